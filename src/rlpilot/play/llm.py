"""``rlpilot eval`` on an LLM run: greedy answers to the held-out prompts, their rewards, a CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from rlpilot.common.files import atomic_write

if TYPE_CHECKING:
    import torch


def is_llm_run(target: str | Path) -> bool:
    """True for a run directory whose config says ``algo: grpo`` (read without torch or the config module)."""
    config = Path(target) / "config.yaml"
    if not config.is_file():
        return False
    import yaml

    from rlpilot.config import safe_yaml

    try:
        data = safe_yaml.load(config.read_text(), source=str(config))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False  # not readable here: loading the run says why, in one line
    return isinstance(data, dict) and data.get("algo") == "grpo"


def eval_llm_run(target: str | Path, *, checkpoint: str = "last", csv_path: str | Path | None = None) -> str:
    from rlpilot.common.errors import UserError

    if checkpoint not in ("last", "best"):
        raise UserError(f"--checkpoint {checkpoint}: choose last or best")
    rewards, prompts, responses = evaluate_run(target, checkpoint=checkpoint)
    out = Path(csv_path) if csv_path is not None else Path(target) / "eval.csv"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["prompt", "response", "reward"])
    writer.writerows([p, r, f"{float(x):.6g}"] for p, r, x in zip(prompts, responses, rewards))
    atomic_write(out, buffer.getvalue())
    return (
        f"{len(prompts)} held-out prompts, greedy: mean reward {float(rewards.mean()):.3f} (max 1)  "
        f"min {float(rewards.min()):.3f}  max {float(rewards.max()):.3f}\nanswers: {out}"
    )


def evaluate_run(path, *, checkpoint: str = "last") -> tuple[torch.Tensor, list[str], list[str]]:
    """``rlpilot eval`` on an LLM run: greedy held-out rewards of a checkpoint (prompts, responses too)."""
    from rlpilot.common.errors import UserError
    from rlpilot.config.schema import resolve_device
    from rlpilot.llm.grpo import build_learner, eval_prompts
    from rlpilot.runs import load_run

    run = load_run(path)
    config = run.config()
    if config.algo != "grpo":
        raise UserError(f"{run.path} is not an LLM run")
    saved = run.load_checkpoint(checkpoint)
    device = resolve_device(config.train.device)
    learner = build_learner(config, device, state=saved["state"], event=lambda *args, **kwargs: None)
    prompts = eval_prompts(config, learner.task)
    rewards, responses, _ = learner.evaluate(prompts)
    return rewards, prompts, responses
