"""Writing an exported policy: the artifact in one of three formats, checked against the live module
before it is kept (staged beside the output folder: a failed export leaves nothing). Used by
``rlpilot.export`` (single-agent policies) and ``rlpilot.multiagent.play`` (group policies)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from rlpilot.play.load import load_artifact

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


def write_artifact(module: nn.Module, fmt: str, example: torch.Tensor, path: Path) -> None:
    batch = torch.export.Dim("batch", min=1)
    dynamic = {"observation": {0: batch}}
    if fmt == "pt2":
        torch.export.save(torch.export.export(module, (example,), dynamic_shapes=dynamic), str(path))
    elif fmt == "onnx":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (example,),
                str(path),
                input_names=["observation"],
                output_names=["action"],
                external_data=False,  # one self-contained file (the default writes weights beside it)
                dynamic_shapes=dynamic,
                dynamo=True,
                verbose=False,
            )
    else:
        torch.jit.trace(module, example).save(str(path))


def write_checked(
    module: nn.Module, observations: torch.Tensor, fmt: str, out_dir: Path, signature: dict, tolerance: float
) -> ExportResult:
    """Writes ``module`` as ``fmt`` into ``out_dir`` with its signature, after checking that the artifact
    (reloaded the way ``eval`` loads it) acts like the live module on ``observations``: identical discrete
    actions, continuous ones within ``tolerance``. Staged beside ``out_dir``: a failed export leaves nothing."""
    with torch.inference_mode():
        live = module(observations)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=out_dir.parent))
    try:
        artifact = staging / FORMATS[fmt]
        write_artifact(module, fmt, observations[:4].clone(), artifact)
        (staging / f"{artifact.name}.json").write_text(json.dumps(signature, indent=2) + "\n")
        run_exported, _ = load_artifact(artifact)
        exported = torch.as_tensor(run_exported(observations.numpy()))
        max_diff = float((exported.double() - live.double()).abs().max())
        discrete = not live.dtype.is_floating_point
        ok = bool(torch.equal(exported.to(live.dtype), live)) if discrete else max_diff <= tolerance
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
        (staging / f"{artifact.name}.json").write_text(json.dumps(signature, indent=2) + "\n")
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / artifact.name
        os.replace(artifact, final)  # the artifact first; the signature, written last, marks a complete export
        os.replace(staging / f"{artifact.name}.json", out_dir / f"{artifact.name}.json")
        return ExportResult(final, out_dir / f"{artifact.name}.json", max_diff, len(observations))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
