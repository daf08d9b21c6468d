"""Everything around the loop, used once per run: threads and seeding, the memory check, resume bookkeeping,
signals, budgets, the checkpoint, and the end of a run (meta.json, the ``end`` event).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager

import numpy as np
import torch

from rlpilot import registry
from rlpilot.common.bounds import refuse_beyond
from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact_data
from rlpilot.config.load import apply_overrides
from rlpilot.config.schema import Config, resolve_device
from rlpilot.loop.monitor import Progress
from rlpilot.runs import CHECKPOINT_FORMAT, Run

RESUME_SEED_STRIDE = 7_919  # envs restart with fresh episodes after a resume, on a different seed


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def check_memory(config: Config) -> None:
    """What the run would allocate (its trainable's ``allocations``: envs, batches, buffers, networks, estimated
    from the config and the env's specs) must fit in the memory available now (``train.device``'s too);
    otherwise one line (:func:`rlpilot.common.bounds.refuse_beyond`), before anything is allocated."""
    device = str(resolve_device(config.train.device))
    refuse_beyond(registry.trainable_builder(config.algo).allocations(config), device=device)


def process_age() -> float | None:
    """Seconds since this process started (Linux: ``/proc``; None elsewhere), so start-up counts the
    interpreter and every import, not only what runs after rlpilot's first line."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime, clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 2)


_STARTED_A_RUN = False


def startup_seconds(entered: float) -> float | None:
    """The wait before a run's first frame: for this process's first run, its whole age (interpreter and imports
    included: :func:`process_age`); for a later one (the Python API, a notebook, a sweep in one process), the time
    since its ``train`` began (``entered``: ``time.monotonic()`` then), not the earlier runs' time too."""
    global _STARTED_A_RUN
    first, _STARTED_A_RUN = not _STARTED_A_RUN, True
    return process_age() if first else round(time.monotonic() - entered, 2)


def count_resume(run: Run, frames: int) -> int:
    """Records a resume where it happens (meta.json and an event, before anything is built), so a resume
    killed before its first checkpoint is still counted; returns the number of resumes so far."""
    resumes = int(run.meta().get("resumes") or 0) + 1
    run.update_meta(status="running", resumes=resumes)
    run.event("resume", frames=frames, resumes=resumes)
    return resumes


def checkpoint(config: Config, trainable, progress: Progress, *, replay: bool = True) -> dict:
    """The one checkpoint format (tensors and plain data only). ``replay=False`` leaves a replay buffer out
    (``best.pt``: played and exported, never resumed; a MuJoCo run's replay is hundreds of MB)."""
    state = trainable.state_dict()
    algo = state.get("algo")
    if not replay and isinstance(algo, dict) and algo.get("buffer") is not None:  # the control algorithms' replay
        state = {**state, "algo": {**algo, "buffer": None}}
    return {
        "format": CHECKPOINT_FORMAT,
        "algo": config.algo,
        "subject": config.subject,
        "config": redact_data(config.to_dict()),  # as config.yaml holds it: no secret, and resume compares the two
        "state": state,
        "frames": progress.frames,
        "progress": progress.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }


# what a resume may change (``train --resume RUN --frames N --set KEY=VALUE``): the budget, the stop rule, and
# how often the run logs, evaluates and checkpoints. Anything else would continue a checkpoint with settings
# it was not trained with.
RESUMABLE = (
    "train.total_frames",
    "train.max_seconds",
    "train.stop_when_solved",
    "train.solved_at",
    "train.solved_consecutive",
    "train.evals_after_solved",
    "train.milestone_return",
    "train.log_every_frames",
    "train.milestone_every_frames",
    "train.eval_every_frames",
    "train.eval_episodes",
    "train.checkpoint_every_frames",
    "train.loggers",
    "ppo.anchor_coef",  # refining a run with RL, anchored to the actor it has when the resume's PPO starts
)
SOLVE_RULE = ("train.solved_at", "train.solved_consecutive")


def _flat(config: Config) -> dict:
    return {
        f"{section}.{key}": value
        for section, fields in config.to_dict().items()
        if isinstance(fields, dict)
        for key, value in fields.items()
    }


def resume_changes(config: Config, overrides: list[str], total_frames: int | None) -> dict[str, list]:
    """Applies a resume's ``--set`` overrides (and ``--frames``) to the run's ``config``; returns what changed,
    ``{key: [before, after]}``. A change outside :data:`RESUMABLE` is a :class:`UserError` saying why."""
    if total_frames is not None:
        overrides = [*overrides, f"train.total_frames={total_frames}"]
    before = _flat(config)
    apply_overrides(config, overrides)
    config.validate()
    after = _flat(config)
    changes = {key: [before.get(key), value] for key, value in after.items() if before.get(key) != value}
    refused = [key for key in changes if key not in RESUMABLE]
    if refused:
        key = refused[0]
        raise UserError(
            f"--set {key}: the checkpoint was trained with {key}={before.get(key)!r}, and a resume continues that "
            "run; it may change only the budget, the stop rule and the intervals ("
            + ", ".join(RESUMABLE)
            + "); start a new run for other settings"
        )
    return changes


@contextmanager
def notice_if_slow(line: str, *, after_s: float = 2.0, show: bool = True):
    """Prints ``line`` (to stderr) once if the block is still running after ``after_s`` seconds: a slow env
    start-up shows what it is waiting for instead of nothing."""
    import sys
    import threading

    timer = threading.Timer(after_s, lambda: print(line, file=sys.stderr, flush=True)) if show else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def budget_spent(config: Config, frames: int, start: float) -> tuple[bool, bool]:
    """``(done, out_of_time)``: the frame budget or the wall-clock budget (``train.max_seconds``,
    counted from ``start``, a ``time.perf_counter()`` reading) is used up."""
    limit = config.train.max_seconds
    out_of_time = limit is not None and time.perf_counter() - start >= limit
    return frames >= config.train.total_frames or out_of_time, out_of_time


def finish_run(
    run: Run,
    progress: Progress,
    *,
    status: str,
    reason: str | None,
    guard_trips: int,
) -> None:
    """The end of every run, whatever stopped it: the final ``meta.json`` and the ``end`` event (the trainer
    then draws the curve)."""
    run.update_meta(
        status=status,
        reason=reason,
        end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        frames=progress.frames,
        elapsed_s=round(progress.elapsed_before, 3),
        last_eval=progress.last_eval,
        best_eval=None if progress.best_eval == -math.inf else progress.best_eval,
        solved_at_frames=progress.solved_at_frames,
        guard_trips=guard_trips,
    )
    run.event("end", status=status, frames=progress.frames)
