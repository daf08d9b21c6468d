"""``rlpilot tune``: hyperparameter search on Optuna that a skeptic can check.

A *trial* is one configuration (the preset, the study's ``--set`` overrides, the sampled parameters)
trained on K seeds through the normal training path: one ordinary run directory per seed, under
``STUDY/trials/<key>/s<seed>``, so ``doctor``, ``plot`` and ``eval`` work on each of them.

- **Objective**: frames to solved (unsolved seeds score the whole budget), wall seconds to solved, or the
  final greedy return; aggregated over the trial's seeds by IQM (default), median or mean.
- **Seeds**: trials train on the tuning seeds (``--seed-start``, default 0 .. K-1); the closing check runs
  the best configuration and the starting one on other seeds (``--check-seed-start``, default 1000), paired
  per seed, and reports each with a 95% bootstrap interval.
- **Pruning**: after each seed, the trial reports its aggregate so far (step = seeds done); Optuna's
  ``PercentilePruner`` stops the trial when that is worse than three quarters of the trials that reached
  the same step on the same seeds (from the 5th trial on).
- **Storage**: an Optuna RDB storage, SQLite inside the study folder by default (PostgreSQL for several
  machines). Rerunning the same command continues the study. A trial whose process died is failed and
  queued again with the same parameters (its run directories resume from their checkpoints): at once on
  this host (the trial's lock file is free), after the heartbeat's grace period from another host.
- **Workers**: ``--workers W`` processes (or W Ray tasks) share the study through the storage; Optuna's
  storage hands every trial to exactly one of them.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlpilot import stopping
from rlpilot.bounds import refuse_runs
from rlpilot.config import safe_yaml
from rlpilot.config.load import field_type, load_config
from rlpilot.config.schema import solved_threshold
from rlpilot.endpoints import check_reachable, host_port
from rlpilot.errors import UserError
from rlpilot.files import dumps
from rlpilot.redact import redact, redact_url
from rlpilot.runs import atomic_write, load_run, try_lock
from rlpilot.sweep import BOOTSTRAP_SAMPLES, bootstrap, iqm, run_in_processes, run_member

OBJECTIVES = ("frames", "time", "return")
AGGREGATES = {"iqm": iqm, "median": lambda v: float(np.median(v)), "mean": lambda v: float(np.mean(v))}
HEARTBEAT_S = 10  # a running trial's heartbeat; another host fails it after GRACE_S without one
GRACE_S = 60
MAX_RETRIES = 3
CHECK_SEED_START = 1000
SPEC_FILE = "tune.json"


@dataclass
class Param:
    """One search dimension: a numeric range (``low``/``high``, ``log``) or a list of ``choices``."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: list | None = None

    def suggest(self, trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.key, self.choices)
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)

    def describe(self) -> str:
        if self.choices is not None:
            return f"{self.key} in {{{', '.join(map(str, self.choices))}}}"
        return (
            f"{self.key} in [{self.low:g}, {self.high:g}]{' log' if self.log else ''}{' int' if self.integer else ''}"
        )


@dataclass
class TuneSpec:
    """What defines a study; stored in ``STUDY/tune.json`` and in the study's user attributes, so a rerun
    with other settings is refused instead of mixing two searches in one study."""

    preset: str
    space: list[Param]
    overrides: list[str] = field(default_factory=list)
    seeds_per_trial: int = 3
    seed_start: int = 0
    objective: str = "frames"
    aggregate: str = "iqm"
    pruner: str = "percentile"

    @property
    def direction(self) -> str:
        return "maximize" if self.objective == "return" else "minimize"

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.seeds_per_trial))

    def identity(self) -> dict:
        data = asdict(self)
        data["space"] = [asdict(p) for p in self.space]
        return data


# -- the search space ----------------------------------------------------------------------------
MAX_INTEGER_BOUND = 2**53  # an integer range's bounds stay exact as floats (Optuna's distributions hold floats)


