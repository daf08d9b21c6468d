"""TorchRL loggers fed with the same rows as ``metrics.csv`` (chosen by ``train.loggers``)."""

from __future__ import annotations

import math
import os

from rlpilot.runs import Run

# where each logger writes, inside the run directory
EXPERIMENT_NAMES = {"tensorboard": "tb", "csv": "torchrl_csv", "wandb": "wandb", "mlflow": "mlflow"}


class RunLoggers:
    """The loggers open at the first row they are given, not before: TensorBoard's import (its TensorFlow
    stub pulls in absl) costs 0.05-0.25 s here, which the first frame need not wait for."""

    def __init__(self, run: Run, kinds: list[str]):
        self.run, self.kinds = run, kinds
        self.loggers: list | None = None

    def open(self) -> list:
        from torchrl.record.loggers import get_logger

        run, self.loggers = self.run, []
        for kind in self.kinds:
            name, experiment = str(run.path), EXPERIMENT_NAMES[kind]
            if kind == "mlflow":
                # TorchRL's get_logger makes a file store at logger_name (file://...); MLflow 3 refuses file
                # stores unless this is set. The store is RUN/mlflow, its experiment the run's name:
                # `mlflow ui --backend-store-uri RUN/mlflow` shows it (docs/tune.md).
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
                name, experiment = str(run.path / "mlflow"), run.path.name
            try:
                self.loggers.append(get_logger(kind, logger_name=name, experiment_name=experiment))
            except ImportError as exc:  # wandb / mlflow not installed: say so once, keep training
                run.event("logger_unavailable", logger=kind, reason=str(exc).splitlines()[0])
        return self.loggers

    def log(self, row: dict[str, float]) -> None:
        step = int(row["frames"])
        for logger in self.loggers if self.loggers is not None else self.open():
            for name, value in row.items():
                if name != "frames" and isinstance(value, (int, float)) and math.isfinite(value):
                    logger.log_scalar(name, float(value), step=step)

    def close(self) -> None:
        if not self.loggers:
            return
        if any(type(logger).__name__ == "MLFlowLogger" for logger in self.loggers):
            import mlflow

            mlflow.end_run()  # the run's status becomes FINISHED (it stays RUNNING otherwise)
        for logger in self.loggers:
            experiment = getattr(logger, "experiment", None)
            for method in ("flush", "close"):
                if hasattr(experiment, method):
                    getattr(experiment, method)()
