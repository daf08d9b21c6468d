"""GRPO on a Qwen2-0.5B-shaped model (random weights, bf16, one GPU): peak memory, generation tokens/s, step time.

    PYTHONPATH=src python3 benchmarks/llm_gpu.py --out DIR            # on a CUDA machine (< 3 min on an H200)
    PYTHONPATH=src python3 benchmarks/llm_gpu.py --out DIR --tiny     # same code path, tiny model, CPU

The model has Qwen2-0.5B's architecture (hidden 896, 24 layers, 14 heads, 2 KV heads, intermediate 4864,
vocab 151936, tied embeddings) built from ``Qwen2Config`` with random weights: nothing can be downloaded.
The tokenizer is built here too: a word-level vocabulary of the model's size (characters for the prompts,
``w<i>`` words for the rest, whitespace-separated so decode -> encode gives the sampled tokens back).
Each step is rlpilot's own GRPO step (``rlpilot.llm.grpo.GRPOLearner``): sample ``--group`` responses for
each of ``--prompts`` prompts, reward them, score with the policy and a frozen reference copy, ``GRPOLoss``
with the KL penalty, Adam step. A random model almost never emits end-of-sequence, so every response is
``--max-new-tokens`` long: the numbers are for full-length responses. The reward (share of response tokens
from the lower half of the vocabulary) only exists to give non-zero advantages.
Prints one JSON object and writes it to ``DIR/llm_gpu.json``, stamped (commit, versions, command, CPU, load;
docs/benchmarks.md); on CPU it also records the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

from rlpilot.config import Config  # noqa: E402
from rlpilot.llm.grpo import GRPOLearner, frozen_copy  # noqa: E402
from rlpilot.llm.model import qwen2_config  # noqa: E402
from rlpilot.llm.tasks import Task, split_answer  # noqa: E402

QWEN2_05B = {"hidden_size": 896, "layers": 24, "heads": 14, "kv_heads": 2, "intermediate_size": 4864}
QWEN2_05B_VOCAB = 151_936
TINY = {"hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate_size": 128}
TINY_VOCAB = 1_000
PROMPT_CHARS = "0123456789+="


def word_tokenizer(vocab_size: int):
    """A word-level fast tokenizer with exactly ``vocab_size`` ids (built locally)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for char in PROMPT_CHARS:
        vocab[char] = len(vocab)
    while len(vocab) < vocab_size:
        vocab[f"w{len(vocab)}"] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


class LowerHalf(Task):
    """Prompts ``a + b = `` (whitespace-separated); reward = share of response words from the vocab's lower half."""

    def __init__(self, vocab_size: int):
        prompts = [f"{a} + {b} = " for a in range(10) for b in range(10)]
        super().__init__("lower-half", prompts, prompts[:8], {p: "" for p in prompts}, "benchmark reward")
        self.half = vocab_size // 2

    def _score(self, prompt: str, answer: str, finished: bool) -> float:
        words = answer.split()
        return sum(w.startswith("w") and int(w[1:]) < self.half for w in words) / max(len(words), 1)

    def reward(self, prompt: str, response: str, eos: str) -> float:
        return self._score(prompt, *split_answer(response, eos))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for llm_gpu.json")
    parser.add_argument("--tiny", action="store_true", help="a tiny model on CPU: checks the script, measures nothing")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps measured (after one warm-up step)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="responses per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16", help="--tiny: float32")
    args = parser.parse_args()
    header = stamp.header()

    device = torch.device("cpu" if args.tiny or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if args.tiny else getattr(torch, args.dtype)
    sizes, vocab_size = (TINY, TINY_VOCAB) if args.tiny else (QWEN2_05B, QWEN2_05B_VOCAB)
    torch.manual_seed(0)
    tokenizer = word_tokenizer(vocab_size)
    from transformers import Qwen2ForCausalLM

    arch = qwen2_config(
        vocab_size=vocab_size,
        max_positions=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **sizes,
    )
    start = time.perf_counter()
    with torch.device(device):
        model = Qwen2ForCausalLM(arch).to(dtype).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    build_s = time.perf_counter() - start

    config = Config(algo="grpo")
    config.grpo.prompts_per_step, config.grpo.group_size, config.grpo.epochs = args.prompts, args.group, 1
    config.grpo.lr, config.grpo.kl_coef = 1e-6, 0.02
    config.llm.max_new_tokens = args.max_new_tokens
    config.validate()
    task = LowerHalf(vocab_size)
    learner = GRPOLearner(model, frozen_copy(model), tokenizer, task, config, device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    rows = []
    for step in range(args.steps + 1):  # step 0 warms up kernels and allocators, and is not counted
        prompts = task.train_prompts[step * args.prompts : (step + 1) * args.prompts]
        sync()
        t0 = time.perf_counter()
        batch, metrics, _, _ = learner.sample(prompts)
        sync()
        t1 = time.perf_counter()
        metrics.update(learner.learn(batch))
        sync()
        t2 = time.perf_counter()
        metrics.update({"sample_and_score_s": t1 - t0, "learn_s": t2 - t1, "step_s": t2 - t0})
        if step > 0:
            rows.append(metrics)
        print(
            f"step {step}: {t2 - t0:.2f} s (sample+score {t1 - t0:.2f}, learn {t2 - t1:.2f}), "
            f"generation {metrics['time/tokens_per_s']:,.0f} tokens/s, response length "
            f"{metrics['train/response_length']:.0f}, loss {metrics['train/loss']:.4f}",
            flush=True,
        )

    def mean(key: str) -> float:
        return sum(row[key] for row in rows) / len(rows)

    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "model": "tiny Qwen2" if args.tiny else "Qwen2-0.5B architecture, random weights",
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(dtype).replace("torch.", ""),
        "prompts_per_step": args.prompts,
        "group_size": args.group,
        "responses_per_step": args.prompts * args.group,
        "max_new_tokens": args.max_new_tokens,
        "steps_measured": len(rows),
        "model_build_s": round(build_s, 2),
        "step_s_mean": round(mean("step_s"), 3),
        "sample_and_score_s_mean": round(mean("sample_and_score_s"), 3),
        "generate_s_mean": round(mean("time/generate_s"), 3),
        "learn_s_mean": round(mean("learn_s"), 3),
        "generation_tokens_per_s_mean": round(mean("time/tokens_per_s"), 1),
        "response_length_mean": round(mean("train/response_length"), 1),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.type == "cuda" else None,
        "versions": {
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "torchrl": __import__("torchrl").__version__,
        },
    }
    if device.type != "cuda":
        result["peak_resident_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    result["stamp"] = [*header, *stamp.footer()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "llm_gpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