def _number(text: str, key: str, integer: bool) -> float | int:
    """A range's bound: a finite number (an integer setting's: a whole one, at most 2^53 from 0)."""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--param {key}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"--param {key}: a range's bounds are finite numbers (got {text.strip()})")
    if integer:
        if not value.is_integer() or abs(value) > MAX_INTEGER_BOUND:
            raise UserError(f"--param {key}: {key} is an integer setting; give integer bounds (got {text.strip()})")
        return int(value)
    return value


def parse_range(key: str, value: str, *, integer: bool = False) -> Param:
    """``low:high`` or ``low:high:log`` as a :class:`Param` every sampler can draw from: finite bounds, low below
    high, a width that is a finite number too (uniform draws over -1e308:1e308 overflow), low > 0 for a log range."""
    parts = str(value).split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise UserError(f"--param {key}={value}: a range is low:high or low:high:log; choices are a,b,c")
    low, high = (_number(part, key, integer) for part in parts[:2])
    log = len(parts) == 3
    if not low < high:
        raise UserError(f"--param {key}: low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise UserError(f"--param {key}: a log range needs low > 0 (got {low})")
    if not math.isfinite(float(high) - float(low)):
        raise UserError(f"--param {key}: the range {low:g}:{high:g} is wider than a float holds; narrow it")
    return Param(key=key, low=low, high=high, log=log, integer=integer)


def _number_kind(preset: str, key: str) -> type | None:
    """int or float for a numeric setting, else None (an unknown key: one line with close matches)."""
    tp = field_type(load_config(preset), key)
    return tp if tp in (int, float) else None


def parse_param(preset: str, item: str, overrides: list[str] | tuple = ()) -> Param:
    """``key=low:high[:log]`` (a range) or ``key=a,b,c`` (choices)."""
    key, sep, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise UserError(f"--param expects key=low:high[:log] or key=a,b,c, got '{item}'")
    return param_from(preset, key, value, overrides)


def param_from(preset: str, key: str, value: Any, overrides: list[str] | tuple = ()) -> Param:
    """One dimension of the space; each of its bounds or choices must be a value the setting takes, with the
    start's ``overrides`` (else every trial would be refused)."""
    if isinstance(value, list):
        choices = value
    elif isinstance(value, dict):
        unknown = set(value) - {"low", "high", "log"}
        if unknown or not {"low", "high"} <= set(value):
            raise UserError(f"space {key}: a range is {{low: .., high: .., log: true|false}}, got {value}")
        value = f"{value['low']}:{value['high']}" + (":log" if value.get("log") else "")
        choices = None
    elif "," in str(value):
        choices = [c.strip() for c in str(value).split(",") if c.strip()]
    else:
        choices = None
    if choices is not None:
        if len(choices) < 2:
            raise UserError(f"--param {key}: give at least two choices (a,b), got {value!r}")
        choices = [c if isinstance(c, (bool, int, float, str)) else yaml.safe_dump(c).strip() for c in choices]
        for choice in choices:  # an unknown key, or a choice the setting does not take: one line
            load_config(preset, overrides=[*overrides, f"{key}={choice}"])
        return Param(key=key, choices=choices)
    if len(str(value).split(":")) not in (2, 3):
        raise UserError(f"--param {key}={value}: a range is low:high or low:high:log; choices are a,b,c")
    kind = _number_kind(preset, key)
    if kind is None:
        raise UserError(f"--param {key}: {key} is not a number; give choices instead ({key}=a,b)")
    param = parse_range(key, value, integer=kind is int)
    for bound in (param.low, param.high):  # outside what the setting accepts (e.g. a negative learning rate)
        load_config(preset, overrides=[*overrides, f"{key}={bound}"])
    return param


def parse_space(
    preset: str, params: list[str], space_file: str | None, overrides: list[str] | tuple = ()
) -> list[Param]:
    space: list[Param] = []
    if space_file:
        try:
            data = safe_yaml.load(Path(space_file).read_text(), source=f"--space {space_file}")
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"--space {space_file}: cannot read it ({str(exc).splitlines()[0]})") from None
        if not isinstance(data, dict) or not data:
            raise UserError(f"--space {space_file}: expected a mapping key: low:high | [a, b] | {{low, high, log}}")
        space += [param_from(preset, str(key), value, overrides) for key, value in data.items()]
    space += [parse_param(preset, item, overrides) for item in params]
    if not space:
        raise UserError("rlpilot tune needs a search space: --param key=low:high[:log] (repeatable) or --space FILE")
    return once_each(space)


