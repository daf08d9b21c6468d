"""THE training loop: step -> evaluate -> log -> checkpoint -> roll back -> stop, for every kind of run.

It holds a :class:`~rlpilot.loop.trainable.Trainable` and never asks which one (control or LLM):
every ``train.*`` and ``guard.*`` setting means the same for all of them. A run can be killed at any
moment: ``checkpoints/last.pt`` is written every ``train.checkpoint_every_frames`` (atomically), and
:func:`resume` continues from it, on the same curve.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from rlpilot import registry
from rlpilot.cluster import check_reachable, ray_session
from rlpilot.common import stopping
from rlpilot.common.errors import StopRun, UserError
from rlpilot.config.schema import Config, remote_collection_problem, resolve_device, solved_threshold
from rlpilot.loop import curve_helper, lifecycle
from rlpilot.loop.monitor import Milestones, Progress, ProgressBar
from rlpilot.loop.trainable import Trainable
from rlpilot.runs import MetricsWriter, Run, check_compatible, load_run


def train(
    config: Config,
    *,
    run_root: str = "runs",
    run_dir: str | None = None,
    show_progress: bool = True,
    verbose: bool = False,
    ray: str | None = None,
    origin: dict | None = None,
    builder=None,
) -> Run:
    """Trains ``config`` in a new run directory; the returned ``Run`` says how it ended. ``ray``: a Ray
    cluster address or ``local``, where ``collect.workers`` actors collect (docs/distributed.md). ``origin``: how
    the run was asked for (``rlpilot.runs.train_origin``), recorded in ``meta.json``. ``builder``: what builds
    the trainable instead of the algorithm's (``rlpilot train adapt``: DAgger steps writing a PPO run's
    checkpoints); it is called as the registry's builders are."""
    config.validate()
    _check_remote(config, ray)
    lifecycle.check_memory(config)  # envs, buffers and networks that cannot fit: refused before anything is allocated
    stopping.clear()
    # signals handled before the run directory exists: one during start-up stops it at once (nothing kept)
    with stopping.stop_on_signals(immediate=True):
        run = Run.create(config, root=run_root, path=run_dir, origin=origin)  # holds the run's lock until the end
        try:
            return _train(
                config, run, checkpoint=None, show_progress=show_progress, verbose=verbose, ray=ray, builder=builder
            )
        except BaseException:
            if not (run.checkpoint_dir / "last.pt").exists():  # failed before its first checkpoint: leave nothing
                shutil.rmtree(run.path, ignore_errors=True)
            raise
        finally:
            run.unlock()


def resume(
    path: str | Path,
    *,
    total_frames: int | None = None,
    overrides: list[str] | None = None,
    show_progress: bool = True,
    verbose: bool = False,
    ray: str | None = None,
) -> Run:
    """Continues a run from ``checkpoints/last.pt``: same config, same curve (rows after the checkpoint
    are dropped from ``metrics.csv``, since those frames are collected again). A run killed before its first
    checkpoint starts again from frame 0. ``total_frames`` and ``overrides`` may change the budget, the stop
    rule and the intervals (the settings ``lifecycle.RESUMABLE`` names); an ended run goes on when they leave it
    something to do."""
    stopping.clear()
    with stopping.stop_on_signals(immediate=True):  # a signal while loading and building stops it at once
        run = load_run(path)
        run.lock()  # a second writer is refused here, before anything is read or written
        try:
            return _resume(run, total_frames, overrides, show_progress=show_progress, verbose=verbose, ray=ray)
        finally:
            run.unlock()


def _resume(
    run: Run,
    total_frames: int | None,
    overrides: list[str] | None,
    *,
    show_progress: bool,
    verbose: bool,
    ray: str | None,
) -> Run:
    config = run.config()
    _check_remote(config, ray)
    status = run.meta().get("status")
    killed_early = status == "running" and not (run.checkpoint_dir / "last.pt").exists()
    saved = None if killed_early else run.load_checkpoint("last")
    if saved is not None:
        check_compatible(saved, config, run)
    run.check_readable()  # a damaged meta.json, metrics.csv or events.jsonl: refused, nothing is written
    changes = lifecycle.resume_changes(config, overrides or [], total_frames)
    lifecycle.check_memory(config)  # a resume may evaluate on more episodes: refused before anything is built
    if saved is not None and status in ("finished", "solved"):
        _continue_ended(run, config, saved, status, changes)
    if changes:
        run.save_config(config)
        run.event("resume_changes", frames=saved["frames"] if saved else 0, changes=changes)
    if saved is None:
        _forget_killed_attempt(run, config)
    return _train(config, run, checkpoint=saved, show_progress=show_progress, verbose=verbose, ray=ray)


