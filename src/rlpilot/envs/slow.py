"""``rlpilot/SlowCartPole-v0``: CartPole whose every step costs a set time without burning CPU.

A stand-in for a simulator that costs milliseconds a step (finer physics, a production cell, hardware in
the loop): ``step_ms`` of :func:`time.sleep` per step, so collection on many actors (``collect.workers``,
docs/distributed.md) can be measured on a machine with fewer cores than actors. The dynamics, spaces and
time limit are gymnasium's CartPole-v1 (registered by :func:`rlpilot.envs.arm.env.register_envs`, torch-free).
"""

from __future__ import annotations

import time

from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class SlowCartPole(CartPoleEnv):
    """gymnasium's CartPole; each ``step`` sleeps ``step_ms`` milliseconds first (``reset`` costs nothing).
    ``fail_after``: the simulator crashes (``RuntimeError``) at its step number ``fail_after + 1``, counted over the
    env's life (fault tests: a simulator that dies mid-run, inside a Ray actor or this process)."""

    def __init__(self, step_ms: float = 10.0, fail_after: int | None = None, **kwargs):
        if not step_ms >= 0:
            raise ValueError(f"step_ms must be >= 0 (got {step_ms})")
        super().__init__(**kwargs)
        self.step_seconds = step_ms / 1000.0
        self.fail_after = fail_after
        self.steps = 0

    def step(self, action):
        time.sleep(self.step_seconds)
        self.steps += 1
        if self.fail_after is not None and self.steps > self.fail_after:
            raise RuntimeError(f"the simulator crashed after fail_after={self.fail_after} steps")
        return super().step(action)
