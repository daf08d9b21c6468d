"""A study of ``rlpilot tune`` in its Optuna storage: opened, created or continued (and removed again when a start
fails before any trial finished), what a trial scores, dead trials recovered, and each finished trial logged to
MLflow. Nothing here trains: the trials run in :mod:`rlpilot.tune`."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from rlpilot.common.endpoints import check_reachable, host_port
from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, dumps
from rlpilot.common.redact import redact, redact_data, redact_url
from rlpilot.runs import try_lock
from rlpilot.tune.space import TuneSpec

HEARTBEAT_S = 10  # a running trial's heartbeat; another host fails it after GRACE_S without one
GRACE_S = 60
MAX_RETRIES = 3
SPEC_FILE = "tune.json"


def open_storage(url: str):
    """Optuna's RDB storage with heartbeats (a dead worker's trial is failed and retried); one line if the
    database cannot be reached or the URL is not one Optuna reads."""
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    quiet_optuna()

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


def quiet_optuna() -> None:
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

        quiet_optuna()
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

    quiet_optuna()
    if storage_url is None:
        out.mkdir(parents=True, exist_ok=True)
    url = study_address(out, storage_url)
    name = name or f"rlpilot-{spec.preset}"
    storage = open_storage(url)  # an unreachable database: one line, nothing written yet
    out.mkdir(parents=True, exist_ok=True)
    identity = redact_data(spec.identity())  # stored in the study: a --set value's secret never is
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


def trial_overrides(study: Study, params: dict) -> list[str]:
    """The start's overrides, then the sampled values (a sampled key replaces the start's value)."""
    merged = {item.partition("=")[0].strip(): item for item in study.spec.overrides}
    merged.update({key: f"{key}={value}" for key, value in params.items()})
    return list(merged.values())


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


def fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def value_text(trial) -> str:
    if trial.value is not None:
        return fmt(trial.value)
    values = trial.intermediate_values
    return f"(after {len(values)} seed(s): {fmt(values[max(values)])})" if values else ""


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
