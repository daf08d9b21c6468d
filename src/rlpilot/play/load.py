"""Loading what was trained: a run's policy, rebuilt from its config and checkpoint (weights only, never
pickled code), or an exported artifact (``rlpilot export``) as a numpy function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.control.algos import Algorithm, build
from rlpilot.envs.make import make_env
from rlpilot.errors import UserError
from rlpilot.files import read_json
from rlpilot.play.safe_artifact import load_pt2
from rlpilot.play.trust import code_allowed, require_trust
from rlpilot.runs import Run, check_compatible, load_run


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
    refuse_nonfinite(
        {**algo.greedy_module.state_dict(), **{f"obs_norm.{k}": v for k, v in (state["obs_norm"] or {}).items()}},
        f"{run.checkpoint_dir / checkpoint}.pt",
    )
    return LoadedPolicy(run, algo, state["obs_norm"], checkpoint)


def refuse_nonfinite(tensors: dict, where: str) -> None:
    """A :class:`UserError` when a floating tensor of ``tensors`` holds NaN or inf: a diverged policy acts
    arbitrarily (an all-NaN discrete actor plays action 0), so it is neither played nor exported."""
    bad = [
        name
        for name, value in tensors.items()
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all())
    ]
    if bad:
        raise UserError(
            f"{where} holds non-finite weights (NaN or inf in {', '.join(bad[:3])}"
            f"{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}): the policy diverged; use --checkpoint best "
            "or an earlier run, or retrain (rlpilot doctor RUN says why it diverged)"
        )


class StatefulArtifact:
    """An exported controller with state (a residual run on the PID): ``raw(observation, state)`` is the
    artifact's pure function, ``(action, next state)``; calling it with observations alone carries the state
    from call to call, zeros for a batch it has not seen, and ``reset(mask)`` zeroes the rows that start an
    episode (``None``: all), as ``rlpilot eval``'s loop does for a live controller."""

    def __init__(self, raw: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]], state_size: int):
        self.raw, self.state_size = raw, state_size
        self.state: np.ndarray | None = None

    def reset(self, mask=None) -> None:
        if self.state is None or mask is None:
            self.state = None
        else:
            self.state[np.asarray(mask, dtype=bool)] = 0.0

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        observation = np.asarray(observation, np.float32)
        if self.state is None or len(self.state) != len(observation):
            self.state = np.zeros((len(observation), self.state_size), np.float32)
        action, self.state = self.raw(observation, self.state)
        return action


def load_artifact(path: str | Path, *, trusted: bool | None = None) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """The artifact as a numpy function, and its signature. onnx runs on onnxruntime (no torch needed); a
    ``.pt2`` is checked as data before torch reads it, and never unpickles (:mod:`rlpilot.play.safe_artifact`);
    TorchScript, a program, loads only when ``trusted`` (default: the command line's ``--trust-code``).
    An artifact with state (its signature's ``state``) comes as a :class:`StatefulArtifact`.
    A damaged signature or artifact is a :class:`UserError` naming the file."""
    path = Path(path)
    signature_path = path.with_name(path.name + ".json")
    if not path.is_file() or not signature_path.is_file():
        raise UserError(f"{path} is not an exported policy (needs the file and {signature_path.name} beside it)")
    signature = read_signature(signature_path)
    fmt = signature["format"]
    state_size = int((signature.get("state") or {}).get("size", 0))
    try:
        if fmt == "onnx":
            import onnxruntime

            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

            def run(*arrays: np.ndarray):
                feed = dict(zip(("observation", "state"), (np.asarray(a, np.float32) for a in arrays)))
                outputs = session.run(None, feed)
                return tuple(outputs) if state_size else outputs[0]

        else:
            if fmt == "pt2":
                module = load_pt2(path)
            else:
                if not (code_allowed() if trusted is None else trusted):
                    require_trust(path, trusted=False, verb="loading")
                module = torch.jit.load(str(path))

            def run(*arrays: np.ndarray):
                with torch.inference_mode():
                    outputs = module(*(torch.as_tensor(np.asarray(a, np.float32)) for a in arrays))
                return tuple(o.numpy() for o in outputs) if state_size else outputs.numpy()

    except UserError:
        raise
    except ImportError:
        raise UserError(f"{path}: running an onnx policy needs onnxruntime: pip install 'rlpilot[export]'") from None
    except Exception as exc:  # truncated, overwritten, or another kind of file under the artifact's name
        raise UserError(
            f"{path} cannot be loaded as a {fmt} policy ({type(exc).__name__}); export it again (rlpilot export RUN)"
        ) from None
    return (StatefulArtifact(run, state_size) if state_size else run), signature


SIGNATURE_FORMATS = ("onnx", "pt2", "torchscript")


def read_signature(path: Path) -> dict:
    """The JSON signature ``rlpilot export`` writes beside an artifact, checked for what eval reads."""
    signature = read_json(path, "export the run again")
    env = signature.get("env") if isinstance(signature, dict) else None
    if (
        not isinstance(env, dict)
        or signature.get("format") not in SIGNATURE_FORMATS
        or not isinstance(env.get("id"), str)
        or not isinstance(env.get("kwargs", {}), dict)
    ):
        raise UserError(
            f"{path} is not an rlpilot export signature (needs format and env.id, env.kwargs); export the run again"
        )
    return signature


def check_signature_fits(signature: dict, signature_name: str, observation_space) -> None:
    """The artifact's declared input (``[batch, n]``) must be the size of the env's flat observation."""
    import gymnasium as gym

    try:
        width = signature["inputs"][0]["shape"][1:]
    except (KeyError, IndexError, TypeError):
        return
    image = isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) > 1
    if len(width) != 1 or not isinstance(width[0], int) or image:
        return
    expected = gym.spaces.flatdim(observation_space)
    if width[0] != expected:
        raise UserError(
            f"{signature_name} says env '{signature['env']['id']}', whose observations have {expected} numbers, "
            f"but the policy takes {width[0]}: the signature does not belong to this artifact; export the run again"
        )
