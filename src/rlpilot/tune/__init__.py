"""``rlpilot tune``: hyperparameter search on Optuna that a skeptic can check.

A *trial* is one configuration (the preset, the study's ``--set`` overrides, the sampled parameters)
trained on K seeds through the normal training path: one ordinary run directory per seed, under
``STUDY/trials/<key>/s<seed>``, so ``doctor``, ``plot`` and ``eval`` work on each of them.

- **Objective**: frames to solved (unsolved seeds score the whole budget), wall seconds to solved, or the
  final greedy return; aggregated over the trial's seeds by IQM (default), median or mean.
- **Seeds**: trials train on the tuning seeds (``--seed-start``, default 0 .. K-1); the closing check trains
  the best configuration and the starting one on the same other seeds (``--check-seed-start``, default 1000)
  and reports the difference best - start seed by seed, its mean with a 95% paired bootstrap interval, and a
  verdict: tuning helped (or hurt) when that interval excludes 0.
- **Pruning**: after each seed, the trial reports its aggregate so far (step = seeds done); Optuna's
  ``PercentilePruner`` stops the trial when that is worse than three quarters of the trials that reached
  the same step on the same seeds (from the 5th trial on).
- **Storage**: an Optuna RDB storage, SQLite inside the study folder by default (PostgreSQL for several
  machines). Rerunning the same command continues the study. A trial whose process died is failed and
  queued again with the same parameters (its run directories resume from their checkpoints): at once on
  this host (the trial's lock file is free), after the heartbeat's grace period from another host.
- **Workers**: ``--workers W`` processes (or W Ray tasks) share the study through the storage; Optuna's
  storage hands every trial to exactly one of them.

The package: ``space`` (the search space), ``study`` (the study in its storage), ``report`` (tables, figure,
``best.yaml``), ``controller`` (``--controller``); here, the trials, the workers and the closing check, which train
(the one module of the verb that starts runs).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np

from rlpilot.common import stopping
from rlpilot.common.bounds import refuse_runs
from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact, redact_url
from rlpilot.config.load import load_config
from rlpilot.config.schema import solved_threshold
from rlpilot.runs import load_run, try_lock
from rlpilot.stats import bootstrap
from rlpilot.sweep import run_in_processes, run_member
from rlpilot.tune.controller import controller_space, tune_controller
from rlpilot.tune.report import OBJECTIVE_NAMES, interval, paired_check, summarize, trial_rows
from rlpilot.tune.space import AGGREGATES, OBJECTIVES, Param, TuneSpec, parse_param, parse_space
from rlpilot.tune.study import (
    MlflowTrials,
    Study,
    TrialInterrupted,
    check_mlflow,
    create_study,
    finished_count,
    nothing_left_on_error,
    recover,
    run_score,
    study_address,
    trial_overrides,
    value_text,
)

__all__ = [
    "AGGREGATES",
    "OBJECTIVES",
    "Param",
    "TuneSpec",
    "controller_space",
    "interval",
    "parse_param",
    "parse_space",
    "run_score",
    "tune",
    "tune_controller",
]

CHECK_SEED_START = 1000


def run_trial(study: Study, trial) -> float:
    """Optuna's objective: K seeds of one configuration, pruned between seeds."""
    import optuna

    key = trial.user_attrs.get("run_key") or f"t{trial.number:04d}"
    directory = study.trial_dir(key)
    directory.mkdir(parents=True, exist_ok=True)
    lock = try_lock(directory / "trial.lock")  # held while the trial runs: a dead holder is seen at once
    if lock is None:
        raise UserError(f"{directory} is held by another rlpilot tune process")
    # where the trial runs, set once its lock is held: recover() trusts a free lock only for its own folder
    trial.set_user_attr("run_key", key)
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("out", str(study.out.resolve()))
    trial.set_user_attr("pid", os.getpid())
    trial.set_user_attr("interrupted", False)  # a retry inherits its original's attributes
    params = {p.key: p.suggest(trial) for p in study.spec.space}
    overrides = trial_overrides(study, params)
    try:
        load_config(study.spec.preset, overrides=overrides)  # a combination the config refuses: the trial fails
        scores: list[float] = []
        aggregate = AGGREGATES[study.spec.aggregate]
        for step, seed in enumerate(study.spec.seeds):
            run = run_member(study.spec.preset, overrides, seed, directory / f"s{seed}")
            if run.status == "interrupted":
                raise TrialInterrupted(f"trial {trial.number} interrupted at seed {seed}")
            scores.append(run_score(run, study.spec.objective))
            trial.set_user_attr("scores", scores)
            trial.report(aggregate(np.array(scores)), step)
            if step < len(study.spec.seeds) - 1 and trial.should_prune():
                raise optuna.TrialPruned(f"after {step + 1} seed(s): {aggregate(np.array(scores)):.4g}")
        return aggregate(np.array(scores))
    finally:
        lock.close()