def _continue_ended(run: Run, config: Config, saved: dict, status: str, changes: dict) -> None:
    """A finished or solved run resumes only when the changes leave it something to do: a larger budget
    (a solved run then trains on to it: its stop rule is turned off, and said so), or a new solve rule
    (``train.solved_at`` / ``train.solved_consecutive``: the solve is judged again from the next evaluation).
    Otherwise a :class:`UserError` with the options."""
    frames = saved["frames"]
    budget_left = config.train.total_frames > frames
    rejudged = any(key in changes for key in lifecycle.SOLVE_RULE)
    if status == "solved" and rejudged:
        saved["progress"].update(solved_at_frames=None, consecutive_solved=0, evals_after_solved=[])
    elif status == "solved" and budget_left and config.train.stop_when_solved:
        if "train.stop_when_solved" in changes or "train.total_frames" not in changes:
            budget_left = False  # solved, and told to stop when solved: it would end after one batch again
        else:
            config.train.stop_when_solved = False
            changes["train.stop_when_solved"] = [True, False]
            print(
                f"{run.path} was solved at {saved['progress'].get('solved_at_frames') or frames:,} frames: "
                f"training on to {config.train.total_frames:,} frames (train.stop_when_solved=false)"
            )
    if not budget_left:
        raise UserError(
            f"{run.path} already ended ({status} at {frames:,} frames): nothing to resume; add --frames N (more "
            f"than {frames:,}) to extend its budget"
            + (", or --set train.solved_at=X to judge the solve again" if status == "solved" else "")
        )


def _forget_killed_attempt(run: Run, config: Config) -> None:
    """A run killed before its first checkpoint (SIGKILL, a power cut: SIGINT and SIGTERM write one) has
    nothing to continue from, so ``--resume`` starts it again from frame 0 in its directory, with its config
    and seed: what the killed attempt logged (rows, evaluations, ``best.pt``) is dropped, a ``restart``
    event says so, and the run is the one it would have been (the same seed; not counted as a resume)."""
    killed_at = max((row["frames"] for row in run.metrics()), default=0)
    run.truncate_metrics(after_frames=0)
    run.truncate_events(after_frames=0)
    (run.checkpoint_dir / "best.pt").unlink(missing_ok=True)
    every = config.train.checkpoint_every_frames
    run.event(
        "restart",
        reason=f"killed before its first checkpoint (train.checkpoint_every_frames={every:,}); restarted at frame 0",
        logged_frames=killed_at,
    )
    print(
        f"{run.path} was killed before its first checkpoint (its last row at {killed_at:,.0f} frames, "
        f"train.checkpoint_every_frames={every:,}): starting it again from frame 0"
    )


def _check_remote(config: Config, ray: str | None) -> None:
    """Collection on Ray that cannot work is one line before anything is written (an address that does not
    answer included)."""
    if problem := remote_collection_problem(config, ray):
        raise UserError(problem)
    if ray is not None and ray != "local":
        check_reachable(ray)


def _train(
    config: Config,
    run: Run,
    *,
    checkpoint: dict | None,
    show_progress: bool,
    verbose: bool,
    ray: str | None = None,
    builder=None,
) -> Run:
    """Builds the trainable (fresh, or from the checkpoint) and runs the loop (inside a Ray session with ``ray``)."""
    entered = time.monotonic()
    curve = curve_helper.for_this_run()  # a helper importing matplotlib on the idle core, unless this process has it
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(denormals_flushed(config.train.flush_denormal))
            stack.enter_context(torch_threads(config.train.num_threads))
            if ray is not None:
                stack.enter_context(ray_session(ray, config.collect.workers))
            return _build_and_run(
                config,
                run,
                checkpoint,
                curve,
                show_progress=show_progress,
                verbose=verbose,
                remote=ray is not None,
                builder=builder,
                entered=entered,
            )
    finally:
        curve.close()


def flushing_denormals() -> bool:
    """Whether this thread's float arithmetic flushes subnormal numbers to zero now (x86 FTZ/DAZ)."""
    return bool((torch.tensor([1e-30]) * 1e-10).item() == 0.0)