def once_each(space: list[Param]) -> list[Param]:
    """``space``, refused in one line where it names a key twice (the later range would silently win)."""
    keys = [p.key for p in space]
    if len(set(keys)) != len(keys):
        raise UserError(
            f"the search space names a key twice: {', '.join(sorted({k for k in keys if keys.count(k) > 1}))}"
        )
    return space


# -- storage and study ------------------------------------------------------------------------------
def open_storage(url: str):
    """Optuna's RDB storage with heartbeats (a dead worker's trial is failed and retried); one line if the
    database cannot be reached or the URL is not one Optuna reads."""
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    _quiet_optuna()

    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    if url.startswith("postgresql"):
        engine_kwargs = {"connect_args": {"connect_timeout": 10}, "pool_pre_ping": True}
    for attempt in range(3):
        try:
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES),
            )
        except ImportError as exc:
            hint = "(PostgreSQL: pip install 'psycopg[binary]')"
            raise UserError(f"--storage {redact_url(url)}: {exc} {hint}") from None
        except Exception as exc:  # noqa: BLE001 (sqlalchemy's many error types)
            # two workers starting on a fresh database race to create its tables: the loser tries again
            if attempt == 2:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UserError(f"--storage {redact_url(url)} cannot be opened: {redact(first)[:300]}") from None
            time.sleep(1.0 + attempt)


def _quiet_optuna() -> None:
    import optuna

    # ERROR: a failed trial's warning prints its traceback; rlpilot says what became of each trial in one line
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@dataclass
class Study:
    spec: TuneSpec
    out: Path
    storage_url: str
    name: str

    def load(self):
        import optuna

        _quiet_optuna()
        return optuna.load_study(study_name=self.name, storage=open_storage(self.storage_url))  # TPE by default

    def pruner(self):
        import optuna

        if self.spec.pruner == "none":
            return optuna.pruners.NopPruner()
        # stops a trial whose aggregate after the same seeds is worse than 3/4 of the others'
        return optuna.pruners.PercentilePruner(75.0, n_startup_trials=4, n_warmup_steps=0, n_min_trials=3)

    def trial_dir(self, key: str) -> Path:
        return self.out / "trials" / key


def study_address(out: Path, storage_url: str | None) -> str:
    """The storage URL of a study in ``out``: ``storage_url``, else ``OUT/study.db`` (SQLite)."""
    return storage_url or f"sqlite:///{(out / 'study.db').resolve()}"


@contextlib.contextmanager
def nothing_left_on_error(out: Path, url: str, name: str):
    """A study this block creates (in its storage, and its files in ``out``) is removed again when the block fails
    (a :class:`UserError`: a space the config refuses everywhere, a controller that cannot be built) before any of
    its trials finished: nothing half-written is left, so the next command with the same ``--out`` starts afresh
    instead of being refused as another search. A study that existed before is left as it is."""
    import optuna

    before = set(out.iterdir()) if out.is_dir() else None
    existed = _has_study(url, name)
    try:
        yield
    except UserError:
        if not existed and _has_study(url, name):
            storage = open_storage(url)
            if finished_count(optuna.load_study(study_name=name, storage=storage)) > 0:
                raise
            optuna.delete_study(study_name=name, storage=storage)
        if not existed:
            for entry in [out] if before is None else sorted(set(out.iterdir()) - before):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)
        raise


def _has_study(url: str, name: str) -> bool:
    """Whether the storage at ``url`` holds study ``name`` (a SQLite file that does not exist is not created)."""
    import optuna

    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return False
    return name in optuna.get_all_study_names(open_storage(url))


