"""The one training loop: build → collect → learn → evaluate → log → checkpoint → stop.

Algorithms plug in through :mod:`rlpilot.algos`; nothing here asks which one it holds.
A run can be killed at any moment: ``checkpoints/last.pt`` is written every
``train.checkpoint_every_frames`` (atomically), and :func:`resume` continues from it.
"""

from __future__ import annotations

import math
import shutil
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from rlpilot import algos
from rlpilot.collect import BatchCollector, NonFiniteObservation
from rlpilot.config import Config
from rlpilot.envs import make_env, obs_norm_state, resolve_env
from rlpilot.errors import UserError
from rlpilot.evaluate import evaluate
from rlpilot.loggers import RunLoggers
from rlpilot.monitor import Milestones, Progress, ProgressBar
from rlpilot.plot import plot_run
from rlpilot.runs import MetricsWriter, Run, load_run

EVAL_SEED_OFFSET = 10_000
RESUME_SEED_STRIDE = 7_919  # envs restart with fresh episodes after a resume, on a different seed


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is visible to torch; use --device cpu or auto")
    return torch.device(name)


def solved_threshold(config: Config) -> float | None:
    """The preset's ``train.solved_at``, else the env's registered ``reward_threshold``."""
    if config.train.solved_at is not None or config.algo == "grpo":
        return config.train.solved_at
    _, env_id = resolve_env(config.env.id)
    return None if env_id is None else gym.spec(env_id).reward_threshold


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)


def train(
    config: Config,
    *,
    run_root: str = "runs",
    run_dir: str | None = None,
    show_progress: bool = True,
    verbose: bool = False,
) -> Run:
    """Trains ``config`` in a new run directory; the returned :class:`Run` says how it ended."""
    config.validate()
    run = Run.create(config, root=run_root, path=run_dir)
    try:
        return _run(config, run, checkpoint=None, show_progress=show_progress, verbose=verbose)
    except BaseException:
        if not (run.checkpoint_dir / "last.pt").exists():  # failed while building: leave nothing behind
            shutil.rmtree(run.path, ignore_errors=True)
        raise


def resume(
    path: str | Path, *, total_frames: int | None = None, show_progress: bool = True, verbose: bool = False
) -> Run:
    """Continues a run from ``checkpoints/last.pt``: same config, same curve (rows after the checkpoint
    are dropped from ``metrics.csv`` since those frames are collected again)."""
    run = load_run(path)
    config = run.config()
    checkpoint = run.load_checkpoint("last")
    _check_compatible(checkpoint, config, run)
    status = run.status
    budget_left = (total_frames or config.train.total_frames) > checkpoint["frames"]
    if status == "finished" and not budget_left or status == "solved" and total_frames is None:
        raise UserError(
            f"{run.path} already ended ({status} at {checkpoint['frames']:,} frames): nothing to "
            "resume; add --frames N to extend its budget"
        )
    if total_frames is not None:
        config.train.total_frames = total_frames
        config.validate()
        run.save_config(config)
    return _run(config, run, checkpoint=checkpoint, show_progress=show_progress, verbose=verbose)


def _check_compatible(checkpoint: dict, config: Config, run: Run) -> None:
    saved = checkpoint.get("config", {})
    if (
        checkpoint.get("algo") != config.algo
        or checkpoint.get("env_id") != config.env.id
        or saved.get("model") != config.to_dict()["model"]
    ):
        raise UserError(
            f"checkpoint in {run.path} was made by {checkpoint.get('algo')} on {checkpoint.get('env_id')} "
            f"(preset {saved.get('preset')}), which does not match the run's config ({config.algo} on "
            f"{config.env.id}); it cannot be resumed here"
        )


