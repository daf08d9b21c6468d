"""``rlpilot sweep``: a preset over a grid of overrides x seeds, several runs at once, one table.

Each (grid point, seed) is one ordinary run directory under ``OUT/<point>/s<seed>``, so every other
verb works on it. Finished runs are skipped when a sweep is started again; interrupted or killed ones
are resumed from their checkpoint. Aggregates per grid point: final greedy evaluation (mean and IQM,
each with a 95% bootstrap interval over seeds), share of seeds solved, frames and wall time to the
threshold (median over solved seeds).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlpilot.cluster import ray_session
from rlpilot.common import stopping
from rlpilot.common.bounds import refuse_runs
from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, dumps
from rlpilot.config.load import load_config
from rlpilot.runs import Run, load_run, slug, train_origin, try_lock
from rlpilot.stats import BOOTSTRAP_SAMPLES, bootstrap, iqm


def parse_grid(items: list[str], overrides: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """``--grid key=v1,v2`` items as ``(key, values)``. A key given twice (in two ``--grid``, or in ``--grid``
    and ``--set``), a value given twice, or ``train.seed`` (the seeds are ``--seeds``/``--seed-start``) is a
    :class:`UserError`: the later one would win in every run while the labels said otherwise."""
    grid: list[tuple[str, list[str]]] = []
    fixed = {item.partition("=")[0].strip(): item for item in overrides or []}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not values or not key:
            raise UserError(f"--grid expects key=v1,v2,..., got '{item}'")
        listed = [v.strip() for v in values.split(",")]
        if key in (name for name, _ in grid):
            raise UserError(f"--grid {key} is given twice: list all its values in one --grid {key}=v1,v2,...")
        if key in fixed:
            raise UserError(f"--grid {key} conflicts with --set {fixed[key]}: give the key in one of them")
        if len(set(listed)) < len(listed):
            raise UserError(f"--grid {item}: a value is listed twice; each grid point must be a different run")
        grid.append((key, listed))
    for key in (*[name for name, _ in grid], *fixed):
        if key == "train.seed":
            raise UserError(
                "train.seed cannot be swept or set in a sweep: the seeds are --seeds N and --seed-start S "
                "(seeds S .. S+N-1)"
            )
    return grid


def points(grid: list[tuple[str, list[str]]]) -> list[list[str]]:
    keys = [key for key, _ in grid]
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in itertools.product(*[vs for _, vs in grid])]


def point_name(overrides: list[str]) -> str:
    return slug("_".join(overrides)) if overrides else "default"


@dataclass
class Job:
    preset: str
    overrides: list[str]
    seed: int
    path: Path


def run_member(preset: str, overrides: list[str], seed: int, path: Path):
    """Runs one seed of ``preset`` + ``overrides`` in ``path``, or picks it up where it stopped: a finished
    run is returned as it is, an interrupted or killed one resumes from its checkpoint, one killed before
    its first checkpoint starts over (torch threads: the run's ``train.num_threads``, 1 by default). Shared by
    ``sweep``, ``bench`` and ``tune``; returns the Run.

    The member is looked at under its run lock: one another process writes is refused in one line (never
    removed under it), and one trained with other settings than ``overrides`` (another sweep's) too."""
    from rlpilot.loop.trainer import resume, train

    path = Path(path)
    settings = [*overrides, f"train.seed={seed}"]
    config = load_config(preset, overrides=settings)
    if path.is_dir() and any(path.iterdir()):
        member = Run(path)
        member.lock()  # another writer: one line, and nothing of its is touched
        try:
            started = (path / "meta.json").is_file() and (path / "config.yaml").is_file()
            if started:
                _check_settings(path, config)
                status = member.status
            if started and status in ("solved", "finished"):
                return member
            if not (started and (path / "checkpoints" / "last.pt").exists()):
                shutil.rmtree(path)  # killed before its first checkpoint (or its record): start over
        finally:
            member.unlock()
        if path.exists():
            return resume(path, show_progress=False)
    return train(config, run_dir=str(path), show_progress=False, origin=train_origin(preset=preset, overrides=settings))


def _check_settings(path: Path, config) -> None:
    """The member in ``path`` was trained with ``config`` (its ``config.yaml``), else a :class:`UserError`:
    the sweep's label would name settings that did not run."""
    ran = load_run(path).config().to_dict()
    asked = yaml.safe_load(config.to_yaml())
    ran = yaml.safe_load(yaml.safe_dump(ran, sort_keys=False))
    for section in sorted(set(ran) | set(asked)):
        if ran.get(section) == asked.get(section):
            continue
        if not isinstance(ran.get(section), dict) or not isinstance(asked.get(section), dict):
            key, was, want = section, ran.get(section), asked.get(section)
        else:
            keys = sorted(set(ran[section]) | set(asked[section]))
            key = next(k for k in keys if ran[section].get(k) != asked[section].get(k))
            key, was, want = f"{section}.{key}", ran[section].get(key), asked[section].get(key)
        raise UserError(
            f"{path} was trained with {key}={was!r}, this sweep asks for {want!r}: it is another sweep's run; "
            "choose another --out, or remove that folder"
        )


def _run_job(job: Job) -> str:
    """Runs (or resumes) one sweep member in a worker process; returns its final status."""
    return run_member(job.preset, job.overrides, job.seed, job.path).status


@dataclass
class SweepPlan:
    """One sweep's members, checked and named, before any of them runs."""

    preset: str
    out: Path
    base: list[str]
    grid_points: list[list[str]]
    seeds: list[int]
    jobs: list[Job]
    record: dict


def plan_sweep(
    preset: str,
    *,
    seeds: int,
    grid: list[str],
    out: str | Path,
    overrides: list[str] | None = None,
    seed_start: int = 0,
) -> SweepPlan:
    """The sweep's members (every grid point x seed), each combination's config checked before anything starts."""
    base = overrides or []
    parsed = parse_grid(grid, base)
    count = math.prod(len(values) for _, values in parsed)  # before listing them: a grid can multiply to billions
    refuse_runs(count * seeds, f"--seeds {seeds} x {count:,} grid point(s)", "--seeds or the --grid values")
    grid_points = points(parsed)
    for point in grid_points:  # validate every combination before starting anything
        load_config(preset, overrides=[*base, *point])
    out = Path(out)
    seed_list = list(range(seed_start, seed_start + seeds))
    jobs = [
        Job(preset, [*base, *point], seed, out / point_name(point) / f"s{seed}")
        for point in grid_points
        for seed in seed_list
    ]
    names = [point_name(point) for point in grid_points]
    if len(set(names)) < len(names):
        raise UserError(f"--grid {' '.join(grid)}: two grid points would share a folder name; use distinct values")
    record = {"preset": preset, "seeds": seeds, "seed_start": seed_start, "grid": grid, "overrides": base}
    return SweepPlan(preset, out, base, grid_points, seed_list, jobs, record)


def run_plans(plans: list[SweepPlan], workers: int, ray: str | None = None) -> list[dict]:
    """Every plan's members on ONE local process pool (or one Ray session), so that a worker's start (its imports,
    seconds) is paid once per worker, not once per sweep; each sweep locked in its folder and summarised."""
    with contextlib.ExitStack() as stack:
        for plan in plans:
            stack.enter_context(sweep_lock(plan.out))
            atomic_write(plan.out / "sweep.json", dumps(plan.record, indent=2) + "\n")
        jobs = [job for plan in plans for job in plan.jobs]
        bases = [plan.base for plan in plans for _ in plan.jobs]
        named = len(plans) > 1
        if ray is None:
            _run_local(jobs, workers, bases, named)
        else:
            _run_ray(jobs, workers, bases, ray, named)
        return [summarize(plan.out, plan.grid_points, plan.seeds) for plan in plans]


def run_sweep(
    preset: str,
    *,
    seeds: int,
    grid: list[str],
    out: str | Path,
    workers: int = 2,
    overrides: list[str] | None = None,
    ray: str | None = None,
    seed_start: int = 0,
) -> dict:
    """Runs the sweep on a local process pool, or on Ray (``ray``: a cluster address, or ``local``); seeds
    ``seed_start`` .. ``seed_start + seeds - 1``."""
    plan = plan_sweep(preset, seeds=seeds, grid=grid, out=out, overrides=overrides, seed_start=seed_start)
    return run_plans([plan], workers, ray)[0]


@contextlib.contextmanager
def sweep_lock(out: Path):
    """One sweep at a time in ``out`` (``out/.sweep.lock``, dropped by the kernel when its holder ends):
    a second one is refused in one line, before any member is touched."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the sweep folder {out}: {exc.strerror or exc}; choose another --out") from None
    lock_path = out / ".sweep.lock"
    if lock_path.is_symlink():
        raise UserError(f"{lock_path} is a symbolic link; remove it")
    handle = try_lock(lock_path)
    if handle is None:
        holder = lock_path.read_text().strip() or "another process"
        raise UserError(f"{out} is in use by another sweep ({holder}): wait for it to end, or choose another --out")
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()


def _report(job: Job, base: list[str], status: str, named: bool = False) -> None:
    preset = f"{job.preset} " if named else ""
    print(f"  {preset}{point_name(job.overrides[len(base) :])} seed {job.seed}: {status}", flush=True)


def die_with_parent() -> None:
    """SIGTERM when the parent dies, however it dies (Linux ``PR_SET_PDEATHSIG``). A worker of a killed
    ``sweep``/``tune`` would otherwise train on as an orphan; with SIGTERM its run stops cleanly at a checkpoint,
    and the next start resumes it."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent was already gone before the call
            os.kill(os.getpid(), signal.SIGTERM)


_stop_event = None  # in a worker process: set by the parent when it is asked to stop


PRELOAD = ("torch", "rlpilot.loop.trainer")
"""What the pool's fork server imports once (~4 s here), so that a worker starts in a fraction of a second instead
of importing torch again: every ``sweep``, ``bench``, ``tune`` and reference search of one process after the
first pays no import (a process that runs several, as a notebook or the tests, pays it once). Importing them
starts no thread (torch's thread pools start at the first parallel operation), so the fork is clean."""


def _start_worker(stop, environ: dict[str, str]) -> None:
    """Process-pool initializer: the environment the parent has now (the fork server holds the one it had when
    it started), :func:`die_with_parent`, and a watcher that sends this worker SIGTERM when the parent sets
    ``stop``: the run in progress stops at its next gradient step with a checkpoint (status ``interrupted``), as
    if the signal had come to it."""
    global _stop_event
    _stop_event = stop
    os.environ.clear()
    os.environ.update(environ)
    die_with_parent()

    def watch() -> None:
        stop.wait()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()


def _call(function: Callable, args: tuple):
    """One call in a worker; none is started once the parent asked the workers to stop."""
    if _stop_event is not None and _stop_event.is_set():
        raise stopping.Interrupted("SIGTERM")
    return function(*args)


def run_in_processes(
    calls: list[tuple[Callable, tuple]], workers: int, on_result: Callable[[int, Any], None] | None = None
) -> None:
    """``function(*args)`` for each of ``calls`` on at most ``workers`` processes, forked from a fork server that
    has imported :data:`PRELOAD` and nothing else (no torch/OpenMP state of this process) and ended with this one;
    ``on_result(index, result)`` as each ends. The one process pool of ``sweep``, ``bench`` and ``tune``. A signal
    that stops this process (SIGINT/SIGTERM: the CLI's handler raises here), or a call that fails, stops the
    workers too: calls not started are cancelled, the runs in progress stop at a checkpoint (resumable), and the
    exception is raised once they have (before, the pool waited for every queued run to train its whole budget)."""
    context = multiprocessing.get_context("forkserver")  # forked from a clean server, not from this process
    context.set_forkserver_preload(list(PRELOAD))
    stop = context.Event()
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(workers, len(calls))),
        mp_context=context,
        initializer=_start_worker,
        initargs=(stop, dict(os.environ)),
    )
    try:
        futures = {pool.submit(_call, function, args): index for index, (function, args) in enumerate(calls)}
        for future in as_completed(futures):
            result = future.result()
            if on_result is not None:
                on_result(futures[future], result)
    except BaseException:
        stop.set()  # every worker stops its run at a checkpoint
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_local(jobs: list[Job], workers: int, bases: list[list[str]], named: bool) -> None:
    run_in_processes(
        [(_run_job, (job,)) for job in jobs],
        workers,
        lambda index, status: _report(jobs[index], bases[index], status, named),
    )