def create_study(spec: TuneSpec, out: Path, storage_url: str | None, name: str | None) -> Study:
    """Creates the study, or checks that the existing one was started with the same settings."""
    import optuna

    _quiet_optuna()
    if storage_url is None:
        out.mkdir(parents=True, exist_ok=True)
    url = study_address(out, storage_url)
    name = name or f"rlpilot-{spec.preset}"
    storage = open_storage(url)  # an unreachable database: one line, nothing written yet
    out.mkdir(parents=True, exist_ok=True)
    identity = spec.identity()
    study = optuna.create_study(study_name=name, storage=storage, direction=spec.direction, load_if_exists=True)
    stored = study.user_attrs.get("rlpilot")
    if stored is None:
        study.set_user_attr("rlpilot", identity)
    elif stored != identity:
        differ = [key for key in identity if stored.get(key) != identity[key]]
        raise UserError(
            f"study '{name}' in {redact_url(url)} was started with other settings ({', '.join(differ)}); "
            f"run the same command to continue it, or choose another --out/--study for a new search"
        )
    spec_path = out / SPEC_FILE
    atomic_write(spec_path, dumps({"study": name, "storage": redact_url(url), **identity}, indent=2) + "\n")
    return Study(spec=spec, out=out, storage_url=url, name=name)


# -- trials ---------------------------------------------------------------------------------------------
class TrialInterrupted(Exception):
    """A run of the trial was stopped by SIGINT/SIGTERM: the trial is failed and queued again on the next start."""


def run_score(run, objective: str) -> float:
    """One seed's score: frames or wall seconds to solved (unsolved: the whole budget, the run's full wall
    time), or the final greedy return."""
    if objective == "return":
        if run.last_eval is None:
            raise UserError(f"{run.path} ended without a greedy evaluation: set train.eval_every_frames")
        return float(run.last_eval)
    if objective == "frames":
        return float(run.solved_at_frames if run.solved_at_frames is not None else run.config().train.total_frames)
    return float(run.elapsed_s)


def _overrides(study: Study, params: dict) -> list[str]:
    """The start's overrides, then the sampled values (a sampled key replaces the start's value)."""
    merged = {item.partition("=")[0].strip(): item for item in study.spec.overrides}
    merged.update({key: f"{key}={value}" for key, value in params.items()})
    return list(merged.values())


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
    overrides = _overrides(study, params)
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


def recover(study: Study, optuna_study) -> list[int]:
    """Trials left RUNNING by a process of this host that is gone (its trial lock is free), and trials stopped
    by a signal, are failed and queued again with their parameters and run key (their runs resume)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.trial import TrialState

    host, here = socket.gethostname(), str(study.out.resolve())
    requeued = []
    guard = try_lock(study.out / ".recover.lock")
    while guard is None:  # another process of this host is recovering: wait for it
        time.sleep(0.2)
        guard = try_lock(study.out / ".recover.lock")
    try:
        done = set(optuna_study.user_attrs.get("requeued", []))
        for trial in optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.FAIL)):
            key = trial.user_attrs.get("run_key")
            if key is None or trial.number in done:
                continue
            if trial.state == TrialState.RUNNING:
                if trial.user_attrs.get("host") != host or trial.user_attrs.get("out") != here:
                    continue  # another host's or another study folder's: the heartbeat's grace period decides
                if not (study.trial_dir(key) / "trial.lock").exists():
                    continue
                handle = try_lock(study.trial_dir(key) / "trial.lock")
                if handle is None:
                    continue  # alive
                handle.close()
                optuna_study.tell(trial.number, state=TrialState.FAIL)
            elif not trial.user_attrs.get("interrupted"):
                continue
            RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES)(optuna_study, trial)  # same params and run key
            done.add(trial.number)
            requeued.append(trial.number)
        if requeued:
            optuna_study.set_user_attr("requeued", sorted(done))
    finally:
        guard.close()
    return requeued


def finished_count(optuna_study) -> int:
    from optuna.trial import TrialState

    return len(optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


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
            trial.set_user_attr("error", str(exc))
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
            print(f"  trial {trial.number}: {trial.state.name.lower()} {_value_text(trial)}", flush=True)

    optuna_study.optimize(
        objective, n_trials=None, callbacks=[*callbacks, count_invalid], catch=(UserError,), gc_after_trial=True
    )
    if invalid >= max(5, trials):
        raise UserError(f"{invalid} sampled configurations were refused by the config; narrow the space")
    return 0


def _value_text(trial) -> str:
    if trial.value is not None:
        return _fmt(trial.value)
    values = trial.intermediate_values
    return f"(after {len(values)} seed(s): {_fmt(values[max(values)])})" if values else ""


MLFLOW_HTTP = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}
"""MLflow's HTTP client, unless the environment says otherwise: a server that goes away during a study is one
line within a minute, not MLflow's default 120 s a request and 7 retries with backoff."""


