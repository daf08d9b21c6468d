"""Doctor rules for every kind of run: non-finite values, skipped updates, no progress, throughput.

``no_progress`` and ``nonfinite_metrics`` take the fix as an argument: what to change differs between
an env run and a language-model run, the evidence does not.
"""

from __future__ import annotations

import numpy as np

from rlpilot.common.findings import Finding
from rlpilot.doctor.view import RunView, tail

RETURN_COLUMNS = ("train/episode_return", "eval/return_mean")
"""Besides every ``loss/*`` column: the columns ``nonfinite_metrics`` requires to hold a finite value."""


def rule_nonfinite_rewards(v: RunView) -> list[Finding]:
    """The env's rewards were NaN/inf (training stops at the first such batch): the cause, named before any
    rule that would blame the learning rate for the NaN losses that follow."""
    events = [event for event in v.events_of("stopped") if event.get("cause") == "nonfinite_reward"]
    if not events:
        return []
    return [
        Finding(
            rule="nonfinite_rewards",
            severity="error",
            title="the env returned NaN/inf rewards",
            evidence={"envs": events[-1].get("envs"), "at_frames": events[-1].get("frames")},
            cause="the environment's reward function produced NaN or inf; the run was stopped",
            fix=f"rlpilot check {v.config.env.id}  (and fix the env's reward)",
        )
    ]


def rule_nonfinite_observations(v: RunView) -> list[Finding]:
    events = v.events_of("nonfinite_observation")
    if not events:
        return []
    return [
        Finding(
            rule="nonfinite_observations",
            severity="error",
            title="the env returned NaN/inf observations",
            evidence={
                "events": len(events),
                "envs": sorted({env for event in events for env in event["envs"]}),
                "first_at_frames": events[0].get("frames"),
            },
            cause="the environment's dynamics or observation code produced NaN/inf",
            fix=f"rlpilot check {v.config.env.id}  (and fix the env; guard.on_nonfinite_obs=stop stops at the "
            "first one)",
        )
    ]


def rule_nonfinite_normalization(v: RunView) -> list[Finding]:
    """The one rule that opens the checkpoint (and so imports torch), only when the run normalised observations."""
    norm = _obs_norm(v)
    if norm is None or all(bool(np.isfinite(np.asarray(stat)).all()) for stat in norm.values()):
        return []
    return [
        Finding(
            rule="nonfinite_normalization",
            severity="error",
            title="observation normalisation statistics are not finite",
            evidence={"loc": np.asarray(norm["loc"]).tolist(), "scale": np.asarray(norm["scale"]).tolist()},
            cause="random-policy rollouts produced NaN/inf or the statistics were corrupted",
            fix=v.cmd("env.normalize_obs=false"),
        )
    ]


def _obs_norm(v: RunView) -> dict | None:
    """``loc``/``scale`` from the last checkpoint: ``checkpoint["state"]["obs_norm"]`` (current format) or
    ``checkpoint["obs_norm"]`` (older runs); None without normalisation or a readable checkpoint."""
    if not v.config.env.normalize_obs or not (v.run.checkpoint_dir / "last.pt").is_file():
        return None
    try:
        checkpoint = v.run.load_checkpoint("last")
    except Exception:  # an unreadable checkpoint: resume and eval report that
        return None
    state = checkpoint.get("state", checkpoint)
    return state.get("obs_norm")


def rule_loss_exploding(v: RunView) -> list[Finding]:
    skips = v.events_of("guard_skip")
    if not skips:
        return []
    return [
        Finding(
            rule="loss_exploding",
            severity="error" if len(skips) > 20 else "warning",
            title="updates were skipped: non-finite or exploding loss",
            evidence={
                "skipped_updates": len(skips),
                "first_reason": skips[0]["reason"],
                "first_at_frames": skips[0].get("frames"),
                "rollbacks": len(v.events_of("rollback")),
            },
            cause="the learning rate is too high for this problem, or the rewards/observations are badly scaled",
            fix=v.cmd_lower_lr(),
        )
    ]


def nonfinite_metrics(v: RunView, *, fix: str) -> list[Finding]:
    """Loss or return columns that were logged but never held a finite value (``present`` drops NaN, so the
    other rules see nothing in them and would stay silent)."""
    columns = sorted({key for row in v.rows for key in row if key.startswith("loss/") or key in RETURN_COLUMNS})
    dead = [key for key in columns if not np.isfinite(v.logged(key)).any()]
    if not dead:
        return []
    return [
        Finding(
            rule="nonfinite_metrics",
            severity="error",
            title="losses or returns were never finite",
            evidence={"columns": dead, "values_logged": [len(v.logged(key)) for key in dead], "rows": len(v.rows)},
            cause="NaN/inf from the first logged value on: non-finite inputs (observations, rewards) or an "
            "update that diverged at once",
            fix=fix,
        )
    ]


def rule_nonfinite_metrics(v: RunView) -> list[Finding]:
    return nonfinite_metrics(v, fix=f"rlpilot check {v.config.env.id}  (non-finite inputs); then {v.cmd_lower_lr()}")


def no_progress(v: RunView, *, fix: str) -> list[Finding]:
    """Best greedy evaluation gained less than 10% of the way to the threshold (of the first evaluation's
    size without one), over at least 3 evaluations, in a run that is over or past half its budget."""
    evals = v.evals
    if v.did_well or len(evals) < 3 or _too_early(v):
        return []
    spread = (v.threshold - evals[0]) if v.threshold is not None else max(abs(evals[0]), 1.0)
    if np.max(evals) - evals[0] >= 0.1 * abs(spread):
        return []
    return [
        Finding(
            rule="no_progress",
            severity="warning",
            title="greedy evaluation barely improved over the run",
            evidence={
                "first_eval": float(evals[0]),
                "best_eval": float(np.max(evals)),
                "last_eval": float(evals[-1]),
                "threshold": v.threshold,
                "frames": int(v.frames[-1]),
            },
            cause="see the other findings; without any, the budget may be too small or the task too hard for "
            "these hyperparameters",
            fix=fix,
        )
    ]


def _too_early(v: RunView) -> bool:
    """Still running and short of half its budget: too early to call it stalled."""
    return v.meta.get("status") == "running" and v.frames[-1] < 0.5 * v.budget


def rule_no_progress(v: RunView) -> list[Finding]:
    return no_progress(v, fix=f"rlpilot check {v.config.env.id}; then {v.cmd(f'train.total_frames={2 * v.budget}')}")


def rule_throughput(v: RunView) -> list[Finding]:
    frames, elapsed = v.present("time/elapsed_s")
    if len(frames) < 12:
        return []
    fps = np.diff(frames) / np.maximum(np.diff(elapsed), 1e-9)
    early, late = np.median(fps[: len(fps) // 2]), np.median(tail(fps))
    if late >= 0.5 * early:
        return []
    return [
        Finding(
            rule="throughput_collapse",
            severity="warning",
            title="training slowed down by more than half mid-run",
            evidence={"fps_first_half_median": float(early), "fps_last_quarter_median": float(late)},
            cause="something grows with time (longer episodes in evaluation, a filling buffer, memory pressure, "
            "another process on the machine)",
            fix="python benchmarks/soak.py --minutes 10  (memory over time), or rerun with -v",
        )
    ]
