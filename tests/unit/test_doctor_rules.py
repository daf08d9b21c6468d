"""Every doctor rule on synthetic runs written by hand: it fires on its evidence, and stays quiet on a
healthy counterpart. No training, no torch: the whole file runs in a few seconds."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import rlpilot
from rlpilot.common.findings import Finding, render_finding
from rlpilot.config import Config, TrainConfig
from rlpilot.doctor import RULES_BY_ALGO, control, diagnose, llm, offpolicy, rules_for
from rlpilot.doctor.common import rule_nonfinite_normalization
from rlpilot.doctor.view import RunView
from rlpilot.runs import Run, load_run

ROWS, FRAMES_PER_ROW = 12, 1024
BUDGET = ROWS * FRAMES_PER_ROW
DISCRETE = {"action": {"type": "discrete", "n": 2}, "max_episode_steps": 500}
BOX = {"meta": {"solved_at": -200.0, "env_facts": {"action": {"type": "box", "dim": 1}, "max_episode_steps": 200}}}
"""A Pendulum-like SAC/TD3 run: rewards about -6 a step, gamma 0.99, so no discounted return exceeds ~600."""


def config(algo: str = "ppo", **sections: dict[str, Any]) -> Config:
    """A config whose budget is the synthetic run's frames; ``ppo={"gamma": 0.5}`` sets section fields."""
    default = Config()
    built = {name: type(getattr(default, name))(**fields) for name, fields in sections.items()}
    built.setdefault("train", TrainConfig(total_frames=BUDGET))
    return Config(algo=algo, **built)


def columns(n: int = ROWS, **values: Any) -> list[dict[str, float]]:
    """``n`` metrics rows, ``FRAMES_PER_ROW`` apart; each value is a list (one per row) or one for every row.
    Names use ``__`` for ``/``: ``ppo__kl`` is ``ppo/kl``."""
    rows = [{"frames": FRAMES_PER_ROW * (i + 1)} for i in range(n)]
    for name, value in values.items():
        for row, item in zip(rows, value if isinstance(value, list) else [value] * n):
            if item is not None:
                row[name.replace("__", "/")] = item
    return rows


def evals(*means: float) -> list[dict[str, float]]:
    """Rows that carry only a greedy evaluation, spread over the budget."""
    step = BUDGET // len(means)
    return [{"frames": step * (i + 1), "eval/return_mean": mean} for i, mean in enumerate(means)]


