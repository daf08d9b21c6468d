"""What every result file starts with (docs/benchmarks.md): commit, package versions, the command,
the CPU, and the machine's load when the run started and ended."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

PACKAGES = (
    "rlpilot",
    "torch",
    "torchrl",
    "tensordict",
    "gymnasium",
    "numpy",
    "stable-baselines3",
    "sbx-rl",
    "jax",
)
ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False)
        return out.stdout.strip()

    # a copy of the tree without its git folder (the GPU machine's): the commit its sender named in RLPILOT_COMMIT
    revision = git("rev-parse", "HEAD") or os.environ.get("RLPILOT_COMMIT", "unknown")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return revision + (" (with uncommitted changes)" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> str:
    found = [f"python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min)"


def header(argv: list[str] | None = None) -> list[str]:
    """Stamp lines for the start of a result file (``# key: value``)."""
    argv = sys.argv if argv is None else argv
    return [
        f"# date: {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
        f"# commit: {commit()}",
        f"# command: python {' '.join(argv)}",
        f"# versions: {versions()}",
        f"# cpu: {cpu_model()}, {os.cpu_count()} cores",
        f"# load at start: {load()}",
    ]


def footer() -> list[str]:
    return [f"# load at end: {load()}"]


def write_result(out: str | Path, header: list[str], body: list[str], data: dict) -> None:
    """The result file ``out`` (stamp header, ``body``, stamp footer) and its JSON twin beside it (``data``
    with ``stamp``: the same header and footer lines), the folder made if needed."""
    end = footer()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join([*header, *body, "", *end]) + "\n")
    out.with_suffix(".json").write_text(json.dumps({**data, "stamp": [*header, *end]}, indent=1) + "\n")
    print(f"written: {out} and {out.with_suffix('.json')}")