def check_mlflow(uri: str) -> None:
    """``--mlflow URI`` before the study starts: the client installed, and a server URI (http, https, a database)
    answering a TCP connection within seconds; otherwise one line."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise UserError("--mlflow needs the MLflow client: pip install 'rlpilot[mlflow]'") from None
    target = host_port("--mlflow", uri)
    if target is not None:
        hint = "start the MLflow server (mlflow server), fix the address, or use a local store: sqlite:///mlflow.db"
        check_reachable("--mlflow", *target, shown=redact_url(uri), hint=hint)


class MlflowTrials:
    """Optuna callback: each finished trial becomes an MLflow run (parameters, objective, per-seed scores)."""

    def __init__(self, study: Study, uri: str):
        self.study, self.uri = study, uri
        for name, value in MLFLOW_HTTP.items():
            os.environ.setdefault(name, value)

    def __call__(self, optuna_study, trial) -> None:
        try:
            self.log(trial)
        except Exception as exc:  # noqa: BLE001 (MLflow's and requests' many error types)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(
                f"--mlflow {redact_url(self.uri)}: trial {trial.number} could not be logged ({redact(first)[:200]}); "
                "the trial is kept in the study: run the same command again once the server answers"
            ) from None

    def log(self, trial) -> None:
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        mlflow.set_experiment(self.study.name)
        with mlflow.start_run(run_name=f"trial-{trial.number}"):
            mlflow.log_params({**trial.params, "seeds": len(self.study.spec.seeds)})
            mlflow.set_tags(
                {
                    "state": trial.state.name,
                    "run_key": trial.user_attrs.get("run_key", ""),
                    "preset": self.study.spec.preset,
                }
            )
            if trial.value is not None:
                mlflow.log_metric(f"objective_{self.study.spec.objective}", trial.value)
            for step, score in enumerate(trial.user_attrs.get("scores", [])):
                mlflow.log_metric("seed_score", score, step=step)


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


# -- results --------------------------------------------------------------------------------------------------
def _interval(values: list[float], aggregate: str) -> tuple[float, float]:
    """95% bootstrap interval of the aggregate over seeds (NaN for fewer than two)."""
    return bootstrap(np.array(values, dtype=float), AGGREGATES[aggregate])


def trial_rows(study: Study, optuna_study) -> list[dict]:
    from optuna.trial import TrialState

    rows = []
    for trial in optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        scores = trial.user_attrs.get("scores", [])
        rows.append(
            {
                "number": trial.number,
                "state": trial.state.name.lower(),
                "params": trial.params,
                "value": trial.value,
                "scores": scores,
                "interval": _interval(scores, study.spec.aggregate),
                "run_key": trial.user_attrs.get("run_key"),
            }
        )
    sign = -1 if study.spec.direction == "maximize" else 1
    rows.sort(key=lambda r: (r["state"] != "complete", sign * (r["value"] if r["value"] is not None else 0)))
    return rows


def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _params_text(params: dict) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def study_table(study: Study, rows: list[dict], *, top: int = 10) -> str:
    spec = study.spec
    what = {"frames": "frames to solved", "time": "wall s to solved", "return": "final greedy return"}[spec.objective]
    lines = [
        f"| trial | state | parameters | {spec.aggregate} {what} [95% CI] | per seed |",
        "|---|---|---|---|---|",
    ]
    for row in rows[:top]:
        low, high = row["interval"]
        value = _fmt(row["value"]) if row["value"] is not None else "pruned"
        cell = f"{value} [{_fmt(low)}, {_fmt(high)}]"
        lines.append(
            f"| {row['number']} | {row['state']} | {_params_text(row['params'])} | {cell} | "
            f"{', '.join(_fmt(s) for s in row['scores'])} |"
        )
    lines.append("")
    lines.append(
        f"Seeds {spec.seeds[0]}-{spec.seeds[-1]} per trial; unsolved seeds score the whole budget; intervals: "
        f"percentile bootstrap over seeds ({BOOTSTRAP_SAMPLES} resamples)."
    )
    return "\n".join(lines) + "\n"


def importances(optuna_study) -> dict[str, float]:
    """Optuna's parameter importances (PED-ANOVA); empty when there are too few complete trials to fit them."""
    import warnings

    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "quantiles select the same set of trials": equal importances, shown
            return dict(optuna.importance.get_param_importances(optuna_study))
    except (RuntimeError, ValueError, ZeroDivisionError):
        return {}