def write_run(
    path: Path,
    *,
    cfg: Config | None = None,
    meta: dict | None = None,
    rows: list[dict] = (),
    events: list[dict] = (),
) -> Path:
    """A run directory as training leaves it (see rlpilot.runs): config.yaml, meta.json, metrics.csv, events.jsonl."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text((cfg or config()).to_yaml())
    meta = {"status": "finished", "solved_at": 475.0, "env_facts": DISCRETE, **(meta or {})}
    (path / "meta.json").write_text(json.dumps(meta))
    names = list(dict.fromkeys(key for row in rows for key in row))
    with (path / "metrics.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
    (path / "events.jsonl").write_text("".join(json.dumps({"time": 0.0, **event}) + "\n" for event in events))
    return path


class Case(NamedTuple):
    rule: str
    severity: str
    evidence: tuple[str, Any]
    """One evidence name and the value it must hold when the rule fires."""
    broken: dict
    """``write_run`` arguments of a run where the rule must fire."""
    healthy: dict
    """The counterpart where it must not."""


def skips(n: int) -> list[dict]:
    return [{"event": "guard_skip", "reason": "non-finite loss", "frames": 2048} for _ in range(n)]


def greedy_actions(*seen: int) -> list[dict]:
    return [{"event": "eval", "frames": 4096 * (i + 1), "actions_seen": s} for i, s in enumerate(seen)]


NAN = float("nan")
SPREAD = {"id": "mpe2.simple_spread_v3"}
ONE_HOT = {"env": {"action_encoding": "one_hot"}, "ppo": {"distribution": "categorical"}}
CASES = {
    # -- common ---------------------------------------------------------------------------------
    "nonfinite_observations": Case(
        "nonfinite_observations",
        "error",
        ("envs", [1, 3]),
        {"events": [{"event": "nonfinite_observation", "envs": [3, 1], "frames": 2048}]},
        {"events": [{"event": "eval", "frames": 2048}]},
    ),
    "nonfinite_rewards": Case(
        "nonfinite_rewards",
        "error",
        ("envs", [0, 2]),
        {
            "events": [
                {
                    "event": "stopped",
                    "frames": 256,
                    "reason": "non-finite rewards",
                    "cause": "nonfinite_reward",
                    "envs": [0, 2],
                }
            ]
        },
        {"events": [{"event": "stopped", "frames": 256, "reason": "non-finite observation from env(s) [0]"}]},
    ),
    "loss_exploding": Case(
        "loss_exploding", "warning", ("skipped_updates", 3), {"events": skips(3)}, {"events": greedy_actions(2)}
    ),
    "loss_exploding_often": Case("loss_exploding", "error", ("skipped_updates", 21), {"events": skips(21)}, {}),
    "nonfinite_metrics": Case(
        "nonfinite_metrics",
        "error",
        ("columns", ["eval/return_mean", "loss/critic", "loss/objective"]),
        {"rows": columns(loss__critic=NAN, loss__objective=float("inf"), eval__return_mean=NAN)},
        {"rows": columns(loss__critic=[NAN] + [1.0] * 11, loss__objective=0.1, eval__return_mean=20.0)},
    ),
    "no_progress": Case(
        "no_progress",
        "warning",
        ("best_eval", 21.0),
        {"rows": evals(20.0, 21.0, 20.0)},
        {"rows": evals(20.0, 100.0, 150.0)},
    ),
    "throughput_collapse": Case(
        "throughput_collapse",
        "warning",
        ("fps_first_half_median", 1024.0),
        {"rows": columns(time__elapsed_s=[1.0 * i for i in range(7)] + [6.0 + 5 * i for i in range(1, 6)])},
        {"rows": columns(time__elapsed_s=[1.0 * i for i in range(12)])},
    ),
    # -- control ----------------------------------------------------------------------------------
    "collection_bound": Case(
        "collection_bound",
        "info",
        ("wait_share_last_quarter_median", 0.8),
        {"cfg": config(collect={"workers": 2}), "rows": columns(collect__wait_share=0.8, collect__fps=300.0)},
        {"cfg": config(collect={"workers": 2}), "rows": columns(collect__wait_share=0.3, collect__fps=300.0)},
    ),
    "learning_bound": Case(
        "learning_bound",
        "info",
        ("workers", 4),
        {"cfg": config(collect={"workers": 4}), "rows": columns(collect__wait_share=0.05)},
        {"cfg": config(collect={"workers": 1}), "rows": columns(collect__wait_share=0.05)},
    ),
    "rewards_zero": Case(
        "rewards_zero",
        "error",
        ("reward_mean", 1e-6),
        {"cfg": config(env={"reward_scale": 0.0}), "rows": columns(train__reward_mean=1e-6, train__reward_std=0.0)},
        {"rows": columns(train__reward_mean=1.0, train__reward_std=0.5)},
    ),
    "rewards_constant": Case(
        "rewards_constant",
        "warning",
        ("episode_length", 200.0),
        {"rows": columns(train__reward_mean=1.0, train__reward_std=0.0, train__episode_length=200.0)},
        {"rows": columns(train__reward_mean=1.0, train__reward_std=0.0, train__episode_length=[20.0, 30.0] * 6)},
    ),
    "buffer_smaller_than_batch": Case(
        "buffer_smaller_than_batch",
        "error",
        ("dqn.buffer_size", 32),
        {"cfg": config("dqn", dqn={"buffer_size": 32, "batch_size": 64})},
        {"cfg": config("dqn")},
    ),
    "learning_before_buffer_filled": Case(
        "learning_before_buffer_filled",
        "warning",
        ("dqn.learning_starts", 10),
        {"cfg": config("dqn", dqn={"learning_starts": 10, "batch_size": 64})},
        {"cfg": config("dqn", dqn={"learning_starts": 64, "batch_size": 64})},
    ),
    "actions_identical": Case(
        "actions_identical",
        "error",
        ("actions_seen", [1, 1, 1]),
        {"events": greedy_actions(2, 1, 1, 1)},
        {"events": greedy_actions(1, 1, 2)},
    ),
    "actions_identical_one_hot": Case(
        "actions_identical",
        "error",
        ("ppo.distribution", "categorical"),
        {"cfg": config(**ONE_HOT), "events": greedy_actions(1, 1)},
        {"cfg": config(**ONE_HOT), "events": greedy_actions(1, 1), "meta": {"status": "solved"}},
    ),
    "loss_rising": Case(
        "loss_rising",
        "warning",
        ("last_quarter_median", 50.0),
        {"rows": columns(loss__critic=[1.0] * 9 + [50.0] * 3)},
        {"rows": columns(loss__critic=[1.0] * 9 + [5.0] * 3)},
    ),
    "horizon_too_short": Case(
        "horizon_too_short",
        "warning",
        ("effective_horizon_steps", 2.0),
        {"cfg": config(ppo={"gamma": 0.5}), "rows": columns(train__episode_length=100.0)},
        {"cfg": config(ppo={"gamma": 0.5}), "rows": columns(train__episode_length=15.0)},
    ),
    "exploration_not_decaying_ppo": Case(
        "exploration_not_decaying",
        "warning",
        ("ppo.entropy_coef", 1.0),
        {"cfg": config(ppo={"entropy_coef": 1.0}), "rows": columns(ppo__entropy=0.69)},
        {"cfg": config(ppo={"entropy_coef": 1.0}), "rows": columns(ppo__entropy=0.3)},
    ),
    "exploration_collapsed": Case(
        "exploration_collapsed",
        "warning",
        ("last_eval", 30.0),
        {"rows": columns(ppo__entropy=0.01) + evals(20.0, 25.0, 30.0)},
        {"rows": columns(ppo__entropy=0.01) + evals(20.0, 250.0, 300.0)},
    ),
    "exploration_not_decaying_dqn": Case(
        "exploration_not_decaying",
        "warning",
        ("epsilon_last", 0.5),
        {"cfg": config("dqn"), "rows": columns(explore__epsilon=0.5)},
        {"cfg": config("dqn"), "rows": columns(explore__epsilon=[0.5] * 3 + [0.05] * 9)},
    ),
    "ppo_steps_too_large": Case(
        "ppo_steps_too_large",
        "warning",
        ("median_approx_kl", 0.2),
        {"rows": columns(ppo__kl=0.2, ppo__clip_fraction=0.5)},
        {"rows": columns(ppo__kl=0.01, ppo__clip_fraction=0.1)},
    ),
    "value_loss_dominates": Case(
        "value_loss_dominates",
        "info",
        ("critic_to_policy_loss", 1e6),
        {"rows": columns(loss__critic=1e4, loss__objective=-0.01, opt__grad_norm=100.0)},
        {"rows": columns(loss__critic=1.0, loss__objective=-0.01, opt__grad_norm=100.0)},
    ),
    "explained_variance_negative": Case(
        "explained_variance_negative",
        "warning",
        ("median_explained_variance_last_quarter", -0.5),
        {"rows": columns(ppo__explained_variance=-0.5)},
        {"rows": columns(ppo__explained_variance=0.8)},
    ),
    "lr_zero_before_budget": Case(
        "lr_zero_before_budget",
        "warning",
        ("lr_zero_at_frames", 3 * FRAMES_PER_ROW),
        {"rows": columns(opt__lr=[3e-4, 2e-4, 0.0] + [0.0] * 9)},
        {"rows": columns(opt__lr=[3e-4 * (1 - i / 12) for i in range(1, 13)])},
    ),
    "always_truncated": Case(
        "always_truncated",
        "info",
        ("max_episode_steps", 500),
        {"rows": columns(train__episode_length=500.0)},
        {"rows": columns(train__episode_length=[500.0, 120.0] * 6)},
    ),
    # -- off-policy (SAC, TD3) ---------------------------------------------------------------------
    "loss_rising_sac": Case(
        "loss_rising",
        "warning",
        ("metric", "loss/critic"),
        {"cfg": config("sac"), **BOX, "rows": columns(loss__critic=[1.0] * 9 + [50.0] * 3)},
        {  # DQN's key rising does not count for SAC
            "cfg": config("sac"),
            **BOX,
            "rows": columns(loss__critic=[1.0] * 9 + [5.0] * 3, loss__td=[1.0] * 9 + [50.0] * 3),
        },
    ),
    "temperature_collapsed": Case(
        "temperature_collapsed",
        "warning",
        ("alpha_last", 1e-6),
        {
            "cfg": config("sac", sac={"target_entropy": -50.0, "alpha_init": 1e-3}),
            **BOX,
            "rows": columns(sac__alpha=[1e-3 / 2**i for i in range(11)] + [1e-6], sac__entropy=0.5),
        },
        {"cfg": config("sac"), **BOX, "rows": columns(sac__alpha=[1.0 / 1.3**i for i in range(12)], sac__entropy=-1.0)},
    ),
    "temperature_exploding": Case(
        "temperature_exploding",
        "warning",
        ("sac.target_entropy", 5.0),
        {
            "cfg": config("sac", sac={"target_entropy": 5.0}),
            **BOX,
            "rows": columns(sac__alpha=[2.0**i for i in range(12)], sac__entropy=1.3),
        },
        {"cfg": config("sac", sac={"target_entropy": 5.0}), **BOX, "rows": columns(sac__alpha=2.0, sac__entropy=1.3)},
    ),
    "q_diverging": Case(
        "q_diverging",
        "warning",
        ("q_mean_last_quarter_median", -5000.0),
        {"cfg": config("td3"), **BOX, "rows": columns(train__reward_mean=-6.0, q__mean=[-100.0] * 6 + [-5000.0] * 6)},
        {"cfg": config("td3"), **BOX, "rows": columns(train__reward_mean=-6.0, q__mean=[-100.0] * 6 + [-500.0] * 6)},
    ),
    "q_diverging_soft": Case(  # SAC's soft Q carries the entropy bonus: alpha x entropy per step widens the bound
        "q_diverging",
        "warning",
        ("entropy_bonus_per_step_max", 2.0),
        {
            "cfg": config("sac"),
            **BOX,
            "rows": columns(train__reward_mean=-6.0, sac__alpha=2.0, sac__entropy=1.0, q__mean=-3000.0),
        },
        {
            "cfg": config("sac"),
            **BOX,
            "rows": columns(train__reward_mean=-6.0, sac__alpha=2.0, sac__entropy=1.0, q__mean=-2000.0),
        },
    ),
    "q_diverging_undiscounted": Case(  # gamma 1: the horizon is the time limit (200 steps), not 1 / (1 - gamma)
        "q_diverging",
        "warning",
        ("horizon_steps", 200.0),
        {
            "cfg": config("td3", td3={"gamma": 1.0, "tau": 1.0}),
            **BOX,
            "rows": columns(train__reward_mean=-6.0, q__mean=-5000.0),
        },
        {
            "cfg": config("td3", td3={"gamma": 1.0, "tau": 1.0}),
            **BOX,
            "rows": columns(train__reward_mean=-6.0, q__mean=-3000.0),
        },
    ),
    "critic_loss_blowup": Case(
        "critic_loss_blowup",
        "warning",
        ("td_error_rms_last_quarter", 1000.0),
        {"cfg": config("sac"), **BOX, "rows": columns(train__reward_mean=-6.0, loss__critic=[50.0] * 6 + [2e6] * 6)},
        {"cfg": config("sac"), **BOX, "rows": columns(train__reward_mean=-6.0, loss__critic=[50.0] * 6 + [2e4] * 6)},
    ),
    "actions_at_bounds": Case(
        "actions_at_bounds",
        "warning",
        ("at_bound_share_last_quarter", 1.0),
        {"cfg": config("td3"), **BOX, "rows": columns(action__at_bound=[0.1] * 6 + [1.0] * 6)},
        {"cfg": config("td3"), **BOX, "rows": columns(action__at_bound=[0.1] * 6 + [0.5] * 6)},
    ),
    "actions_at_bounds_solved": Case(  # a bang-bang policy that solves (MountainCar) is not nagged
        "actions_at_bounds",
        "warning",
        ("at_bound_share_last_quarter", 1.0),
        {"cfg": config("sac"), **BOX, "rows": columns(action__at_bound=1.0)},
        {"cfg": config("sac"), "meta": {**BOX["meta"], "status": "solved"}, "rows": columns(action__at_bound=1.0)},
    ),
    # -- LLM (GRPO) -----------------------------------------------------------------------------
    "kl_blowup": Case(
        "kl_blowup",
        "error",
        ("kl_to_ref_last_quarter_median", 12.0),
        {"cfg": config("grpo"), "rows": columns(train__kl_to_ref=[0.05] * 6 + [12.0] * 6)},
        {"cfg": config("grpo"), "rows": columns(train__kl_to_ref=0.5)},
    ),
    "kl_drifting": Case(
        "kl_blowup",
        "warning",
        ("kl_to_ref_first", 3.0),
        {"cfg": config("grpo"), "rows": columns(train__kl_to_ref=3.0)},
        {},
    ),
    "reward_flat": Case(
        "reward_flat",
        "warning",
        ("grpo.group_size", 8),
        {"cfg": config("grpo"), "rows": columns(train__groups_without_signal=1.0, train__reward_mean=0.0)},
        {"cfg": config("grpo"), "rows": columns(train__groups_without_signal=0.3, train__reward_mean=0.4)},
    ),
    "reward_flat_solved": Case(
        "reward_flat",
        "info",
        ("reward_mean_median", 1.0),
        {"cfg": config("grpo"), "rows": columns(train__groups_without_signal=1.0, train__reward_mean=1.0)},
        {},
    ),
    "response_length_collapse": Case(
        "response_length_collapse",
        "warning",
        ("length_last_quarter_median", 1.0),
        {"cfg": config("grpo"), "rows": columns(train__response_length=[4.0] * 3 + [1.0] * 9)},
        {"cfg": config("grpo"), "rows": columns(train__response_length=4.0)},
    ),
    "responses_unfinished": Case(
        "responses_unfinished",
        "warning",
        ("finished_share_last_quarter", 0.2),
        {"cfg": config("grpo"), "rows": columns(train__finished_frac=0.2)},
        {"cfg": config("grpo"), "rows": columns(train__finished_frac=0.9)},
    ),
    "no_progress_llm": Case(
        "no_progress",
        "warning",
        ("first_eval", 0.1),
        {"cfg": config("grpo"), "meta": {"solved_at": None}, "rows": evals(0.1, 0.1, 0.1)},
        {"cfg": config("grpo"), "meta": {"solved_at": None}, "rows": evals(0.1, 0.5, 0.9)},
    ),
    "nonfinite_metrics_llm": Case(
        "nonfinite_metrics",
        "error",
        ("columns", ["train/episode_return"]),
        {"cfg": config("grpo"), "rows": columns(train__episode_return=NAN)},
        {"cfg": config("grpo"), "rows": columns(train__episode_return=0.5)},
    ),
    # -- multi-agent (mappo, ippo) ---------------------------------------------------------------
    "agent_entropy_collapse": Case(
        "agent_entropy_collapse",
        "warning",
        ("entropy_share_agent0", 0.014),  # 0.01 nats of log(2)
        {
            "cfg": config("mappo", env=SPREAD),
            "rows": columns(ppo__entropy_agent0=0.01, ppo__entropy_agent1=0.6, ppo__entropy_agent2=0.6),
        },
        {
            "cfg": config("mappo", env=SPREAD),
            "rows": columns(ppo__entropy_agent0=0.5, ppo__entropy_agent1=0.6, ppo__entropy_agent2=0.6),
        },
    ),
    "critic_blind": Case(
        "critic_blind",
        "warning",
        ("explained_variance_last_quarter", 0.1),
        {"cfg": config("ippo", env=SPREAD), "rows": columns(ppo__explained_variance=0.1)},
        {"cfg": config("ippo", env=SPREAD), "rows": columns(ppo__explained_variance=0.8)},
    ),
    "agents_unequal": Case(
        "agents_unequal",
        "info",
        ("eval_return_agent1", -20.0),
        {
            "cfg": config("mappo", env=SPREAD),
            "rows": columns(eval__return_agent0=-5.0, eval__return_agent1=-20.0, eval__return_agent2=-6.0),
        },
        {
            "cfg": config("mappo", env=SPREAD),
            "rows": columns(eval__return_agent0=-5.0, eval__return_agent1=-5.5, eval__return_agent2=-6.0),
        },
    ),
}


def findings_of(tmp_path: Path, spec: dict) -> dict[str, Finding]:
    return {finding.rule: finding for finding in diagnose(write_run(tmp_path / "run", **spec)).findings}


@pytest.mark.parametrize("case", list(CASES))
def test_rule_fires_on_its_evidence(case, tmp_path):
    rule, severity, (name, value), broken, _ = CASES[case]
    found = findings_of(tmp_path, broken)
    assert rule in found, sorted(found)
    assert found[rule].severity == severity
    assert found[rule].evidence[name] == (pytest.approx(value) if isinstance(value, float) else value)
    assert found[rule].fix and found[rule].title


@pytest.mark.parametrize("case", [name for name, case in CASES.items() if case.healthy])
def test_rule_stays_quiet_on_a_healthy_counterpart(case, tmp_path):
    assert CASES[case].rule not in findings_of(tmp_path, CASES[case].healthy)


def test_every_rule_fires_in_some_case(tmp_path):
    """A rule added to a registry without a case above fails here (the checkpoint rule has its own test)."""
    views = {name: RunView(load_run(write_run(tmp_path / name, **case.broken))) for name, case in CASES.items()}
    every_rule = {rule for rules in RULES_BY_ALGO.values() for rule in rules} - {rule_nonfinite_normalization}
    silent = [
        rule.__name__
        for rule in every_rule
        if not any(rule(view) for view in views.values() if rule in rules_for(view.config.algo))
    ]
    assert not silent


# -- fixes that name the right change -----------------------------------------------------------------
@pytest.mark.parametrize(
    "case, text",
    [
        ("rewards_zero", "--set env.reward_scale=1.0"),
        ("buffer_smaller_than_batch", "--set dqn.buffer_size=100000"),
        ("actions_identical_one_hot", "--set ppo.distribution=auto"),
        ("horizon_too_short", "--set ppo.gamma=0.99"),
        ("loss_exploding", "--set ppo.lr=3e-05"),
        ("kl_blowup", "grpo.kl_coef=0.05"),
        ("reward_flat", "llm.sft_steps=120"),
        ("no_progress_llm", "llm.sft_steps=120"),
        ("nonfinite_metrics_llm", "--set grpo.lr=0.0001"),
        ("temperature_collapsed", "--set sac.target_entropy=auto --set sac.alpha_init=0.1"),
        ("temperature_exploding", "--set sac.target_entropy=auto"),
        ("q_diverging", "--set td3.lr=0.0001"),
        ("q_diverging_undiscounted", "--set td3.gamma=0.99 --set td3.tau=0.005"),
        ("critic_loss_blowup", "--set sac.lr=3e-05"),
    ],
)
def test_fix_names_the_change(case, text, tmp_path):
    found = findings_of(tmp_path, CASES[case].broken)
    assert text in found[CASES[case].rule].fix


# -- fixes that retrain the run as it was started (meta.json's origin) ---------------------------------------
TRAINED_WITH = ["ppo.lr=0.001", "env.reward_scale=0", "train.seed=3"]
"""The run's own overrides: ``env.reward_scale=0`` is the one rewards_zero's fix changes."""
ORIGINS = {
    "config file": (
        {"config_file": "my tank.yaml", "overrides": TRAINED_WITH},
        "rlpilot train --config 'my tank.yaml' --set ppo.lr=0.001 --set train.seed=3 --set env.reward_scale=1.0",
    ),
    "preset": (
        {"preset": "ppo-cartpole", "overrides": TRAINED_WITH},
        "rlpilot train ppo-cartpole --set ppo.lr=0.001 --set train.seed=3 --set env.reward_scale=1.0",
    ),
    "algorithm and env": (
        {"algo": "ppo", "env": "CartPole-v1", "overrides": []},
        "rlpilot train ppo CartPole-v1 --set env.reward_scale=1.0",
    ),
    "none recorded (an older run)": (None, "rlpilot train ppo CartPole-v1 --set env.reward_scale=1.0"),
}


@pytest.mark.parametrize("origin", list(ORIGINS))
def test_fix_retrains_the_run_as_it_was_started(origin, tmp_path):
    """The fix keeps how the run was started (a ``--config FILE`` run retrained as plain PPO was issue 56's
    complaint) and its own ``--set`` overrides, less the one the fix changes, the fix's last."""
    recorded, command = ORIGINS[origin]
    spec = {**CASES["rewards_zero"].broken, "meta": {"origin": recorded} if recorded else {}}
    assert findings_of(tmp_path, spec)["rewards_zero"].fix == command


