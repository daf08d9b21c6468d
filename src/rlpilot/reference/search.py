"""The strongest classical reference one can build: a controller's constructor arguments searched continuously,
in batches, on tuning episodes.

Two stages, each batch of candidates played side by side on the same episodes (:mod:`rlpilot.reference.play`):

1. **Global**: Optuna's TPE (multivariate, seeded), ``batch`` candidates a round; the starting points given (the
   controller's own arguments, a textbook tuning, an earlier best) are enqueued first, so the search never ends
   worse than them.
2. **Refinement**: a pattern search from the best point in the unit cube of the space (log ranges in log): each
   round tries one step up and down along every dimension and as many random directions, moves to the best
   candidate that improves, and halves the step when none does, down to 1/1000 of a range.

The result names every dimension whose best value sits within 1% of its range's edge: the search was too narrow
there, and the reference may be stronger beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlpilot.common.errors import UserError
from rlpilot.tune.space import Param

BUDGETS = {"quick": (8, 3, 6), "fine": (16, 6, 12)}
"""A search's budget by name (``rlpilot compare --search``, ``adapt.search``): candidates a batch, TPE rounds,
refinement rounds."""
EDGE = 0.01
"""How close to a range's end (as a fraction of the range, in log for log ranges) a best value is on the edge."""
SMALLEST_STEP = 1e-3


@dataclass
class Searched:
    """A search's outcome: the best arguments, their score, and what the search saw."""

    best: dict
    score: float
    evaluated: int
    edge: list[str] = field(default_factory=list)
    """``kp at its upper bound (60)``: each dimension whose best value is on its range's edge."""
    history: list[tuple[dict, float]] = field(default_factory=list)


def _to_unit(param: Param, value: float) -> float:
    """``value``'s place in ``param``'s range, 0 to 1 (a value outside is clipped to the range's end)."""
    value = min(max(float(value), float(param.low)), float(param.high))
    if param.log:
        return (math.log(value) - math.log(param.low)) / (math.log(param.high) - math.log(param.low))
    return (value - param.low) / (param.high - param.low)


def _from_unit(param: Param, u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    if param.log:
        return float(math.exp(math.log(param.low) + u * (math.log(param.high) - math.log(param.low))))
    return float(param.low + u * (param.high - param.low))


def check_space(space: list[Param]) -> None:
    """Ranges only (a search in the unit cube): a choice or an integer dimension is one line."""
    for param in space:
        if param.choices is not None or param.integer:
            raise UserError(f"--param {param.key}: the reference search takes ranges of numbers (low:high[:log])")


def search(
    score: Callable[[list[dict]], np.ndarray],
    space: list[Param],
    *,
    starts: list[dict] = (),
    batch: int = 16,
    rounds: int = 6,
    refine_rounds: int = 12,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Searched:
    """Minimises ``score`` (a batch of candidates -> a score each) over ``space``. ``starts``: points tried
    first (values outside a range are clipped into it)."""
    import optuna

    from rlpilot.tune.study import quiet_optuna

    check_space(space)
    quiet_optuna()
    history: list[tuple[dict, float]] = []

    def played(candidates: list[dict]) -> np.ndarray:
        values = np.asarray(score(candidates), dtype=np.float64)
        values = np.where(np.isfinite(values), values, np.inf)
        history.extend(zip(candidates, values.tolist()))
        if progress is not None:
            progress(len(candidates))
        return values

    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=batch, constant_liar=True)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    for start in starts:
        study.enqueue_trial({p.key: _from_unit(p, _to_unit(p, float(start[p.key]))) for p in space if p.key in start})
    for _ in range(rounds):
        trials = [study.ask() for _ in range(batch)]
        candidates = [{p.key: p.suggest(trial) for p in space} for trial in trials]
        for trial, value in zip(trials, played(candidates)):
            study.tell(trial, float(value) if math.isfinite(value) else float("inf"))
    best, best_score = min(history, key=lambda item: item[1])
    best, best_score = _refine(played, space, best, best_score, refine_rounds, np.random.default_rng(seed))
    return Searched(best, best_score, len(history), _edges(space, best), history)


def _refine(played, space: list[Param], best: dict, best_score: float, rounds: int, rng) -> tuple[dict, float]:
    dims = len(space)
    step = 0.1
    for _ in range(rounds):
        if step < SMALLEST_STEP:
            break
        centre = np.array([_to_unit(p, best[p.key]) for p in space])
        directions = [sign * np.eye(dims)[i] for i in range(dims) for sign in (1.0, -1.0)]
        directions += [d / np.linalg.norm(d) for d in rng.normal(size=(dims, dims))]
        points = [np.clip(centre + step * d, 0.0, 1.0) for d in directions]
        candidates = [{p.key: _from_unit(p, u) for p, u in zip(space, point)} for point in points]
        values = played(candidates)
        k = int(np.argmin(values))
        if values[k] < best_score:
            best, best_score = candidates[k], float(values[k])
        else:
            step /= 2
    return best, best_score


def _edges(space: list[Param], best: dict) -> list[str]:
    edges = []
    for param in space:
        u = _to_unit(param, best[param.key])
        if u <= EDGE:
            edges.append(f"{param.key} at its lower bound ({param.low:g})")
        elif u >= 1 - EDGE:
            edges.append(f"{param.key} at its upper bound ({param.high:g})")
    return edges
