"""``rlpilot compare``: the client's question asked of any plant that declares its conditions (docs/conditions.md):
does a learned policy (or any controller) track as closely as the user's controller retuned for each condition?

Rows: the user's controller as given, its **robust** tuning (one set of arguments for conditions sampled from the
declared ranges), its **oracle** (retuned per condition: what a commissioning engineer reaches knowing the
condition), then each ``--run`` and ``--artifact``. Both references are searched on tuning episodes
(:mod:`rlpilot.reference`) and cached in ``--out`` (a rerun with the same settings tunes nothing); every row is then
played on the same evaluation episodes of every condition (seeds disjoint from the tuning ones), so each ratio to a
reference is paired, with a bootstrap interval over episodes (:func:`rlpilot.stats.paired_ratio`).

A cell **replaces the tuning** when its error is within ``bar`` x the oracle's (default 1.2), below the robust
reference's (the interval's top under 1), with effort within ``effort_bar`` x the oracle's. What is written into
``--out``: ``answer.md`` (the table and the figures), ``compare.json`` (every number, per episode),
``ratios.png`` and ``trace-CONDITION.png`` (one episode of each row, where the env declares a ``trace``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

from rlpilot.common.errors import UserError
from rlpilot.compare.report import ORACLE, ROBUST, summarise, write_report
from rlpilot.conditions import SAMPLED, Declared
from rlpilot.config.sections import EnvConfig
from rlpilot.control.evaluate import EvalResult
from rlpilot.reference import Reference, controller_defaults, side_by_side, tune_reference
from rlpilot.reference.play import Objective, play_candidates
from rlpilot.tune.space import Param


@dataclass
class Plan:
    """What one comparison plays."""

    env: EnvConfig
    controller: str
    space: list[Param]
    fixed: dict
    conditions: dict[str, dict]
    """Label -> the complete condition (every value the ``nominal`` case names, then the case's or the user's)."""
    runs: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    """Other controllers played as rows as they are built by default (``--also adaptive-pd``)."""
    episodes: int = 100
    seed: int = 10_000
    tuning_episodes: int = 32
    tuning_seed: int = 0
    objective: Objective = field(default_factory=Objective)
    bar: float = 1.2
    effort_bar: float = 1.2
    batch: int = 16
    rounds: int = 6
    refine_rounds: int = 12
    command: str = ""
    """The command line that asked (redacted), stamped into the answer."""
    workers: int = 1
    """Processes the oracles are searched on side by side (``--workers``; what they find does not depend on it)."""

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.episodes))

    @property
    def tuning_seeds(self) -> list[int]:
        return list(range(self.tuning_seed, self.tuning_seed + self.tuning_episodes))

    def identity(self, kind: str, condition: str) -> str:
        """What a cached reference was tuned with: the same key, the same search."""
        key = {
            "env": self.env.id,
            "kwargs": self.env.kwargs,
            "controller": self.controller,
            "space": [vars(p) for p in self.space],
            "fixed": self.fixed,
            "condition": self.conditions.get(condition, {}) if kind == ORACLE else "sampled",
            "seeds": self.tuning_seeds,
            "objective": vars(self.objective),
            "search": [self.batch, self.rounds, self.refine_rounds],
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def conditions_of(declared: Declared, items: list[str] | None) -> dict[str, dict]:
    """``--condition`` items as labelled complete conditions: a named case (``delay``), ``sampled``, or
    ``LABEL:name=value,name=value`` (a case of one's own); none given: every named case, then ``sampled``."""
    nominal = declared.named.get("nominal", {})
    chosen: dict[str, dict] = {}
    for item in items or [*declared.named, SAMPLED]:
        if item == SAMPLED:
            chosen[SAMPLED] = {}
            continue
        label, colon, values = item.partition(":")
        if colon:
            if not label.strip():
                raise UserError(f"--condition {item}: a case of one's own is LABEL:name=value[,name=value]")
            chosen[label.strip()] = {**nominal, **declared.resolve(values.split(","))}
        else:
            chosen[item] = {**nominal, **declared.resolve([item])}
    return chosen


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _progress_bar(plan: Plan, description: str):
    """A bar of the candidates a search plays (at most its TPE rounds and refinement rounds), on a terminal only."""
    from tqdm import tqdm

    dims = len(plan.space)
    total = plan.batch * plan.rounds + plan.refine_rounds * 3 * dims
    return tqdm(total=total, desc=description, unit="candidates", file=sys.stderr, disable=not sys.stderr.isatty())


def references(plan: Plan, out: Path) -> dict[str, Reference]:
    """The robust reference and each condition's oracle, tuned here or read back from ``out/references.json``
    when tuned with the same settings."""
    from rlpilot.common.files import atomic_write, dumps, read_json

    cache_path = out / "references.json"
    advice = "it is not a cache rlpilot compare wrote: remove it to tune again"
    cache = read_json(cache_path, advice) if cache_path.exists() else {}
    if not isinstance(cache, dict) or not all(isinstance(entry, dict) for entry in cache.values()):
        raise UserError(f"{cache_path}: {advice}")
    defaults = controller_defaults(plan.env.id, plan.controller, plan.fixed, plan.space)
    wanted = [(ROBUST, SAMPLED)] + [(ORACLE, label) for label in plan.conditions if label != SAMPLED]
    keys = {p.key for p in plan.space}
    found: dict[str, Reference] = {}
    missing: list[tuple[int, str, str, str]] = []
    for index, (kind, label) in enumerate(wanted, start=1):
        key = plan.identity(kind, label)
        name = ROBUST if kind == ROBUST else f"{ORACLE}/{label}"
        if key not in cache:
            missing.append((index, kind, label, key))
            continue
        try:
            found[name] = Reference(**cache[key])
        except TypeError:
            raise UserError(f"{cache_path}: {advice}") from None
        _say(f"[{index}/{len(wanted)}] {name}: from {cache_path}")

    def keep(job: tuple[int, str, str, str], reference: Reference) -> None:  # cached as each search ends
        index, kind, label, key = job
        name = ROBUST if kind == ROBUST else f"{ORACLE}/{label}"
        _say(f"[{index}/{len(wanted)}] {name}: {reference.evaluated} candidates in {reference.seconds:.0f} s")
        found[name] = reference
        cache[key] = reference.as_dict()
        atomic_write(cache_path, dumps(cache))

    def call(job: tuple[int, str, str, str], progress=None):
        index, kind, label, _ = job
        starts = [defaults] + ([found[ROBUST].kwargs] if ROBUST in found else [])
        return partial(
            tune_reference, plan.env, plan.controller, plan.space, plan.fixed, kind=kind, condition_name=label,
            condition=plan.conditions.get(label, {}) if kind == ORACLE else {}, seeds=plan.tuning_seeds,
            objective=plan.objective, starts=[{k: v for k, v in s.items() if k in keys} for s in starts],
            batch=plan.batch, rounds=plan.rounds, refine_rounds=plan.refine_rounds, progress=progress,
        )  # fmt: skip

    def here(job: tuple[int, str, str, str]) -> None:  # one search in this process, its bar on a terminal
        index, kind, label, _ = job
        bar = _progress_bar(plan, f"[{index}/{len(wanted)}] tuning {ROBUST if kind == ROBUST else f'{ORACLE}/{label}'}")
        reference = call(job, bar.update)()
        bar.close()
        keep(job, reference)

    if missing and missing[0][1] == ROBUST:  # the robust reference first: every oracle's search starts from it too
        here(missing.pop(0))
    workers = min(plan.workers, len(missing))
    if workers > 1:
        _say(f"tuning {len(missing)} oracles on {workers} processes")
        side_by_side([call(job) for job in missing], workers, lambda i, reference: keep(missing[i], reference))
    else:
        for job in missing:
            here(job)
    return found


def play_rows(plan: Plan, refs: dict[str, Reference], trace: tuple[str, ...]) -> dict[str, dict[str, EvalResult]]:
    """Every row on every condition's evaluation episodes: condition label -> row label -> result."""
    from rlpilot.play.episodes import evaluate_target

    table: dict[str, dict[str, EvalResult]] = {}
    short = plan.controller.rsplit(":", 1)[-1]
    for index, (label, condition) in enumerate(plan.conditions.items(), start=1):
        _say(f"playing {label} ({index}/{len(plan.conditions)}): {plan.episodes} episodes a row")
        plant = replace(plan.env, condition=dict(condition), condition_sampled=label == SAMPLED)
        rows = {short: plan.fixed, ROBUST: refs[ROBUST].kwargs}
        if f"{ORACLE}/{label}" in refs:
            rows[ORACLE] = refs[f"{ORACLE}/{label}"].kwargs
        played = play_candidates(plant, plan.controller, list(rows.values()), seeds=plan.seeds, trace=trace)
        table[label] = dict(zip(rows, played))
        for other in plan.others:
            table[label][other.rsplit(":", 1)[-1]] = play_candidates(plant, other, [{}], seeds=plan.seeds, trace=trace)[
                0
            ]
        items = [SAMPLED] if label == SAMPLED else [f"{k}={v}" for k, v in condition.items()]
        for target in [*plan.runs, *plan.artifacts]:
            result, _, _ = evaluate_target(
                target,
                episodes=plan.episodes,
                seed=plan.seed,
                csv_path=None,
                condition=items or None,
                trace=trace,
            )
            table[label][Path(target).name] = result
    return table


def compare(plan: Plan, declared: Declared, out: Path) -> dict:
    """Tunes the references, plays every row, writes ``answer.md``, ``compare.json`` and the figures into
    ``out``; returns what ``compare.json`` holds."""

    overlap = set(plan.seeds) & set(plan.tuning_seeds)
    if overlap:
        raise UserError(
            f"--seed {plan.seed} and --tuning-seed {plan.tuning_seed}: the evaluation episodes overlap the tuning "
            f"ones ({len(overlap)} seeds); references are never measured on what they were tuned on"
        )
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    refs = references(plan, out)
    tuned_s = time.perf_counter() - started
    table = play_rows(plan, refs, declared.trace)
    summary = summarise(plan, refs, table)
    summary["seconds"] = {"tuning": round(tuned_s, 1), "total": round(time.perf_counter() - started, 1)}
    write_report(plan, declared, summary, table, out)
    return summary


def per_episode(result: EvalResult, objective: Objective) -> dict[str, np.ndarray]:
    """The error (the objective's measure) and the effort of each episode."""
    measures = result.per_episode()
    error = objective.per_episode(result)
    effort = measures.get("effort", measures.get("action_effort"))
    return {"error": error, "effort": effort if effort is not None else np.zeros_like(error)}
