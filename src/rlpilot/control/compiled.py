"""``train.compile``: the update's loss (forward, and through AOTAutograd its backward) as compiled code.

``torch.compile`` (inductor) turns a learner's loss function into generated code: one C++ (CPU) or Triton (CUDA)
program for its elementwise work around the library's matrix multiplies, and the backward of that graph compiled
the same way. The optimiser step stays fused Adam and the guard's checks stay eager (they decide in Python whether
an update is applied).

``auto`` compiles on CUDA only. The rule is measured, not assumed (``python benchmarks/update_cost.py --limit``,
docs/results.md "Compiled updates and the physical limit"): on this project's 2-core CPU machine a compiled update
ran within about 15% of the eager one either way (two runs on 2026-12-03: the small networks 5-13% faster in one,
DQN's and SAC 64-64's slower in the other; the Zoo's SAC 256-256 and TD3 400-300 slower in both, their matrix
multiplies being most of the time and inductor calling the same ones), while a cold compile costs 3.5-19 s per
algorithm. ``on`` compiles wherever asked; ``off`` never does.

Compiled code is cached across runs and resumes in inductor's FX-graph cache, kept in a per-user folder
(``$XDG_CACHE_HOME/rlpilot/inductor``, else ``~/.cache/rlpilot/inductor``) unless ``TORCHINDUCTOR_CACHE_DIR`` says
otherwise. Without a C++ compiler (inductor's CPU backend needs one) the run says so in one line and stays eager.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

F = TypeVar("F", bound=Callable)

COMPILERS = ("c++", "g++", "clang++")
"""What inductor's CPU backend can build with (it looks for ``$CXX`` first, then these)."""


def cache_dir() -> Path:
    """The per-user folder inductor's cache lives in: ``TORCHINDUCTOR_CACHE_DIR`` when the user set it, else
    ``$XDG_CACHE_HOME/rlpilot/inductor`` (``~/.cache/...``). Importing TorchRL already wrote inductor's own default
    (a folder under ``/tmp``, gone at reboot) into the variable: that value counts as unset."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen and os.path.abspath(chosen) != os.path.abspath(default_cache_dir()):
        return Path(chosen)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rlpilot" / "inductor"


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use, or None."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else list(COMPILERS)
    for name in candidates:
        if path := shutil.which(name):
            return path
    return None


def wanted(setting: str, device: torch.device) -> bool:
    """Whether ``train.compile`` (``auto``/``on``/``off``) compiles on ``device``: ``auto`` on CUDA only (see the
    module docstring for the measurement behind it). Asked for on a CPU with no C++ compiler: one line on
    stderr, and eager."""
    if setting == "off" or (setting == "auto" and device.type != "cuda"):
        return False
    if device.type == "cpu" and cxx_compiler() is None:
        print(
            "rlpilot: train.compile=on needs a C++ compiler for inductor's CPU code (none of $CXX, "
            f"{', '.join(COMPILERS)} found): training eagerly instead; install g++ or set train.compile=off",
            file=sys.stderr,
        )
        return False
    return True


class Compiled:
    """``fn`` compiled once (``dynamic=False``: a learner's minibatch shapes do not change), its first call's
    wall time (the compilation, or the cache load) kept in ``seconds`` for the run's events."""

    def __init__(self, fn: Callable, name: str):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir())
        self.name = name
        self.fn = torch.compile(fn, dynamic=False)
        self.seconds: float | None = None

    def __call__(self, *args, **kwargs):
        if self.seconds is not None:
            return self.fn(*args, **kwargs)
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.seconds = time.perf_counter() - start
        return out


def maybe_compiled(fn: F, enabled: bool, name: str) -> F:
    """``fn`` itself, or :class:`Compiled` around it."""
    return Compiled(fn, name) if enabled else fn  # type: ignore[return-value]


def compile_seconds(*fns: Callable) -> dict[str, float]:
    """``compile/<name>_s`` for each compiled function that has run (the first call's time), for metrics."""
    return {f"compile/{fn.name}_s": fn.seconds for fn in fns if isinstance(fn, Compiled) and fn.seconds is not None}
