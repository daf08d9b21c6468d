"""``rlpilot doctor RUN``: what is wrong with a run, the evidence, the likely cause, and the fix.

Rules read ``config.yaml``, ``meta.json``, ``metrics.csv`` and ``events.jsonl`` (and the checkpoint's
normalisation statistics). A rule only fires on evidence it can quote; most warnings also require
that the run did not do well (greedy evaluation below the threshold at the end), so a healthy run is
not nagged. Thresholds and their reasoning are in docs/doctor.md; the JSON schema is ``to_json``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rlpilot.config import Config
from rlpilot.runs import Run, load_run

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
SCHEMA_VERSION = 1


@dataclass
class Finding:
    rule: str
    severity: str  # error | warning | info
    title: str
    evidence: dict
    cause: str
    fix: str  # a concrete command


@dataclass
class Diagnosis:
    run: str
    status: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run": self.run,
            "status": self.status,
            "summary": {
                "errors": self.errors,
                "warnings": self.warnings,
                "infos": sum(f.severity == "info" for f in self.findings),
            },
            "findings": [asdict(f) for f in self.findings],
        }

    def render(self, *, short: bool = False) -> str:
        if not self.findings:
            return "doctor: no findings (nothing looks wrong in this run's metrics)"
        lines = [f"doctor: {self.errors} error(s), {self.warnings} warning(s)"]
        for f in self.findings:
            lines.append(f"  [{f.severity}] {f.title}")
            if not short:
                lines.append(f"      evidence: {_evidence_text(f.evidence)}")
                lines.append(f"      cause:    {f.cause}")
            lines.append(f"      fix:      {f.fix}")
        return "\n".join(lines)


def _evidence_text(evidence: dict) -> str:
    return "; ".join(f"{k}={_fmt(v)}" for k, v in evidence.items())


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value[:8]) + (", ..." if len(value) > 8 else "") + "]"
    return str(value)


class RunView:
    """The run's data, shaped for rules: columns as arrays (NaN where a row has no value)."""

    def __init__(self, run: Run):
        self.run = run
        self.config: Config = run.config()
        self.meta = run.meta()
        self.rows = run.metrics()
        self.events = run.events()
        self.frames = self.column("frames")
        self.threshold = self.meta.get("solved_at")
        self.budget = self.config.train.total_frames

    def column(self, key: str) -> np.ndarray:
        return np.array([row.get(key, np.nan) for row in self.rows], dtype=float)

    def present(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        values = self.column(key)
        keep = ~np.isnan(values)
        return self.frames[keep], values[keep]

    @property
    def evals(self) -> np.ndarray:
        return self.present("eval/return_mean")[1]

    @property
    def did_well(self) -> bool:
        """Solved, or (without a threshold) the last evaluation improved clearly on the first."""
        if self.run.meta().get("status") == "solved":
            return True
        evals = self.evals
        if len(evals) == 0:
            return False
        if self.threshold is not None:
            return bool(evals[-1] >= self.threshold)
        return False

    def cmd(self, *overrides: str) -> str:
        target = self.config.preset or f"{self.config.algo} {self.config.env.id}"
        sets = " ".join(f"--set {o}" for o in overrides)
        return f"rlpilot train {target} {sets}".strip()


def _tail(values: np.ndarray, share: float = 0.25) -> np.ndarray:
    return values[int(len(values) * (1 - share)) :] if len(values) else values


def _head(values: np.ndarray, share: float = 0.25) -> np.ndarray:
    return values[: max(1, int(len(values) * share))] if len(values) else values


# -- rules ---------------------------------------------------------------------------------------
def rule_nonfinite(v: RunView) -> list[Finding]:
    found = []
    events = [e for e in v.events if e["event"] == "nonfinite_observation"]
    if events:
        envs = sorted({i for e in events for i in e["envs"]})
        found.append(
            Finding(
                "nonfinite_observations",
                "error",
                "the env returned NaN/inf observations",
                {"events": len(events), "envs": envs, "first_at_frames": events[0].get("frames")},
                "the environment's dynamics or observation code produced NaN/inf",
                f"rlpilot check {v.config.env.id}  (and fix the env; guard.on_nonfinite_obs=stop "
                "stops at the first one)",
            )
        )
    try:
        norm = v.run.load_checkpoint("last").get("obs_norm")
    except Exception:  # no or unreadable checkpoint: other verbs report that
        norm = None
    if norm is not None and not all(bool(np.isfinite(np.asarray(t)).all()) for t in norm.values()):
        found.append(
            Finding(
                "nonfinite_normalization",
                "error",
                "observation normalisation statistics are not finite",
                {"loc": np.asarray(norm["loc"]).tolist(), "scale": np.asarray(norm["scale"]).tolist()},
                "random-policy rollouts produced NaN/inf or the statistics were corrupted",
                v.cmd("env.normalize_obs=false"),
            )
        )
    skips = [e for e in v.events if e["event"] == "guard_skip"]
    if skips:
        found.append(
            Finding(
                "loss_exploding",
                "error" if len(skips) > 20 else "warning",
                "updates were skipped: non-finite or exploding loss",
                {
                    "skipped_updates": len(skips),
                    "first_reason": skips[0]["reason"],
                    "first_at_frames": skips[0].get("frames"),
                    "rollbacks": sum(e["event"] == "rollback" for e in v.events),
                },
                "the learning rate is too high for this problem, or the rewards/observations are badly scaled",
                v.cmd(f"{v.config.algo}.lr={_lower_lr(v)}"),
            )
        )
    return found


def _lower_lr(v: RunView) -> str:
    return f"{v.config.algo_config.lr / 10:.3g}"


def rule_loss_rising(v: RunView) -> list[Finding]:
    key = "loss/critic" if v.config.algo == "ppo" else "loss/td"
    _, loss = v.present(key)
    if len(loss) < 8 or v.did_well:
        return []
    early, late = np.median(_head(loss)), np.median(_tail(loss))
    if late > 10 * max(early, 1e-8) and late > 1.0:
        return [
            Finding(
                "loss_rising",
                "warning",
                f"{key} rose tenfold over the run",
                {"metric": key, "first_quarter_median": float(early), "last_quarter_median": float(late)},
                "value estimates are diverging (learning rate too high, or targets growing without bound)",
                v.cmd(f"{v.config.algo}.lr={_lower_lr(v)}"),
            )
        ]
    return []


def rule_rewards(v: RunView) -> list[Finding]:
    _, std = v.present("train/reward_std")
    _, mean = v.present("train/reward_mean")
    if len(std) < 2 or np.nanmax(std) > 0:
        return []
    value = float(mean[0])
    if abs(value) < 1e-4:  # RewardScaling clamps its scale at 1e-6: "0" arrives as 1e-6
        cause = "every reward the learner saw was 0" + (
            f": env.reward_scale is {v.config.env.reward_scale:g}" if v.config.env.reward_scale < 1e-3 else ""
        )
        return [
            Finding(
                "rewards_zero",
                "error",
                "the learner saw only zero rewards",
                {"reward_mean": value, "reward_std_max": float(np.nanmax(std)), "batches": len(std)},
                cause,
                v.cmd("env.reward_scale=1.0")
                if v.config.env.reward_scale < 1e-3
                else f"rlpilot check {v.config.env.id}  (the reward function returns 0)",
            )
        ]
    if not v.did_well:
        _, lengths = v.present("train/episode_length")
        if len(lengths) and np.nanstd(lengths) == 0:
            return [
                Finding(
                    "rewards_constant",
                    "warning",
                    "rewards and episode lengths never varied",
                    {"reward": value, "episode_length": float(lengths[0])},
                    "a constant reward with fixed-length episodes carries no learning signal",
                    f"rlpilot check {v.config.env.id}  (shape the reward)",
                )
            ]
    return []


def rule_horizon(v: RunView) -> list[Finding]:
    gamma = v.config.algo_config.gamma
    _, lengths = v.present("train/episode_length")
    if v.did_well or not len(lengths) or gamma >= 0.9:
        return []
    horizon = 1.0 / max(1e-6, 1.0 - gamma)
    mean_length = float(np.nanmean(lengths))
    if horizon < 0.1 * mean_length:
        return [
            Finding(
                "horizon_too_short",
                "warning",
                f"gamma {gamma:g} looks {horizon:.3g} steps ahead; episodes last {mean_length:.0f}",
                {
                    f"{v.config.algo}.gamma": gamma,
                    "effective_horizon_steps": horizon,
                    "mean_episode_length": mean_length,
                },
                "with a discount this low the learner ignores everything but the next reward or so",
                v.cmd(f"{v.config.algo}.gamma=0.99"),
            )
        ]
    return []


def rule_buffer(v: RunView) -> list[Finding]:
    if v.config.algo != "dqn":
        return []
    cfg, found = v.config.dqn, []
    if cfg.buffer_size < cfg.batch_size:
        found.append(
            Finding(
                "buffer_smaller_than_batch",
                "error",
                "the replay buffer is smaller than a batch",
                {"dqn.buffer_size": cfg.buffer_size, "dqn.batch_size": cfg.batch_size},
                "every minibatch samples the same few transitions again and again",
                v.cmd(f"dqn.buffer_size={max(100_000, 100 * cfg.batch_size)}"),
            )
        )
    elif cfg.learning_starts < cfg.batch_size:
        found.append(
            Finding(
                "learning_before_buffer_filled",
                "warning",
                "learning started before the buffer held a batch of transitions",
                {"dqn.learning_starts": cfg.learning_starts, "dqn.batch_size": cfg.batch_size},
                "the first updates fit a handful of transitions repeatedly",
                v.cmd(f"dqn.learning_starts={10 * cfg.batch_size}"),
            )
        )
    return found


def rule_exploration(v: RunView) -> list[Finding]:
    if v.did_well:
        return []
    found = []
    action = v.meta.get("env_facts", {}).get("action", {})
    if v.config.algo == "ppo":
        _, entropy = v.present("ppo/entropy")
        if len(entropy) >= 4 and action.get("type") == "discrete":
            maximum = math.log(action["n"])
            if np.median(_tail(entropy)) >= 0.9 * maximum and v.config.ppo.entropy_coef > 0:
                found.append(
                    Finding(
                        "exploration_not_decaying",
                        "warning",
                        "the policy stayed (almost) uniformly random",
                        {
                            "entropy_last_quarter": float(np.median(_tail(entropy))),
                            "max_entropy": maximum,
                            "ppo.entropy_coef": v.config.ppo.entropy_coef,
                        },
                        "the entropy bonus outweighs the return signal, so the policy never commits",
                        v.cmd("ppo.entropy_coef=0.0"),
                    )
                )
            elif np.median(_tail(entropy)) < 0.05 * maximum and len(v.evals) and v.evals[-1] < _low(v):
                found.append(
                    Finding(
                        "exploration_collapsed",
                        "warning",
                        "the policy became deterministic while returns were still low",
                        {
                            "entropy_last_quarter": float(np.median(_tail(entropy))),
                            "max_entropy": maximum,
                            "last_eval": float(v.evals[-1]),
                        },
                        "premature convergence: too large steps or no entropy bonus",
                        v.cmd("ppo.entropy_coef=0.01"),
                    )
                )
    else:
        frames, eps = v.present("explore/epsilon")
        floor = v.config.dqn.eps_end
        if len(eps) and eps[-1] > floor + 1e-6 and frames[-1] >= 0.5 * v.budget:
            found.append(
                Finding(
                    "exploration_not_decaying",
                    "warning",
                    "epsilon had not reached its floor by half the budget",
                    {"epsilon_last": float(eps[-1]), "dqn.eps_end": floor},
                    "dqn.exploration_fraction is too large for the budget",
                    v.cmd("dqn.exploration_fraction=0.1"),
                )
            )
    return found


def _low(v: RunView) -> float:
    """Half way from the first evaluation to the threshold."""
    evals = v.evals
    if v.threshold is None or not len(evals):
        return -math.inf
    return float(evals[0] + 0.5 * (v.threshold - evals[0]))


def rule_ppo_steps(v: RunView) -> list[Finding]:
    if v.config.algo != "ppo" or v.did_well:
        return []
    _, kl = v.present("ppo/kl")
    _, clip = v.present("ppo/clip_fraction")
    if not len(kl):
        return []
    kl_med, clip_med, kl_max = float(np.median(np.abs(kl))), float(np.median(clip)), float(np.max(np.abs(kl)))
    if kl_med > 0.05 or clip_med > 0.3 or kl_max > 0.5:
        return [
            Finding(
                "ppo_steps_too_large",
                "warning",
                "PPO updates move the policy too far",
                {
                    "median_approx_kl": kl_med,
                    "max_approx_kl": kl_max,
                    "median_clip_fraction": clip_med,
                    "ppo.lr": v.config.ppo.lr,
                },
                "the learning rate (or epochs per batch) is too high: most samples hit the clip",
                v.cmd(f"ppo.lr={_lower_lr(v)}"),
            )
        ]
    return []


def rule_value_dominates(v: RunView) -> list[Finding]:
    if v.config.algo != "ppo" or v.did_well:
        return []
    _, critic = v.present("loss/critic")
    _, objective = v.present("loss/objective")
    _, grad = v.present("opt/grad_norm")
    if not len(critic) or not len(grad):
        return []
    ratio = float(np.median(critic) / max(np.median(np.abs(objective)), 1e-8))
    clipped = float(np.mean(grad > 5 * v.config.ppo.max_grad_norm))
    if ratio > 1000 and clipped > 0.5:
        return [
            Finding(
                "value_loss_dominates",
                "info",
                "the value loss dwarfs the policy loss",
                {"critic_to_policy_loss": ratio, "share_of_batches_clipped_5x": clipped},
                "large returns make value gradients dominate the shared gradient clip, shrinking policy steps",
                v.cmd("env.reward_scale=0.1"),
            )
        ]
    return []


def rule_explained_variance(v: RunView) -> list[Finding]:
    if v.config.algo != "ppo" or v.did_well:
        return []
    _, ev = v.present("ppo/explained_variance")
    late = _tail(ev[~np.isnan(ev)])
    if len(late) >= 2 and np.median(late) < 0:
        return [
            Finding(
                "explained_variance_negative",
                "warning",
                "the critic predicts returns worse than a constant",
                {"median_explained_variance_last_quarter": float(np.median(late))},
                "value targets are too noisy or badly scaled for the critic",
                v.cmd("env.reward_scale=0.1", "ppo.value_coef=1.0"),
            )
        ]
    return []


def rule_lr_schedule(v: RunView) -> list[Finding]:
    frames, lr = v.present("opt/lr")
    if v.config.algo != "ppo" or v.did_well or not len(lr) or v.config.ppo.lr_schedule == "constant":
        return []
    dead = frames[lr <= 1e-3 * v.config.ppo.lr]
    if len(dead) and dead[0] < 0.9 * v.budget and frames[-1] > dead[0]:
        return [
            Finding(
                "lr_zero_before_budget",
                "warning",
                "the learning rate reached zero long before the budget",
                {
                    "lr_zero_at_frames": int(dead[0]),
                    "budget_frames": v.budget,
                    "ppo.lr_schedule_fraction": v.config.ppo.lr_schedule_fraction,
                },
                "every frame after that point is collected but nothing is learned from it",
                v.cmd("ppo.lr_schedule_fraction=1.0"),
            )
        ]
    return []


def rule_identical_actions(v: RunView) -> list[Finding]:
    evals = [e for e in v.events if e["event"] == "eval" and e.get("actions_seen") is not None]
    action = v.meta.get("env_facts", {}).get("action", {})
    if len(evals) < 2 or action.get("type") != "discrete" or action.get("n", 1) < 2 or v.did_well:
        return []
    last = evals[-3:]
    if not all(e["actions_seen"] == 1 for e in last):
        return []
    mismatch = (
        v.config.algo == "ppo"
        and v.config.env.action_encoding == "one_hot"
        and v.config.ppo.distribution == "categorical"
    )
    if mismatch:
        cause = (
            "a Categorical distribution over a OneHot action spec: each sampled index is decoded as a "
            "one-hot vector of length 1, so every action reaches the env as action 0"
        )
        fix = v.cmd("ppo.distribution=auto")
    else:
        cause = (
            "the policy ignores its input: a distribution that does not match the action spec (e.g. "
            "Categorical over a OneHot spec sends action 0), or a collapsed network"
        )
        fix = f"rlpilot check {v.config.env.id}  (then retrain: {v.cmd()})"
    evidence = {
        "actions_seen": [e["actions_seen"] for e in last],
        "actions_available": action["n"],
        "frames": [e.get("frames") for e in last],
    }
    if mismatch:
        evidence.update({"env.action_encoding": "one_hot", "ppo.distribution": "categorical"})
    return [
        Finding(
            "actions_identical",
            "error",
            "every greedy action reaching the env was the same over the last evaluations",
            evidence,
            cause,
            fix,
        )
    ]


def rule_truncation(v: RunView) -> list[Finding]:
    limit = v.meta.get("env_facts", {}).get("max_episode_steps")
    _, lengths = v.present("train/episode_length")
    if not limit or len(lengths) < 4:
        return []
    if np.all(np.abs(lengths - limit) < 0.5):
        return [
            Finding(
                "always_truncated",
                "info",
                "every training episode ended at the time limit",
                {"episode_length": float(lengths[0]), "max_episode_steps": limit},
                "episodes are cut by the time limit, never terminated: the learner must bootstrap at the "
                "cut (rlpilot does: GAE and TD targets bootstrap on truncation, not on termination)",
                "nothing to change; see docs/pitfalls.md (truncation is not termination)",
            )
        ]
    return []


def rule_no_progress(v: RunView) -> list[Finding]:
    evals = v.evals
    if v.did_well or len(evals) < 3 or v.frames[-1] < 0.5 * v.budget and v.meta.get("status") == "running":
        return []
    spread = (v.threshold - evals[0]) if v.threshold is not None else max(abs(evals[0]), 1.0)
    best_gain = float(np.max(evals) - evals[0])
    if best_gain < 0.1 * abs(spread):
        return [
            Finding(
                "no_progress",
                "warning",
                "greedy evaluation barely improved over the run",
                {
                    "first_eval": float(evals[0]),
                    "best_eval": float(np.max(evals)),
                    "last_eval": float(evals[-1]),
                    "threshold": v.threshold,
                    "frames": int(v.frames[-1]),
                },
                "see the other findings; without any, the budget may be too small or the task too hard "
                "for these hyperparameters",
                f"rlpilot check {v.config.env.id}; then {v.cmd(f'train.total_frames={2 * v.budget}')}",
            )
        ]
    return []


def rule_throughput(v: RunView) -> list[Finding]:
    frames, elapsed = v.present("time/elapsed_s")
    if len(frames) < 12:
        return []
    fps = np.diff(frames) / np.maximum(np.diff(elapsed), 1e-9)
    early, late = np.median(fps[: len(fps) // 2]), np.median(_tail(fps))
    if late < 0.5 * early:
        return [
            Finding(
                "throughput_collapse",
                "warning",
                "training slowed down by more than half mid-run",
                {"fps_first_half_median": float(early), "fps_last_quarter_median": float(late)},
                "something grows with time (longer episodes in evaluation, a filling buffer, memory "
                "pressure, another process on the machine)",
                "python benchmarks/soak.py --minutes 10  (memory over time), or rerun with -v",
            )
        ]
    return []


RULES = [
    rule_nonfinite,
    rule_rewards,
    rule_buffer,
    rule_identical_actions,
    rule_loss_rising,
    rule_horizon,
    rule_exploration,
    rule_ppo_steps,
    rule_value_dominates,
    rule_explained_variance,
    rule_lr_schedule,
    rule_no_progress,
    rule_throughput,
    rule_truncation,
]


def diagnose(path: str | Path) -> Diagnosis:
    run = load_run(path)
    view = RunView(run)
    rules = RULES
    if view.config.algo == "grpo":  # a language model: rules about envs and critics do not apply
        from rlpilot.llm.doctor_rules import LLM_RULES

        rules = LLM_RULES
    findings = [finding for rule in rules for finding in rule(view)]
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return Diagnosis(str(run.path), view.meta.get("status", "unknown"), findings)
