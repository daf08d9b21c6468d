"""TorchRL loggers fed with the same rows as ``metrics.csv`` (chosen by ``train.loggers``)."""

from __future__ import annotations

import math

from rlpilot.runs import Run

# where each logger writes, inside the run directory
EXPERIMENT_NAMES = {"tensorboard": "tb", "csv": "torchrl_csv", "wandb": "wandb", "mlflow": "mlflow"}


class RunLoggers:
    def __init__(self, run: Run, kinds: list[str]):
        from torchrl.record.loggers import get_logger

        self.loggers = []
        for kind in kinds:
            try:
                self.loggers.append(get_logger(kind, logger_name=str(run.path), experiment_name=EXPERIMENT_NAMES[kind]))
            except ImportError as exc:  # wandb / mlflow not installed: say so once, keep training
                run.event("logger_unavailable", logger=kind, reason=str(exc).splitlines()[0])

    def log(self, row: dict[str, float]) -> None:
        step = int(row["frames"])
        for logger in self.loggers:
            for name, value in row.items():
                if name != "frames" and isinstance(value, (int, float)) and math.isfinite(value):
                    logger.log_scalar(name, float(value), step=step)

    def close(self) -> None:
        for logger in self.loggers:
            experiment = getattr(logger, "experiment", None)
            for method in ("flush", "close"):
                if hasattr(experiment, method):
                    getattr(experiment, method)()