def test_preset_run_without_origin_keeps_its_preset(tmp_path):
    cfg = config(env={"reward_scale": 0.0})
    cfg.preset = "ppo-cartpole"
    spec = {**CASES["rewards_zero"].broken, "cfg": cfg}
    assert findings_of(tmp_path, spec)["rewards_zero"].fix == "rlpilot train ppo-cartpole --set env.reward_scale=1.0"


@pytest.mark.parametrize(
    "origin, fix",
    [
        ({"preset": "ippo-spread", "overrides": ["ppo.lr=0.001"]}, "rlpilot train mappo-spread --set ppo.lr=0.001"),
        (
            {"config_file": "spread.yaml", "overrides": []},
            "set algo: mappo in spread.yaml, then rlpilot train --config",
        ),
    ],
)
def test_critic_blind_fix_switches_to_mappo_the_way_the_run_was_started(origin, fix, tmp_path):
    spec = {**CASES["critic_blind"].broken, "meta": {"origin": origin}}
    assert findings_of(tmp_path, spec)["critic_blind"].fix.startswith(fix)


LLM_CASES = [name for name, case in CASES.items() if "cfg" in case.broken and case.broken["cfg"].algo == "grpo"]


@pytest.mark.parametrize("case", LLM_CASES)
def test_llm_fixes_never_point_at_an_env(case, tmp_path):
    assert not [f.fix for f in findings_of(tmp_path, CASES[case].broken).values() if "rlpilot check" in f.fix]


