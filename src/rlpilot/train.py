"""The one training loop: build → collect → learn → evaluate → log → checkpoint → stop.

Algorithms plug in through :mod:`rlpilot.algos`; nothing here asks which one it holds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from rlpilot import algos
from rlpilot.collect import BatchCollector
from rlpilot.config import Config
from rlpilot.envs import make_env, obs_norm_state, resolve_env
from rlpilot.errors import UserError
from rlpilot.evaluate import evaluate
from rlpilot.plot import plot_run
from rlpilot.runs import MetricsWriter, Run

EVAL_SEED_OFFSET = 10_000


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is visible to torch; use --device cpu or auto")
    return torch.device(name)


def solved_threshold(config: Config) -> float | None:
    """The preset's ``train.solved_at``, else the env's registered ``reward_threshold``."""
    if config.train.solved_at is not None:
        return config.train.solved_at
    _, env_id = resolve_env(config.env.id)
    return None if env_id is None else gym.spec(env_id).reward_threshold


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)


@dataclass
class Progress:
    """Counters of a run: what the log, the stop rule and checkpoints read."""

    frames: int = 0
    batches: int = 0
    episodes: int = 0
    evaluations: int = 0
    best_eval: float = -math.inf
    last_eval: float | None = None
    solved_at_frames: int | None = None


def train(
    config: Config,
    *,
    run_root: str = "runs",
    run_dir: str | None = None,
    show_progress: bool = True,
) -> Run:
    """Trains ``config`` in a new run directory; the returned :class:`Run` says how it ended."""
    config.validate()
    torch.set_num_threads(config.train.num_threads)
    device = resolve_device(config.train.device)
    seed = config.train.seed
    seed_everything(seed)
    threshold = solved_threshold(config)
    env = make_env(config.env, seed=seed, device=device)
    eval_env = make_env(
        config.env,
        num_envs=config.train.eval_episodes,
        seed=seed + EVAL_SEED_OFFSET,
        device=device,
        obs_norm_state=obs_norm_state(env),
    )
    algo = algos.build(config, env, device)
    collector = BatchCollector(env, algo.act, steps=config.algo_config.steps_per_env, seed=seed)
    run = Run.create(config, root=run_root, path=run_dir)
    run.update_meta(solved_at=threshold, device=str(device))
    metrics_writer = MetricsWriter(run.path / "metrics.csv")
    bar = ProgressBar(config, show_progress)
    progress = Progress()
    status = "failed"
    start = time.perf_counter()
    next_eval, next_log = config.train.eval_every_frames, 0
    try:
        for _ in range(config.num_batches):
            batch = collector.collect()
            progress.frames += batch.numel()
            progress.batches += 1
            metrics = algo.learn(batch, progress.frames)
            returns, lengths = collector.episodes.drain()
            progress.episodes += len(returns)
            row = {"frames": progress.frames, **_episode_metrics(returns, lengths), **metrics}
            last_batch = progress.batches == config.num_batches
            if progress.frames >= next_eval or last_batch:
                next_eval += config.train.eval_every_frames
                row.update(_evaluate(config, eval_env, algo, run, progress, threshold))
            elapsed = time.perf_counter() - start
            row.update({"time/elapsed_s": elapsed, "time/fps": progress.frames / elapsed})
            if progress.frames >= next_log or "eval/return_mean" in row or last_batch:
                next_log = progress.frames + config.train.log_every_frames
                metrics_writer.write(row)
            bar.update(progress, elapsed)
            if progress.solved_at_frames is not None and config.train.stop_when_solved:
                break
        status = "solved" if progress.solved_at_frames is not None else "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        elapsed = time.perf_counter() - start
        bar.close()
        run.save_checkpoint("last", _checkpoint(config, algo, env, progress))
        run.update_meta(
            status=status,
            end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            frames=progress.frames,
            elapsed_s=round(elapsed, 3),
            last_eval=progress.last_eval,
            best_eval=None if progress.best_eval == -math.inf else progress.best_eval,
            solved_at_frames=progress.solved_at_frames,
        )
        run.event("end", status=status, frames=progress.frames)
        if run.metrics():
            plot_run(run, solved_at=threshold)
        env.close()
        eval_env.close()
    return run


def _episode_metrics(returns: list[float], lengths: list[int]) -> dict[str, float]:
    if not returns:
        return {}
    return {
        "train/episode_return": float(np.mean(returns)),
        "train/episode_length": float(np.mean(lengths)),
        "train/episodes": float(len(returns)),
    }


def _evaluate(config: Config, eval_env, algo, run: Run, progress: Progress, threshold: float | None) -> dict:
    """Greedy evaluation (fresh seeds each time), recorded in progress and events; returns its metrics."""
    result = evaluate(
        eval_env,
        algo.greedy_action,
        episodes=config.train.eval_episodes,
        seed=config.train.seed + EVAL_SEED_OFFSET + 1000 * progress.evaluations,
    )
    progress.evaluations += 1
    progress.last_eval = result.mean
    if result.mean > progress.best_eval:
        progress.best_eval = result.mean
    run.event("eval", frames=progress.frames, mean=result.mean, std=result.std, actions_seen=result.actions_seen)
    if threshold is not None and result.mean >= threshold and progress.solved_at_frames is None:
        progress.solved_at_frames = progress.frames
        run.event("solved", frames=progress.frames, mean=result.mean, threshold=threshold)
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
        "torch_rng": torch.get_rng_state(),
    }


class ProgressBar:
    """tqdm bar with frames, fps and the latest evaluation (silent when disabled)."""

    def __init__(self, config: Config, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=config.train.total_frames, unit="frames", unit_scale=True, dynamic_ncols=True, leave=True
            )

    def update(self, progress: Progress, elapsed: float) -> None:
        if self.bar is None:
            return
        self.bar.n = progress.frames
        last = "-" if progress.last_eval is None else f"{progress.last_eval:.1f}"
        self.bar.set_postfix_str(f"fps={progress.frames / elapsed:,.0f} eval={last}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