def _run_ray(jobs: list[Job], workers: int, bases: list[list[str]], address: str, named: bool) -> None:
    """One Ray task per run (:func:`ray_session`)."""
    with ray_session(address, workers) as ray:
        remote = ray.remote(num_cpus=1)(_run_job)
        pending = {remote.remote(job): index for index, job in enumerate(jobs)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    index = pending.pop(ref)
                    _report(jobs[index], bases[index], ray.get(ref), named)
        except BaseException:  # a signal: the tasks stop too (a cancelled run resumes from its last checkpoint)
            for ref in pending:
                ray.cancel(ref)
            raise


def summarize(out: Path, grid_points: list[list[str]], seeds: list[int]) -> dict:
    groups = [
        (" ".join(point) or "(preset)", [load_run(out / point_name(point) / f"s{seed}") for seed in seeds])
        for point in grid_points
    ]  # each run directory read once, for the rows, the figure and the revisions
    rows = []
    for name, runs in groups:
        finals = np.array([run.last_eval for run in runs if run.last_eval is not None], dtype=float)
        solved = [run for run in runs if run.solved_at_frames is not None]
        rows.append(
            {
                "point": name,
                "runs": len(runs),
                "final_mean": float(finals.mean()) if len(finals) else float("nan"),
                "final_mean_ci": bootstrap(finals, np.mean),
                "final_iqm": iqm(finals) if len(finals) else float("nan"),
                "final_iqm_ci": bootstrap(finals, iqm),
                "solved": len(solved),
                "frames_to_solve_median": float(np.median([r.solved_at_frames for r in solved])) if solved else None,
                "wall_s_to_solve_median": float(np.median([r.elapsed_s for r in solved])) if solved else None,
                # runs with train.evals_after_solved > 0: the share of the evaluations after the first solve
                # at or above the threshold (does the greedy policy hold?), mean over the solved runs
                "stays_solved": _mean_or_none([r.meta().get("stays_solved") for r in solved]),
            }
        )
    table = render_table(rows, seeds)
    atomic_write(out / "summary.md", table)
    atomic_write(out / "summary.json", dumps(rows, indent=2) + "\n")
    from rlpilot.plot import plot_groups

    plot_groups(groups, out / "curves.png", title=f"sweep: mean over {len(seeds)} seeds, 95% band")
    revisions = {(run.meta().get("git_revision") or "unknown")[:12] for _, runs in groups for run in runs}
    return {"rows": rows, "table": table, "revisions": sorted(revisions)}


def _mean_or_none(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _result_cells(row: dict) -> str:
    """solved | mean [CI] | IQM [CI] | frames to solve | wall s to solve: one table row's result cells."""
    frames = "-" if row["frames_to_solve_median"] is None else f"{row['frames_to_solve_median']:,.0f}"
    wall = "-" if row["wall_s_to_solve_median"] is None else f"{row['wall_s_to_solve_median']:.2f}"
    mean_low, mean_high = row["final_mean_ci"]
    iqm_low, iqm_high = row["final_iqm_ci"]
    return (
        f"{row['solved']}/{row['runs']} | {row['final_mean']:.1f} [{mean_low:.1f}, {mean_high:.1f}] | "
        f"{row['final_iqm']:.1f} [{iqm_low:.1f}, {iqm_high:.1f}] | {frames} | {wall}"
    )


def render_table(rows: list[dict], seeds: list[int]) -> str:
    lines = [
        "| grid point | solved | final eval mean [95% CI] | final eval IQM [95% CI] | frames to solve "
        "(median) | wall s to solve (median) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['point']} | {_result_cells(r)} |")
    lines.append("")
    lines.append(
        f"{len(seeds)} seeds per grid point ({_seed_range(seeds)}); intervals: percentile bootstrap over seeds "
        f"({BOOTSTRAP_SAMPLES} resamples). Final eval: each run's last greedy evaluation."
    )
    return "\n".join(lines) + "\n"


def _seed_range(seeds: list[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


BENCH_START, BENCH_END = "<!-- bench:start -->", "<!-- bench:end -->"


BENCH_MAX_FRAMES = 500_000
BENCH_SEED_START = 100  # docs/benchmarks.md: seeds that tuned a preset (0-15 at most) never measure it
BENCH_EVALS_AFTER_SOLVED = 5


def bench_presets() -> list[str]:
    """What ``rlpilot bench`` runs by default: control presets on gymnasium's classic-control envs with a
    CPU-sized budget (at most 500k frames): minutes each here. LLM presets have their own numbers
    (docs/llm.md); Box2D, MuJoCo, pixel and GPU presets (hours on this CPU) are named with ``--presets``."""
    from rlpilot.config.load import preset_names
    from rlpilot.registry import registered_spec

    def classic(env_id: str) -> bool:
        spec = registered_spec(env_id) if ":" not in env_id and "/" not in env_id else None
        return spec is not None and str(spec.entry_point).startswith("gymnasium.envs.classic_control")

    return [
        name
        for name in preset_names()
        if (config := load_config(name)).kind == "control"
        and config.train.total_frames <= BENCH_MAX_FRAMES
        and classic(config.env.id)
        and config.env.backend != "native"
    ]


def run_bench(
    *,
    seeds: int,
    out: str | Path,
    workers: int,
    results: str | Path | None,
    ray: str | None = None,
    presets: list[str] | None = None,
    seed_start: int = BENCH_SEED_START,
    overrides: list[str] | None = None,
) -> str:
    """Presets (default: :func:`bench_presets`) with ``seeds`` seeds from ``seed_start`` (a sweep each), one
    table; written between markers in ``results``. Each run goes on for ``BENCH_EVALS_AFTER_SOLVED``
    evaluations after its first solve, so the table says whether the greedy policy holds. ``overrides``: ``--set``
    items for every run (a smaller budget, say); the budget column shows each preset's as run."""
    out = Path(out)
    lines = [
        "| preset | env | budget (frames) | solved | final eval mean [95% CI] | final eval IQM [95% CI] | "
        "frames to solve (median) | wall s to solve (median) | stays solved |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    chosen = presets or bench_presets()
    refuse_runs(len(chosen) * seeds, f"--seeds {seeds} x {len(chosen)} preset(s)", "--seeds or --presets")
    load_start, revisions = os.getloadavg(), set()
    plans = [
        plan_sweep(
            preset,
            seeds=seeds,
            grid=[],
            out=out / preset,
            seed_start=seed_start,
            overrides=[f"train.evals_after_solved={BENCH_EVALS_AFTER_SOLVED}", *(overrides or [])],
        )
        for preset in chosen
    ]
    for preset, sweep in zip(chosen, run_plans(plans, workers, ray)):  # every preset's runs on one pool
        config = load_config(preset, overrides=list(overrides or []))
        row = sweep["rows"][0]
        stays = "-" if row["stays_solved"] is None else f"{row['stays_solved']:.2f}"
        lines.append(
            f"| `{preset}` | {config.subject} | {config.train.total_frames:,} | {_result_cells(row)} | {stays} |"
        )
        revisions.update(sweep["revisions"])
    load_end = os.getloadavg()
    table = "\n".join(lines) + (
        f"\n\n{seeds} seeds per preset ({_seed_range(list(range(seed_start, seed_start + seeds)))}: no preset was "
        f"tuned on seeds from 100); final eval = each run's last greedy evaluation; frames and wall time to the "
        f"first solved evaluation; stays solved = the share of the {BENCH_EVALS_AFTER_SOLVED} evaluations after "
        f"it at or above the threshold while training goes on (mean over solved seeds); wall time measured with "
        f"{workers} run{'s' if workers != 1 else ''} at a time. Command: "
        f"`rlpilot bench --seeds {seeds} --workers {workers}"
        f"{' --presets ' + ','.join(presets) if presets else ''}"
        f"{''.join(f' --set {item}' for item in overrides or [])}`; "
        f"{time.strftime('%Y-%m-%d')}, rlpilot at {', '.join(sorted(revisions)) or 'unknown revision'}, load "
        f"average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end.\n"
    )
    atomic_write(out / "bench.md", table)
    if results is not None:
        path = Path(results)
        text = path.read_text() if path.exists() else ""
        block = f"{BENCH_START}\n{table}{BENCH_END}"
        if BENCH_START in text and BENCH_END in text:
            text = text[: text.index(BENCH_START)] + block + text[text.index(BENCH_END) + len(BENCH_END) :]
        else:
            text = text.rstrip() + "\n\n## Every preset (`rlpilot bench`)\n\n" + block + "\n"
        atomic_write(path, text)
    return table