# -- the checkpoint's normalisation statistics (the one rule that opens the checkpoint) ----------------
@pytest.mark.parametrize("layout", ["state", "top level"])
@pytest.mark.parametrize("loc, fires", [([0.0, NAN], True), ([0.0, 1.0], False)])
def test_nonfinite_normalization_reads_both_checkpoint_layouts(layout, loc, fires, tmp_path, monkeypatch):
    """``checkpoint["state"]["obs_norm"]`` (current) and ``checkpoint["obs_norm"]`` (older runs). The
    checkpoint is stood in for by a dict: writing a real one needs torch, which these tests keep out."""
    norm = {"loc": loc, "scale": [1.0, 1.0]}
    checkpoint = {"state": {"obs_norm": norm}} if layout == "state" else {"obs_norm": norm}
    monkeypatch.setattr(Run, "load_checkpoint", lambda self, name="last": checkpoint)
    path = write_run(tmp_path / "run", cfg=config(env={"normalize_obs": True}))
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "last.pt").write_bytes(b"")
    found = {finding.rule: finding for finding in diagnose(path).findings}
    assert ("nonfinite_normalization" in found) == fires
    if fires:
        assert found["nonfinite_normalization"].severity == "error"
        assert found["nonfinite_normalization"].evidence["scale"] == [1.0, 1.0]