def worker(study: Study, trials: int, mlflow_uri: str | None = None) -> int:
    """One process's share of the study: trials until ``trials`` are complete or pruned (all workers together)."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    optuna_study = study.load()
    optuna_study.pruner = study.pruner()
    recover(study, optuna_study)
    if finished_count(optuna_study) >= trials:
        return 0
    callbacks = [MaxTrialsCallback(trials, states=(TrialState.COMPLETE, TrialState.PRUNED))]
    if mlflow_uri:
        callbacks.append(MlflowTrials(study, mlflow_uri))

    def objective(trial):
        try:
            return run_trial(study, trial)
        except TrialInterrupted:
            trial.set_user_attr("interrupted", True)
            raise KeyboardInterrupt from None
        except UserError as exc:
            trial.set_user_attr("error", redact(str(exc)))  # stored in the study, printed
            raise

    invalid = 0

    def count_invalid(optuna_study, trial) -> None:
        nonlocal invalid
        if trial.state == TrialState.FAIL and trial.user_attrs.get("error"):
            invalid += 1
            print(f"  trial {trial.number}: not run: {trial.user_attrs['error']}", flush=True)
            if invalid >= max(5, trials):
                optuna_study.stop()
        else:
            print(f"  trial {trial.number}: {trial.state.name.lower()} {value_text(trial)}", flush=True)

    optuna_study.optimize(
        objective, n_trials=None, callbacks=[*callbacks, count_invalid], catch=(UserError,), gc_after_trial=True
    )
    if invalid >= max(5, trials):
        raise UserError(f"{invalid} sampled configurations were refused by the config; narrow the space")
    return 0


def run_workers(study: Study, trials: int, *, workers: int, ray: str | None, mlflow_uri: str | None) -> None:
    if ray is not None:
        from rlpilot.cluster import ray_session

        with ray_session(ray, workers) as ray_module:
            remote = ray_module.remote(num_cpus=1)(worker)
            ray_module.get([remote.remote(study, trials, mlflow_uri) for _ in range(workers)])
        return
    if workers == 1:
        worker(study, trials, mlflow_uri)
        return
    run_in_processes([(worker, (study, trials, mlflow_uri))] * workers, workers)


def check(study: Study, params: dict, seeds: list[int], *, workers: int) -> dict:
    """The best configuration and the starting one trained on the same ``seeds`` (none of them a tuning seed),
    compared seed by seed (:func:`rlpilot.tune.report.paired_check`): each arm's scores and aggregate, and the
    paired difference best - start with its interval and verdict."""
    arms = {"start": list(study.spec.overrides), "best": trial_overrides(study, params)}
    jobs = [(arm, seed) for seed in seeds for arm in arms]

    def path(arm: str, seed: int) -> Path:
        return study.out / "check" / arm / f"s{seed}"

    if workers == 1:
        for arm, seed in jobs:
            if run_member(study.spec.preset, arms[arm], seed, path(arm, seed)).status == "interrupted":
                raise stopping.Interrupted(stopping.requested() or "SIGTERM")  # the next run would clear the request
    else:
        run_in_processes([(run_member, (study.spec.preset, arms[a], s, path(a, s))) for a, s in jobs], workers)
    runs = {arm: [load_run(path(arm, s)) for s in seeds] for arm in arms}
    scores = {arm: [run_score(run, study.spec.objective) for run in runs[arm]] for arm in arms}
    aggregate = study.spec.aggregate
    result = {"seeds": seeds, "arms": {}}
    for arm, values in scores.items():
        result["arms"][arm] = {
            "overrides": arms[arm],
            "scores": values,
            "value": AGGREGATES[aggregate](np.array(values)),
            "interval": interval(values, aggregate),
            "solved": sum(r.solved_at_frames is not None for r in runs[arm]),
        }
    result["difference"] = paired_check(
        scores["best"],
        scores["start"],
        maximize=study.spec.direction == "maximize",
        what=f"best - start, {OBJECTIVE_NAMES[study.spec.objective]} per seed",
    )
    if study.spec.objective != "return":  # start / best per seed: > 1 means the best configuration is faster
        ratios = np.array(scores["start"]) / np.maximum(np.array(scores["best"]), 1e-9)
        result["ratio_median"] = float(np.median(ratios))
        result["ratio_interval"] = bootstrap(ratios, np.median)
    return result


def tune(
    spec: TuneSpec,
    *,
    trials: int,
    out: str | Path,
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
    ray: str | None = None,
    check_seeds: int = 5,
    check_seed_start: int = CHECK_SEED_START,
    mlflow_uri: str | None = None,
) -> dict:
    """The whole verb: create or continue the study, run the trials, check the best on fresh seeds, report."""
    if mlflow_uri:
        check_mlflow(mlflow_uri)
    refuse_runs(
        trials * spec.seeds_per_trial + 2 * check_seeds,
        f"--trials {trials} x --seeds-per-trial {spec.seeds_per_trial} (and the check's 2 x {check_seeds})",
        "--trials or --seeds-per-trial",
    )
    if check_seeds and set(range(check_seed_start, check_seed_start + check_seeds)) & set(spec.seeds):
        raise UserError(
            f"--check-seed-start {check_seed_start}: the check seeds overlap the tuning seeds "
            f"{spec.seeds[0]}-{spec.seeds[-1]}"
        )
    if spec.objective == "frames" or spec.objective == "time":
        if solved_threshold(load_config(spec.preset, overrides=spec.overrides)) is None:
            raise UserError(f"{spec.preset} has no solved threshold: use --objective return (or set train.solved_at)")
    out, name = Path(out), study_name or f"rlpilot-{spec.preset}"
    with nothing_left_on_error(out, study_address(out, storage), name):
        study = create_study(spec, out, storage, name)
        optuna_study = study.load()
        already = finished_count(optuna_study)
        print(
            f"study {study.name}: {already} of {trials} trials done; storage {redact_url(study.storage_url)}",
            flush=True,
        )
        run_workers(study, trials, workers=workers, ray=ray, mlflow_uri=mlflow_uri)
    check_result = None
    rows = [r for r in trial_rows(study, optuna_study) if r["state"] == "complete"]  # read from the storage now
    if check_seeds and rows:
        seeds = list(range(check_seed_start, check_seed_start + check_seeds))
        print(f"check: best trial {rows[0]['number']} and the start on seeds {seeds[0]}-{seeds[-1]}", flush=True)
        check_result = check(study, rows[0]["params"], seeds, workers=workers if ray is None else 1)
    return summarize(study, optuna_study, check_result=check_result)
