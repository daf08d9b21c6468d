"""Reading a result file's stamp (``benchmarks/stamp.py`` writes it): shared by the generators of tools/."""

from __future__ import annotations


def stamp_value(stamp: list[str], key: str) -> str:
    """The value of ``# key: value`` in a result file's stamp lines, ``?`` where it has none."""
    for line in stamp:
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return "?"
