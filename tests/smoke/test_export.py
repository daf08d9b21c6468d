"""Export to ONNX, torch.export (.pt2) and TorchScript: parity, any batch size, same returns, clean failures."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_runner import run_cli
from rlpilot.common.errors import UserError
from rlpilot.config import load_config
from rlpilot.loop.trainer import train
from rlpilot.play.episodes import evaluate_target
from rlpilot.play.export import export_run
from rlpilot.play.load import load_artifact
from rlpilot.play.write import FORMATS

ROOT = Path(__file__).resolve().parents[2]
RUNS = {
    # ppo-cartpole seed 1 solves in ~4k frames: a real policy for the deploy example's >= 475 check
    "ppo-cartpole": ["train.seed=1"],
    "ppo-pendulum": ["train.total_frames=4096", "train.eval_every_frames=4096"],
    "dqn-cartpole": ["train.total_frames=1024", "dqn.learning_starts=0", "train.eval_every_frames=1024"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        preset: train(
            load_config(preset, overrides=overrides + ["train.eval_episodes=4"]),
            run_root=str(root),
            show_progress=False,
        )
        for preset, overrides in RUNS.items()
    }


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("preset", list(RUNS))
def test_export_parity_batch_sizes_and_returns(runs, preset, fmt, tmp_path, trusted_code):
    run = runs[preset]
    result = export_run(run.path, fmt, tmp_path / "out")
    signature = json.loads(result.signature.read_text())
    assert result.observations == 1000 and signature["parity"]["observations"] == 1000
    discrete = signature["action"]["type"] == "discrete"
    assert result.max_abs_diff == 0 if discrete else result.max_abs_diff <= 1e-5
    assert {"torch", "torchrl", "gymnasium"} <= set(signature["versions"])
    policy, _ = load_artifact(result.artifact, trusted=True)  # this test wrote it (TorchScript is code)
    obs_dim = signature["inputs"][0]["shape"][1]
    for batch in (1, 7, 256):
        action = policy(np.random.default_rng(batch).normal(size=(batch, obs_dim)).astype(np.float32))
        assert action.shape[0] == batch
        if discrete:
            assert action.dtype == np.int64 and ((0 <= action) & (action < signature["action"]["n"])).all()
        else:
            assert (action >= np.array(signature["action"]["low"]) - 1e-6).all()
            assert (action <= np.array(signature["action"]["high"]) + 1e-6).all()
    live, _, _ = evaluate_target(run.path, episodes=5, seed=77, csv_path=tmp_path / "live.csv")
    exported, _, _ = evaluate_target(
        result.artifact, episodes=5, seed=77, csv_path=tmp_path / "art.csv"
    )  # trusted_code: as `eval ARTIFACT --trust-code`
    if discrete:
        np.testing.assert_array_equal(exported.returns, live.returns)
    else:
        np.testing.assert_allclose(exported.returns, live.returns, rtol=1e-4, atol=1e-3)


def test_deploy_example_runs_without_torch(runs, tmp_path):
    result = export_run(runs["ppo-cartpole"].path, "onnx", tmp_path / "onnx")
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['deploy_onnx.py', {str(result.artifact)!r}, '--episodes', '3', '--seed', '5']\n"
        f"runpy.run_path({str(ROOT / 'examples' / 'deploy_onnx.py')!r}, run_name='__main__')\n"
        "assert 'torch' not in sys.modules and 'torchrl' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    mean = float(out.stdout.strip().splitlines()[-1].split(":")[-1])
    assert mean >= 475


def test_eval_writes_episodes_and_a_gif(runs, tmp_path):
    result, csv_path, video = evaluate_target(
        runs["ppo-cartpole"].path, episodes=3, seed=0, csv_path=tmp_path / "e.csv", video=tmp_path / "episode.gif"
    )
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "episode,seed,return,length" and len(rows) == 4
    assert [float(r.split(",")[2]) for r in rows[1:]] == result.returns.tolist()
    from PIL import Image

    with Image.open(video) as gif:
        assert gif.size[0] > 100
        total_ms = 0
        for index in range(gif.n_frames):  # identical consecutive frames are merged, durations add up
            gif.seek(index)
            total_ms += gif.info["duration"]
    # the recorded episode is the one a 1-env gymnasium env plays from that seed: one frame per step
    # (plus the last), GIF durations in 10 ms units (33 ms -> 30 ms)
    same, _, _ = evaluate_target(
        runs["ppo-cartpole"].path, episodes=1, seed=0, csv_path=tmp_path / "one.csv", backend="sync"
    )
    assert same.lengths[0] >= 100 and same.lengths[0] * 30 <= total_ms <= (same.lengths[0] + 1) * 40


rlpilot = run_cli


def test_export_bad_input_is_one_line_and_leaves_nothing(runs, tmp_path):
    run = runs["ppo-cartpole"].path
    no_checkpoint = tmp_path / "no-ckpt"
    shutil.copytree(run, no_checkpoint, ignore=shutil.ignore_patterns("checkpoints", "export"))
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = [
        (["export", str(no_checkpoint), "--out", str(tmp_path / "o1")], "has no checkpoint"),
        (["export", str(run), "--format", "tflite", "--out", str(tmp_path / "o2")], "unknown export format 'tflite'"),
        (["export", str(run), "--out", str(a_file)], "is a file, not a folder"),
    ]
    for args, needle in cases:
        out = rlpilot(*args)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".export-")]


def test_failed_parity_fails_and_keeps_nothing(runs, tmp_path, monkeypatch):
    """An artifact that disagrees with the live policy must fail the command and leave no files."""
    import rlpilot.play.write as write

    real_write = write.write_artifact

    def write_wrong(module, fmt, example, path):
        with __import__("torch").no_grad():
            module.loc.add_(5.0)  # a different normalisation: a different policy
        real_write(module, fmt, example, path)

    monkeypatch.setattr(write, "write_artifact", write_wrong)
    with pytest.raises(write.ExportFailed, match="parity check failed"):
        export_run(runs["ppo-cartpole"].path, "onnx", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".export-")]


def test_load_artifact_rejects_a_file_without_signature(tmp_path):
    lonely = tmp_path / "policy.onnx"
    lonely.write_bytes(b"not a model")
    with pytest.raises(UserError, match="not an exported policy"):
        load_artifact(lonely)


@pytest.mark.slow  # ~34 s of ffmpeg through the CLI; make test keeps the GIF path (test_eval_writes_episodes_and_a_gif)
def test_eval_cli_records_mp4(runs, tmp_path):
    video = tmp_path / "episode.mp4"
    out = rlpilot(
        "eval",
        str(runs["ppo-cartpole"].path),
        "--episodes",
        "2",
        "--video",
        str(video),
        "--csv",
        str(tmp_path / "e.csv"),
    )
    assert out.returncode == 0, out.stderr
    assert f"video:    {video}" in out.stdout
    import imageio.v2 as imageio

    reader = imageio.get_reader(video)
    assert reader.count_frames() >= 500
    assert rlpilot("eval", str(runs["ppo-cartpole"].path), "--video", str(tmp_path / "x.avi")).returncode == 2


def test_best_checkpoint_can_be_evaluated_and_exported(runs, tmp_path):
    run = runs["ppo-cartpole"]
    assert (run.path / "checkpoints" / "best.pt").is_file()
    result = export_run(run.path, "torchscript", tmp_path / "best", checkpoint="best")
    assert json.loads(result.signature.read_text())["checkpoint"] == "best"
    best, _, _ = evaluate_target(run.path, episodes=3, seed=1, csv_path=tmp_path / "b.csv", checkpoint="best")
    assert best.mean >= 475
