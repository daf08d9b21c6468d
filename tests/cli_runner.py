"""The CLI as a user runs it: a fresh ``python -m rlpilot.cli`` process, from the tests folder (where the
tests' own env modules live, as a user's would be in their project)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def cli_command(args) -> list[str]:
    return [sys.executable, "-m", "rlpilot.cli", *map(str, args)]


SRC = Path(__file__).resolve().parents[1] / "src"


def cli_env(**extra: str) -> dict[str, str]:
    # this checkout's rlpilot first (an editable install may point at another checkout), nothing else
    # from the test run's path
    return {**os.environ, "PYTHONPATH": str(SRC), **extra}


def run_cli(
    *args, cwd: str | Path = TESTS, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``env``: variables added to the process's environment."""
    return subprocess.run(
        cli_command(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=cli_env(**(env or {}))
    )


def start_cli(*args, cwd: str | Path = TESTS) -> subprocess.Popen:
    """A CLI process left running (for tests that signal or kill it)."""
    return subprocess.Popen(
        cli_command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=cli_env()
    )
