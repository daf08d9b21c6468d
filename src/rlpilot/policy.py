"""A trained run's policy, rebuilt from its config and checkpoint (weights only, never pickled code)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torchrl.envs import TransformedEnv

from rlpilot import algos
from rlpilot.envs import make_env
from rlpilot.errors import UserError
from rlpilot.evaluate import EvalResult, evaluate
from rlpilot.runs import Run, load_run


@dataclass
class LoadedPolicy:
    run: Run
    algo: algos.Algorithm
    obs_norm: dict | None

    def make_env(self, *, num_envs: int, seed: int | None = None) -> TransformedEnv:
        """An env with the run's transform chain and the run's normalisation statistics."""
        config = self.run.config()
        return make_env(config.env, num_envs=num_envs, seed=seed, obs_norm_state=self.obs_norm)


def load_policy(path: str | Path, checkpoint: str = "last") -> LoadedPolicy:
    run = load_run(path)
    config = run.config()
    state = run.load_checkpoint(checkpoint)
    if state.get("algo") != config.algo or state.get("env_id") != config.env.id:
        raise UserError(
            f"checkpoint {checkpoint}.pt in {run.path} was made by {state.get('algo')} on {state.get('env_id')}, "
            f"but the run's config is {config.algo} on {config.env.id}"
        )
    env = make_env(config.env, num_envs=1, obs_norm_state=state["obs_norm"])
    algo = algos.build(config, env, torch.device("cpu"))
    env.close()
    try:
        algo.load_state_dict(state["algo_state"])
    except (KeyError, RuntimeError) as exc:
        raise UserError(
            f"checkpoint {checkpoint}.pt does not fit the run's config: {str(exc).splitlines()[0]}"
        ) from None
    return LoadedPolicy(run, algo, state["obs_norm"])


def evaluate_run(path: str | Path, *, episodes: int, seed: int) -> EvalResult:
    policy = load_policy(path)
    env = policy.make_env(num_envs=min(episodes, 64), seed=seed)
    try:
        return evaluate(env, policy.algo.greedy_action, episodes=episodes, seed=seed)
    finally:
        env.close()
