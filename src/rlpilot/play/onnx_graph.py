"""An ONNX artifact on onnxruntime, held to its signature before a step is played.

The session is built from the file's bytes (read within :data:`rlpilot.play.safe_artifact.MAX_ARCHIVE_BYTES`),
so a graph cannot pull weights from other files ("external data": onnxruntime refuses it without a model
path). Then the graph's own inputs and outputs must be the signature's: the same names (no more, no fewer),
ranks, fixed sizes and dtypes, and a batch dimension left free. Outputs are fetched by name, never by
position: a graph that lists another output before ``action`` still plays its ``action``. onnxruntime's own
logging is silenced: its errors come back as exceptions, which the caller says in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlpilot.common.errors import UserError
from rlpilot.play.signature import AGAIN, Declared

ORT_DTYPES = {"float32": "tensor(float)", "int64": "tensor(int64)"}
QUIET = 4
"""onnxruntime's log severity for fatal errors only: a failed run is raised, not also printed."""


def _quiet_run_options():
    import onnxruntime

    options = onnxruntime.RunOptions()
    options.log_severity_level = QUIET
    return options


class OnnxStep:
    """``step(*arrays)``: the declared inputs in order -> the declared outputs by name; ``stop()`` ends a run in
    progress (``RunOptions.terminate``; later steps run with fresh options)."""

    def __init__(self, data: bytes, path: Path, declared: Declared):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = QUIET
        self.session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        check_graph(self.session, declared, path.name)
        self.inputs, self.outputs = list(declared.inputs), list(declared.outputs)
        self._options = _quiet_run_options()

    def __call__(self, *arrays: np.ndarray) -> dict[str, np.ndarray]:
        values = self.session.run(self.outputs, dict(zip(self.inputs, arrays)), self._options)
        return dict(zip(self.outputs, values))

    def stop(self) -> None:
        self._options.terminate = True
        self._options = _quiet_run_options()


def check_graph(session, declared: Declared, name: str) -> None:
    """A :class:`UserError` at the first way the session's graph disagrees with the signature ``declared``."""
    for kind, args, wanted in (
        ("input", session.get_inputs(), declared.inputs),
        ("output", session.get_outputs(), declared.outputs),
    ):
        names = [arg.name for arg in args]
        missing = [n for n in wanted if n not in names]
        extra = [n for n in names if n not in wanted]
        if missing or extra:
            problem = (
                f"has no {kind} '{missing[0]}', which its signature declares"
                if missing
                else f"has an {kind} '{extra[0]}' that its signature does not declare"
            )
            raise UserError(f"{name} {problem} (the graph's {kind}s: {', '.join(names)[:80]}); {AGAIN}")
        for arg in args:
            shape, dtype = wanted[arg.name]
            declared_as = f"{dtype} ['batch'{''.join(f', {size}' for size in shape)}]"
            dims = list(arg.shape or [])
            if arg.type != ORT_DTYPES[dtype]:
                problem = f"is {arg.type}"
            elif len(dims) != 1 + len(shape):
                problem = f"has {len(dims)} dimensions {dims}"
            elif isinstance(dims[0], int):
                problem = f"fixes the batch at {dims[0]} rows"
            elif any(isinstance(got, int) and got != size for got, size in zip(dims[1:], shape)):
                problem = f"has shape {dims}"
            else:
                continue
            raise UserError(
                f"{name}'s {kind} '{arg.name}' {problem}, but its signature declares {declared_as}: the signature "
                f"does not belong to this graph; {AGAIN}"
            )