@contextlib.contextmanager
def denormals_flushed(enabled: bool):
    """``train.flush_denormal``: subnormal floats read and written as zero for the run (``torch.set_flush_denormal``),
    the previous mode restored after it (tests and notebooks share the process)."""
    before = flushing_denormals()
    torch.set_flush_denormal(enabled)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


@contextlib.contextmanager
def torch_threads(count: int):
    """``train.num_threads`` for the run, the process's previous count restored after it (a notebook training a
    two-thread preset, then something else, is left as it was)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _build_and_run(
    config: Config,
    run: Run,
    checkpoint: dict | None,
    curve: curve_helper.CurveHelper,
    *,
    show_progress: bool,
    verbose: bool,
    remote: bool = False,
    builder=None,
    entered: float,
) -> Run:
    device = resolve_device(config.train.device)
    threshold = solved_threshold(config)
    progress = Progress.from_state(checkpoint["progress"]) if checkpoint else Progress()
    with _start_recorded(run, resuming=checkpoint is not None):
        resumes = lifecycle.count_resume(run, progress.frames) if checkpoint else 0
        seed = config.train.seed + lifecycle.RESUME_SEED_STRIDE * resumes
        show = show_progress or verbose
        trainable = _build(config, run, checkpoint, device, seed, remote=remote, show=show, builder=builder)
    # from here a signal no longer raises: it is recorded, and the loop (which it may reach before its first
    # batch) ends the run as interrupted, with a checkpoint, instead of leaving it marked "running"
    with stopping.stop_on_signals(), contextlib.closing(trainable):
        with _start_recorded(run, resuming=checkpoint is not None):
            if checkpoint:
                torch.set_rng_state(checkpoint["torch_rng"])
                run.truncate_metrics(after_frames=progress.frames)
                run.truncate_events(after_frames=progress.frames)
            loop = Loop(
                config, run, trainable, progress, threshold, curve=curve, show_progress=show_progress, verbose=verbose
            )
            # startup_s: the wait before the first frame (interpreter, imports, config, envs, networks; the
            # loggers open at the first row they log)
            startup = lifecycle.startup_seconds(entered)
            run.update_meta(
                status="running",
                solved_at=threshold,
                device=str(device),
                resumes=resumes,
                startup_s=startup,
                **trainable.facts(),
            )
        loop.run()
    return run


@contextlib.contextmanager
def _start_recorded(run: Run, *, resuming: bool):
    """A resume's start-up: whatever ends it before its loop is recorded in meta.json (:func:`_start_ended`)."""
    try:
        yield
    except BaseException as exc:
        if resuming:
            _start_ended(run, exc)
        raise


def _start_ended(run: Run, exc: BaseException) -> None:
    """A resume that ended before its loop (``count_resume`` marked it ``running``): ``interrupted`` for a
    signal (it stopped cleanly and stays resumable), ``failed`` with the reason otherwise (a write that failed,
    an env that cannot be built), so the run does not stay marked ``running`` after the process has exited.
    Written only if meta.json can still be written."""
    try:
        if run.meta().get("status") != "running":
            return
        if isinstance(exc, stopping.Interrupted):
            run.update_meta(status="interrupted", reason=f"signal {exc.signal} during start-up")
        elif isinstance(exc, KeyboardInterrupt):
            run.update_meta(status="interrupted", reason="KeyboardInterrupt during start-up")
        else:
            reason = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            run.update_meta(status="failed", reason=f"the resume could not start: {reason}"[:500])
    except Exception:  # noqa: BLE001 - meta.json cannot be written either: the exception in flight says why
        pass


def _build(
    config: Config, run: Run, checkpoint: dict | None, device, seed: int, *, remote: bool, show: bool, builder=None
) -> Trainable:
    """The trainable, fresh or from the checkpoint's state; a signal while it builds stops it at once."""
    lifecycle.seed_everything(seed)
    build = builder or registry.trainable_builder(config.algo)
    with lifecycle.notice_if_slow(f"building {config.subject} ... (Ctrl-C stops it)", show=show):
        state = checkpoint["state"] if checkpoint else None
        extra = {"remote": True} if remote else {}  # only control runs collect on Ray (_check_remote)
        trainable = build(config, device=device, seed=seed, state=state, event=run.event, **extra)
    if stopping.requested():  # a signal the env's constructor caught (and carried on after): stop now
        trainable.close()
        raise stopping.Interrupted(stopping.requested())
    return trainable


