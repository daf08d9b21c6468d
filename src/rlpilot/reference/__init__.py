"""Classical references for a plant that declares its conditions (:mod:`rlpilot.conditions`): the user's controller
retuned for one condition (the **oracle**: what a commissioning engineer reaches knowing the condition) and tuned
once for every condition at once (the **robust** reference: conditions sampled from their declared ranges), both
searched continuously on tuning episodes (:mod:`rlpilot.reference.search`), never on the episodes they are then
measured on."""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rlpilot.config.sections import EnvConfig
from rlpilot.reference.play import Objective, play_candidates
from rlpilot.reference.search import search
from rlpilot.tune.space import Param


@dataclass
class Reference:
    """A tuned controller: its full constructor arguments and how the search went."""

    kind: str
    """``oracle`` (one condition) or ``robust`` (conditions sampled from their ranges)."""
    condition: str
    kwargs: dict
    tuning_score: float
    evaluated: int
    seconds: float
    edge: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "condition": self.condition,
            "kwargs": self.kwargs,
            "tuning_score": self.tuning_score,
            "evaluated": self.evaluated,
            "seconds": round(self.seconds, 2),
            "edge": self.edge,
        }


def controller_defaults(env_id: str, controller: str, fixed: dict, space: list[Param]) -> dict:
    """The values the controller is built with for the searched arguments (read back from the built controller's
    attributes of those names): the search's first candidate, so it never ends worse than them."""
    from rlpilot.envs.catalogue import base_controller

    built = base_controller(controller, env_id, dict(fixed))
    values = {p.key: getattr(built, p.key, None) for p in space}
    return {
        key: float(value)
        for key, value in values.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


def tune_reference(
    env_cfg: EnvConfig,
    controller: str,
    space: list[Param],
    fixed: dict,
    *,
    kind: str,
    condition_name: str,
    condition: dict,
    seeds: list[int],
    objective: Objective,
    starts: list[dict] = (),
    batch: int = 16,
    rounds: int = 6,
    refine_rounds: int = 12,
    progress=None,
) -> Reference:
    """The controller's arguments in ``space`` searched under ``condition`` (``kind="robust"``: every parameter
    the condition does not fix sampled per episode) on the tuning episodes ``seeds``."""
    plant = replace(env_cfg, condition=dict(condition), condition_sampled=kind == "robust")

    def score(candidates: list[dict]):
        results = play_candidates(plant, controller, [{**fixed, **c} for c in candidates], seeds=seeds)
        return [objective.per_episode(result).mean() for result in results]

    started = time.perf_counter()
    found = search(
        score,
        space,
        starts=list(starts),
        batch=batch,
        rounds=rounds,
        refine_rounds=refine_rounds,
        seed=0,
        progress=progress,
    )
    return Reference(
        kind,
        condition_name,
        {**fixed, **found.best},
        found.score,
        found.evaluated,
        time.perf_counter() - started,
        found.edge,
    )


def _one_thread(call: Callable[[], Any]) -> Any:
    """``call()`` in a worker of :func:`side_by_side`'s pool: one torch thread there (the processes are the
    parallelism, and two threads each on a core apiece only fight)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        import torch

        torch.set_num_threads(1)
    return call()


def side_by_side(calls: list[Callable[[], Any]], workers: int, on_result: Callable[[int, Any], None]) -> None:
    """Each of ``calls`` (picklable, no arguments: ``functools.partial(tune_reference, ...)``) on at most ``workers``
    processes at once, ``on_result(index, result)`` here as each ends (what searched is kept at once: a stop loses
    only the searches under way); with one worker, or one call, here in order. Searches are seeded each alone, so
    what they find does not depend on ``workers``. The pool is :func:`rlpilot.sweep.run_in_processes` (forked from
    a clean server, stopped with this process)."""
    workers = min(workers, len(calls))
    if workers <= 1:
        for index, call in enumerate(calls):
            on_result(index, call())
        return
    from rlpilot.sweep import run_in_processes

    run_in_processes([(_one_thread, (call,)) for call in calls], workers, on_result=on_result)
