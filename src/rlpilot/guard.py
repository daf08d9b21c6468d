"""``Guard``: skips updates whose loss or gradient is non-finite or exploding, and cuts the learning rate.

Every learner (control algorithms, GRPO) steps its optimiser through :meth:`Guard.step`; the training
loop reads ``trips`` to roll back to the last checkpoint when skipped updates pile up. One host sync
per gradient update; nothing here runs per environment step.
"""

from __future__ import annotations

import math

import torch

from rlpilot.config.sections import GuardConfig


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
        self.refuse(loss_value, norm_value, update)
        return False

    def refuse(self, loss_value: float, norm_value: float, update: int) -> None:
        """Counts a refused update, cuts ``lr_scale`` and queues its ``guard_skip`` event."""
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

    def step(
        self, optimizer: torch.optim.Optimizer, parameters: list, loss: torch.Tensor, max_grad_norm: float, update: int
    ) -> torch.Tensor | None:
        """backward, clip, and the optimiser step unless the guard refuses; the grad norm, or None if skipped."""
        drop_grads(optimizer)
        loss.backward()
        grad_norm = clip_grad_norm(parameters, max_grad_norm)
        return self.apply(optimizer, loss, grad_norm, update)

    def update(
        self, optimizer: torch.optim.Optimizer, gradients, *args, update: int
    ) -> tuple[torch.Tensor | None, dict]:
        """One update through a :class:`rlpilot.control.compiled.trace.Gradients` (eager or compiled): the gradients of
        its loss on ``args``, then the optimiser step unless the guard refuses. ``(grad norm, or None if skipped;
        the loss's statistics)``. A compiled program that steps ``optimizer`` itself (``CompiledStep.step``) applies
        or refuses the update in the program with the same test; a refusal is recorded here as :meth:`allow` would.
        Otherwise (``step`` answers None) its ``unfused`` gradients and the library's step run here."""
        out = gradients.step(*args)
        if out is not None:
            loss, grad_norm, stats, applied = out
            if applied:
                return grad_norm, stats
            self.refuse(float(loss), float(grad_norm), update)
            return None, stats
        gradients = gradients.unfused
        drop_grads(optimizer)
        loss, grad_norm, stats = gradients(*args)
        return self.apply(optimizer, loss, grad_norm, update), stats

    def updates(self, gradients, args: tuple, start: int, stop: int, *, update: int) -> list[dict | None] | None:
        """Updates ``start .. stop - 1`` in one program (:meth:`rlpilot.control.compiled.trace.Gradients.steps`), which
        applies or refuses each with :meth:`allow`'s test; each applied update's statistics (``loss``, ``grad_norm``
        and the loss's scalar ones, as floats), None for a refused one, recorded here in order as :meth:`update`
        records it (``update``: the first one's number). None where the program does not apply: the caller then
        makes the updates one by one through :meth:`update`."""
        out = gradients.steps(args, start, stop)
        if out is None:
            return None
        values, names = out
        rows: list[dict | None] = []
        for offset, value in enumerate(values):
            row = dict(zip(names, value))
            if row.pop("applied"):
                rows.append(row)
            else:
                self.refuse(row["loss"], row["grad_norm"], update + offset)
                rows.append(None)
        return rows

    def apply(
        self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, grad_norm: torch.Tensor, update: int
    ) -> torch.Tensor | None:
        """The optimiser step on the gradients in place, unless :meth:`allow` refuses (then they are dropped)."""
        if not self.allow(loss, grad_norm, update):
            drop_grads(optimizer)
            return None
        adam_step(optimizer)
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


# The two library calls below run once per gradient update and cost more in Python than in arithmetic at RL's network
# sizes: ``clip_grad_norm_`` groups tensors by device and dtype and checks its arguments (~140 us an update for a
# 256-256 DQN on this project's 2-core machine, against ~30 us for its three foreach kernels) and ``Adam.step``
# walks its hooks, profiler scope and group bookkeeping before its one fused kernel (~100 us). Both are done here
# with the same kernels in the same order, so the numbers are bit for bit the library's
# (``benchmarks/same_computation.py``); anything else (several devices or dtypes, another optimiser or Adam
# setting) goes through the library unchanged.


def clip_grad_norm(parameters: list, max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True)``: the total 2-norm of the gradients,
    which are scaled by ``min(1, max_norm / (norm + 1e-6))`` in place."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads or len({(g.device, g.dtype) for g in grads}) != 1:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True)
    with torch.no_grad():
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
        torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


PLAIN_FUSED_ADAM = {
    "fused": True,
    "amsgrad": False,
    "maximize": False,
    "capturable": False,
    "differentiable": False,
    "decoupled_weight_decay": False,
}


def direct_adam(optimizer: torch.optim.Optimizer) -> bool:
    """A fused Adam (no amsgrad, maximize, capturable or differentiable) whose groups each hold one device and dtype:
    what :func:`adam_step` steps with the fused kernel directly, and a compiled update may step itself."""
    groups = optimizer.param_groups
    return (
        type(optimizer) is torch.optim.Adam
        and all(group.get(key) == value for group in groups for key, value in PLAIN_FUSED_ADAM.items())
        and all(len({(p.device, p.dtype) for p in group["params"]}) == 1 for group in groups)
    )


def adam_state(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> dict:
    """``param``'s Adam state, created as ``Adam`` creates it (a float step counter and two zero moments)."""
    state = optimizer.state[param]
    if not state:
        state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    return state


def adam_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``; for a :func:`direct_adam`, its fused kernel called directly on the optimiser's own state
    (:func:`adam_state`), group by group. The check comes first: a step is either all library or all direct."""
    if not direct_adam(optimizer):
        optimizer.step()
        return
    with torch.no_grad():
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [adam_state(optimizer, p) for p in params]
            steps = [state["step"] for state in states]
            torch._foreach_add_(steps, 1)
            beta1, beta2 = group["betas"]
            torch._fused_adam_(
                params,
                [p.grad for p in params],
                [state["exp_avg"] for state in states],
                [state["exp_avg_sq"] for state in states],
                [],
                steps,
                amsgrad=False,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=False,
                grad_scale=None,
                found_inf=None,
            )


def json_float(value: float) -> float | str:
    """JSON has no NaN/inf: those are written as strings."""
    return value if math.isfinite(value) else str(value)
