"""Loading what was trained: a run's policy, rebuilt from its config and checkpoint (weights only, never
pickled code), or an exported artifact (``rlpilot export``) as a numpy function."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.common.errors import UserError
from rlpilot.common.files import read_regular
from rlpilot.control.algos import Algorithm, build
from rlpilot.envs.make import make_env
from rlpilot.play.bounded_step import STEP_LIMIT_S, BoundedStep
from rlpilot.play.safe_artifact import MAX_ARCHIVE_BYTES, load_pt2
from rlpilot.play.signature import AGAIN, Declared, declared, read_signature
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


def load_artifact(
    path: str | Path, *, trusted: bool | None = None, step_limit_s: float = STEP_LIMIT_S
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """The artifact as a numpy function, and its signature. onnx runs on onnxruntime (no torch needed); a
    ``.pt2`` is checked as data before torch reads it, and never unpickles (:mod:`rlpilot.play.safe_artifact`);
    TorchScript, a program, loads only when ``trusted`` (default: the command line's ``--trust-code``).
    An artifact with state (its signature's ``state``) comes as a :class:`StatefulArtifact`.

    Read as data: the signature is checked (:mod:`rlpilot.play.signature`), the file is a regular one of at most
    :data:`~rlpilot.play.safe_artifact.MAX_ARCHIVE_BYTES`, an ONNX graph's inputs and outputs must be the
    signature's (:mod:`rlpilot.play.onnx_graph`), and one step on zeros must return what the signature declares
    before the function is handed out. Every step then runs within ``step_limit_s`` and stops on SIGINT/SIGTERM
    (:mod:`rlpilot.play.bounded_step`), and its outputs are checked again (shapes, dtypes, actions in range).
    A damaged signature or artifact, or a step that fails, is a :class:`UserError` naming the file."""
    path = Path(path)
    signature_path = path.with_name(path.name + ".json")
    if not path.exists() or not signature_path.exists():  # a pipe or a device there: read_regular says so
        raise UserError(f"{path} is not an exported policy (needs the file and {signature_path.name} beside it)")
    signature = read_signature(signature_path)
    fmt, shapes = signature["format"], declared(signature)
    if fmt == "torchscript" and not (code_allowed() if trusted is None else trusted):
        require_trust(path, trusted=False, verb="loading")
    data = read_regular(path, MAX_ARCHIVE_BYTES, advice=AGAIN)
    try:
        if fmt == "onnx":
            from rlpilot.play.onnx_graph import OnnxStep

            step = OnnxStep(data, path, shapes)
            stop = step.stop
        else:
            module = load_pt2(path, data) if fmt == "pt2" else torch.jit.load(io.BytesIO(data))
            step, stop = _torch_step(module, list(shapes.outputs)), _cannot_stop
    except UserError:
        raise
    except ImportError:
        raise UserError(f"{path}: running an onnx policy needs onnxruntime: pip install 'rlpilot[export]'") from None
    except Exception as exc:  # truncated, overwritten, or another kind of file under the artifact's name
        raise UserError(f"{path} cannot be loaded as a {fmt} policy ({type(exc).__name__}); {AGAIN}") from None
    base = (signature.get("controller") or {}).get("base")
    run = CheckedStep(BoundedStep(step, stop, what=str(path), limit_s=step_limit_s), shapes, path, base)
    run.probe()
    return (StatefulArtifact(run, shapes.state_size) if shapes.state_size else run), signature


def _cannot_stop() -> None:
    """A torch step cannot be ended from another thread: :class:`BoundedStep` leaves it behind."""


def _torch_step(module, names: list[str]) -> Callable[..., dict[str, np.ndarray]]:
    """A torch module's step with the declared outputs named in the signature's order (torch returns a tuple)."""

    def step(*arrays: np.ndarray) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            outputs = module(*(torch.as_tensor(a) for a in arrays))
        outputs = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
        if len(outputs) != len(names) or not all(isinstance(o, torch.Tensor) for o in outputs):
            raise ValueError(f"it returned {len(outputs)} value(s), but its signature declares {', '.join(names)}")
        return {name: output.numpy() for name, output in zip(names, outputs)}

    return step


class CheckedStep:
    """``(observation[, state]) -> action`` or ``(action, next_state)``: a bounded step whose outputs are held to
    the signature's declared shapes and dtypes every call, actions checked too (an index within ``[0, n)``, a
    one-hot row, finite box values); anything else, or an error the runtime raises, is one line naming the file."""

    def __init__(self, step: BoundedStep, shapes: Declared, path: Path, base: str | None = None):
        """``base``: the controller exported with the policy (named when the actions go wrong)."""
        self.step, self.shapes, self.path = step, shapes, path
        self.who = f"{path.name} (controller {base} + policy)" if base else str(path)

    def probe(self) -> None:
        """One step on zeros (two rows) before any is played: the runtime accepts the declared inputs and
        returns the declared outputs."""
        self._run([np.zeros((2, *shape), np.float32) for shape, _ in self.shapes.inputs.values()], values=False)

    def __call__(self, *arrays: np.ndarray):
        outputs = self._run([np.asarray(a, np.float32) for a in arrays], values=True)
        return tuple(outputs.values()) if self.shapes.state_size else outputs["action"]

    def _run(self, arrays: list[np.ndarray], *, values: bool) -> dict[str, np.ndarray]:
        if len(arrays) != len(self.shapes.inputs):
            raise TypeError(f"{self.path.name} takes {', '.join(self.shapes.inputs)} ({len(arrays)} given)")
        try:
            outputs = self.step(*arrays)
        except UserError:  # the step ran past its limit
            raise
        except Exception as exc:  # noqa: BLE001 (onnxruntime's and torch's errors, of many types)
            raise UserError(
                f"{self.path} failed on a step of {len(arrays[0])} observation(s) ({_first_line(exc)}): it does not "
                f"run on the inputs its signature declares; {AGAIN}"
            ) from None
        self._check(outputs, len(arrays[0]), values)
        return outputs

    def _check(self, outputs: dict[str, np.ndarray], rows: int, values: bool) -> None:
        for name, (shape, dtype) in self.shapes.outputs.items():
            value = outputs[name]
            if value.shape != (rows, *shape) or value.dtype != dtype:
                raise UserError(
                    f"{self.path} returned '{name}' {value.dtype} {list(value.shape)} for {rows} observation(s), but "
                    f"its signature declares {dtype} {['batch', *shape]}; {AGAIN}"
                )
        action, n = outputs["action"], self.shapes.actions
        if not values:
            return
        if n is None:
            wrong = "non-finite actions (NaN or inf)" if not np.isfinite(action).all() else None
        elif self.shapes.one_hot:
            wrong = (
                "actions that are not one-hot rows"
                if not ((action == 0) | (action == 1)).all() or not (action.sum(-1) == 1).all()
                else None
            )
        else:
            wrong = (
                f"actions outside [0, {n})" if action.size and not (0 <= action.min() and action.max() < n) else None
            )
        if wrong:
            raise UserError(f"{self.who} returned {wrong} when played: the artifact does not act on this env; {AGAIN}")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.replace("[ONNXRuntimeError] : ", "onnxruntime: ")[:300]
