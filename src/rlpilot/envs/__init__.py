"""Environments: ``make`` (the factory: any gymnasium id or user class -> a batched, seeded TorchRL env with
the right transforms; what its envs and buffers allocate), ``gym_vector`` (the gymnasium vector env behind it),
``native`` (tensor dynamics), ``pixels`` (image observations), ``residual`` (a base controller inside the vector env,
and the law by which a residual policy's action enters it), ``slow`` (a slow CartPole for distributed tests),
``arm/`` (the robot arm: its env, disturbances and controllers).

The factory's public names are re-exported here, loaded when first used (``from rlpilot.envs import make_env``):
importing a module of this package (the arm's env, registered torch-free) does not import torch or TorchRL.
"""

from __future__ import annotations

from typing import Any

_FACTORY = (
    "env_allocations",
    "make_env",
    "make_vector_env",
    "obs_norm_state",
    "observation_reader",
    "single_observation_space",
    "to_numpy",
)

__all__ = list(_FACTORY)


def __getattr__(name: str) -> Any:
    if name in _FACTORY:
        from rlpilot.envs import make

        return getattr(make, name)
    raise AttributeError(f"module 'rlpilot.envs' has no attribute {name!r}")
