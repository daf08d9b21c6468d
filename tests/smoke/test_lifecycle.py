"""The one loop's lifecycle, the same tests for a control run (PPO on CartPole) and an LLM run (GRPO on a
tiny model): budget, time limit, solved_consecutive, guard roll-back, SIGKILL then resume, SIGTERM,
a second writer refused. Every ``train.*`` and ``guard.*`` setting means the same for both."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import torch

from cli_runner import run_cli, start_cli
from rlpilot.common.errors import UserError
from rlpilot.config import load_config
from rlpilot.loop.trainer import resume, train
from rlpilot.runs import load_run

pytest.importorskip("transformers")

KINDS = {
    # 8 envs x 32 steps = 256 frames a step
    "control": (
        "ppo-cartpole",
        [
            "train.eval_episodes=2",
            "train.eval_every_frames=512",
            "train.checkpoint_every_frames=512",
            "train.log_every_frames=256",
            "train.solved_at=1000",
        ],
        256,
    ),
    # 4 prompts x 4 responses = 16 frames a step
    "llm": (
        "grpo-reverse",
        [
            "grpo.prompts_per_step=4",
            "grpo.group_size=4",
            "grpo.eval_prompts=4",
            "llm.sft_steps=3",
            "llm.tiny_hidden_size=32",
            "llm.tiny_layers=1",
            "train.eval_every_frames=32",
            "train.checkpoint_every_frames=32",
            "train.log_every_frames=16",
            "train.solved_at=1000",
        ],
        16,
    ),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return request.param


def config_for(kind: str, *overrides: str):
    preset, base, _ = KINDS[kind]
    return load_config(preset, overrides=[*base, *overrides])


def steps(kind: str, count: int) -> int:
    return KINDS[kind][2] * count


def test_budget_ends_the_run_and_rows_follow_the_logging_cadence(kind, tmp_path):
    run = train(config_for(kind, f"train.total_frames={steps(kind, 4)}"), run_root=str(tmp_path), show_progress=False)
    assert run.status == "finished" and run.frames == steps(kind, 4)
    frames = [row["frames"] for row in run.metrics()]
    assert [f for f in frames if f > 0] == [steps(kind, i) for i in range(1, 5)]  # log_every = one step
    evals = [e["frames"] for e in run.events() if e["event"] == "eval" and e["frames"] > 0]
    assert evals == [steps(kind, 2), steps(kind, 4)]  # eval_every = two steps
    assert (run.path / "checkpoints" / "last.pt").exists() and run.meta()["resumes"] == 0


def test_time_limit_stops_with_a_final_evaluation(kind, tmp_path):
    config = config_for(kind, "train.total_frames=10000000", "train.max_seconds=1")
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert run.status == "finished" and 0 < run.frames < 10_000_000
    events = run.events()
    assert any(e["event"] == "time_limit" for e in events)
    assert [e for e in events if e["event"] == "eval"][-1]["frames"] == run.frames


def test_solved_needs_consecutive_evaluations(kind, tmp_path):
    config = config_for(
        kind,
        "train.total_frames=100000",
        "train.solved_at=-1000",
        "train.solved_consecutive=2",
        "train.stop_when_solved=true",
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    solved = [e for e in run.events() if e["event"] == "solved"]
    assert run.status == "solved" and len(solved) == 1 and solved[0]["consecutive"] == 2
    assert run.solved_at_frames == run.frames == steps(kind, 4)  # the second evaluation (every two steps)


def test_evals_after_solved_keep_training_and_record_whether_it_holds(kind, tmp_path):
    overrides = ["train.total_frames=100000", "train.solved_at=-1000", "train.stop_when_solved=true"]
    config = config_for(kind, *overrides, "train.evals_after_solved=2")
    run = train(config, run_root=str(tmp_path), show_progress=False)
    meta = run.meta()
    assert run.status == "solved" and run.solved_at_frames == steps(kind, 2)  # the first evaluation
    assert run.frames == steps(kind, 6)  # two more evaluations, every two steps
    assert meta["stays_solved"] == 1.0 and len(meta["evals_after_solved"]) == 2


def test_guard_skips_cut_the_lr_and_roll_back(kind, tmp_path):
    config = config_for(
        kind, f"train.total_frames={steps(kind, 6)}", "guard.max_loss=1e-12", "guard.max_trips=2", "guard.lr_cut=0.5"
    )
    run = train(config, run_root=str(tmp_path), show_progress=False)
    events = run.events()
    skips = [e for e in events if e["event"] == "guard_skip"]
    rollbacks = [e for e in events if e["event"] == "rollback"]
    assert skips and skips[0]["reason"].startswith("loss above") and skips[-1]["lr_scale"] < 0.5
    assert rollbacks and run.meta()["guard_trips"] == len(skips)
    saved = torch.load(run.path / "checkpoints" / "last.pt", weights_only=True)
    assert saved["state"]["guard" if kind == "llm" else "algo"] is not None


def wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            pytest.fail(f"{path} never appeared")
        time.sleep(0.05)


def evaluated_since_resume(run_dir: Path) -> bool:
    """An ``eval`` event after the last ``resume`` event: the resumed process is in its loop. (Rows in
    metrics.csv past the checkpoint prove nothing: the killed process logged some before its next checkpoint,
    and the resume drops them only once it has built everything.)"""
    try:
        kinds = [event["event"] for event in load_run(run_dir).events()]
    except Exception:  # a line being appended: read again
        return False
    return "resume" in kinds and "eval" in kinds[len(kinds) - kinds[::-1].index("resume") :]


# the LLM kind of this test takes ~25 s: make test-all (slow); the control kind runs in make test
@pytest.mark.parametrize("kind", ["control", pytest.param("llm", marks=pytest.mark.slow)])
def test_sigkill_and_sigterm_then_resume_on_the_same_curve(kind, tmp_path):
    run_dir = tmp_path / "run"
    preset, base, _ = KINDS[kind]
    sets = _sets([*base, "train.total_frames=100000000"])
    process = start_cli("train", preset, "--run-dir", run_dir, "-q", *sets)
    wait_for(run_dir / "checkpoints" / "last.pt")
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["frames"]

    process = start_cli("train", "--resume", run_dir, "-q")
    deadline = time.time() + 120
    while not evaluated_since_resume(run_dir):  # in its loop (signals handled), not still building
        if time.time() > deadline:
            pytest.fail("the resumed run never evaluated")
        time.sleep(0.05)
    second = start_cli("train", "--resume", run_dir, "-q")  # a second writer while the first one runs
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 2 and "being written by pid" in stderr and len(stderr.strip().splitlines()) == 1
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and f"resume: rlpilot train --resume {run_dir}" in stdout
    run = load_run(run_dir)
    assert run.status == "interrupted" and "SIGTERM" in run.meta()["reason"]
    interrupted_at = run.frames
    assert interrupted_at > killed_at

    final = resume(run_dir, total_frames=interrupted_at + steps(kind, 2), show_progress=False)
    assert final.status == "finished" and final.frames == interrupted_at + steps(kind, 2)
    frames = [row["frames"] for row in final.metrics()]
    assert frames == sorted(set(frames)), "a frame range was logged twice"
    resumes = [e for e in final.events() if e["event"] == "resume"]
    assert final.meta()["resumes"] == len(resumes) == 2
    assert not list(run_dir.rglob("*.tmp"))


def test_a_run_killed_before_its_first_checkpoint_resumes_from_frame_0(tmp_path, capsys):
    """SIGKILL before any last.pt: --resume starts the run again in its directory (same config and seed),
    dropping what the killed attempt logged, instead of refusing to resume."""
    run_dir = tmp_path / "run"
    preset, base, _ = KINDS["control"]
    sets = _sets([*base, "train.total_frames=100000000", "train.checkpoint_every_frames=100000000"])
    process = start_cli("train", preset, "--run-dir", run_dir, "-q", *sets)
    deadline = time.time() + 120
    while not (run_dir / "checkpoints" / "best.pt").exists():  # written at the first evaluation
        if time.time() > deadline:
            pytest.fail("the run never evaluated")
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (run_dir / "checkpoints" / "last.pt").exists()
    assert load_run(run_dir).meta()["status"] == "running"

    run = resume(run_dir, total_frames=steps("control", 3), show_progress=False)  # what `train --resume` calls
    out = capsys.readouterr().out
    assert "killed before its first checkpoint" in out and "again from frame 0" in out
    assert run.status == "finished" and run.frames == steps("control", 3)
    frames = [row["frames"] for row in run.metrics()]
    assert frames == [steps("control", i) for i in range(1, 4)]  # the killed attempt's rows are gone
    kinds = [event["event"] for event in run.events()]
    assert kinds.count("restart") == 1 and kinds.index("restart") < kinds.index("eval")
    assert run.meta()["resumes"] == 0 and run.config().train.total_frames == steps("control", 3)


def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path):
    config = load_config(
        algo="ppo", env_id="envs_for_tests:RaisesOnStep", overrides=["env.num_envs=2", "ppo.minibatch_size=64"]
    )
    with pytest.raises(UserError, match="envs_for_tests:RaisesOnStep.*RuntimeError: boom"):
        train(config, run_root=str(tmp_path), show_progress=False)
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_what_raised_mid_run_in_one_line(tmp_path):
    run_dir = tmp_path / "run"
    sets = ["env.num_envs=2", "ppo.steps_per_env=64", "ppo.minibatch_size=64", "train.checkpoint_every_frames=128"]
    out = run_cli("train", "ppo", "envs_for_tests:RaisesLater", "--run-dir", run_dir, "-q", *_sets(sets))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "envs_for_tests:RaisesLater" in out.stderr and "RuntimeError: boom" in out.stderr
    meta = load_run(run_dir).meta()
    assert meta["status"] == "failed" and "RuntimeError: boom" in meta["reason"]


def _sets(overrides: list[str]) -> list[str]:
    return [item for override in overrides for item in ("--set", override)]
