"""Watching a run: the counters a checkpoint saves, milestone events and status lines, the progress bar.

Nothing here runs per environment step: the loop calls it once per step of the trainable.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

from rlpilot.config.schema import Config


@dataclass
class Progress:
    """Counters of a run: what the log, the stop rule and checkpoints read (all saved in checkpoints).
    ``episodes`` counts finished training episodes (an LLM run: sampled responses)."""

    frames: int = 0
    batches: int = 0
    episodes: int = 0
    evaluations: int = 0
    best_eval: float = -math.inf
    last_eval: float | None = None
    solved_at_frames: int | None = None
    consecutive_solved: int = 0
    evals_after_solved: list = field(default_factory=list)
    """Greedy means of the evaluations after the solved one (``train.evals_after_solved``)."""
    best_train_return: float = -math.inf
    milestone_reached: bool = False
    elapsed_before: float = 0.0
    recent_returns: list = field(default_factory=list)

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items()}

    @classmethod
    def from_state(cls, state: dict) -> Progress:
        return cls(**state)


class Milestones:
    """Status lines every ``milestone_every_frames`` (with ``-v``) and milestone events (always)."""

    def __init__(self, config: Config, *, verbose: bool, write=None):
        self.config = config
        self.verbose = verbose
        self.write = write or (lambda line: print(line, file=sys.stderr))
        self.next_status = config.train.milestone_every_frames

    def episodes(self, progress: Progress, returns: list[float]) -> list[dict]:
        """Updates training-return statistics; returns milestone events."""
        if not returns:
            return []
        progress.recent_returns = (progress.recent_returns + list(returns))[-100:]
        progress.best_train_return = max(progress.best_train_return, max(returns))
        level = self.config.train.milestone_return
        if level is not None and not progress.milestone_reached and max(returns) >= level:
            progress.milestone_reached = True
            event = {
                "event": "milestone",
                "what": f"first training episode with return >= {level:g}",
                "return": max(returns),
            }
            self.write(
                f"[milestone] {progress.frames:,} frames: first training episode with return "
                f">= {level:g} ({max(returns):.1f})"
            )
            return [event]
        return []

    def status(self, progress: Progress, elapsed: float) -> None:
        if not self.verbose or progress.frames < self.next_status:
            return
        self.next_status += self.config.train.milestone_every_frames
        recent = progress.recent_returns
        mean = f"{sum(recent) / len(recent):.1f}" if recent else "-"
        best = "-" if progress.best_train_return == -math.inf else f"{progress.best_train_return:.1f}"
        last = "-" if progress.last_eval is None else f"{progress.last_eval:.1f}"
        self.write(
            f"[status] frames {progress.frames:,}  fps {progress.frames / max(elapsed, 1e-9):,.0f}  "
            f"episodes {progress.episodes:,}  train return mean(100) {mean} best {best}  last eval {last}"
        )

    def announce(self, text: str) -> None:
        self.write(text)


class ProgressBar:
    """tqdm bar with frames, fps and the latest evaluation (silent when disabled)."""

    def __init__(self, config: Config, enabled: bool, initial: int = 0):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=config.train.total_frames,
                initial=initial,
                unit="frames",
                unit_scale=True,
                dynamic_ncols=True,
                leave=True,
                mininterval=0.5,
            )

    def update(self, progress: Progress, elapsed: float) -> None:
        if self.bar is None:
            return
        last = "-" if progress.last_eval is None else f"{progress.last_eval:.1f}"
        self.bar.set_postfix_str(f"fps={progress.frames / max(elapsed, 1e-9):,.0f} eval={last}", refresh=False)
        self.bar.update(progress.frames - self.bar.n)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