def test_checkpoint_is_not_opened_without_normalisation(tmp_path, monkeypatch):
    def refuse(self, name="last"):
        raise AssertionError("doctor opened the checkpoint of a run without observation normalisation")

    monkeypatch.setattr(Run, "load_checkpoint", refuse)
    path = write_run(tmp_path / "run")
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "last.pt").write_bytes(b"")
    assert diagnose(path).errors == 0


# -- registry, did_well, report ---------------------------------------------------------------------------
def test_registry_maps_algorithms_to_rule_lists():
    assert rules_for("grpo") is llm.RULES and rules_for("ppo") is rules_for("dqn") is control.RULES
    # an algorithm without its own list gets the control rules (SAC and TD3 have their own since issue 17)
    assert rules_for("a2c") is control.RULES
    assert rules_for("sac") is rules_for("td3") is offpolicy.RULES
    assert set(control.RULES) < set(offpolicy.RULES)  # SAC and TD3 keep every control rule


def test_llm_runs_do_not_get_control_rules(tmp_path):
    found = findings_of(tmp_path, {"cfg": config("grpo"), "rows": columns(ppo__kl=0.2, ppo__clip_fraction=0.5)})
    assert "ppo_steps_too_large" not in found


@pytest.mark.parametrize(
    "meta, rows, did_well",
    [
        ({"status": "solved"}, evals(10.0, 20.0, 30.0), True),
        ({}, evals(10.0, 480.0), True),
        ({}, evals(10.0, 470.0), False),
        ({"solved_at": None}, evals(10.0, 400.0), False),  # no threshold, no yardstick: rules stay on
    ],
)
def test_did_well(meta, rows, did_well, tmp_path):
    assert RunView(load_run(write_run(tmp_path / "run", meta=meta, rows=rows))).did_well is did_well


