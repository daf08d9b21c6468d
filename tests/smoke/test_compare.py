"""``rlpilot compare`` on the heated tank (examples/heated_tank): the references searched and cached, every row on
the same episodes, the numbers equal to what ``rlpilot eval`` plays, the paired intervals against a hand
computation, the report written, and bad input as one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import EXAMPLES
from rlpilot.cli import main
from rlpilot.stats import paired_ratio

TANK, PID = "heated_tank.plant:HeatedTank", "heated_tank.pid:TankPID"
SPACE = ["--param", "kp=0.01:2:log", "--param", "ki=0.0001:0.1:log"]
SMALL = ["--episodes", "3", "--tuning-episodes", "2", "--search", "quick", "--seed", "500"]


pytestmark = pytest.mark.usefixtures("examples_on_path")


def test_paired_ratio_against_a_hand_computation():
    """Two episodes, errors (1, 3) against (1, 1): the ratio of means is 2; a bootstrap resample is (1, 1), (1, 3)
    or (3, 3) with probability 1/4, 1/2, 1/4, so its ratio is 1, 2 or 3 and the 95% interval is [1, 3]. Pairing
    cancels what the episodes share: a row twice the reference on every episode is 2 with no spread."""
    assert paired_ratio(np.array([1.0, 3.0]), np.array([1.0, 1.0])) == (2.0, 1.0, 3.0)
    hard = np.array([0.1, 5.0, 0.3, 9.0, 1.0])
    assert paired_ratio(2 * hard, hard) == (2.0, 2.0, 2.0)
    ratio, low, high = paired_ratio(np.array([2.0]), np.array([1.0]))
    assert ratio == 2.0 and np.isnan(low) and np.isnan(high)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        argv = ["compare", TANK, "--controller", PID, *SPACE, "--condition", "nominal"]
        argv += ["--condition", "slow-load:time_constant=200,load=10", "--condition", "sampled", *SMALL]
        argv += ["--also", "random", "--workers", "1"]  # one process (the pool: a test below)
        assert main([*argv, "--out", str(out)]) == 0
    finally:
        sys.path.remove(str(EXAMPLES))
    return out, argv


def test_compare_writes_the_answer_with_its_figures(compared):
    out, _ = compared
    answer = (out / "answer.md").read_text()
    summary = json.loads((out / "compare.json").read_text())
    assert set(summary["conditions"]) == {"nominal", "slow-load", "sampled"}
    assert set(summary["references"]) == {"robust", "oracle/nominal", "oracle/slow-load"}
    for figure in ["ratios.png", "trace-nominal.png", "trace-slow-load.png", "trace-sampled.png"]:
        assert (out / figure).read_bytes().startswith(b"\x89PNG") and f"]({figure})" in answer
    assert "| nominal | TankPID |" in answer and "| sampled | robust |" in answer and "| nominal | random |" in answer
    assert summary["conditions"]["slow-load"]["condition"] == {
        "gain": 40.0,
        "time_constant": 200.0,
        "dead_time": 4,
        "load": 10.0,
    }  # a case of one's own starts from the nominal one; beyond a declared range it is played, and flagged
    assert "| slow-load (time_constant: outside the declared range) | TankPID |" in answer


def test_each_cell_is_what_eval_plays_and_its_ratios_are_paired(compared, capsys):
    """The controller's row is what ``rlpilot eval --controller --condition`` plays on the same seeds; a ratio is
    the mean over the reference's mean on the same episodes; the oracle tunes no worse than where it started."""
    out, _ = compared
    summary = json.loads((out / "compare.json").read_text())
    nominal = summary["conditions"]["nominal"]
    argv = ["eval", TANK, "--controller", PID, "--condition", "nominal", "--episodes", "3", "--seed", "500"]
    assert main([*argv, "--csv", str(out / "eval.csv")]) == 0
    rows = (out / "eval.csv").read_text().splitlines()
    column = rows[0].split(",").index("tracking_error")
    played = [float(row.split(",")[column]) for row in rows[1:]]
    assert np.allclose(nominal["per_episode"]["TankPID"]["error"], played, rtol=1e-5)
    errors = {row: np.array(values["error"]) for row, values in nominal["per_episode"].items()}
    ratio = nominal["cells"]["TankPID"]["to_oracle"]
    assert ratio[0] == pytest.approx(errors["TankPID"].mean() / errors["oracle"].mean())
    assert ratio[0] == paired_ratio(errors["TankPID"], errors["oracle"])[0]
    # the search starts from the controller's own arguments: the oracle scores no worse than them on its episodes
    from dataclasses import replace

    from rlpilot.config.sections import EnvConfig
    from rlpilot.reference.play import Objective, play_candidates

    first, last = summary["tuning_seeds"]
    plant = replace(EnvConfig(id=TANK), condition=nominal["condition"])
    (default,) = play_candidates(plant, PID, [{}], seeds=list(range(first, last + 1)))
    assert summary["references"]["oracle/nominal"]["tuning_score"] <= Objective().per_episode(default).mean()
    assert "verdict" in nominal["cells"]["TankPID"] and "verdict" not in nominal["cells"]["oracle"]


