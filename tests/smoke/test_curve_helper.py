"""The end-of-run curve drawn by the helper process (rlpilot.loop.curve_helper): the same file, drawn without
importing matplotlib in the run's process; a dead helper changes nothing; a killed run leaves no helper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlpilot.config import load_config
from rlpilot.loop import curve_helper
from rlpilot.loop.trainer import train
from rlpilot.runs import load_run

TINY = ["train.total_frames=512", "train.eval_every_frames=256", "train.eval_episodes=2", "train.log_every_frames=256"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = train(
        load_config("ppo-cartpole", overrides=TINY), run_root=str(tmp_path_factory.mktemp("runs")), show_progress=False
    )
    assert run.curve_path.stat().st_size > 0  # the run's own end drew it (through a helper, or here)
    return run.path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_the_helper_draws_the_curve_and_this_process_never_imports_matplotlib(run_dir):
    load_run(run_dir).curve_path.unlink()
    code = (
        "import sys, json\n"
        "from rlpilot.loop import curve_helper\n"
        "from rlpilot.runs import load_run\n"
        "helper = curve_helper.start()\n"
        "process = helper.process\n"
        f"path = helper.draw(load_run({str(run_dir)!r}), solved_at=475.0)\n"
        "print(json.dumps({'path': str(path), 'matplotlib': 'matplotlib' in sys.modules, "
        "'helper_exit': process.poll()}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"path": str(run_dir / "curve.png"), "matplotlib": False, "helper_exit": 0}
    assert (run_dir / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(run_dir.glob(".curve.tmp*"))  # the atomic write left no temporary file


def test_a_dead_helper_changes_nothing_the_curve_is_drawn_here(run_dir):
    run = load_run(run_dir)
    run.curve_path.unlink()
    helper = curve_helper.start()
    helper.process.kill()
    helper.process.wait()
    assert helper.draw(run, solved_at=475.0) == run.curve_path
    assert run.curve_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert curve_helper.CurveHelper(None).draw(run, solved_at=None) == run.curve_path  # no helper at all


def test_close_ends_a_helper_that_was_never_asked():
    helper = curve_helper.start()
    process = helper.process
    helper.close()
    assert process.returncode is not None and helper.process is None


def test_a_killed_run_leaves_no_helper_behind(tmp_path):
    """SIGKILL of the run: the helper reads end-of-file on its standard input and exits."""
    code = (
        "from rlpilot.loop import curve_helper\n"
        "helper = curve_helper.start()\n"
        "print(helper.process.pid, flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    helper_pid = int(parent.stdout.readline())
    assert _alive(helper_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60  # it may still be importing matplotlib when its parent dies
    while _alive(helper_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(helper_pid)


def test_a_process_with_matplotlib_draws_its_runs_curves_itself():
    """``for_this_run``: a helper for a fresh process (the CLI's), none where matplotlib's figure is imported
    already (a notebook or a sweep training run after run): the curve is then drawn here, as without a helper."""
    code = (
        "import sys\n"
        "from rlpilot.loop import curve_helper\n"
        "fresh = curve_helper.for_this_run()\n"
        "print(fresh.process is not None)\n"
        "fresh.close()\n"
        "import matplotlib.figure\n"
        "print(curve_helper.for_this_run().process is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_a_later_run_of_the_process_counts_its_own_start_up(monkeypatch):
    """``startup_s``: the process's age for its first run; for a later one, from its own ``train`` call."""
    from rlpilot.loop import lifecycle

    monkeypatch.setattr(lifecycle, "_STARTED_A_RUN", False)
    monkeypatch.setattr(lifecycle, "process_age", lambda: 123.0)
    monkeypatch.setattr(lifecycle, "time", SimpleNamespace(monotonic=lambda: 1005.0))  # its clock at the first frame
    assert lifecycle.startup_seconds(1000.0) == 123.0  # the first run: the process's age
    assert lifecycle.startup_seconds(1000.0) == 5.0  # a later one: since its train call
