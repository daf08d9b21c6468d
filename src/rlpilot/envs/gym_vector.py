"""A TorchRL ``EnvBase`` over a gymnasium vector env: N environments stepped as one batch.

Why not TorchRL's ``GymWrapper``: it fails on gymnasium's numpy-vectorised ``CartPoleVectorEnv``
(that env only knows NEXT_STEP autoreset, the wrapper wants SAME_STEP or DISABLED), and it pays its
per-step overhead once per *sub-env* for ``SyncVectorEnv`` info handling. Here every vector env runs
with autoreset DISABLED and TorchRL drives partial resets through ``_reset`` (a ``"_reset"`` mask),
which is TorchRL's own convention, so ``step_and_maybe_reset``, ``rollout`` and collectors just work.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase
from torchrl.envs.libs.gym import _gym_to_torchrl_spec_transform

from rlpilot.common.errors import UserError


class CartPoleVectorEnvNoAutoreset(CartPoleVectorEnv):
    """gymnasium's numpy CartPole (one array op per step for all envs) with autoreset DISABLED.

    The upstream class only implements NEXT_STEP autoreset: a finished env spends its next step on
    a reset and returns reward 0 for an ignored action, which corrupts advantage estimates unless
    every such step is masked. Here finished envs are reset explicitly with
    ``reset(options={"reset_mask": mask})``, as gymnasium's ``SyncVectorEnv`` does in DISABLED mode.
    """

    metadata = {**CartPoleVectorEnv.metadata, "autoreset_mode": AutoresetMode.DISABLED}

    def step(self, action):
        """Upstream's ``step`` (gymnasium 1.4: the same arithmetic, in the same order, so the same floats)
        without its two per-step costs that DISABLED mode does not need: ``action_space.contains`` (an
        ``assert``: the actions come from rlpilot's own policies, in range by construction) and the
        NEXT_STEP reset of ``prev_done`` envs (none here: finished envs are reset by the caller; a draw
        of zero values does not advance the generator, so seeded streams are unchanged). About 2x faster
        at 8 and 20 envs (130-150 -> 50-80 us a step on this project's 2-core machine, 2026-12-02); a
        ``ppo-cartpole`` run steps it ~2,500 times (collection and evaluation). Tested identical to
        upstream's step (observations, rewards, flags) over thousands of steps with partial resets."""
        if self.num_envs == 1:
            return self._step_one(action)
        x, x_dot, theta, theta_dot = self.state
        force = np.sign(action - 0.5) * self.force_mag
        x, x_dot, theta, theta_dot = self._advance(x, x_dot, theta, theta_dot, force, np.cos(theta), np.sin(theta))
        self.state = np.stack((x, x_dot, theta, theta_dot))
        # |x| > t is x < -t or x > t (upstream's four comparisons), for every float but NaN, which
        # is neither in both forms
        terminated = (np.abs(x) > self.x_threshold) | (np.abs(theta) > self.theta_threshold_radians)
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        if self._sutton_barto_reward:
            reward = -np.array(terminated, dtype=np.float32)
        else:
            reward = np.ones_like(terminated, dtype=np.float32)
        return self.state.T.astype(np.float32), reward, terminated, truncated, {}

    def _advance(self, x, x_dot, theta, theta_dot, force, costheta, sintheta):
        """Upstream's dynamics and integrator step, the same operations in the same order, on arrays (every env) or
        floats (one env); ``v * v`` is ``np.square(v)``'s value."""
        temp = (force + self.polemass_length * (theta_dot * theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * (costheta * costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        if self.kinematics_integrator == "euler":
            return (
                x + self.tau * x_dot,
                x_dot + self.tau * xacc,
                theta + self.tau * theta_dot,
                theta_dot + self.tau * thetaacc,
            )
        x_dot = x_dot + self.tau * xacc  # semi-implicit euler
        theta_dot = theta_dot + self.tau * thetaacc
        return x + self.tau * x_dot, x_dot, theta + self.tau * theta_dot, theta_dot

    def _step_one(self, action):
        """:meth:`step` for one env (the RL Zoo's DQN CartPole) in Python floats: the same arithmetic in the same
        order on float64 scalars, ``math``'s cosine and sine for numpy's (equal on 10^6 draws here, and tested against
        upstream's step, bit for bit). A ``[1]`` array costs ~1 us per numpy call, ~20 of them a step: 19 -> 6 us a
        step on this project's 2-core machine (2026-12-05, a scratch loop of 20,000 steps with resets)."""
        x, x_dot, theta, theta_dot = self.state[:, 0].tolist()
        force = self.force_mag if action[0] > 0.5 else -self.force_mag
        x, x_dot, theta, theta_dot = self._advance(x, x_dot, theta, theta_dot, force, math.cos(theta), math.sin(theta))
        self.state = np.array([[x], [x_dot], [theta], [theta_dot]])
        terminated = np.array([abs(x) > self.x_threshold or abs(theta) > self.theta_threshold_radians])
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        if self._sutton_barto_reward:
            reward = -terminated.astype(np.float32)
        else:
            reward = np.ones(1, dtype=np.float32)
        return np.array([[x, x_dot, theta, theta_dot]], dtype=np.float32), reward, terminated, truncated, {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        mask = None if options is None else options.get("reset_mask")
        if mask is None or self.state is None:
            return super().reset(seed=seed, options=options)
        if seed is not None:
            super(CartPoleVectorEnv, self).reset(seed=seed)
        self.state[:, mask] = self.np_random.uniform(low=self.low, high=self.high, size=(4, int(mask.sum())))
        self.steps[mask] = 0
        return self.state.T.astype(np.float32), {}


def to_numpy_action(action: torch.Tensor, space: gym.Space, *, one_hot: bool = False) -> np.ndarray:
    """A batch of policy actions as the gymnasium vector env takes them.

    ``one_hot``: decoded as TorchRL's ``OneHot.to_numpy`` does (``argmax(-1)``). Fed a categorical
    index instead of a one-hot vector, each env's action is the argmax of a single number: always 0.
    That is the silent bug of a Categorical distribution over a OneHot spec, reproduced faithfully so
    ``rlpilot doctor`` can be tested on it.
    """
    if one_hot:
        if action.ndim == len(space.shape):  # an index per env, not a vector: argmax of a 1-element row is 0
            action = action.unsqueeze(-1)
        return action.long().argmax(-1).cpu().numpy().astype(space.dtype)
    array = action.detach().cpu().numpy()
    if isinstance(space, gym.spaces.Box):
        return np.clip(array.astype(space.dtype, copy=False), space.low, space.high)
    return array.astype(space.dtype, copy=False)


def set_batched_specs(env: EnvBase, vector_env, *, one_hot_actions: bool) -> None:
    """TorchRL specs of batch size ``[num_envs]`` from a vector env's single-env gymnasium spaces:
    ``observation`` (or one entry per key of a Dict space), the action, a reward, and done flags."""
    obs_spec = _gym_to_torchrl_spec_transform(vector_env.single_observation_space, device=env.device)
    if not isinstance(obs_spec, Composite):
        obs_spec = Composite(observation=obs_spec)
    env.observation_spec = obs_spec.expand(env.batch_size).to(env.device)
    action_spec = _gym_to_torchrl_spec_transform(
        vector_env.single_action_space, device=env.device, categorical_action_encoding=not one_hot_actions
    )
    env.action_spec = action_spec.expand(*env.batch_size, *action_spec.shape)
    env.reward_spec = Unbounded(shape=(*env.batch_size, 1), device=env.device)
    flag = Categorical(2, shape=(*env.batch_size, 1), dtype=torch.bool, device=env.device)
    env.done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=env.batch_size)


class GymVectorEnv(EnvBase):
    """TorchRL env of batch size ``[num_envs]`` over a gymnasium ``VectorEnv`` in DISABLED autoreset mode.

    Observations keep gymnasium's dtype (``DoubleToFloat`` is added by ``make_env`` when needed);
    dict observation spaces become one entry per key. Discrete actions are categorical indices.
    """

    def __init__(
        self,
        vector_env: gym.vector.VectorEnv,
        *,
        device: torch.device | str = "cpu",
        one_hot_actions: bool = False,
        env_id: str = "the env",
    ):
        mode = vector_env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.DISABLED:
            raise ValueError(f"GymVectorEnv needs autoreset_mode=DISABLED, got {mode}")
        super().__init__(batch_size=torch.Size([vector_env.num_envs]), device=device)
        self.vector_env = vector_env
        self.env_id = env_id
        self.num_envs = vector_env.num_envs
        self._dict_obs = isinstance(vector_env.single_observation_space, gym.spaces.Dict)
        set_batched_specs(self, vector_env, one_hot_actions=one_hot_actions)
        self._single_action_space = vector_env.single_action_space
        self.one_hot_actions = one_hot_actions and isinstance(vector_env.single_action_space, gym.spaces.Discrete)
        self._seed: int | None = None

    # -- conversions -------------------------------------------------------------------------
    def _obs_td(self, obs: Any) -> dict[str, torch.Tensor]:
        if self._dict_obs:
            return {key: torch.as_tensor(value, device=self.device) for key, value in obs.items()}
        return {"observation": torch.as_tensor(obs, device=self.device)}

    def _done_entries(self, terminated: np.ndarray, truncated: np.ndarray) -> dict[str, torch.Tensor]:
        term = torch.as_tensor(terminated, device=self.device).view(self.num_envs, 1)
        trunc = torch.as_tensor(truncated, device=self.device).view(self.num_envs, 1)
        return {"terminated": term, "truncated": trunc, "done": term | trunc}

    # -- EnvBase API -----------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        reset_mask = None if tensordict is None else tensordict.get("_reset", None)
        if reset_mask is not None and not bool(reset_mask.all()):
            options = {"reset_mask": reset_mask.view(-1).cpu().numpy()}
            obs = self._reset_vector(options=options)
        else:
            seed, self._seed = self._seed, None  # a fresh seed applies to the next full reset only
            obs = self._reset_vector(seed=seed)
        falses = np.zeros(self.num_envs, dtype=bool)
        return TensorDict({**self._obs_td(obs), **self._done_entries(falses, falses)}, batch_size=self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = self.env_action(tensordict.get("action"))
        obs, reward, terminated, truncated, _ = step_checked(self.vector_env, self.env_id, action)
        reward = torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device)
        return TensorDict(
            {
                **self._obs_td(obs),
                "reward": reward.view(self.num_envs, 1),
                **self._done_entries(terminated, truncated),
            },
            batch_size=self.batch_size,
        )

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """Policy actions (batch) as the gymnasium vector env takes them, per this env's action encoding."""
        return to_numpy_action(action, self.vector_env.action_space, one_hot=self.one_hot_actions)

    def _set_seed(self, seed: int | None) -> None:
        self._seed = seed
        self.vector_env.action_space.seed(seed)
        # gymnasium seeds sub-envs as seed, seed+1, ...; the next full reset applies it.
        self._reset_vector(seed=seed)

    def _reset_vector(self, **kwargs) -> Any:
        return reset_checked(self.vector_env, self.env_id, **kwargs)

    def close(self, *, raise_if_closed: bool = True) -> None:  # noqa: D102
        self.vector_env.close()
        super().close(raise_if_closed=raise_if_closed)


def step_checked(vector_env, env_id: str, action) -> tuple:
    """``vector_env.step(action)``. A user env that raises there (or returns another tuple than gymnasium's
    five values) is one :class:`UserError` naming the env; the traceback stays on the exception's cause."""
    try:
        return vector_env.step(action)
    except UserError:
        raise
    except Exception as exc:
        hint = " (step must return observation, reward, terminated, truncated, info)" if "unpack" in str(exc) else ""
        raise UserError(f"env '{env_id}' raised during step: {type(exc).__name__}: {exc}{hint}") from exc


def reset_checked(vector_env: gym.vector.VectorEnv, env_id: str, **kwargs) -> Any:
    """``vector_env.reset(**kwargs)``'s observations. A user env that raises there, or returns observations of
    another shape than its ``observation_space``, is one :class:`UserError` naming the env and the problem."""
    space = vector_env.single_observation_space
    try:
        obs, _ = vector_env.reset(**kwargs)
    except Exception as exc:
        shape = _single_reset_shape(vector_env)
        if shape is not None and isinstance(space, gym.spaces.Box) and shape != space.shape:
            raise UserError(_shape_problem(env_id, shape, space)) from None
        raise UserError(f"env '{env_id}' raised during reset: {type(exc).__name__}: {exc}") from None
    if isinstance(space, gym.spaces.Box) and tuple(np.shape(obs)[1:]) != space.shape:
        raise UserError(_shape_problem(env_id, tuple(np.shape(obs)[1:]), space))
    return obs


def _single_reset_shape(vector_env: gym.vector.VectorEnv) -> tuple | None:
    """Why a vector reset failed: the shape one sub-env's reset returns (SyncVectorEnv only)."""
    envs = getattr(vector_env, "envs", None)
    if not envs:
        return None
    try:
        return tuple(np.shape(envs[0].reset()[0]))
    except Exception:
        return None


def _shape_problem(env_id: str, shape: tuple, space: gym.spaces.Box) -> str:
    return (
        f"env '{env_id}': reset returns observations of shape {shape} but its observation_space "
        f"is {space}: make reset and step return what observation_space declares"
    )