def test_a_rerun_reuses_its_references(compared, capsys, monkeypatch):
    out, argv = compared
    monkeypatch.syspath_prepend(str(EXAMPLES))
    before = (out / "references.json").read_text()
    assert main([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("from ") == 3 and "tuning" not in err
    assert (out / "references.json").read_text() == before


def test_oracles_searched_side_by_side_are_the_ones_one_process_finds(tmp_path, monkeypatch, capsys):
    """A plan's two oracles searched on two processes (``--workers 2``) and one after the other in this process are
    the same, candidate for candidate, each cached under the same key (short episodes: the search is what counts)."""
    from rlpilot.check import env_config
    from rlpilot.compare import Plan, conditions_of, references
    from rlpilot.envs.make import declaration
    from rlpilot.reference.search import BUDGETS
    from rlpilot.tune.controller import controller_space

    monkeypatch.syspath_prepend(str(EXAMPLES))
    env = env_config(TANK, ["env.max_episode_steps=40"])
    conditions = conditions_of(declaration(env), ["nominal", "slow-load:time_constant=200,load=10"])
    batch, rounds, refine = BUDGETS["quick"]
    found = {}
    for workers in (2, 1):
        plan = Plan(
            env=env, controller=PID, space=controller_space(SPACE[1::2]), fixed={}, conditions=conditions,
            tuning_episodes=1, batch=batch, rounds=rounds, refine_rounds=refine, workers=workers,
        )  # fmt: skip
        references(plan, tmp_path / str(workers))
        found[workers] = json.loads((tmp_path / str(workers) / "references.json").read_text())
        for entry in found[workers].values():
            entry.pop("seconds")
    assert "tuning 2 oracles on 2 processes" in capsys.readouterr().err
    assert len(found[2]) == 3 and found[2] == found[1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--condition", "arctic"], "names no such condition"),
        (["--condition", "x:mass=2"], "declares no condition 'mass'"),
        (["--seed", "1"], "overlap the tuning ones"),
        (["--param", "kq=0.1:1"], "kq"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, extra, message):
    argv = ["compare", TANK, "--controller", PID, *SPACE, *SMALL, *extra, "--out", str(tmp_path / "c")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_plant_without_conditions_or_a_search_is_one_line(tmp_path, capsys):
    assert main(["compare", "CartPole-v1", "--controller", "random", "--param", "k=1:2"]) == 2
    assert "CartPole-v1 declares no conditions" in capsys.readouterr().err
    assert main(["compare", TANK, "--controller", PID, "--out", str(tmp_path)]) == 2
    assert "--param kp=0.1:100:log" in capsys.readouterr().err


def test_a_cache_that_is_not_one_is_one_line(tmp_path, capsys):
    (tmp_path / "references.json").write_text('{"abc": [1, 2]}')
    argv = ["compare", TANK, "--controller", PID, *SPACE, *SMALL, "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "references.json: it is not a cache rlpilot compare wrote" in capsys.readouterr().err


def test_search_starts_clip_into_the_space_and_the_edge_is_named():
    """A start outside a range (a derivative gain of 0 on a log range) is clipped into it; a best point on the
    range's end is reported as the search's edge."""
    from rlpilot.reference.search import search
    from rlpilot.tune.space import parse_range

    space = [parse_range("kd", "0.01:10:log"), parse_range("kp", "0:1")]
    found = search(
        lambda cs: [abs(c["kp"] - 0.3) - c["kd"] for c in cs], space, starts=[{"kd": 0.0, "kp": 0.5}], batch=4
    )
    assert found.history[0][0]["kd"] == pytest.approx(0.01)
    assert found.edge == ["kd at its upper bound (10)"] and abs(found.best["kp"] - 0.3) < 0.05
