"""The two tools a control engineer asks for first, on a real exported arm controller with state (a PID gain
schedule: its integral is the artifact's second input and output): ``examples/fixed_rate.py`` (missed
deadlines in a fixed-rate loop against the sim, without torch) and ``benchmarks/control_latency.py`` (one
control step's latency, onnxruntime and ``.pt2``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("onnxruntime")

from cli_runner import cli_env  # noqa: E402
from rlpilot.config import load_config  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402
from rlpilot.play.export import export_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from fixed_rate import report  # noqa: E402

# one worker takes this file's tests, so its module fixture (a run, exported: ~10-15 s) is built once, not once per
# worker
pytestmark = pytest.mark.xdist_group("control_latency")


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory) -> Path:
    """A tiny residual run on the PID (64 frames, no update: the policy is untrained, the artifact is real),
    exported as onnx and pt2 into RUN/export (~9 s)."""
    overrides = ["env.base_controller=pid", "env.num_envs=2", "env.backend=sync", "train.total_frames=64"]
    overrides += ["sac.learning_starts=1000", "train.eval_every_frames=64", "train.eval_episodes=1"]
    run = train(
        load_config("sac-reacher-track-gains", overrides=overrides),
        run_dir=str(tmp_path_factory.mktemp("arm") / "run"),
        show_progress=False,
    )
    for fmt in ("onnx", "pt2"):
        export_run(run.path, fmt)
    assert json.loads((run.path / "export" / "policy.onnx.json").read_text())["state"]["size"] == 2
    return run.path


def test_fixed_rate_example_runs_1khz_without_torch_and_counts_missed_deadlines(arm_run):
    script = (
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'examples')!r})\n"  # as `python examples/fixed_rate.py` puts it first
        f"sys.argv = ['fixed_rate.py', {str(arm_run / 'export' / 'policy.onnx')!r}, '--hz', '1000', '--steps', '200']\n"
        f"runpy.run_path({str(ROOT / 'examples' / 'fixed_rate.py')!r}, run_name='__main__')\n"
        "assert 'torch' not in sys.modules and 'torchrl' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fixed-rate loop: 1000 Hz (period 1000 us), 200 steps" in out.stdout
    missed = re.search(r"missed deadlines: (\d+) of 200 steps \(([\d.]+)%; controller alone: (\d+)\)", out.stdout)
    assert missed, out.stdout
    whole, controller_alone = int(missed[1]), int(missed[3])
    assert 0 <= controller_alone <= whole <= 200  # a controller that misses makes its whole step miss
    # 200 steps of 200-step episodes: one reset, between two steps
    assert "episode resets: 1 " in out.stdout
    assert re.search(r"controller compute: p50 \d+ us, p99 \d+ us", out.stdout)


def test_fixed_rate_report_counts_by_hand():
    """Period 1 ms; five steps, times from each release in ns. Step 1's controller finishes 0.1 ms late, step 3's
    sim step 2 ms late, step 4 is released 0.9 ms late and takes 0.2 ms: three misses, one by the controller alone,
    one by a late release alone; the worst overrun 2 ms."""
    result = {
        "period": 1_000_000,
        "late": np.array([0, 0, 50_000, 0, 900_000]),
        "controller_done": np.array([100_000, 1_100_000, 150_000, 300_000, 950_000]),
        "step_done": np.array([500_000, 1_500_000, 999_000, 3_000_000, 1_100_000]),
        "resets": np.array([4_000_000]),
    }
    lines = report(result, hz=1000)
    assert lines[1] == "missed deadlines: 3 of 5 steps (60.00%; controller alone: 1)"
    assert lines[2].endswith("the step itself under a period: 1")
    assert lines[3] == "worst overrun: 2000 us past the deadline"
    # controller compute from each step's start: 100, 1100, 100, 300, 50 us; whole: 500, 1500, 949, 3000, 200 us
    assert lines[4] == "controller compute: p50 100 us, p99 1068 us, max 1100 us"
    assert lines[6].endswith("max 3000 us")
    sim_share = (400 + 400 + 849 + 2700 + 150) / (500 + 1500 + 949 + 3000 + 200)
    assert lines[7] == f"sim share of the whole step: {100 * sim_share:.0f}% (of the summed time)"
    assert "episode resets: 1 " in lines[9] and lines[9].endswith("max 4000 us")


def test_latency_benchmark_writes_ordered_percentiles_for_both_artifacts(arm_run, tmp_path):
    out = tmp_path / "control_latency-2099-01-01.txt"
    command = [sys.executable, "benchmarks/control_latency.py", str(arm_run), "--calls", "200", "--warmup", "20"]
    command += ["--rounds", "2", "--observations", "300", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180, env=cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["artifacts"] == str(arm_run / "export") and data["state_size"] == 2
    assert data["observations"] == 300 and data["max_action_difference"] < 1e-4  # onnx and pt2 act alike
    assert list(data["results"]) == ["onnxruntime", "pt2 (torch.export)", "empty call (loop floor)"]
    for kind, row in data["results"].items():
        assert 0 < row["p50_us"] <= row["p99_us"] <= row["p99.9_us"] <= row["max_us"], kind
    floor, onnx = data["results"]["empty call (loop floor)"], data["results"]["onnxruntime"]
    assert floor["p50_us"] < onnx["p50_us"]  # a session.run is more than the loop around it
    assert data["stamp"][0].startswith("# date:") and "| onnxruntime |" in out.read_text()
