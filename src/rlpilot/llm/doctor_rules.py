"""``rlpilot doctor`` rules for LLM (GRPO) runs: KL blow-up, no reward signal, response length collapse.

Control rules about envs, critics and exploration do not apply to a language model; the guard,
no-progress and throughput rules do and are reused. Thresholds are in docs/llm.md.
"""

from __future__ import annotations

import numpy as np

from rlpilot.doctor import Finding, RunView, _head, _tail, rule_no_progress, rule_nonfinite, rule_throughput

KL_WARNING = 2.0  # nats per token (TorchRL k3 estimate, padded mean); grpo-reverse: 0.05-1.2 while learning
NO_SIGNAL_SHARE = 0.9  # groups whose responses all score the same give zero advantage
LENGTH_COLLAPSE = 0.5  # last-quarter median response length below this share of the first quarter's
UNFINISHED_SHARE = 0.5  # responses that hit llm.max_new_tokens without end-of-sequence


def rule_kl_blowup(v: RunView) -> list[Finding]:
    _, kl = v.present("train/kl_to_ref")
    if len(kl) < 4:
        return []
    late = float(np.median(_tail(kl)))
    if late <= KL_WARNING:
        return []
    cfg = v.config.grpo
    return [
        Finding(
            "kl_blowup",
            "error" if late > 4 * KL_WARNING else "warning",
            "the policy drifted far from the reference model",
            {
                "kl_to_ref_last_quarter_median": late,
                "kl_to_ref_first": float(kl[0]),
                "grpo.kl_coef": cfg.kl_coef,
            },
            "updates are too large for the KL penalty: the model may exploit the reward or forget the warm-up",
            v.cmd(f"grpo.lr={cfg.lr / 3:.3g}", f"grpo.kl_coef={max(2 * cfg.kl_coef, 0.05):.3g}"),
        )
    ]


def rule_reward_flat(v: RunView) -> list[Finding]:
    _, share = v.present("train/groups_without_signal")
    _, reward = v.present("train/reward_mean")
    if len(share) < 4:
        return []
    late = float(np.median(_tail(share, 0.5)))
    if late < NO_SIGNAL_SHARE:
        return []
    level = float(np.median(_tail(reward, 0.5)))
    solved = level >= 0.99
    group = v.config.grpo.group_size
    return [
        Finding(
            "reward_flat",
            "info" if solved else "warning",
            "almost every group of responses scored the same: GRPO had no advantage to learn from",
            {
                "groups_without_signal_median": late,
                "reward_mean_median": level,
                "grpo.group_size": group,
            },
            "every sampled response already gets the full reward"
            if solved
            else "the task is out of the model's reach (every response scores 0): warm up longer, sample more",
            v.cmd(f"llm.sft_steps={2 * max(v.config.llm.sft_steps, 10)}", f"grpo.group_size={2 * group}"),
        )
    ]


def rule_length_collapse(v: RunView) -> list[Finding]:
    found = []
    _, length = v.present("train/response_length")
    if len(length) >= 8:
        early, late = float(np.median(_head(length))), float(np.median(_tail(length)))
        if late < LENGTH_COLLAPSE * early:
            found.append(
                Finding(
                    "response_length_collapse",
                    "warning",
                    "responses got much shorter during training",
                    {"length_first_quarter_median": early, "length_last_quarter_median": late},
                    "the reward favours stopping early (or the KL penalty is cheapest for empty answers)",
                    v.cmd(f"grpo.kl_coef={max(2 * v.config.grpo.kl_coef, 0.05):.3g}"),
                )
            )
    _, finished = v.present("train/finished_frac")
    share = float(np.median(_tail(finished))) if len(finished) >= 4 else 1.0
    if share < UNFINISHED_SHARE:
        found.append(
            Finding(
                "responses_unfinished",
                "warning",
                "most responses ran out of tokens before end-of-sequence",
                {
                    "finished_share_last_quarter": float(np.median(_tail(finished))),
                    "llm.max_new_tokens": v.config.llm.max_new_tokens,
                },
                "llm.max_new_tokens is too small for the answers, or the model never learned to stop",
                v.cmd(f"llm.max_new_tokens={2 * v.config.llm.max_new_tokens}"),
            )
        )
    return found


def rule_no_progress_llm(v: RunView) -> list[Finding]:
    """The control rule (best held-out reward gained < 10% of the reward range), with a fix that fits an LLM run."""
    found = rule_no_progress(v)
    for finding in found:
        finding.fix = v.cmd(
            f"train.total_frames={2 * v.budget}", f"llm.sft_steps={2 * max(v.config.llm.sft_steps, 10)}"
        )
    return found


LLM_RULES = [
    rule_nonfinite,
    rule_kl_blowup,
    rule_reward_flat,
    rule_length_collapse,
    rule_no_progress_llm,
    rule_throughput,
]
