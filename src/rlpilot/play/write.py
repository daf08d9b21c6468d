"""Writing an exported policy: the artifact in one of three formats, checked against the live module
before it is kept (staged beside the output folder: a failed export leaves nothing). Used by
``rlpilot.play.export`` (single-agent policies) and ``rlpilot.play.group`` (group policies)."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, dumps, read_regular, refuse_links
from rlpilot.play.load import load_artifact, refuse_nonfinite
from rlpilot.play.signature import MAX_SIGNATURE_BYTES, loads_bounded

FORMATS = {"onnx": "policy.onnx", "pt2": "policy.pt2", "torchscript": "policy.ts.pt"}
PARITY_OBSERVATIONS = 1000


class ExportFailed(Exception):
    """The artifact was written but does not act like the live policy (exit code 1; nothing is kept)."""


@dataclass
class ExportResult:
    artifact: Path
    signature: Path
    max_abs_diff: float
    observations: int


INPUT_NAMES = ("observation", "state")
OUTPUT_NAMES = ("action", "next_state")


def write_artifact(module: nn.Module, fmt: str, examples: tuple[torch.Tensor, ...], path: Path) -> None:
    """``module`` as ``fmt`` at ``path``; its inputs are ``observation`` (and ``state`` for a stateful
    controller), its outputs ``action`` (and ``next_state``), every one with a dynamic batch dimension."""
    batch = torch.export.Dim("batch", min=1)
    names = INPUT_NAMES[: len(examples)]
    dynamic = {name: {0: batch} for name in names}
    if fmt == "pt2":  # into memory, then written by Python: torch's C++ writer aborts the process on EFBIG
        buffer = io.BytesIO()
        torch.export.save(torch.export.export(module, examples, dynamic_shapes=dynamic), buffer)
        atomic_write(path, buffer.getvalue())
    elif fmt == "onnx":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                examples,
                str(path),
                input_names=list(names),
                output_names=list(OUTPUT_NAMES[: len(examples)]),
                external_data=False,  # one self-contained file (the default writes weights beside it)
                dynamic_shapes=dynamic,
                dynamo=True,
                verbose=False,
            )
    else:
        buffer = io.BytesIO()
        torch.jit.save(torch.jit.trace(module, examples), buffer)
        atomic_write(path, buffer.getvalue())


def _as_tuple(value) -> tuple[torch.Tensor, ...]:
    """One tensor or several (a stateful controller's inputs and outputs) as a tuple."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def export_folder(run_path: Path, out_dir: str | Path | None) -> Path:
    """Where an export goes: ``out_dir``, or ``RUN/export`` (which must not be a symbolic link: a run's files
    stay inside it). A file there is a :class:`UserError`."""
    if out_dir is None:
        refuse_links(run_path, ("export",))
        out_dir = run_path / "export"
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} is a file, not a folder: choose a folder for the export")
    return out_dir


def _refuse_foreign(out_dir: Path, run: str, force: bool) -> None:
    """``out_dir`` holding another run's export (a signature naming another run) is refused unless ``force``:
    an export silently replacing one of another run's would leave a folder whose files disagree."""
    if force or not out_dir.is_dir():
        return
    for path in sorted(out_dir.glob("*.json")):
        try:  # within bounds: a pipe or a huge file named *.json there is skipped, never read
            other = loads_bounded(read_regular(path, MAX_SIGNATURE_BYTES, advice="").decode(), str(path))
        except (OSError, UserError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(other, dict) and isinstance(other.get("run"), str) and "format" in other:
            if Path(other["run"]).resolve() != Path(run).resolve():
                raise UserError(
                    f"{out_dir} holds an export of another run ({other['run']}, {path.name}): choose another --out, "
                    "or add --force to replace it"
                )


def write_checked(
    module: nn.Module,
    inputs: torch.Tensor | tuple[torch.Tensor, ...],
    fmt: str,
    out_dir: Path,
    signature: dict,
    tolerance: float,
    *,
    force: bool = False,
    reference: torch.Tensor | None = None,
) -> ExportResult:
    """Writes ``module`` as ``fmt`` into ``out_dir`` with its signature, after checking that the artifact
    (reloaded the way ``eval`` loads it) acts like the live module on ``inputs`` (observations, and the states
    a stateful controller carries into them): identical discrete actions, continuous ones (and next states)
    within ``tolerance``. ``reference``: the actions the run itself takes at these steps, when the artifact's
    inputs are not the run's (an arm run's history carried as state): the artifact's actions must match them too.
    Staged beside ``out_dir``: a failed export leaves nothing."""
    _refuse_foreign(out_dir, signature["run"], force)
    refuse_nonfinite(module.state_dict(), f"the policy of {signature['run']}")
    inputs = _as_tuple(inputs)
    observations = inputs[0]
    with torch.inference_mode():
        live = _as_tuple(module(*inputs))
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=out_dir.parent))
    try:
        artifact = staging / FORMATS[fmt]
        write_artifact(module, fmt, tuple(x[:4].clone() for x in inputs), artifact)
        (staging / f"{artifact.name}.json").write_text(dumps(signature, indent=2) + "\n")
        run_exported, _ = load_artifact(artifact, trusted=True)  # the file this process just wrote
        raw = getattr(run_exported, "raw", None)  # a stateful artifact: the pure (observation, state) function
        exported = _as_tuple(raw(*(x.numpy() for x in inputs)) if raw else run_exported(observations.numpy()))
        exported = tuple(torch.as_tensor(x) for x in exported)
        expected = zip(exported, live) if reference is None else [*zip(exported, live), (exported[0], reference)]
        max_diff = max(float((e.double() - v.double()).abs().max()) for e, v in expected)
        discrete = not live[0].dtype.is_floating_point
        same = all(torch.equal(exported[0].to(a.dtype), a) for a in (live[0], reference) if a is not None)
        ok = len(exported) == len(live) and (same if discrete else max_diff <= tolerance)
        if not ok:
            raise ExportFailed(
                f"parity check failed for {fmt}: max |exported - live| = {max_diff:.3g} over "
                f"{len(observations)} observations (allowed: {'0' if discrete else tolerance})"
            )
        signature["parity"] = {
            "observations": len(observations),
            "max_abs_diff": max_diff,
            "rule": "identical actions" if discrete else f"<= {tolerance}",
        }
        if len(inputs) > 1:
            signature["parity"]["state"] = (
                "each observation with the state the live controller carried into it over the rollout, from zeros "
                "at each episode's start"
            )
        if reference is not None:
            signature["parity"]["reference"] = "the run's own actions from the env's full observations"
        (staging / f"{artifact.name}.json").write_text(dumps(signature, indent=2) + "\n")
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / artifact.name
        os.replace(artifact, final)  # the artifact first; the signature, written last, marks a complete export
        os.replace(staging / f"{artifact.name}.json", out_dir / f"{artifact.name}.json")
        return ExportResult(final, out_dir / f"{artifact.name}.json", max_diff, len(observations))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
