"""Doctor rules for LLM (GRPO) runs: KL blow-up, no reward signal, response length collapse.

Control rules about envs, critics and exploration do not apply to a language model; the common rules do
(``no_progress`` and ``nonfinite_metrics`` with fixes that fit an LLM run). Reading these rules needs
numpy only, never the ``[llm]`` extra. Thresholds are in docs/llm.md.
"""

from __future__ import annotations

import numpy as np

from rlpilot.common.findings import Finding
from rlpilot.doctor.common import (
    no_progress,
    nonfinite_metrics,
    rule_loss_exploding,
    rule_nonfinite_normalization,
    rule_nonfinite_observations,
    rule_throughput,
)
from rlpilot.doctor.view import Rule, RunView, head, tail

KL_WARNING = 2.0  # nats per token (TorchRL k3 estimate, padded mean); grpo-reverse: 0.05-1.2 while learning
NO_SIGNAL_SHARE = 0.9  # groups whose responses all score the same give zero advantage
LENGTH_COLLAPSE = 0.5  # last-quarter median response length below this share of the first quarter's
UNFINISHED_SHARE = 0.5  # responses that hit llm.max_new_tokens without end-of-sequence


def rule_kl_blowup(v: RunView) -> list[Finding]:
    _, kl = v.present("train/kl_to_ref")
    late = float(np.median(tail(kl))) if len(kl) >= 4 else 0.0
    if late <= KL_WARNING:
        return []
    cfg = v.config.grpo
    return [
        Finding(
            rule="kl_blowup",
            severity="error" if late > 4 * KL_WARNING else "warning",
            title="the policy drifted far from the reference model",
            evidence={
                "kl_to_ref_last_quarter_median": late,
                "kl_to_ref_first": float(kl[0]),
                "grpo.kl_coef": cfg.kl_coef,
            },
            cause="updates are too large for the KL penalty: the model may exploit the reward or forget the warm-up",
            fix=v.cmd(f"grpo.lr={cfg.lr / 3:.3g}", _stronger_kl(v)),
        )
    ]


def _stronger_kl(v: RunView) -> str:
    return f"grpo.kl_coef={max(2 * v.config.grpo.kl_coef, 0.05):.3g}"


def _longer_warm_up(v: RunView) -> str:
    return f"llm.sft_steps={2 * max(v.config.llm.sft_steps, 10)}"


def rule_reward_flat(v: RunView) -> list[Finding]:
    _, share = v.present("train/groups_without_signal")
    _, reward = v.present("train/reward_mean")
    late = float(np.median(tail(share, 0.5))) if len(share) >= 4 else 0.0
    if late < NO_SIGNAL_SHARE:
        return []
    level = float(np.median(tail(reward, 0.5)))
    solved = level >= 0.99
    group = v.config.grpo.group_size
    return [
        Finding(
            rule="reward_flat",
            severity="info" if solved else "warning",
            title="almost every group of responses scored the same: GRPO had no advantage to learn from",
            evidence={
                "groups_without_signal_median": late,
                "reward_mean_median": level,
                "grpo.group_size": group,
            },
            cause="every sampled response already gets the full reward"
            if solved
            else "the task is out of the model's reach (every response scores 0): warm up longer, sample more",
            fix=v.cmd(_longer_warm_up(v), f"grpo.group_size={2 * group}"),
        )
    ]


def rule_length_collapse(v: RunView) -> list[Finding]:
    _, length = v.present("train/response_length")
    if len(length) < 8:
        return []
    early, late = float(np.median(head(length))), float(np.median(tail(length)))
    if late >= LENGTH_COLLAPSE * early:
        return []
    return [
        Finding(
            rule="response_length_collapse",
            severity="warning",
            title="responses got much shorter during training",
            evidence={"length_first_quarter_median": early, "length_last_quarter_median": late},
            cause="the reward favours stopping early (or the KL penalty is cheapest for empty answers)",
            fix=v.cmd(_stronger_kl(v)),
        )
    ]


def rule_unfinished(v: RunView) -> list[Finding]:
    _, finished = v.present("train/finished_frac")
    share = float(np.median(tail(finished))) if len(finished) >= 4 else 1.0
    if share >= UNFINISHED_SHARE:
        return []
    max_new_tokens = v.config.llm.max_new_tokens
    return [
        Finding(
            rule="responses_unfinished",
            severity="warning",
            title="most responses ran out of tokens before end-of-sequence",
            evidence={
                "finished_share_last_quarter": share,
                "llm.max_new_tokens": max_new_tokens,
            },
            cause="llm.max_new_tokens is too small for the answers, or the model never learned to stop",
            fix=v.cmd(f"llm.max_new_tokens={2 * max_new_tokens}"),
        )
    ]


def rule_no_progress_llm(v: RunView) -> list[Finding]:
    """``no_progress`` (best held-out reward gained < 10% of the reward range), with a fix that fits an LLM run."""
    return no_progress(v, fix=v.cmd(f"train.total_frames={2 * v.budget}", _longer_warm_up(v)))


def rule_nonfinite_metrics_llm(v: RunView) -> list[Finding]:
    """``nonfinite_metrics``: an LLM run has no env to check, so the fix is a gentler update."""
    return nonfinite_metrics(v, fix=v.cmd_lower_lr())


RULES: list[Rule] = [
    rule_nonfinite_observations,
    rule_nonfinite_normalization,
    rule_loss_exploding,
    rule_nonfinite_metrics_llm,
    rule_kl_blowup,
    rule_reward_flat,
    rule_length_collapse,
    rule_unfinished,
    rule_no_progress_llm,
    rule_throughput,
]
"""Every rule an LLM (GRPO) run gets, in the order their findings are listed within a severity."""