def _run(config: Config, run: Run, *, checkpoint: dict | None, show_progress: bool, verbose: bool) -> Run:
    if config.algo == "grpo":  # a language model, not an env: its own loop with the same run directory
        from rlpilot.llm.grpo import run_grpo

        return run_grpo(config, run, checkpoint=checkpoint, show_progress=show_progress, verbose=verbose)
    torch.set_num_threads(config.train.num_threads)
    device = resolve_device(config.train.device)
    threshold = solved_threshold(config)
    progress = Progress.from_state(checkpoint["progress"]) if checkpoint else Progress()
    seed = config.train.seed + RESUME_SEED_STRIDE * (progress.resumes + (1 if checkpoint else 0))
    seed_everything(seed)
    env = make_env(config.env, seed=seed, device=device, obs_norm_state=checkpoint["obs_norm"] if checkpoint else None)
    eval_env = make_env(
        config.env,
        num_envs=config.train.eval_episodes,
        seed=config.train.seed + EVAL_SEED_OFFSET,
        device=device,
        obs_norm_state=obs_norm_state(env),
    )
    algo = algos.build(config, env, device)
    if checkpoint:
        algo.load_state_dict(checkpoint["algo_state"])
        torch.set_rng_state(checkpoint["torch_rng"])
        progress.resumes += 1
        run.truncate_metrics(after_frames=progress.frames)
        run.event("resume", frames=progress.frames, resumes=progress.resumes)
    collector = BatchCollector(
        env, algo.act, steps=config.algo_config.steps_per_env, seed=seed, on_nonfinite=config.guard.on_nonfinite_obs
    )
    run.update_meta(
        status="running",
        solved_at=threshold,
        device=str(device),
        resumes=progress.resumes,
        env_facts=_env_facts(config, env),
    )
    metrics_writer = MetricsWriter(run.path / "metrics.csv")
    loggers = RunLoggers(run, config.train.loggers)
    bar = ProgressBar(config, show_progress, initial=progress.frames)
    milestones = Milestones(config, verbose=verbose, write=bar.write if show_progress or verbose else _silent)
    status, reason = "failed", None
    start = time.perf_counter() - progress.elapsed_before
    next_eval = (progress.frames // config.train.eval_every_frames + 1) * config.train.eval_every_frames
    next_log = progress.frames
    next_checkpoint = progress.frames + config.train.checkpoint_every_frames

    def save(name: str = "last") -> None:
        progress.elapsed_before = time.perf_counter() - start
        run.save_checkpoint(name, _checkpoint(config, algo, env, progress))

    unlogged_returns: list[float] = []
    unlogged_lengths: list[int] = []
    try:
        with _stop_on_signals() as stop:
            while progress.frames < config.train.total_frames and not stop.requested:
                batch = collector.collect()
                progress.frames += batch.numel()
                progress.batches += 1
                metrics = algo.learn(batch, progress.frames)
                returns, lengths = collector.episodes.drain()
                progress.episodes += len(returns)
                unlogged_returns += returns  # episodes of batches between two rows go in the next row
                unlogged_lengths += lengths
                events = collector.events + algo.guard.drain() + milestones.episodes(progress, returns)
                collector.events = []
                reward = batch.get(("next", "reward"))  # what the learner sees (after reward scaling)
                row = {
                    "frames": progress.frames,
                    **_episode_metrics(unlogged_returns, unlogged_lengths),
                    **metrics,
                    "train/reward_mean": float(reward.mean()),
                    "train/reward_std": float(reward.std()),
                }
                done, out_of_time = budget_spent(config, progress.frames, start)
                if progress.frames >= next_eval or done:
                    next_eval += config.train.eval_every_frames
                    best_before = progress.best_eval
                    row.update(_evaluate(config, eval_env, algo, run, progress, threshold, milestones))
                    if progress.best_eval > best_before:
                        save("best")
                elapsed = time.perf_counter() - start
                row.update({"time/elapsed_s": elapsed, "time/fps": progress.frames / elapsed})
                for event in events:
                    run.event(event.pop("event"), frames=progress.frames, **event)
                if algo.guard.trips >= config.guard.max_trips:
                    _roll_back(run, algo, progress, milestones)
                if progress.frames >= next_log or "eval/return_mean" in row or done:
                    next_log = progress.frames + config.train.log_every_frames
                    metrics_writer.write(row)
                    loggers.log(row)
                    unlogged_returns, unlogged_lengths = [], []
                if progress.frames >= next_checkpoint:
                    next_checkpoint += config.train.checkpoint_every_frames
                    algo.guard.trips = 0  # a checkpoint taken now is the new last good state
                    save()
                bar.update(progress, elapsed)
                milestones.status(progress, elapsed)
                if progress.consecutive_solved >= config.train.solved_consecutive and config.train.stop_when_solved:
                    break
                if out_of_time:
                    run.event("time_limit", seconds=round(elapsed, 3))
                    break
            if stop.requested:
                status, reason = "interrupted", f"signal {stop.requested}"
            else:
                status = "solved" if progress.solved_at_frames is not None else "finished"
    except NonFiniteObservation as exc:
        status, reason = "failed", f"{exc} (guard.on_nonfinite_obs=stop)"
        run.event("stopped", reason=reason)
    except KeyboardInterrupt:
        status, reason = "interrupted", "KeyboardInterrupt"
    finally:
        bar.close()
        save()
        loggers.close()
        finish_run(run, progress, status=status, reason=reason, guard_trips=algo.guard.total_trips, solved_at=threshold)
        env.close()
        eval_env.close()
    return run


def budget_spent(config: Config, frames: int, start: float) -> tuple[bool, bool]:
    """``(done, out_of_time)``: the frame budget or the wall-clock budget (``train.max_seconds``,
    counted from ``start``, a ``time.perf_counter()`` reading) is used up."""
    limit = config.train.max_seconds
    out_of_time = limit is not None and time.perf_counter() - start >= limit
    return frames >= config.train.total_frames or out_of_time, out_of_time


def finish_run(
    run: Run, progress: Progress, *, status: str, reason: str | None, guard_trips: int, solved_at: float | None
) -> None:
    """The end of every run, whatever stopped it: the final ``meta.json``, the ``end`` event, the curve."""
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
    if run.metrics():
        plot_run(run, solved_at=solved_at)


def _silent(line: str) -> None:
    """Library calls without progress output stay quiet; events.jsonl has everything."""


def _env_facts(config: Config, env) -> dict:
    """What ``doctor`` needs to know of the env: action space and time limit."""
    from torchrl.data import Categorical, OneHot

    spec = env.full_action_spec_unbatched["action"]
    if isinstance(spec, (Categorical, OneHot)):
        action = {"type": "discrete", "n": int(spec.space.n), "encoding": config.env.action_encoding}
    else:
        action = {"type": "box", "dim": int(spec.shape[-1])}
    _, env_id = resolve_env(config.env.id)
    limit = config.env.max_episode_steps or (gym.spec(env_id).max_episode_steps if env_id else None)
    return {"action": action, "max_episode_steps": limit}


def _roll_back(run: Run, algo, progress: Progress, milestones: Milestones) -> None:
    """Too many skipped updates since the last checkpoint: restore its weights, keep the cut LR."""
    path = run.checkpoint_dir / "last.pt"
    lr_scale, total_trips = algo.guard.lr_scale, algo.guard.total_trips
    if path.exists():
        algo.load_state_dict(run.load_checkpoint("last")["algo_state"])
        run.event("rollback", frames=progress.frames, to="checkpoints/last.pt", lr_scale=lr_scale)
        milestones.announce(
            f"[guard] {progress.frames:,} frames: rolled back to the last checkpoint, learning rate x{lr_scale:g}"
        )
    algo.guard.lr_scale, algo.guard.total_trips, algo.guard.trips = lr_scale, total_trips, 0


class _StopFlag:
    requested: str | None = None


@contextmanager
def _stop_on_signals():
    """SIGINT/SIGTERM finish the current batch, then the loop writes a checkpoint and returns."""
    flag = _StopFlag()

    def handler(signum, frame):
        flag.requested = signal.Signals(signum).name

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no handlers, Ctrl-C raises as usual
        pass
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _episode_metrics(returns: list[float], lengths: list[int]) -> dict[str, float]:
    if not returns:
        return {}
    return {
        "train/episode_return": float(np.mean(returns)),
        "train/episode_length": float(np.mean(lengths)),
        "train/episodes": float(len(returns)),
    }


def _evaluate(
    config: Config, eval_env, algo, run: Run, progress: Progress, threshold: float | None, milestones: Milestones
) -> dict:
    """Greedy evaluation (fresh seeds each time), recorded in progress and events; returns its metrics."""
    result = evaluate(
        eval_env,
        algo.greedy_action,
        episodes=config.train.eval_episodes,
        seed=config.train.seed + EVAL_SEED_OFFSET + 1000 * progress.evaluations,
    )
    progress.evaluations += 1
    progress.last_eval = result.mean
    progress.best_eval = max(progress.best_eval, result.mean)
    run.event("eval", frames=progress.frames, mean=result.mean, std=result.std, actions_seen=result.actions_seen)
    reached = threshold is not None and result.mean >= threshold
    progress.consecutive_solved = progress.consecutive_solved + 1 if reached else 0
    if progress.consecutive_solved >= config.train.solved_consecutive and progress.solved_at_frames is None:
        progress.solved_at_frames = progress.frames
        run.event(
            "solved",
            frames=progress.frames,
            mean=result.mean,
            threshold=threshold,
            consecutive=progress.consecutive_solved,
        )
        milestones.announce(f"[solved] {progress.frames:,} frames: greedy mean {result.mean:.1f} >= {threshold:g}")
    return result.metrics()


def _checkpoint(config: Config, algo, env, progress: Progress) -> dict:
    return {
        "format": 1,
        "algo": config.algo,
        "env_id": config.env.id,
        "config": config.to_dict(),
        "algo_state": algo.state_dict(),
        "obs_norm": obs_norm_state(env),
        "frames": progress.frames,
        "progress": progress.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }
