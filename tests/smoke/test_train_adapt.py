"""``rlpilot train adapt`` end to end on the heated tank with a tiny budget: the references and the teacher tuned (and
cached), DAgger through the loop into a PPO run that ``rlpilot eval`` and ``rlpilot export`` read as any run (the
history carried as the onnx artifact's state); the fallback acts on a plant far outside the declared ranges, where
the student is then no worse than the robust controller; bad input is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

pytest.importorskip("onnxruntime")

from rlpilot.cli import main  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = [pytest.mark.usefixtures("examples_on_path"), pytest.mark.xdist_group("adapt")]

TANK, PID = "heated_tank.plant:HeatedTank", "heated_tank.pid:TankPID"
SPACE = ["--param", "kp=0.005:2:log", "--param", "ki=0.00001:0.1:log", "--param", "kd=0.01:10:log"]
TINY = [
    f"adapt.{item}"
    for item in ("conditions=3", "tuning_episodes=1", "robust_episodes=2", "search=quick", "robust_search=quick")
]
TINY += [f"adapt.{item}" for item in ("iterations=2", "episodes=1", "epochs=5", "caution=10")]  # the arm's
TINY += ["adapt.workers=2"]  # the teacher's process pool (its oracles: test_the_teachers_pool_finds_...)
TINY += ["env.max_episode_steps=50", "train.eval_episodes=2", "train.num_threads=1"]
FAR = {"gain": 300.0, "dead_time": 30}
"""Five times the declared gain range's top, a dead time 2.5 times its longest: a plant the student never saw."""


@pytest.fixture(scope="module")
def adapt_run(tmp_path_factory) -> Path:
    """The tiny adapt run (~15 s: the robust reference on 2 short episodes, 3 oracles on 1, 2 DAgger iterations)."""
    root = tmp_path_factory.mktemp("adapt")
    sets = [arg for item in TINY for arg in ("--set", item)]
    argv = ["train", "adapt", TANK, "--controller", PID, *SPACE, *sets, "--runs", str(root), "--run-dir"]
    with pytest.MonkeyPatch.context() as patch:  # built before the tests' own examples_on_path (module scope first)
        patch.syspath_prepend(str(EXAMPLES))
        assert main([*argv, str(root / "run"), "-q"]) == 0
    return root / "run"


def test_train_adapt_writes_a_ppo_run_that_eval_and_export_read(adapt_run, capsys):
    config = yaml.safe_load((adapt_run / "config.yaml").read_text())
    teacher = json.loads((adapt_run / "teacher.json").read_text())
    assert config["algo"] == "ppo" and config["env"]["residual_mode"] == "gains" and config["env"]["history"] == 32
    assert config["env"]["gain_average"] == 1000  # the student's estimates averaged over the episode
    assert config["env"]["gain_excitation"] == 32  # each weighed by how much the command moved lately
    assert config["env"]["base_controller_kwargs"] == teacher["robust"]  # action 0: the robust controller
    assert list(teacher["labels"]) == ["nominal", "slow", "fast-dead-time"] and teacher["seconds"] > 0
    rows = [line.split(",") for line in (adapt_run / "metrics.csv").read_text().splitlines()]
    assert [row[0] for row in rows[1:]] == ["0", "150", "300"]  # the robust controller, then each iteration
    assert json.loads((adapt_run / "meta.json").read_text())["adapt"]["conditions"] == 3
    assert main(["eval", str(adapt_run), "--episodes", "2", "--trust-code"]) == 0
    assert main(["export", str(adapt_run), "--format", "onnx", "--trust-code"]) == 0
    signature = json.loads((adapt_run / "export" / "policy.onnx.json").read_text())
    # the PID's 4 numbers of state, the 3 averaged gains and their accumulated weights, the excitation's last
    # command, level and most, then 32 steps of [4 observed, 1 applied]
    state = 4 + 3 + 3 + 3 + 32 * 5
    assert signature["inputs"][0]["shape"] == ["batch", 4] and signature["state"]["size"] == state
    assert signature["parity"]["max_abs_diff"] <= 1e-4
    assert main(["eval", str(adapt_run / "export" / "policy.onnx"), "--episodes", "2", "--trust-code"]) == 0


def test_the_fallback_acts_far_outside_the_ranges_and_the_student_is_then_no_worse_than_robust(adapt_run):
    from rlpilot.control.evaluate import evaluate
    from rlpilot.control.models import Envelope
    from rlpilot.envs.make import make_env
    from rlpilot.play.load import load_policy
    from rlpilot.reference.play import play_candidates

    policy = load_policy(adapt_run)
    envelope = policy.algo.actor_net.body
    assert isinstance(envelope, Envelope) and envelope.armed == 1.0
    config = policy.run.config()
    far = config.env.__class__(**{**vars(config.env), "condition": FAR, "condition_sampled": False})
    env = make_env(far, num_envs=4, seed=50, obs_norm_state=policy.obs_norm)
    fell_back = []

    def act(observation: torch.Tensor) -> torch.Tensor:
        fell_back.append(envelope.outside(observation).float().mean().item())
        return policy.algo.greedy_action(observation)

    student = evaluate(env, act, episodes=4, seed=50)
    env.close()
    assert np.mean(fell_back) > 0.25  # on many steps the student knows it is off what it was taught
    plain = far.__class__(**{**vars(far), "base_controller": "none", "history": 0, "normalize_obs": False})
    (robust,) = play_candidates(plain, PID, [config.env.base_controller_kwargs], seeds=[50, 51, 52, 53])
    ratio = student.final["tracking_error"].mean() / robust.final["tracking_error"].mean()
    assert ratio <= 1.05, ratio


