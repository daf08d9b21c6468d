"""Greedy evaluation: all episodes of an evaluation run side by side as one vector env."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.conditions import declared
from rlpilot.envs.gym_vector import reset_checked, step_checked
from rlpilot.envs.make import observation_reader, to_numpy

# Task measures the env reports at the step an episode ends, by env id: name -> function of the vector
# env's step info. Reacher-v5 reports reward_dist = -|fingertip - target| (metres) every step.
FINAL_STATE_MEASURES: dict[str, dict[str, Callable[[dict], np.ndarray]]] = {
    "Reacher-v5": {"final_distance": lambda info: -np.asarray(info["reward_dist"], dtype=np.float64)},
    # rlpilot/ReacherTrack-v0 declares its episode measures (rlpilot.conditions); this adds the error at the end
    "rlpilot/ReacherTrack-v0": {"final_error": lambda info: np.asarray(info["error"], dtype=np.float64)},
}


@dataclass
class EvalResult:
    returns: np.ndarray
    lengths: np.ndarray
    actions_seen: int
    """Distinct greedy actions over the evaluation (discrete); 1 means the policy never varies."""
    action_effort: np.ndarray | None = None
    """Continuous actions: per episode, mean squared action (over steps and action dimensions, as the
    env receives them); ``None`` for discrete actions."""
    action_smoothness: np.ndarray | None = None
    """Continuous actions: per episode, mean squared change of the action between consecutive steps
    (0 for a constant action); ``None`` for discrete actions."""
    final: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-episode task measures at the last step (``FINAL_STATE_MEASURES``, and what the env declares), e.g.
    ``final_distance``, ``tracking_error``."""
    condition: dict = field(default_factory=dict)
    """The condition of the plant every episode ran under (``env.condition``; empty: the env as it is)."""
    trace: dict = field(default_factory=dict)
    """Step info entries of the first round's episodes (``evaluate(trace=...)``; a set-point), ``[steps, envs]``:
    env ``i``'s episode is its first ``lengths[i]`` rows."""
    outside: list = field(default_factory=list)
    """The names of ``condition``'s values beyond their declared range (played, and flagged)."""

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        return float(self.returns.std())

    def per_episode(self) -> dict[str, np.ndarray]:
        """Every per-episode measure beyond return and length, by name."""
        extra = {"action_effort": self.action_effort, "action_smoothness": self.action_smoothness}
        return {name: values for name, values in {**extra, **self.final}.items() if values is not None}

    def metrics(self) -> dict[str, float]:
        metrics = {
            "eval/return_mean": self.mean,
            "eval/return_std": self.std,
            "eval/return_min": float(self.returns.min()),
            "eval/return_max": float(self.returns.max()),
            "eval/episode_length": float(self.lengths.mean()),
        }
        metrics.update({f"eval/{name}": float(values.mean()) for name, values in self.per_episode().items()})
        return metrics


def evaluate(
    env: TransformedEnv,
    greedy_action: Callable[[torch.Tensor], torch.Tensor],
    *,
    episodes: int,
    seed: int,
    seeds: list[int] | None = None,
    trace: tuple[str, ...] = (),
) -> EvalResult:
    """Runs ``episodes`` greedy episodes, ``env.batch_size`` at a time (one episode per env per round).

    Round ``k`` resets with ``seed + k * num_envs``, so the same seed gives the same episodes. ``seeds``: one
    round, env ``i`` reset with ``seeds[i]`` (candidates side by side on the same episodes). ``trace``: step info
    entries recorded at every step of the first round (``EvalResult.trace``).
    """
    vector_env = env.base_env.vector_env
    read = observation_reader(env)
    n = vector_env.num_envs
    env_id = getattr(env.base_env, "env_id", None) or _env_id(vector_env) or "the env"
    measures = {**declared_measures(vector_env, env_id), **FINAL_STATE_MEASURES.get(_env_id(vector_env), {})}
    # the action's own columns apart from the env's measures (an env may declare an ``effort`` of its own)
    columns: dict[str, list[np.ndarray]] = {"return": [], "length": [], "action effort": [], "action smoothness": []}
    columns.update({name: [] for name in measures})
    seen: set = set()
    traced: dict[str, list[float]] = {}
    continuous = False
    for round_index in range((episodes + n - 1) // n):
        raw = reset_checked(vector_env, env_id, seed=seed + round_index * n if seeds is None else list(seeds))
        observation = read(raw, reset=True)
        reset_state = getattr(greedy_action, "reset", None)  # a stateful controller (PID): a new episode each
        if reset_state is not None:
            reset_state(None)
        episode_return = np.zeros(n)
        episode_length = np.zeros(n, dtype=np.int64)
        effort, smoothness = np.zeros(n), np.zeros(n)
        final = {name: np.zeros(n) for name in measures}
        previous = None
        active = np.ones(n, dtype=bool)
        while active.any():
            env_action = env.base_env.env_action(greedy_action(observation))
            action_array = to_numpy(env_action)
            if action_array.dtype.kind in "iu":  # actions as the env receives them
                seen.update(action_array[active].reshape(-1).tolist())
            else:
                continuous = True
                flat = action_array.reshape(n, -1).astype(np.float64)
                effort += np.square(flat).mean(-1) * active
                if previous is not None:
                    smoothness += np.square(flat - previous).mean(-1) * active
                previous = flat
            raw, reward, terminated, truncated, info = step_checked(vector_env, env_id, env_action)
            reward, terminated, truncated = to_numpy(reward), to_numpy(terminated), to_numpy(truncated)
            episode_return += reward * active
            episode_length += active
            done = terminated | truncated
            if trace and round_index == 0:
                for name in trace:
                    traced.setdefault(name, []).append(np.asarray(info[name], dtype=np.float64).reshape(n, -1)[:, 0])
            for name, measure in measures.items():  # what the env reports at the step the episode ends
                final[name] = np.where(done & active, measure(info), final[name])
            active &= ~done
            observation = read(raw)
            if done.any():  # reset every finished env (vector envs refuse to step them), ignore them from now on
                raw, _ = vector_env.reset(options={"reset_mask": done})
                observation = read(raw, reset=done)
        columns["return"].append(episode_return)
        columns["length"].append(episode_length)
        columns["action effort"].append(effort / episode_length)
        columns["action smoothness"].append(smoothness / np.maximum(episode_length - 1, 1))
        for name in measures:
            columns[name].append(final[name])
    per_episode = {name: np.concatenate(values)[:episodes] for name, values in columns.items()}
    return EvalResult(
        per_episode["return"],
        per_episode["length"],
        len(seen),
        action_effort=per_episode["action effort"] if continuous else None,
        action_smoothness=per_episode["action smoothness"] if continuous else None,
        final={name: per_episode[name] for name in measures},
        trace={name: np.stack(values) for name, values in traced.items()},
    )


def declared_measures(vector_env, env_id: str) -> dict[str, Callable[[dict], np.ndarray]]:
    """The per-episode measures the env declares (``measures``, :mod:`rlpilot.conditions`), each read from the
    step info of the step an episode ends."""
    found = declared(vector_env, env_id)
    names = [] if found is None else list(found.measures)
    return {name: (lambda info, name=name: np.asarray(info[name], dtype=np.float64)) for name in names}


def _env_id(vector_env) -> str | None:
    """The gymnasium id of a vector env's sub-envs (``None`` for envs built without one)."""
    envs = getattr(getattr(vector_env, "unwrapped", vector_env), "envs", None)  # through a ResidualVectorEnv
    spec = getattr(envs[0], "spec", None) if envs else None
    return spec.id if spec is not None else None
