"""Watching a run: update guards, milestone events and status lines, the progress bar.

Nothing here runs per environment step; the guard costs one host sync per gradient update.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import torch

from rlpilot.config import Config, GuardConfig


class Guard:
    """Skips updates whose loss or gradient norm is non-finite or above ``max_loss``, and cuts the LR.

    The algorithm asks ``allow(loss, grad_norm)`` after ``backward`` and steps the optimiser only on
    True; it multiplies its learning rate by ``lr_scale``. Trips since the last good checkpoint are
    counted so the loop can roll back when they pile up.
    """

    def __init__(self, cfg: GuardConfig):
        self.cfg = cfg
        self.lr_scale = 1.0
        self.trips = 0
        self.total_trips = 0
        self.events: list[dict] = []

    def allow(self, loss: torch.Tensor, grad_norm: torch.Tensor, update: int) -> bool:
        if not self.cfg.enabled:
            return True
        loss_value, norm_value = float(loss.detach()), float(grad_norm)
        if math.isfinite(loss_value) and math.isfinite(norm_value) and loss_value <= self.cfg.max_loss:
            return True
        self.trips += 1
        self.total_trips += 1
        self.lr_scale *= self.cfg.lr_cut
        reason = (
            "non-finite loss"
            if not math.isfinite(loss_value)
            else ("non-finite gradient" if not math.isfinite(norm_value) else f"loss above {self.cfg.max_loss:g}")
        )
        self.events.append(
            {
                "event": "guard_skip",
                "reason": reason,
                "update": update,
                "loss": _json_float(loss_value),
                "grad_norm": _json_float(norm_value),
                "lr_scale": self.lr_scale,
            }
        )
        return False

    def step(
        self, optimizer: torch.optim.Optimizer, parameters: list, loss: torch.Tensor, max_grad_norm: float, update: int
    ) -> torch.Tensor | None:
        """backward, clip, and the optimiser step unless the guard trips; the grad norm, or None if skipped."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm, foreach=True)
        if not self.allow(loss, grad_norm, update):
            optimizer.zero_grad(set_to_none=True)
            return None
        optimizer.step()
        return grad_norm

    def drain(self) -> list[dict]:
        events, self.events = self.events, []
        return events

    def state_dict(self) -> dict:
        return {"lr_scale": self.lr_scale, "total_trips": self.total_trips}

    def load_state_dict(self, state: dict) -> None:
        self.lr_scale = float(state["lr_scale"])
        self.total_trips = int(state["total_trips"])
        self.trips = 0


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@dataclass
class Progress:
    """Counters of a run: what the log, the stop rule and checkpoints read (all saved in checkpoints)."""

    frames: int = 0
    batches: int = 0
    episodes: int = 0
    evaluations: int = 0
    best_eval: float = -math.inf
    last_eval: float | None = None
    solved_at_frames: int | None = None
    consecutive_solved: int = 0
    best_train_return: float = -math.inf
    milestone_reached: bool = False
    elapsed_before: float = 0.0
    resumes: int = 0
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
