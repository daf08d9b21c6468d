"""Loading what was trained: a run's policy, rebuilt from its config and checkpoint (weights only, never
pickled code), or an exported artifact (``rlpilot export``) as a numpy function."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.control.algos import Algorithm, build
from rlpilot.envs import make_env
from rlpilot.errors import UserError
from rlpilot.loop.lifecycle import check_compatible
from rlpilot.runs import Run, load_run


@dataclass
class LoadedPolicy:
    run: Run
    algo: Algorithm
    obs_norm: dict | None
    checkpoint: str = "last"

    def make_env(self, *, num_envs: int, seed: int | None = None) -> TransformedEnv:
        """An env with the run's transform chain and the run's normalisation statistics."""
        config = self.run.config()
        return make_env(config.env, num_envs=num_envs, seed=seed, obs_norm_state=self.obs_norm)


def load_policy(path: str | Path, checkpoint: str = "last") -> LoadedPolicy:
    if checkpoint not in ("last", "best"):
        raise UserError(f"--checkpoint {checkpoint}: choose last or best")
    run = load_run(path)
    config = run.config()
    if config.algo == "grpo":
        raise UserError(
            f"{run.path} is an LLM (grpo) run: `rlpilot eval {run.path}` gives its held-out reward; export and "
            "videos are for control policies (the weights are in checkpoints/*.pt under state.policy)"
        )
    saved = run.load_checkpoint(checkpoint)
    check_compatible(saved, config, run)
    state = saved["state"]
    env = make_env(config.env, num_envs=1, obs_norm_state=state["obs_norm"])
    algo = build(config, env, torch.device("cpu"))
    env.close()
    try:
        algo.load_state_dict(state["algo"])
    except (KeyError, RuntimeError) as exc:
        raise UserError(
            f"checkpoint {checkpoint}.pt does not fit the run's config: {str(exc).splitlines()[0]}"
        ) from None
    return LoadedPolicy(run, algo, state["obs_norm"], checkpoint)


def load_artifact(path: str | Path) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """The artifact as a numpy function, and its signature. onnx runs on onnxruntime (no torch needed)."""
    path = Path(path)
    signature_path = path.with_name(path.name + ".json")
    if not path.is_file() or not signature_path.is_file():
        raise UserError(f"{path} is not an exported policy (needs the file and {signature_path.name} beside it)")
    signature = json.loads(signature_path.read_text())
    fmt = signature["format"]
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return (lambda obs: session.run(None, {"observation": np.asarray(obs, np.float32)})[0]), signature
    module = torch.export.load(str(path)).module() if fmt == "pt2" else torch.jit.load(str(path))

    def run(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.as_tensor(np.asarray(obs, np.float32))).numpy()

    return run, signature