class Loop:
    """One run's loop and the state it keeps between steps (cadences, unlogged episodes)."""

    def __init__(
        self,
        config: Config,
        run: Run,
        trainable: Trainable,
        progress: Progress,
        threshold: float | None,
        *,
        curve: curve_helper.CurveHelper | None = None,
        show_progress: bool,
        verbose: bool,
    ):
        self.config = config
        self.curve = curve
        self.run_dir = run  # the run directory being written (``self.run`` is the loop itself)
        self.trainable = trainable
        self.progress = progress
        self.threshold = threshold
        self.bar = ProgressBar(config, show_progress, initial=progress.frames)
        self.milestones = Milestones(
            config, verbose=verbose, write=self.bar.write if show_progress or verbose else None
        )
        self.metrics_writer = MetricsWriter(run.path / "metrics.csv")
        from rlpilot.loop.loggers import RunLoggers

        self.loggers = RunLoggers(run, config.train.loggers)
        self.start = time.perf_counter() - progress.elapsed_before
        every = config.train.eval_every_frames
        self.next_eval = (progress.frames // every + 1) * every
        self.next_log = progress.frames
        self.next_checkpoint = progress.frames + config.train.checkpoint_every_frames
        self.unlogged_returns: list[float] = []
        self.unlogged_lengths: list[int] = []

    def run(self) -> None:
        train, progress, guard = self.config.train, self.progress, self.trainable.guard
        status, reason = "failed", None
        try:
            with stopping.stop_on_signals() as stop:
                if train.eval_at_start and progress.frames == 0:
                    self.log({"frames": 0, **self.evaluate()})
                while progress.frames < train.total_frames and not stop.requested:
                    step = self.trainable.step()
                    progress.frames += step.frames
                    progress.batches += 1
                    progress.episodes += len(step.returns)
                    self.unlogged_returns += step.returns  # episodes of steps between two rows go in the next row
                    self.unlogged_lengths += step.lengths
                    events = step.events + guard.drain() + self.milestones.episodes(progress, step.returns)
                    row = {"frames": progress.frames, **self.episode_metrics(), **step.metrics}
                    done, out_of_time = lifecycle.budget_spent(self.config, progress.frames, self.start)
                    if progress.frames >= self.next_eval or done:
                        self.next_eval += train.eval_every_frames
                        row.update(self.evaluate())
                    for event in events:
                        self.run_dir.event(event.pop("event"), frames=progress.frames, **event)
                    if guard.trips >= self.config.guard.max_trips:
                        self.roll_back()
                    if progress.frames >= self.next_log or "eval/return_mean" in row or done:
                        self.log(row)
                    if progress.frames >= self.next_checkpoint:
                        self.next_checkpoint += train.checkpoint_every_frames
                        guard.trips = 0  # a checkpoint taken now is the new last good state
                        self.save()
                    elapsed = time.perf_counter() - self.start
                    self.bar.update(progress, elapsed)
                    self.milestones.status(progress, elapsed)
                    if self.solved_and_seen_enough():
                        break
                    if out_of_time:
                        self.run_dir.event("time_limit", seconds=round(elapsed, 3))
                        break
                if stop.requested:
                    status, reason = "interrupted", f"signal {stop.requested}"
                else:
                    status = "solved" if progress.solved_at_frames is not None else "finished"
        except StopRun as exc:
            status, reason = "failed", str(exc)
            self.run_dir.event("stopped", frames=self.progress.frames, reason=reason, **exc.fields)
        except KeyboardInterrupt:
            status, reason = "interrupted", "KeyboardInterrupt"
        except Exception as exc:  # recorded, then raised: the run says what stopped it
            reason = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.finish(status, reason)

    # -- the pieces of a step ------------------------------------------------------------------
    def solved_and_seen_enough(self) -> bool:
        """The stop rule: solved, and ``train.evals_after_solved`` evaluations since (0: at once)."""
        train = self.config.train
        solved = self.progress.solved_at_frames is not None
        return train.stop_when_solved and solved and len(self.progress.evals_after_solved) >= train.evals_after_solved

    def episode_metrics(self) -> dict[str, float]:
        if not self.unlogged_returns:
            return {}
        return {
            "train/episode_return": float(np.mean(self.unlogged_returns)),
            "train/episode_length": float(np.mean(self.unlogged_lengths)),
            "train/episodes": float(len(self.unlogged_returns)),
        }

    def evaluate(self) -> dict[str, float]:
        """Greedy evaluation: progress, the ``eval`` event, the best checkpoint, the solved rule."""
        progress = self.progress
        result = self.trainable.evaluate(progress.evaluations)
        progress.evaluations += 1
        progress.last_eval = result.mean
        improved = result.mean > progress.best_eval
        progress.best_eval = max(progress.best_eval, result.mean)
        self.run_dir.event("eval", frames=progress.frames, mean=result.mean, std=result.std, **result.details)
        if progress.solved_at_frames is not None:  # an evaluation after the solved one: does it hold?
            progress.evals_after_solved.append(result.mean)
        reached = self.threshold is not None and result.mean >= self.threshold and progress.frames > 0
        progress.consecutive_solved = progress.consecutive_solved + 1 if reached else 0
        if progress.consecutive_solved >= self.config.train.solved_consecutive and progress.solved_at_frames is None:
            progress.solved_at_frames = progress.frames
            self.run_dir.event(
                "solved",
                frames=progress.frames,
                mean=result.mean,
                threshold=self.threshold,
                consecutive=progress.consecutive_solved,
            )
            self.milestones.announce(
                f"[solved] {progress.frames:,} frames: greedy mean {result.mean:.1f} >= {self.threshold:g}"
            )
        if improved and progress.frames > 0:
            self.save("best")
        return result.metrics

    def log(self, row: dict) -> None:
        elapsed = time.perf_counter() - self.start
        row.update({"time/elapsed_s": elapsed, "time/fps": self.progress.frames / max(elapsed, 1e-9)})
        self.next_log = self.progress.frames + self.config.train.log_every_frames
        self.metrics_writer.write(row)
        self.loggers.log(row)
        self.unlogged_returns, self.unlogged_lengths = [], []

    def save(self, name: str = "last") -> None:
        self.progress.elapsed_before = time.perf_counter() - self.start
        state = lifecycle.checkpoint(self.config, self.trainable, self.progress, replay=name == "last")
        self.run_dir.save_checkpoint(name, state)

    def roll_back(self) -> None:
        """Too many skipped updates since the last checkpoint: restore its state, keep the cut LR."""
        guard, progress = self.trainable.guard, self.progress
        lr_scale, total_trips = guard.lr_scale, guard.total_trips
        if (self.run_dir.checkpoint_dir / "last.pt").exists():
            self.trainable.load_state_dict(self.run_dir.load_checkpoint("last")["state"])
            self.run_dir.event("rollback", frames=progress.frames, to="checkpoints/last.pt", lr_scale=lr_scale)
            self.milestones.announce(
                f"[guard] {progress.frames:,} frames: rolled back to the last checkpoint, learning rate x{lr_scale:g}"
            )
        guard.lr_scale, guard.total_trips, guard.trips = lr_scale, total_trips, 0

    def finish(self, status: str, reason: str | None) -> None:
        """The final checkpoint and the run's record. A checkpoint that cannot be written (disk full)
        still leaves meta.json saying so, and the last good checkpoint in place (writes are atomic)."""
        self.bar.close()
        failed_write = None
        try:
            if self.progress.frames > 0 or (self.run_dir.checkpoint_dir / "last.pt").exists():
                self.save()  # nothing collected and nothing saved before: no 0-frame checkpoint is left
        except OSError as exc:
            failed_write = f"the final checkpoint could not be written ({exc.strerror or exc}); the last one is kept"
            status, reason = "failed", failed_write
        try:
            self.loggers.close()
        except OSError as exc:  # the last rows could not be written (a full disk, a file-size limit): said, not lost
            failed_write = failed_write or f"the last metrics could not be written ({exc.strerror or exc})"
            if status != "failed":
                status, reason = "failed", failed_write
        after = self.progress.evals_after_solved
        if self.config.train.evals_after_solved and after and self.threshold is not None:
            share = sum(mean >= self.threshold for mean in after) / len(after)
            self.run_dir.update_meta(stays_solved=share, evals_after_solved=after)
        lifecycle.finish_run(
            self.run_dir,
            self.progress,
            status=status,
            reason=reason,
            guard_trips=self.trainable.guard.total_trips,
        )
        if self.run_dir.metrics():  # drawn by the helper process started with the run, when there is one
            (self.curve or curve_helper.CurveHelper(None)).draw(self.run_dir, solved_at=self.threshold)
        if failed_write:
            raise UserError(f"{self.run_dir.path}: {failed_write}")


def _silent(line: str) -> None:
    """Status and milestone lines of a quiet run go nowhere (events.jsonl records milestones)."""
