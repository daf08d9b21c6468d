"""Environments: ``make`` (the factory: any gymnasium id or user class -> a batched, seeded TorchRL env with
the right transforms; the memory estimate), ``gym_vector`` (the gymnasium vector env behind it), ``native``
(tensor dynamics), ``pixels`` (image observations), ``residual`` (a base controller inside the vector env).
The factory's public names are re-exported here: ``from rlpilot.envs import make_env``.
"""

from rlpilot.envs.make import (
    check_memory,
    make_env,
    make_vector_env,
    memory_estimate,
    obs_norm_state,
    observation_reader,
    single_observation_space,
    to_numpy,
)

__all__ = [
    "check_memory",
    "make_env",
    "make_vector_env",
    "memory_estimate",
    "obs_norm_state",
    "observation_reader",
    "single_observation_space",
    "to_numpy",
]
