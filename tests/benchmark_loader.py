"""A script under benchmarks/ loaded as a module for a test, benchmarks/ importable while it loads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(path: Path):
    """The module at ``path`` (registered as ``_bench_<stem>``: dataclasses look their module up there), loaded
    with benchmarks/ on ``sys.path`` (the scripts, and the peers under it, import ``stamp`` and each other)."""
    name = f"_bench_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module