def test_the_students_fallback_is_the_robust_reference_compare_measures_it_against(adapt_run, tmp_path):
    """``adapt.robust_episodes`` and ``adapt.robust_search`` as compare's ``--tuning-episodes`` and ``--search``:
    compare's robust reference is the student's base controller, its action 0."""
    out = tmp_path / "compare"
    argv = ["compare", TANK, "--controller", PID, *SPACE, "--condition", "sampled", "--tuning-episodes", "2"]
    argv += ["--search", "quick", "--episodes", "2", "--set", "env.max_episode_steps=50", "--out", str(out)]
    assert main(argv) == 0
    robust = json.loads((out / "compare.json").read_text())["references"]["robust"]["kwargs"]
    assert robust == json.loads((adapt_run / "teacher.json").read_text())["robust"]


def test_the_teachers_pool_finds_the_oracles_one_process_finds(adapt_run):
    """Each plant's oracle, searched in a worker of the teacher's pool (``adapt.workers=2``), is the one the same
    search finds here in this process: the table does not depend on the processes."""
    from dataclasses import replace

    from rlpilot.adapt import tune_condition
    from rlpilot.reference.search import BUDGETS
    from rlpilot.runs import load_run
    from rlpilot.tune.controller import controller_space

    teacher = json.loads((adapt_run / "teacher.json").read_text())
    env = load_run(adapt_run).config().env
    plain = replace(env, base_controller="none", history=0, normalize_obs=False, condition_sampled=False)
    space = controller_space([SPACE[i] for i in range(1, len(SPACE), 2)])
    start = {p.key: teacher["robust"][p.key] for p in space}
    name = "slow"
    found = tune_condition(
        plain, PID, space, {}, name, teacher["conditions"][name], None, False, seeds=[0], start=start,
        budget=BUDGETS["quick"], names=("kp",), scale=1.5,
    )  # fmt: skip
    assert found["oracle"] == teacher["oracles"][name] and found["evaluated"] > 0 and found["slopes"] is None


def test_bad_input_is_one_line(capsys, tmp_path):
    assert main(["train", "adapt", "Pendulum-v1", "--controller", PID, *SPACE, "--runs", str(tmp_path)]) == 2
    assert "declares no conditions" in capsys.readouterr().err
    assert main(["train", "adapt", TANK, "--controller", "tests.controller_fixture:AxisPD", *SPACE]) == 2
    assert "names no gain_names" in capsys.readouterr().err
    assert main(["train", "adapt", TANK, *SPACE]) == 2
    assert "needs a plant and your controller" in capsys.readouterr().err


def test_adapt_first_step_bounds_a_schedule_by_its_first_gains(adapt_run):
    """benchmarks/adapt_first_step.py on the tiny run: each plant's own oracle from step 0 is its reference (1.00
    exactly, the same episodes); per-gain multipliers are the teacher's labels; the best candidate is the one whose
    worst plant is least; a tuple of ones held is the robust controller."""
    from tests.benchmark_loader import BENCHMARKS, load_benchmark

    from rlpilot.play.episodes import playable

    script = load_benchmark(BENCHMARKS / "adapt_first_step.py")
    found = script.measure(adapt_run, [3.0], steps=1, episodes=2, seed=10_000)
    plants = ["nominal", "slow", "fast-dead-time"]
    assert list(found["oracle"]) == plants and list(found["ratios"]) == ["x1", "x3", *(f"{p}'s oracle" for p in plants)]
    for plant in plants:
        assert found["ratios"][f"{plant}'s oracle"][plant][0] == pytest.approx(1.0)
    worst = {label: max(r[0] for r in row.values()) for label, row in found["ratios"].items()}
    assert worst[found["best"]] == min(worst.values())
    teacher = json.loads((adapt_run / "teacher.json").read_text())
    scale = yaml.safe_load((adapt_run / "config.yaml").read_text())["env"]["residual_scale"]
    assert found["oracle"]["slow"] == pytest.approx([10 ** (x * scale) for x in teacher["labels"]["slow"]])
    excitation = load_benchmark(BENCHMARKS / "adapt_excitation.py")
    policy, condition = playable(adapt_run), teacher["conditions"]["slow"]
    np.testing.assert_allclose(
        excitation.held(policy, condition, ((1.0, 1.0, 1.0), 0, (1.0, 1.0, 1.0)), episodes=2, seed=10_000),
        excitation.held(policy, condition, (1.0, 0, 1.0), episodes=2, seed=10_000),
    )


