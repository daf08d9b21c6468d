"""GRPO on TorchRL's LLM stack: the Trainable behind ``rlpilot train grpo-<task>``.

One step: sample ``prompts_per_step`` training prompts; ``TransformersWrapper(generate=True,
num_samples=group_size)`` samples a group of responses for each; the task scores them; each
response's advantage is its reward standardised within its group (GRPO has no critic); the policy
and the frozen reference model score ``prompt + response`` (``TransformersWrapper(generate=False)``)
for the sampling and reference log-probabilities; ``GRPOLoss`` (clipped ratio over response tokens,
``masking_strategy="sft"``, KL to the reference) takes ``grpo.epochs`` gradient steps.

Why not the tutorial's recipe: wrapping ``model.generate`` in a ``TensorDictModule`` for
``ClipPPOLoss`` gives token ids but no differentiable log-probabilities, and PPO's critic has no
value head to train on a language model. :class:`GRPOTrainable` runs in the same loop as control
runs (``rlpilot.loop.trainer``) and writes the same run directory.
"""

from __future__ import annotations

import copy
import math
import time
import warnings

import torch

from rlpilot.common import stopping
from rlpilot.common.bounds import NETWORK_COPIES, Allocation
from rlpilot.config.schema import Config
from rlpilot.guard import Guard
from rlpilot.llm import require_transformers
from rlpilot.llm.model import CHARACTERS, model_sizes
from rlpilot.llm.tasks import Task, make_task
from rlpilot.loop.trainable import Evaluation, EventSink, Step

# TorchRL 0.14.1's TransformersWrapper computes log-probs with cross_entropy(..., reduce=False): torch warns
# on every run; the numbers are right (tests/unit/test_llm_parts.py)
warnings.filterwarnings("ignore", message="size_average and reduce args will be deprecated", category=UserWarning)

PROMPT_TOKENS = 32  # a task's prompt is a few characters; a local model's tokenizer may add a template
ACTIVATIONS_PER_TOKEN = 16  # values a token keeps per layer width for backward (attention, MLP, norms), and logits
SAMPLE_RESPONSES_IN_EVENTS = 4  # eval events show a few prompt -> response pairs: what the numbers mean


def torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def build_model(config: Config, device: torch.device):
    """The policy model and tokenizer of ``llm.model``: the tiny model built in code, or a local directory."""
    require_transformers()
    from rlpilot.llm.model import build_char_tokenizer, build_tiny_model, load_model

    dtype = torch_dtype(config.llm.dtype)
    if config.llm.model == "tiny":
        tokenizer = build_char_tokenizer()
        model = build_tiny_model(
            tokenizer, hidden_size=config.llm.tiny_hidden_size, layers=config.llm.tiny_layers, seed=config.train.seed
        )
    else:
        model, tokenizer = load_model(config.llm.model, dtype=dtype)
    return model.to(device=device, dtype=dtype).eval(), tokenizer


