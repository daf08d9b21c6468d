"""``train.compile``: whether a run compiles its update, when, and with what (the C++ compiler, inductor's cache).

The rule was measured with ``python benchmarks/update_cost.py --limit --cold`` (docs/speed.md, "Compiled updates and
the physical limit"): on the 2-core CPU machine a compiled update took 0.34-0.8x the eager one's time, a cold compile
5-20 s, one from the cache about 2-3 s. ``auto`` therefore compiles on CUDA, and on a CPU where the run plans enough
updates (:data:`PAYS_BACK_AFTER`), after its first :data:`AUTO_EAGER_UPDATES` updates (made eagerly, so a run that
stops sooner never compiles); ``on`` compiles at the first update wherever asked; ``off`` never does. Also here: the
one line a fallback prints (:func:`one_line`), and the compiler's import, timed (:func:`import_compiler`).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch
from torch import nn

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


PAYS_BACK_AFTER = {"ppo": 10_000, "dqn": 16_000, "sac": 3_000, "td3": 5_000}
"""Planned gradient updates above which ``auto`` compiles on a CPU, per algorithm measured: three times the updates
that pay back a compile from the per-user cache (up to ~3 s in a run) with the time each update saves (PPO 64-64
0.92 ms, DQN 256-256 0.56 ms, SAC 256-256 3.15 ms, TD3 400-300 2.19 ms), rounded up; from ``python
benchmarks/update_cost.py --limit --cold`` (benchmarks/results/update_cost-2026-12-03d.txt). The first run of a new
network on a machine pays the cold compile instead (5-20 s, once: it is cached for the runs after). MAPPO/IPPO,
unmeasured, compile only when asked (``on``)."""


AUTO_EAGER_UPDATES = 256
"""Under ``auto`` on a CPU, the updates a run makes eagerly before it compiles: a run that ends (or fails) sooner, a
test's or a smoke run's, never pays a compile; the Zoo's SAC loses ~0.6 s to them."""


def eager_updates(setting: str, device: torch.device) -> int:
    """How many updates run eagerly before the compiled program takes over (when :func:`wanted` says compile):
    :data:`AUTO_EAGER_UPDATES` for ``auto`` on a CPU, none otherwise."""
    return AUTO_EAGER_UPDATES if setting == "auto" and device.type != "cuda" else 0


def measured_kind(modules) -> bool:
    """Whether ``modules`` are made of what the CPU rule was measured on: no convolution or recurrent layer."""
    unmeasured = (nn.modules.conv._ConvNd, nn.RNNBase)
    return not any(isinstance(part, unmeasured) for module in modules for part in module.modules())


def wanted(setting: str, device: torch.device, *, algo: str = "", updates: int = 0, modules=()) -> bool:
    """Whether ``train.compile`` (``auto``/``on``/``off``) compiles: ``on`` always, ``off`` never; ``auto`` on CUDA,
    and on a CPU when the run plans at least :data:`PAYS_BACK_AFTER` gradient ``updates`` for ``algo`` and its
    networks (``modules``) are of the :func:`measured_kind`. Asked for on a CPU with no C++ compiler: one line on
    stderr (only when ``on`` asked for it), and eager."""
    if setting == "off":
        return False
    if setting == "auto" and device.type != "cuda":
        if updates < PAYS_BACK_AFTER.get(algo, math.inf) or not measured_kind(modules):
            return False
    if device.type == "cpu" and cxx_compiler() is None:
        if setting == "on":
            print(
                "rlpilot: train.compile=on needs a C++ compiler for inductor's CPU code (none of $CXX, "
                f"{', '.join(COMPILERS)} found): training eagerly instead; install g++ or set train.compile=off",
                file=sys.stderr,
            )
        return False
    return True


IMPORT_SECONDS: list[float] = []
"""What :func:`import_compiler` took in this process (empty until it ran; 0.0 when inductor was already loaded)."""


def import_compiler() -> None:
    """Loads inductor and the tracer while the run is built, with the other libraries (start-up, before the first
    frame: ``startup_s``), not at the first compiled update in the training clock: ~1.2 s of imports on this
    project's 2-core machine (2026-12-05), as SBX's train clock starts after JAX is imported. The seconds are logged as
    ``compile/import_s`` (:func:`compile_seconds`): a run's compile cost is that plus each program's."""
    if IMPORT_SECONDS:
        return
    start = time.perf_counter()
    import torch._inductor.compile_fx  # noqa: F401 - the import is the point
    from torch.fx.experimental import proxy_tensor  # noqa: F401

    IMPORT_SECONDS.append(time.perf_counter() - start)


def one_line(exc: Exception) -> str:
    """An exception as its type and the first line of its message (for the one stderr line a fallback prints)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__
