"""Many controllers side by side on the same episodes: each candidate's constructor arguments build one controller,
all of them play one vector env (candidate ``k``'s rows play episodes ``seeds[0..E-1]``), so every candidate meets
the same references, disturbances and plants (common random numbers: differences between candidates are theirs,
not the draws'), and a batch of candidates costs one pass over the env.

Each candidate is the controller as its constructor builds it (not a gain multiplier on a base one): what the
search scores is what ``rlpilot eval --controller ... --controller-kwargs`` plays, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from rlpilot.common.errors import UserError
from rlpilot.config.sections import EnvConfig
from rlpilot.control.evaluate import EvalResult, evaluate
from rlpilot.envs.catalogue import build_controller
from rlpilot.envs.make import make_env

MAX_ENVS = 1024
"""Envs one batch plays at once (candidates x episodes): a batch beyond it is played in parts."""


class Bank:
    """Controllers over consecutive row blocks of one batch of observations (``rows`` each)."""

    def __init__(self, controllers: list, rows: int):
        self.controllers, self.rows = controllers, rows

    def __call__(self, observation: torch.Tensor) -> torch.Tensor:
        parts = [
            controller(observation[k * self.rows : (k + 1) * self.rows])
            for k, controller in enumerate(self.controllers)
        ]
        return torch.cat(parts)

    def reset(self, mask=None) -> None:
        for k, controller in enumerate(self.controllers):
            reset = getattr(controller, "reset", None)
            if reset is not None:
                reset(None if mask is None else np.asarray(mask)[k * self.rows : (k + 1) * self.rows])


def controller_env(env_cfg: EnvConfig) -> EnvConfig:
    """``env_cfg`` as a controller plays it: raw observations, actions as the env takes them, no residual base
    (what ``rlpilot eval --controller`` plays), on gymnasium's own env (a condition needs one)."""
    backend = "sync" if env_cfg.backend in ("auto", "numpy", "native") else env_cfg.backend
    return replace(env_cfg, normalize_obs=False, action_encoding="categorical", base_controller="none", backend=backend)


def play_candidates(
    env_cfg: EnvConfig,
    controller: str,
    candidates: list[dict],
    *,
    seeds: list[int],
    trace: tuple[str, ...] = (),
) -> list[EvalResult]:
    """Each candidate (constructor arguments of ``controller``) on the episodes ``seeds``, under ``env_cfg``'s
    condition; one :class:`EvalResult` per candidate, its per-episode measures in the order of ``seeds``."""
    if not candidates:
        return []
    per_batch = max(1, MAX_ENVS // len(seeds))
    if len(candidates) > per_batch:
        return [
            result
            for start in range(0, len(candidates), per_batch)
            for result in play_candidates(
                env_cfg, controller, candidates[start : start + per_batch], seeds=seeds, trace=trace
            )
        ]
    env_cfg = controller_env(env_cfg)
    n = len(candidates) * len(seeds)
    env = make_env(env_cfg, num_envs=n, seed=seeds[0])
    try:
        vector_env = env.base_env.vector_env
        controllers = [build_controller(controller, env_cfg.id, vector_env, kwargs) for kwargs in candidates]
        bank = Bank(controllers, len(seeds))
        result = evaluate(env, bank, episodes=n, seed=seeds[0], seeds=list(seeds) * len(candidates), trace=trace)
    finally:
        env.close()
    return [_rows(result, k, len(seeds)) for k in range(len(candidates))]


def _rows(result: EvalResult, k: int, rows: int) -> EvalResult:
    part = slice(k * rows, (k + 1) * rows)
    cut = lambda values: None if values is None else values[part]  # noqa: E731
    return EvalResult(
        result.returns[part],
        result.lengths[part],
        result.actions_seen,
        action_effort=cut(result.action_effort),
        action_smoothness=cut(result.action_smoothness),
        final={name: values[part] for name, values in result.final.items()},
        trace={name: values[:, part] for name, values in result.trace.items()},
    )


@dataclass(frozen=True)
class Objective:
    """What a search minimises per episode: a measure the env declares (``tracking_error``; ``return`` is
    maximised) plus ``effort_weight`` x ``effort``."""

    score: str = "tracking_error"
    effort_weight: float = 0.0

    def per_episode(self, result: EvalResult) -> np.ndarray:
        values = -result.returns if self.score == "return" else self._measure(result, self.score)
        if self.effort_weight:
            values = values + self.effort_weight * self._measure(result, "effort")
        return np.asarray(values, dtype=np.float64)

    def describe(self) -> str:
        what = "minus the return" if self.score == "return" else self.score
        return what + (f" + {self.effort_weight:g} x effort" if self.effort_weight else "")

    @staticmethod
    def _measure(result: EvalResult, name: str) -> np.ndarray:
        measures = result.per_episode()
        if name not in measures:
            raise UserError(
                f"--score {name}: the env reports no measure '{name}' (it reports: return, {', '.join(measures)})"
            )
        return measures[name]