def test_all_nan_losses_and_returns_are_not_no_findings(tmp_path):
    path = write_run(tmp_path / "run", rows=columns(loss__critic=NAN, loss__objective=NAN, eval__return_mean=NAN))
    diagnosis = diagnose(path)
    assert diagnosis.errors >= 1 and "no findings" not in diagnosis.render()


def test_render_and_json_share_the_finding(tmp_path):
    diagnosis = diagnose(write_run(tmp_path / "run", **CASES["buffer_smaller_than_batch"].broken))
    text, short = diagnosis.render(), diagnosis.render(short=True)
    assert "\n".join(render_finding(diagnosis.findings[0])) in text
    assert "[error] the replay buffer is smaller than a batch" in short and "evidence:" not in short
    assert "evidence: dqn.buffer_size=32; dqn.batch_size=64" in text
    report = diagnosis.to_json()
    assert report["summary"] == {"errors": 1, "warnings": 0, "infos": 0}
    assert list(report["findings"][0]) == ["rule", "severity", "title", "evidence", "cause", "fix"]
    assert json.loads(json.dumps(report)) == report


def test_reading_a_run_imports_neither_torch_nor_its_env_module(tmp_path):
    """In a fresh interpreter (this one has torch loaded by conftest): doctor on a run without a checkpoint."""
    module = "rlpilot_test_user_module_never_imported"
    (tmp_path / f"{module}.py").write_text("raise SystemExit('doctor imported a module named in the config')\n")
    path = write_run(tmp_path / "run", cfg=config(env={"id": f"{module}:Env"}), rows=evals(1.0, 1.0, 1.0))
    code = (
        "import sys; from rlpilot.doctor import diagnose; d = diagnose(sys.argv[1]); "
        f"assert 'torch' not in sys.modules and {module!r} not in sys.modules; print(d.render(short=True))"
    )
    src = str(Path(rlpilot.__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no_progress" in out.stdout or "barely improved" in out.stdout
