"""The doctor rules' cases (tests/unit/test_doctor_rules.py): synthetic runs written by hand, each rule's evidence and
a healthy counterpart, and the helpers that write them."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, NamedTuple

from rlpilot.config import Config, TrainConfig

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
