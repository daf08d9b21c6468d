"""rlpilot: from a gymnasium environment to a trained, checked and diagnosed policy, on TorchRL.

The package root imports nothing heavy: ``import rlpilot`` and the CLI's help stay instant, and
torch/torchrl load when a function that needs them is first called.
"""

from __future__ import annotations

import os
from typing import Any

# Ray reads this when it is imported (torchrl imports ray when it is installed): with it, a local Ray
# cluster binds every listener to 127.0.0.1 instead of the machine's external interface.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

__version__ = "0.1.0"

_LAZY = {
    "train": ("rlpilot.loop.trainer", "train"),
    "resume": ("rlpilot.loop.trainer", "resume"),
    "load_run": ("rlpilot.runs", "load_run"),
    "Run": ("rlpilot.runs", "Run"),
    "make_env": ("rlpilot.envs.make", "make_env"),
    "evaluate": ("rlpilot.control.evaluate", "evaluate"),
    "check_env": ("rlpilot.check.env", "check_env"),
    "load_config": ("rlpilot.config", "load_config"),
    "Config": ("rlpilot.config", "Config"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        return getattr(importlib.import_module(module_name), attr)
    raise AttributeError(f"module 'rlpilot' has no attribute {name!r}")