def frozen_copy(model):
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO's advantage: each response's reward standardised within its prompt's group ([prompts, group]).

    A group whose responses all score the same gets advantage 0 (nothing to prefer); also returns the
    per-group standard deviation (unbiased, as in the GRPO paper's ``std``)."""
    group_std = rewards.std(dim=1, keepdim=True)
    return (rewards - rewards.mean(dim=1, keepdim=True)) / (group_std + eps), group_std


class GRPOLearner:
    """Sampling, scoring and the GRPO update for one policy model and its frozen reference."""

    def __init__(self, model, reference, tokenizer, task: Task, config: Config, device: torch.device):
        from torchrl.modules.llm import TransformersWrapper
        from torchrl.objectives.llm import GRPOLoss

        self.model, self.tokenizer, self.task, self.config = model, tokenizer, task, config
        llm, grpo = config.llm, config.grpo
        common = {"tokenizer": tokenizer, "input_mode": "text", "device": device}
        generation = {"max_new_tokens": llm.max_new_tokens}
        self.sampler = TransformersWrapper(
            model,
            generate=True,
            return_log_probs=False,
            num_samples=grpo.group_size,
            # top_k = vocabulary, top_p = 1: sample from the model's whole distribution (the one GRPOLoss's
            # ratio assumes); TorchRL refuses top_k=0, transformers' default is 50
            generate_kwargs={
                **generation,
                "do_sample": True,
                "temperature": llm.temperature,
                "top_k": model.config.vocab_size,
                "top_p": 1.0,
            },
            **common,
        )
        self.greedy = TransformersWrapper(
            model, generate=True, return_log_probs=False, generate_kwargs={**generation, "do_sample": False}, **common
        )
        self.scorer = TransformersWrapper(model, generate=False, return_log_probs=True, pad_output=False, **common)
        self.reference = TransformersWrapper(
            reference, generate=False, return_log_probs=True, pad_output=False, **common
        )
        self.loss = GRPOLoss(
            self.scorer,
            clip_epsilon=grpo.clip_epsilon,
            kl_to_ref_coeff=grpo.kl_coef if grpo.kl_coef > 0 else None,
            entropy_bonus=grpo.entropy_coef > 0,
            entropy_coeff=grpo.entropy_coef,
            masking_strategy="sft",  # response tokens only: single-turn prompts
        )
        self.optimizer = torch.optim.Adam(model.parameters(), lr=grpo.lr)
        self.guard = Guard(config.guard)
        self.updates = 0
        self.reference_model = reference

    # -- sampling --------------------------------------------------------------------------------
    def generate(self, prompts: list[str], *, greedy: bool) -> tuple[list[list[str]], list[list[torch.Tensor]], object]:
        """Responses (text, and token ids) per prompt: ``group_size`` samples each, or one greedy."""
        from tensordict import TensorDict
        from torchrl.modules.llm.policies import Text

        data = TensorDict(text=Text(prompt=list(prompts), batch_size=[len(prompts)]), batch_size=[len(prompts)])
        with torch.no_grad():
            out = (self.greedy if greedy else self.sampler)(data)
        if greedy:
            return (
                [[r] for r in out["text", "response"]],
                [[t] for t in out.get(("tokens", "response"), as_list=True)],
                out,
            )
        responses = [list(group) for group in out["text", "response"]]
        flat_tokens = out.reshape(-1).get(("tokens", "response"), as_list=True)
        size = self.config.grpo.group_size
        tokens = [flat_tokens[i * size : (i + 1) * size] for i in range(len(prompts))]
        return responses, tokens, out

    def rewards(self, prompts: list[str], responses: list[list[str]]) -> torch.Tensor:
        eos = self.tokenizer.eos_token
        return torch.tensor([[self.task.reward(p, r, eos) for r in group] for p, group in zip(prompts, responses)])

    def sample(self, prompts: list[str]) -> tuple[object, dict[str, float], list[float], list[int]]:
        """A batch ready for ``GRPOLoss``, the step's sampling metrics, and each response's reward and length."""
        start = time.perf_counter()
        responses, tokens, out = self.generate(prompts, greedy=False)
        generate_s = time.perf_counter() - start
        rewards = self.rewards(prompts, responses)
        advantage, group_std = group_advantages(rewards)
        flat = out.reshape(-1)
        batch = self.score(flat.get(("text", "full")).tolist(), flat.get(("tokens", "prompt"), as_list=True))
        batch.set("advantage", advantage.reshape(-1, 1, 1).to(self.model.device))
        lengths = torch.tensor([len(t) for group in tokens for t in group], dtype=torch.float32)
        eos = self.tokenizer.eos_token
        finished = torch.tensor([eos in r for group in responses for r in group], dtype=torch.float32)
        flat_rewards = rewards.flatten()
        metrics = {
            "train/reward_mean": float(flat_rewards.mean()),
            "train/reward_std": float(flat_rewards.std()),
            "train/reward_p10": float(flat_rewards.quantile(0.1)),
            "train/reward_p50": float(flat_rewards.quantile(0.5)),
            "train/reward_p90": float(flat_rewards.quantile(0.9)),
            "train/reward_frac_zero": float((flat_rewards == 0).float().mean()),
            "train/group_reward_std": float(group_std.mean()),
            "train/groups_without_signal": float((group_std.squeeze(1) == 0).float().mean()),
            "train/response_length": float(lengths.mean()),
            "train/finished_frac": float(finished.mean()),
            "time/generate_s": generate_s,
            "time/tokens_per_s": float(lengths.sum()) / max(generate_s, 1e-9),
        }
        return batch, metrics, flat_rewards.tolist(), lengths.long().tolist()

    def score(self, full_texts: list[str], prompt_tokens: list[torch.Tensor]):
        """Sampling-policy and reference log-probs of ``prompt + response`` (per token, ragged)."""
        from tensordict import TensorDict
        from torchrl.modules.llm.policies import Text

        n = len(full_texts)
        data = TensorDict(text=Text(full=full_texts, batch_size=[n]), batch_size=[n])
        with torch.no_grad():
            scored = self.scorer(data.copy()).to_lazystack(0)
            reference = self.reference(data.copy()).get(("log_probs", "full"), as_list=True)
        for item, prompt, ref in zip(scored.tensordicts, prompt_tokens, reference):
            item.set(("tokens", "prompt"), prompt)
            item.set(("next", "ref_log_probs", "full"), ref)
        return scored

    # -- learning --------------------------------------------------------------------------------
    def learn(self, batch) -> dict[str, float]:
        """``grpo.epochs`` clipped GRPO steps on the batch; metrics of the last one."""
        grpo = self.config.grpo
        params = [p for p in self.model.parameters() if p.requires_grad]
        for group in self.optimizer.param_groups:
            group["lr"] = grpo.lr * self.guard.lr_scale
        start = time.perf_counter()
        for _ in range(grpo.epochs):
            out = self.loss(batch)
            loss = out.loss_objective
            for extra in (out.loss_kl_to_ref, out.loss_entropy):
                if extra is not None:
                    loss = loss + extra
            grad_norm = self.guard.step(self.optimizer, params, loss, grpo.max_grad_norm, self.updates)
            self.updates += 1
            if stopping.requested():  # SIGINT/SIGTERM: the loop checkpoints and stops after this step
                break
        metrics = {
            "train/loss": float(loss.detach()),
            "train/loss_objective": float(out.loss_objective.detach()),
            "train/kl_to_ref": float(out.kl_to_ref) if out.kl_to_ref is not None else math.nan,
            "train/kl_to_sampler": float(out.kl_approx),
            "train/clip_fraction": float(out.clip_fraction),
            "train/ess": float(out.ESS),
            "train/grad_norm": math.nan if grad_norm is None else float(grad_norm),
            "train/lr": grpo.lr * self.guard.lr_scale,
            "time/learn_s": time.perf_counter() - start,
        }
        if out.entropy is not None:
            metrics["train/entropy"] = float(out.entropy)
        return {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}

    def evaluate(self, prompts: list[str]) -> tuple[torch.Tensor, list[str], torch.Tensor]:
        """Greedy responses to ``prompts``: rewards, responses, response lengths (tokens)."""
        responses, tokens, _ = self.generate(prompts, greedy=True)
        rewards = self.rewards(prompts, responses).flatten()
        lengths = torch.tensor([len(group[0]) for group in tokens], dtype=torch.float32)
        return rewards, [group[0] for group in responses], lengths

    # -- checkpoints (tensors and plain data only: loaded with weights_only=True) ----------------
    def state_dict(self) -> dict:
        state = {
            "policy": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "guard": self.guard.state_dict(),
            "updates": self.updates,
        }
        # without a warm-up the reference is the model as built or loaded (rebuilt identically from the
        # config): not saving it spares a model-sized copy per checkpoint (1.8 GiB for a 0.5B model)
        if self.config.llm.sft_steps > 0:
            state["reference"] = self.reference_model.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["policy"])
        if "reference" in state:
            self.reference_model.load_state_dict(state["reference"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.guard.load_state_dict(state["guard"])
        self.updates = int(state["updates"])


def eval_prompts(config: Config, task: Task) -> list[str]:
    count = config.grpo.eval_prompts or len(task.heldout_prompts)
    return task.heldout_prompts[:count]


def build_learner(config: Config, device: torch.device, *, state: dict | None, event: EventSink) -> GRPOLearner:
    """Model, reference and learner; without a state to restore, the SFT warm-up runs first (reference = after it)."""
    from rlpilot.llm.sft import sft_warmup

    task = make_task(config.llm.task)
    model, tokenizer = build_model(config, device)
    if state is None and config.llm.sft_steps > 0:
        start = time.perf_counter()
        losses = sft_warmup(
            model,
            tokenizer,
            task,
            steps=config.llm.sft_steps,
            lr=config.llm.sft_lr,
            batch_size=config.llm.sft_batch_size,
            seed=config.train.seed,
        )
        event(
            "sft",
            steps=len(losses),
            loss_first=losses[0],
            loss_last=losses[-1],
            seconds=round(time.perf_counter() - start, 3),
        )
    learner = GRPOLearner(model, frozen_copy(model), tokenizer, task, config, device)
    if state is not None:
        learner.load_state_dict(state)
    return learner


class GRPOTrainable:
    """GRPO as the loop sees it (``rlpilot.loop.trainable``): a step samples ``prompts_per_step`` training
    prompts, a group of responses each, and learns; an evaluation answers the held-out prompts greedily
    (``eval/return_mean`` = mean reward, 1 = every answer right). A frame is one sampled response."""

    def __init__(self, config: Config, *, device: torch.device, seed: int, state: dict | None, event: EventSink):
        require_transformers()
        self.config = config
        self.learner = build_learner(config, device, state=state, event=event)
        self.guard = self.learner.guard
        self.heldout = eval_prompts(config, self.learner.task)

    @staticmethod
    def allocations(config: Config) -> list[Allocation]:
        """What the policy, its reference copy, gradients and Adam state, and a step's activations would hold: from
        the tiny model's settings, or a local model's ``config.json`` (its sizes; no weights are read)."""
        llm, grpo = config.llm, config.grpo
        if llm.model == "tiny":
            width, layers, vocab, inner = (
                llm.tiny_hidden_size,
                llm.tiny_layers,
                len(CHARACTERS) + 3,
                2 * llm.tiny_hidden_size,
            )
            sized = ("llm.tiny_hidden_size", "llm.tiny_layers")
        else:
            sizes = model_sizes(llm.model)
            width, layers, vocab, inner = (
                sizes[key] for key in ("hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size")
            )
            sized = ("llm.model (a smaller model)", "llm.dtype=bfloat16")
        parameters = vocab * width + layers * (4 * width * width + 3 * width * inner)
        tokens = max(grpo.prompts_per_step * grpo.group_size, llm.sft_batch_size) * (PROMPT_TOKENS + llm.max_new_tokens)
        value_bytes = 2 if llm.dtype == "bfloat16" else 4
        return [
            Allocation(f"a model of {parameters:,} parameters", NETWORK_COPIES * parameters * value_bytes, sized),
            Allocation(
                f"a step's activations over {tokens:,} tokens",
                ACTIVATIONS_PER_TOKEN * tokens * (layers * width + vocab) * value_bytes,
                ("grpo.prompts_per_step", "grpo.group_size", "llm.max_new_tokens", "llm.sft_batch_size"),
            ),
        ]

    def step(self) -> Step:
        prompts = _training_prompts(self.learner.task, self.config.grpo.prompts_per_step)
        batch, metrics, rewards, lengths = self.learner.sample(prompts)
        metrics.update(self.learner.learn(batch))
        return Step(len(rewards), metrics, rewards, lengths)

    def evaluate(self, index: int) -> Evaluation:
        rewards, responses, lengths = self.learner.evaluate(self.heldout)
        mean, std = float(rewards.mean()), float(rewards.std()) if len(rewards) > 1 else 0.0
        examples = dict(list(zip(self.heldout, responses))[:SAMPLE_RESPONSES_IN_EVENTS])
        metrics = {"eval/return_mean": mean, "eval/return_std": std, "eval/response_length": float(lengths.mean())}
        return Evaluation(mean, std, metrics, {"examples": examples})

    def facts(self) -> dict:
        learner = self.learner
        return {
            "llm_facts": {
                "task": learner.task.description,
                "parameters": sum(p.numel() for p in learner.model.parameters()),
                "max_reward": 1.0,
                "max_new_tokens": self.config.llm.max_new_tokens,
            }
        }

    def state_dict(self) -> dict:
        return self.learner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state)

    def close(self) -> None:
        """Nothing to release: the models go with the object."""


def _training_prompts(task: Task, count: int) -> list[str]:
    """``count`` training prompts drawn by the (seeded) torch generator: without replacement when enough."""
    n = len(task.train_prompts)
    index = torch.randperm(n)[:count] if count <= n else torch.randint(n, (count,))
    return [task.train_prompts[i] for i in index.tolist()]
