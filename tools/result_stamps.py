"""Reading result files and their stamps (``benchmarks/stamp.py`` writes them): shared by the generators of tools/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def newest(pattern: str) -> Path | None:
    """The newest result file of ``pattern`` under benchmarks/results (their names end in the date they were taken)."""
    found = sorted(RESULTS.glob(pattern))
    return found[-1] if found else None


def shown(path: Path) -> Path:
    """``path`` as a page names it: relative to the repository where it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def source_line(path: Path, stamp: list[str]) -> str:
    """Where a table's numbers come from: the file, its commit, date, load and command."""
    load = stamp_value(stamp, "load at start").split(" (")[0]
    return (
        f"Source: `{shown(path)}` (commit {stamp_value(stamp, 'commit')[:12]}, "
        f"{stamp_value(stamp, 'date')}, load at start {load}); command: `{stamp_value(stamp, 'command')}`."
    )


def stamp_value(stamp: list[str], key: str) -> str:
    """The value of ``# key: value`` in a result file's stamp lines, ``?`` where it has none."""
    for line in stamp:
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return "?"