def plot_study(study: Study, optuna_study, importance: dict[str, float], path: Path) -> None:
    """Optimisation history (each trial's objective, best so far, pruned trials at their last report) and
    parameter importances, side by side. Uses matplotlib's Figure (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from optuna.trial import TrialState

    figure = Figure(figsize=(11, 4))
    FigureCanvasAgg(figure)
    history, bars = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    trials = optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    history.scatter([t.number for t in complete], [t.value for t in complete], label="complete", color="C0")
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
    history.scatter(
        [t.number for t in pruned],
        [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
        marker="x",
        color="C3",
        label="pruned (last report)",
    )
    best, best_line = None, []
    better = max if study.spec.direction == "maximize" else min
    for t in sorted(complete, key=lambda t: t.number):
        best = t.value if best is None else better(best, t.value)
        best_line.append((t.number, best))
    if best_line:
        history.step(*zip(*best_line), where="post", color="C2", label="best so far")
    history.set_xlabel("trial")
    history.set_ylabel(f"{study.spec.aggregate} of {study.spec.objective} over {study.spec.seeds_per_trial} seeds")
    history.set_title(f"rlpilot tune {study.spec.preset}: optimisation history")
    history.legend()
    history.grid(alpha=0.3)
    if importance:
        names = list(importance)[::-1]
        bars.barh(names, [importance[n] for n in names], color="C1")
        bars.set_title("parameter importance (PED-ANOVA)")
    else:
        bars.text(0.5, 0.5, "too few complete trials\nfor importances", ha="center", va="center")
        bars.set_axis_off()
    figure.tight_layout()
    figure.savefig(path.with_suffix(".tmp.png"), dpi=100)
    os.replace(path.with_suffix(".tmp.png"), path)


def write_best(study: Study, params: dict) -> tuple[Path, str]:
    """The best configuration as a config file (``rlpilot train --config``) and as a ``--set`` command line."""
    overrides = _overrides(study, params)
    config = load_config(study.spec.preset, overrides=overrides)
    path = study.out / "best.yaml"
    header = f"# rlpilot tune {study.spec.preset}: best trial's configuration (study {study.name})\n"
    atomic_write(path, header + config.to_yaml())
    command = f"rlpilot train {study.spec.preset} " + " ".join(f"--set {o}" for o in overrides)
    return path, command.strip()


# -- the closing check on fresh seeds ----------------------------------------------------------------------------
def check(study: Study, params: dict, seeds: list[int], *, workers: int) -> dict:
    """The best configuration and the starting one on ``seeds`` (none of them a tuning seed), paired per seed."""
    arms = {"start": list(study.spec.overrides), "best": _overrides(study, params)}
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
            "interval": _interval(values, aggregate),
            "solved": sum(r.solved_at_frames is not None for r in runs[arm]),
        }
    if study.spec.objective != "return":  # start / best per seed: > 1 means the best configuration is faster
        ratios = np.array(scores["start"]) / np.maximum(np.array(scores["best"]), 1e-9)
        result["ratio_median"] = float(np.median(ratios))
        result["ratio_interval"] = bootstrap(ratios, np.median)
    return result


def check_table(study: Study, result: dict) -> str:
    spec = study.spec
    seeds = result["seeds"]
    lines = [
        f"| configuration | solved | {spec.aggregate} of {spec.objective} [95% CI] | per seed |",
        "|---|---|---|---|",
    ]
    for arm, data in result["arms"].items():
        low, high = data["interval"]
        lines.append(
            f"| {arm} ({' '.join(data['overrides']) or 'preset'}) | {data['solved']}/{len(seeds)} | "
            f"{_fmt(data['value'])} [{_fmt(low)}, {_fmt(high)}] | {', '.join(_fmt(s) for s in data['scores'])} |"
        )
    lines.append("")
    if "ratio_median" in result:
        low, high = result["ratio_interval"]
        lines.append(
            "Paired ratio start/best per seed (> 1: the best configuration needs less; a lower bound where the "
            "start did not solve, since it is scored at the budget): median "
            f"{result['ratio_median']:.2f}x [{low:.2f}, {high:.2f}] (95% bootstrap)."
        )
    lines.append(f"Check seeds {seeds[0]}-{seeds[-1]}: none of them a tuning seed ({spec.seeds[0]}-{spec.seeds[-1]}).")
    return "\n".join(lines) + "\n"


def summarize(study: Study, optuna_study, *, check_result: dict | None = None) -> dict:
    rows = trial_rows(study, optuna_study)
    complete = [r for r in rows if r["state"] == "complete"]
    importance = importances(optuna_study) if len(complete) >= 2 else {}
    text = f"# rlpilot tune {study.spec.preset}\n\nSearch space: " + "; ".join(p.describe() for p in study.spec.space)
    text += f". Start: {' '.join(study.spec.overrides) or 'the preset'}.\n\n## Trials (best first)\n\n"
    text += study_table(study, rows)
    if importance:
        text += "\n## Parameter importance (Optuna's default evaluator, PED-ANOVA)\n\n" + "\n".join(
            f"- {name}: {value:.2f}" for name, value in importance.items()
        )
        text += "\n"
    if check_result is not None:
        text += "\n## Check on fresh seeds\n\n" + check_table(study, check_result)
    result = {"rows": rows, "importance": importance, "check": check_result, "text": text}
    if complete:
        best_path, command = write_best(study, complete[0]["params"])
        result.update(best_path=str(best_path), command=command, best=complete[0])
        text += f"\nBest configuration: `{best_path}`\n\n    {command}\n"
        result["text"] = text
    atomic_write(study.out / "summary.md", text)
    atomic_write(
        study.out / "summary.json",
        dumps({k: v for k, v in result.items() if k != "text"}, indent=2) + "\n",
    )
    plot_study(study, optuna_study, importance, study.out / "history.png")
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


# -- classical tuning of a controller's gains (rlpilot tune ENV --controller package.module:Class) ----------
def corners(space: list[Param]) -> list[dict]:
    """Arguments at the edges of ``space``: every range at its low, then at its high, each choice once."""
    low = {p.key: p.low if p.choices is None else p.choices[0] for p in space}
    high = {p.key: p.high if p.choices is None else p.choices[-1] for p in space}
    return [low, high, *({**low, p.key: choice} for p in space for choice in (p.choices or [])[1:-1])]


def controller_space(params: list[str]) -> list[Param]:
    """``--param kp=0.1:100:log`` (a range of a constructor argument) or ``--param mode=a,b`` (choices)."""
    space = []
    for item in params:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value:
            raise UserError(f"--param expects key=low:high[:log] or key=a,b,c, got '{item}'")
        if "," in value:
            space.append(Param(key=key, choices=[c.strip() for c in value.split(",") if c.strip()]))
            continue
        space.append(parse_range(key, value))
    if not space:
        raise UserError("rlpilot tune --controller needs a search space: --param kp=low:high[:log] (repeatable)")
    return once_each(space)


def tune_controller(
    env_cfg,
    controller: str,
    space: list[Param],
    *,
    fixed: dict,
    trials: int,
    episodes: int,
    seed_start: int,
    check_episodes: int,
    check_seed_start: int,
    out: str | Path,
    storage: str | None = None,
) -> dict:
    """The controller's constructor arguments searched with Optuna (TPE) on ``env_cfg``: each trial is the mean
    return of ``episodes`` episodes from ``seed_start`` (the tuning episodes); the best is then played, with the
    commissioned arguments (``fixed``), on ``check_episodes`` fresh ones from ``check_seed_start`` (intervals:
    bootstrap over episodes). Writes ``OUT/best.yaml`` (``env.base_controller`` and its kwargs: what train and
    eval build it from) and ``OUT/tune.json``; the same command again continues the study."""
    import optuna

    from rlpilot.control.evaluate import evaluate
    from rlpilot.play.episodes import PlayablePolicy

    tuning = set(range(seed_start, seed_start + episodes))
    if check_episodes and tuning & set(range(check_seed_start, check_seed_start + check_episodes)):
        raise UserError(f"--check-seed-start {check_seed_start}: the check episodes overlap the tuning episodes")
    plain = replace(env_cfg, base_controller="none", normalize_obs=False)

    def returns(kwargs: dict, count: int, seed: int) -> np.ndarray:
        policy = PlayablePolicy(plain, None, None, None, controller, {**fixed, **kwargs})
        env = policy.make_env(num_envs=min(count, 32), seed=seed)
        try:
            return evaluate(env, policy.policy_for(env), episodes=count, seed=seed).returns
        finally:
            env.close()

    for kwargs in corners(space):  # an argument the controller does not take, or refuses: one line, no study yet
        policy = PlayablePolicy(plain, None, None, None, controller, {**fixed, **kwargs})
        env = policy.make_env(num_envs=1, seed=seed_start)
        try:
            policy.policy_for(env)
        finally:
            env.close()
    out, name = Path(out), f"rlpilot-controller-{controller}"
    identity = {"env": asdict(plain), "controller": controller, "fixed": fixed, "episodes": episodes,
                "seed_start": seed_start, "space": [asdict(p) for p in space]}  # fmt: skip
    _quiet_optuna()
    with nothing_left_on_error(out, study_address(out, storage), name):
        out.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=name,
            storage=open_storage(study_address(out, storage)),
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=seed_start),
            load_if_exists=True,
        )
        if study.user_attrs.get("identity", identity) != identity:
            raise UserError(f"{out}: a study of other settings is stored there; use another --out")
        study.set_user_attr("identity", identity)
        remaining = trials - len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE])
        if remaining > 0:

            def objective(trial) -> float:
                return float(returns({p.key: p.suggest(trial) for p in space}, episodes, seed_start).mean())

            study.optimize(objective, n_trials=remaining)
    best = dict(study.best_params)
    result = {"controller": controller, "env": plain.id, "trials": len(study.trials), "best": {**fixed, **best},
              "tuning": {"episodes": episodes, "seed_start": seed_start, "mean_return": study.best_value}}  # fmt: skip
    lines = [f"best of {len(study.trials)} trials on episodes {seed_start}-{seed_start + episodes - 1}: "
             f"{_params_text(best)}  mean return {study.best_value:.4g}"]  # fmt: skip
    if check_episodes:
        for name, kwargs in (("tuned", best), ("commissioned", {})):
            values = returns(kwargs, check_episodes, check_seed_start)
            low, high = bootstrap(values, np.mean)
            result[f"check_{name}"] = {"mean_return": float(values.mean()), "interval": [low, high]}
            lines.append(f"check ({check_episodes} fresh episodes from {check_seed_start}): {name:<12} mean return "
                         f"{values.mean():.4g} [{low:.4g}, {high:.4g}]")  # fmt: skip
    best_yaml = yaml.safe_dump({"env": {"base_controller": controller, "base_controller_kwargs": result["best"]}})
    atomic_write(out / "best.yaml", f"# rlpilot tune --controller {controller} on {plain.id}\n{best_yaml}")
    atomic_write(out / "tune.json", dumps(result, indent=2) + "\n")
    lines.append(
        f"best: {out / 'best.yaml'} (train with it: --set env.base_controller_kwargs=...; eval: --controller-kwargs)"
    )
    result["text"] = "\n".join(lines)
    return result
