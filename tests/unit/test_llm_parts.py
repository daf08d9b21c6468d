"""LLM pieces with hand-computed numbers: tokenizer round trip, rewards, GRPO advantages, model save/load."""

import pytest
import torch

pytest.importorskip("transformers")

from rlpilot.common.errors import UserError  # noqa: E402
from rlpilot.llm.grpo import group_advantages  # noqa: E402
from rlpilot.llm.model import build_char_tokenizer, build_tiny_model, load_model, save_model  # noqa: E402
from rlpilot.llm.tasks import (  # noqa: E402
    exact_answer,
    format_ok,
    make_task,
    position_matches,
    split_answer,
    target_length,
)


def test_char_tokenizer_round_trips_text_with_end_of_sequence():
    tokenizer = build_char_tokenizer()
    text = "3+4=7<eos>"
    ids = tokenizer(text)["input_ids"]
    assert len(ids) == 6 and ids[-1] == tokenizer.eos_token_id  # one id per character, <eos> is one token
    assert tokenizer.decode(ids) == text


def test_rewards_by_hand():
    assert split_answer("12<eos><pad>", "<eos>") == ("12", True)
    assert split_answer("123", "<eos>") == ("123", False)
    assert exact_answer("7", True, "7") == 1.0
    assert exact_answer("7", False, "7") == 0.0  # unfinished
    assert exact_answer("17", True, "7") == 0.0
    assert position_matches("cba", True, "cba") == 1.0
    assert position_matches("cxa", True, "cba") == pytest.approx(2 / 3)
    assert position_matches("c", True, "cba") == pytest.approx(1 / 3)
    assert position_matches("cbaa", True, "cba") == pytest.approx(2 / 3)  # one extra letter costs one
    assert target_length("abc", True, 3) == 1.0
    assert target_length("abcd", True, 2) == 0.0
    assert target_length("a", True, 2) == 0.5
    assert format_ok("abc", True, "abc") == 1.0 and format_ok("ab1", True, "abc") == 0.0


def test_tasks_hold_out_a_fixed_disjoint_split():
    for name in ("arithmetic", "reverse", "length"):
        task = make_task(name)
        assert task.heldout_prompts and not set(task.heldout_prompts) & set(task.train_prompts)
        assert make_task(name).heldout_prompts == task.heldout_prompts
        for prompt in task.heldout_prompts:  # the warm-up target scores the maximum
            assert task.reward(prompt, task.sft_example(prompt) + "<eos>", "<eos>") == 1.0
    with pytest.raises(UserError, match="llm.task"):
        make_task("chess")


def test_group_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    advantage, std = group_advantages(rewards)
    # group 1: mean 0.25, unbiased std sqrt(0.25) = 0.5 -> (1 - 0.25) / 0.5 = 1.5, (0 - 0.25) / 0.5 = -0.5
    assert advantage[0].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], abs=1e-5)
    assert advantage[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # all equal: no preference
    assert std.flatten().tolist() == pytest.approx([0.5, 0.0])


def test_tiny_model_saved_to_a_directory_loads_with_the_same_outputs(tmp_path):
    tokenizer = build_char_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, seed=0)
    save_model(model, tokenizer, tmp_path / "tiny")
    loaded, loaded_tokenizer = load_model(tmp_path / "tiny")
    ids = torch.tensor([tokenizer("12+3=")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits)
    assert loaded_tokenizer.decode(loaded_tokenizer("ab>c<eos>")["input_ids"]) == "ab>c<eos>"


def test_a_path_that_is_not_a_model_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a Hugging Face model directory"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="cannot load"):
        load_model(tmp_path)


def test_grpo_steps_raise_the_better_response_and_lower_the_worse():
    """Through TorchRL's GRPOLoss: advantage +1 on one response, -1 on another, of the same prompt."""
    from rlpilot.config import load_config
    from rlpilot.llm.grpo import build_learner

    config = load_config(
        "grpo-reverse",
        overrides=["llm.sft_steps=0", "llm.tiny_hidden_size=32", "llm.tiny_layers=1", "grpo.lr=0.01", "grpo.epochs=1"],
    )
    torch.manual_seed(0)
    learner = build_learner(config, torch.device("cpu"), state=None, event=lambda *args, **kwargs: None)
    prompt = torch.tensor(learner.tokenizer("abc>")["input_ids"])
    texts = ["abc>cba<eos>", "abc>aaa<eos>"]

    def response_log_probs():
        batch = learner.score(texts, [prompt, prompt])
        return [float(lp[len(prompt) :].sum()) for lp in batch.get(("log_probs", "full"), as_list=True)]

    before = response_log_probs()
    for _ in range(5):
        batch = learner.score(texts, [prompt, prompt])
        batch.set("advantage", torch.tensor([1.0, -1.0]).reshape(2, 1, 1))
        metrics = learner.learn(batch)
    after = response_log_probs()
    assert after[0] > before[0] + 0.5 and after[1] < before[1] - 0.5, (before, after)
    assert metrics["train/kl_to_ref"] > 0 and 0 <= metrics["train/clip_fraction"] <= 1
