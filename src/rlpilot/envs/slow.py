"""``rlpilot/SlowCartPole-v0``: CartPole whose every step costs a set time without burning CPU.

A stand-in for a simulator that costs milliseconds a step (finer physics, a production cell, hardware in
the loop): ``step_ms`` of :func:`time.sleep` per step, so collection on many actors (``collect.workers``,
docs/distributed.md) can be measured on a machine with fewer cores than actors. The dynamics, spaces and
time limit are gymnasium's CartPole-v1.
"""

from __future__ import annotations

import time

from gymnasium.envs.classic_control.cartpole import CartPoleEnv

SLOW_ID = "rlpilot/SlowCartPole-v0"


class SlowCartPole(CartPoleEnv):
    """gymnasium's CartPole; each ``step`` sleeps ``step_ms`` milliseconds first (``reset`` costs nothing)."""

    def __init__(self, step_ms: float = 10.0, **kwargs):
        if not step_ms >= 0:
            raise ValueError(f"step_ms must be >= 0 (got {step_ms})")
        super().__init__(**kwargs)
        self.step_seconds = step_ms / 1000.0

    def step(self, action):
        time.sleep(self.step_seconds)
        return super().step(action)


def register_envs() -> None:
    """Registers rlpilot's ids (called when an ``rlpilot/`` id is used): this one and the arm's."""
    import gymnasium as gym

    from rlpilot.arm import register_envs as register_arm

    if SLOW_ID not in gym.registry:
        entry_point = "rlpilot.envs.slow:SlowCartPole"
        gym.register(SLOW_ID, entry_point=entry_point, max_episode_steps=500, reward_threshold=475.0)
    register_arm()