def test_adapt_students_reads_a_run_and_its_teacher(adapt_run, tmp_path):
    """benchmarks/adapt_students.py on the tiny run: a row per named plant of its table; the teacher against an
    answer whose fine oracles are the teacher's own is 1.00 on every plant."""
    from tests.benchmark_loader import BENCHMARKS, load_benchmark

    script = load_benchmark(BENCHMARKS / "adapt_students.py")
    rows = script.student_rows(adapt_run, episodes=2, seed=10_000)
    assert [row["plant"] for row in rows] == ["nominal", "slow", "fast-dead-time"]
    assert all(row["tracking_error"] > 0 and 0 < row["label_error_after_100"] < 2 for row in rows)
    teacher = json.loads((adapt_run / "teacher.json").read_text())
    answer = tmp_path / "compare.json"
    answer.write_text(json.dumps({"references": {f"oracle/{k}": {"kwargs": v} for k, v in teacher["oracles"].items()}}))
    lines = script.teacher_rows(adapt_run, answer, episodes=2, seed=10_000)
    assert len(lines) == 2 + 3 and all(line.split(" | ")[1] == "1.00" for line in lines[2:])


def test_adapt_excitation_holds_the_gains_it_is_told_then_the_robust_ones(adapt_run):
    """benchmarks/adapt_excitation.py on the tiny run: ``M:K:A`` at M = A = 1 is the robust controller throughout
    (the same episodes, the same errors); a burst of 10x gains changes them; the student's averaged multipliers are
    read per gain at the early steps, within the schedule's range."""
    from tests.benchmark_loader import BENCHMARKS, load_benchmark

    from rlpilot.play.episodes import playable

    script = load_benchmark(BENCHMARKS / "adapt_excitation.py")
    policy, condition = playable(adapt_run), {"time_constant": 20.0, "dead_time": 12}
    robust = script.held(policy, condition, (1.0, 0, 1.0), episodes=2, seed=10_000)
    np.testing.assert_allclose(script.held(policy, condition, (1.0, 10, 1.0), episodes=2, seed=10_000), robust)
    burst = script.held(policy, condition, (10.0, 20, 1.0), episodes=2, seed=10_000)
    assert not np.allclose(burst, robust, rtol=1e-3)
    errors, seen = script.student_multipliers(policy, condition, episodes=2, seed=10_000)
    assert len(errors) == 2 and sorted(seen) == [1, 5, 15, 40]
    assert all(
        list(m) == ["kp", "ki", "kd"] and all(10**-1.5 <= v <= 10**1.5 for v in m.values()) for m in seen.values()
    )


def test_adapt_identify_fits_the_labels_from_the_first_steps_and_scores_the_student(adapt_run):
    """benchmarks/adapt_identify.py on the tiny run: per step the mean label, a fresh fit and the student scored
    against the labels of each plant (the robust gains played, so the inputs differ by the plant alone); the mean
    label's error is the labels' spread around their mean, and the named plants' labels are the teacher's."""
    from tests.benchmark_loader import BENCHMARKS, load_benchmark

    script = load_benchmark(BENCHMARKS / "adapt_identify.py")
    found = script.measure(adapt_run, steps=3, train_episodes=2, episodes=2, seed=10_000, updates=50)
    assert set(found["errors"]) == {"mean label", "fresh fit", "student"}
    assert all(len(values) == 3 for values in found["errors"].values()) and found["samples"] == 3 * 2 * 3
    labels = torch.tensor(list(json.loads((adapt_run / "teacher.json").read_text())["labels"].values()))
    spread = float((labels - labels.mean(0)).abs().mean())
    assert found["errors"]["mean label"] == pytest.approx([spread] * 3, rel=1e-5)
    scale = yaml.safe_load((adapt_run / "config.yaml").read_text())["env"]["residual_scale"]
    assert found["named"]["slow"]["label"] == pytest.approx([10 ** (scale * x) for x in labels[1].tolist()], rel=1e-5)


def test_adapt_cost_times_a_plants_command_from_nothing_cached(tmp_path):
    """benchmarks/adapt_cost.py runs the tank's documented command (here with a tiny budget) in a fresh folder, as
    its own process: the teacher is tuned there (its seconds are the run's), the whole process timed around it; with
    ``keep`` the timed run is moved out of the throw-away folder, whole."""
    from tests.benchmark_loader import BENCHMARKS, load_benchmark

    script = load_benchmark(BENCHMARKS / "adapt_cost.py")
    tiny = [item for item in TINY if "workers" not in item and "conditions" not in item] + ["adapt.conditions=1"]
    found = script.cost(
        "tank", [arg for item in tiny for arg in ("--set", item)], tmp_path / "fresh", tmp_path / "kept"
    )
    tmp_path = tmp_path / "fresh"
    kept = tmp_path.parent / "kept" / "tank"
    assert not (tmp_path / "run").exists() and json.loads((kept / "meta.json").read_text())["frames"] == found["frames"]
    assert found["command"].startswith("rlpilot train adapt heated_tank.plant:HeatedTank") and found["conditions"] == 1
    assert 0 < found["teacher_s"] < found["whole_s"] and 0 < found["training_s"] < found["whole_s"]
    assert (tmp_path / "adapt-teachers").is_dir() and found["frames"] == 2 * 50
