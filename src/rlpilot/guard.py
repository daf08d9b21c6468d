"""``Guard``: skips updates whose loss or gradient is non-finite or exploding, and cuts the learning rate.

Every learner (control algorithms, GRPO) steps its optimiser through :meth:`Guard.step`; the training
loop reads ``trips`` to roll back to the last checkpoint when skipped updates pile up. One host sync
per gradient update; nothing here runs per environment step.
"""

from __future__ import annotations

import math

import torch

from rlpilot.config.schema import GuardConfig


class Guard:
    """Watches each update. ``step`` runs backward, clips, and steps the optimiser unless ``allow`` says
    no; learners multiply their learning rate by ``lr_scale``, which every refused update cuts by
    ``guard.lr_cut``. ``trips`` counts refusals since the last checkpoint (the loop resets it there),
    ``total_trips`` over the whole run."""

    def __init__(self, cfg: GuardConfig):
        self.cfg = cfg
        self.lr_scale = 1.0
        self.trips = 0
        self.total_trips = 0
        self.events: list[dict] = []

    def allow(self, loss: torch.Tensor, grad_norm: torch.Tensor, update: int) -> bool:
        """True when the update may be applied: the guard is off, or loss and gradient norm are finite
        and the loss is at most ``guard.max_loss``. A refusal is counted, cuts ``lr_scale`` and queues
        a ``guard_skip`` event."""
        if not self.cfg.enabled:
            return True
        loss_value, norm_value = float(loss.detach()), float(grad_norm)
        if math.isfinite(loss_value) and math.isfinite(norm_value) and loss_value <= self.cfg.max_loss:
            return True
        self.trips += 1
        self.total_trips += 1
        self.lr_scale *= self.cfg.lr_cut
        if not math.isfinite(loss_value):
            reason = "non-finite loss"
        elif not math.isfinite(norm_value):
            reason = "non-finite gradient"
        else:
            reason = f"loss above {self.cfg.max_loss:g}"
        self.events.append(
            {
                "event": "guard_skip",
                "reason": reason,
                "update": update,
                "loss": json_float(loss_value),
                "grad_norm": json_float(norm_value),
                "lr_scale": self.lr_scale,
            }
        )
        return False

    def step(
        self, optimizer: torch.optim.Optimizer, parameters: list, loss: torch.Tensor, max_grad_norm: float, update: int
    ) -> torch.Tensor | None:
        """backward, clip, and the optimiser step unless the guard refuses; the grad norm, or None if skipped."""
        drop_grads(optimizer)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm, foreach=True)
        if not self.allow(loss, grad_norm, update):
            drop_grads(optimizer)
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


def drop_grads(optimizer: torch.optim.Optimizer) -> None:
    """What ``optimizer.zero_grad(set_to_none=True)`` does, without its profiler scope and bookkeeping:
    ~100 us -> ~10 us an update on this project's 2-core machine (12 tensors, 2026-12-02), 640 times in a
    ``ppo-cartpole`` run."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            param.grad = None


def json_float(value: float) -> float | str:
    """JSON has no NaN/inf: those are written as strings."""
    return value if math.isfinite(value) else str(value)
