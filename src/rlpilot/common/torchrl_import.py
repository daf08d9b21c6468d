"""TorchRL's first import in a CLI command, without the two integrations it loads and rlpilot never uses.

TorchRL imports Ray and MuJoCo whenever they are installed, whatever the program does: ``torchrl.data``
(its Ray replay buffer) and ``torchrl.record.loggers`` (its Ray service) run ``import ray``, and
``torchrl.envs`` (its own MuJoCo envs) runs ``find_spec("mujoco.mjx")``, which imports ``mujoco``.
Measured on this project's 2-core machine (``python -X importtime``, 2026-12-02): Ray ~0.43 s and MuJoCo
~0.16 s of the ~5.5 s that ``import torchrl.envs, torchrl.data`` took there (the machine ran ~1.7x slower
than on 2026-12-01; ~0.2 s + ~0.1 s at that pace). rlpilot calls none of those TorchRL features: its
MuJoCo tasks are gymnasium's (which import ``mujoco`` themselves, when the env is built), and
``rlpilot sweep``/``tune`` drive Ray directly.

So the CLI's commands that load TorchRL first call :func:`import_torchrl`: while TorchRL's packages are
imported, ``sys.modules`` holds ``None`` for ``ray`` and ``mujoco`` (the documented way to make a module
unimportable: ``import ray`` raises ImportError and ``importlib.util.find_spec("ray")`` returns None, so
TorchRL takes them as absent); then both entries are removed, and any later ``import ray`` or
``import mujoco`` (a gymnasium MuJoCo env, a user's env module, ``rlpilot sweep``) loads the real package.
TorchRL's Ray and MuJoCo classes imported in that window (``RayReplayBuffer``, ``RayService``, TorchRL's
MuJoCo envs) believe the package absent for the rest of that command; nothing in rlpilot uses them.

Only the CLI does this, and only when TorchRL is not imported yet: a program that imports rlpilot as a
library (or TorchRL before it) gets TorchRL exactly as TorchRL loads itself.
"""

from __future__ import annotations

import importlib
import sys

UNUSED = ("ray", "mujoco")
"""Installed packages TorchRL would import at its own import, which no rlpilot command needs from it."""

PACKAGES = ("torchrl.envs", "torchrl.data", "torchrl.record.loggers")
"""TorchRL's packages that import them (``torchrl.record.loggers``: ~10 ms more at start-up, instead of
importing Ray with the first logged row)."""


def import_torchrl() -> None:
    """Imports TorchRL's packages with :data:`UNUSED` hidden from them; nothing if TorchRL is loaded."""
    if "torchrl" not in sys.modules:
        import_hiding(PACKAGES, UNUSED)


def import_hiding(packages: tuple[str, ...], hidden: tuple[str, ...]) -> None:
    """Imports ``packages`` while the not yet imported of ``hidden`` look absent to them; afterwards those
    import normally again."""
    hidden = tuple(name for name in hidden if name not in sys.modules)
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        for package in packages:
            importlib.import_module(package)
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
