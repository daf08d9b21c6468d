"""Native batched environments: N classic-control envs stepped as torch tensors (CPU or CUDA).

Why: gymnasium's CartPole steps ~127k frames/s on one core, TorchRL's ``GymEnv`` ~4k (a TensorDict
per step), while the same dynamics written as tensor ops cost a few microseconds per *batch* of
envs: N = 4096 envs step in about the time one env does. These envs reproduce gymnasium's dynamics,
rewards, termination, time-limit truncation and reset distributions (``tests/unit/test_native_envs.py``
checks 10,000 transitions per env against gymnasium to 1e-5, and the reset distributions with a
Kolmogorov-Smirnov test), so training on them is a faster road to the same place.

Two layers:

- :class:`NativeVectorEnv` subclasses (``CartPoleVector``, ...) hold the dynamics and speak
  gymnasium's vector API with autoreset DISABLED (``reset(seed=, options={"reset_mask": m})``,
  ``step(action) -> obs, reward, terminated, truncated, info``) but on tensors, on one device, with
  no host synchronisation in ``step`` or a masked ``reset``. :class:`rlpilot.control.collect.BatchCollector`
  and evaluation drive this layer directly.
- :class:`NativeEnv` (an ``EnvBase``; ``CartPole``, ``Acrobot``, ``Pendulum``, ``MountainCar``,
  ``MountainCarContinuous``) wraps one for TorchRL: specs, ``rollout``, collectors, ``check_env_specs``.

``env.backend=native`` selects them for the standard ids (:data:`NATIVE_ENVS`); :func:`gymnasium_view`
gives a single-env ``gymnasium.Env`` of any of them (gymnasium's env checker passes on it).

State is float64 (gymnasium's classic-control envs compute in float64 too), observations float32.
Random draws come from a ``torch.Generator`` on the env's device: the same seed gives the same
episodes on the same device, but not the same numbers as gymnasium's numpy generator.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import EnvBase

from rlpilot.common.errors import UserError
from rlpilot.envs.gym_vector import set_batched_specs


class NativeVectorEnv(abc.ABC):
    """Batched dynamics on tensors; subclasses define the physics of one gymnasium env.

    Subclass hooks: ``_initial_state(n)`` (a reset draw), ``_transition(state, action)`` (next state,
    reward, terminated) and ``_observe(state)``; class attributes give the gymnasium id, spaces and
    time limit.
    """

    gym_id: str = ""
    max_episode_steps: int = 0
    single_observation_space: gym.spaces.Box
    single_action_space: gym.Space
    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(
        self,
        num_envs: int,
        *,
        device: torch.device | str = "cpu",
        max_episode_steps: int | None = None,
        **kwargs: Any,
    ):
        if kwargs:
            raise UserError(
                f"native {self.gym_id} does not take env.kwargs {sorted(kwargs)}; use env.backend=numpy or sync"
            )
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps or type(self).max_episode_steps
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.discrete = isinstance(self.single_action_space, gym.spaces.Discrete)
        if not self.discrete:
            self.action_low = torch.as_tensor(self.single_action_space.low, device=self.device)
            self.action_high = torch.as_tensor(self.single_action_space.high, device=self.device)
        self.generator = torch.Generator(device=self.device)
        self.generator.seed()
        self.state: torch.Tensor = self._initial_state(num_envs)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    # -- gymnasium vector API on tensors ----------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[torch.Tensor, dict]:
        """All envs (``seed`` reseeds first), or only those in ``options["reset_mask"]`` (no host sync)."""
        mask = None if options is None else options.get("reset_mask")
        if seed is not None:
            self.generator.manual_seed(int(seed))
        if mask is None:
            self.state = self._initial_state(self.num_envs)
            self.steps.zero_()
        else:
            mask = torch.as_tensor(mask, device=self.device).view(-1)
            # a fresh draw for every env, kept where the mask is set: no data-dependent shapes, no sync
            self.state = torch.where(mask.unsqueeze(-1), self._initial_state(self.num_envs), self.state)
            self.steps.masked_fill_(mask, 0)
        return self._observe(self.state), {}

    def step(self, action) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        action = torch.as_tensor(action, device=self.device)
        if self.discrete:
            action = action.view(self.num_envs).long()
        else:  # what a gymnasium env receives from rlpilot: clipped into the Box
            action = torch.clamp(action.view(self.num_envs, -1).to(torch.float32), self.action_low, self.action_high)
        self.state, reward, terminated = self._transition(self.state, action)
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps  # gymnasium's TimeLimit: may coincide with terminated
        return self._observe(self.state), reward.to(torch.float32), terminated, truncated, {}

    def seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed))
        self.action_space.seed(int(seed))

    def close(self) -> None:  # noqa: B027 - gymnasium's API; tensors need no closing
        """Nothing to release (gymnasium's vector API has ``close``; tensors are freed with the env)."""

    # -- helpers for subclasses --------------------------------------------------------------------
    def _uniform(self, n: int, low, high, dim: int) -> torch.Tensor:
        u = torch.rand(n, dim, generator=self.generator, device=self.device, dtype=torch.float64)
        low = torch.as_tensor(low, dtype=torch.float64, device=self.device)
        high = torch.as_tensor(high, dtype=torch.float64, device=self.device)
        return low + (high - low) * u

    @abc.abstractmethod
    def _initial_state(self, n: int) -> torch.Tensor:
        """A reset draw: ``[n, state_dim]`` float64 states from gymnasium's reset distribution."""

    @abc.abstractmethod
    def _transition(self, state: torch.Tensor, action: torch.Tensor):
        """One step of every env: ``(next_state, reward, terminated)``."""

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.to(torch.float32)

    # gymnasium's single env stores its state in this layout; tests set and read it
    def set_state(self, state) -> None:
        self.state = torch.as_tensor(np.asarray(state), dtype=torch.float64, device=self.device).view(self.num_envs, -1)


class CartPoleVector(NativeVectorEnv):
    """gymnasium ``CartPole-v1`` (Barto, Sutton & Anderson 1983): Euler integration, reward 1 a step."""

    gym_id = "CartPole-v1"
    max_episode_steps = 500
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    _high = np.array([x_threshold * 2, np.inf, theta_threshold * 2, np.inf], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(2)

    def __init__(self, num_envs: int, *, sutton_barto_reward: bool = False, **kwargs: Any):
        if not isinstance(sutton_barto_reward, bool):
            raise UserError(f"env.kwargs.sutton_barto_reward: true or false, got {sutton_barto_reward!r}")
        self.sutton_barto_reward = sutton_barto_reward
        super().__init__(num_envs, **kwargs)

    def _initial_state(self, n: int) -> torch.Tensor:
        return self._uniform(n, -0.05, 0.05, 4)

    def _transition(self, state, action):
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = (action * 2 - 1) * self.force_mag
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot.square() * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta.square() / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        terminated = (x.abs() > self.x_threshold) | (theta.abs() > self.theta_threshold)
        if self.sutton_barto_reward:
            reward = -terminated.to(torch.float64)
        else:
            reward = torch.ones_like(x)
        return torch.stack((x, x_dot, theta, theta_dot), -1), reward, terminated


class CartPoleV0Vector(CartPoleVector):
    gym_id = "CartPole-v0"
    max_episode_steps = 200


class AcrobotVector(NativeVectorEnv):
    """gymnasium ``Acrobot-v1``: "book" dynamics, one RK4 step of 0.2 s, angles wrapped, speeds bounded."""

    gym_id = "Acrobot-v1"
    max_episode_steps = 500
    dt = 0.2
    m1 = m2 = 1.0
    l1 = 1.0
    lc1 = lc2 = 0.5
    moment = 1.0
    g = 9.8
    max_vel_1, max_vel_2 = 4 * math.pi, 9 * math.pi
    _high = np.array([1.0, 1.0, 1.0, 1.0, max_vel_1, max_vel_2], dtype=np.float32)
    single_observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    single_action_space = gym.spaces.Discrete(3)

    def _initial_state(self, n: int) -> torch.Tensor:
        # gymnasium draws float64 then stores float32
        return self._uniform(n, -0.1, 0.1, 4).to(torch.float32).to(torch.float64)

    def _derivatives(self, s: torch.Tensor, torque: torch.Tensor) -> torch.Tensor:
        m1, m2, l1, lc1, lc2, g = self.m1, self.m2, self.l1, self.lc1, self.lc2, self.g
        i1 = i2 = self.moment
        theta1, theta2, dtheta1, dtheta2 = s.unbind(-1)
        cos2, sin2 = torch.cos(theta2), torch.sin(theta2)
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * sin2
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
            + phi2
        )
        ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
            m2 * lc2**2 + i2 - d2**2 / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return torch.stack((dtheta1, dtheta2, ddtheta1, ddtheta2), -1)

    def _transition(self, state, action):
        torque = (action - 1).to(torch.float64)
        dt, dt2 = self.dt, self.dt / 2.0
        k1 = self._derivatives(state, torque)
        k2 = self._derivatives(state + dt2 * k1, torque)
        k3 = self._derivatives(state + dt2 * k2, torque)
        k4 = self._derivatives(state + dt * k3, torque)
        ns = state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        theta1, theta2, dtheta1, dtheta2 = ns.unbind(-1)
        ns = torch.stack(
            (
                _wrap(theta1, -math.pi, math.pi),
                _wrap(theta2, -math.pi, math.pi),
                dtheta1.clamp(-self.max_vel_1, self.max_vel_1),
                dtheta2.clamp(-self.max_vel_2, self.max_vel_2),
            ),
            -1,
        )
        terminated = -torch.cos(ns[:, 0]) - torch.cos(ns[:, 1] + ns[:, 0]) > 1.0
        reward = terminated.to(torch.float64) - 1.0  # -1 a step, 0 on reaching the line
        return ns, reward, terminated

    def _observe(self, state):
        theta1, theta2, dtheta1, dtheta2 = state.unbind(-1)
        obs = (torch.cos(theta1), torch.sin(theta1), torch.cos(theta2), torch.sin(theta2), dtheta1, dtheta2)
        return torch.stack(obs, -1).to(torch.float32)


def _wrap(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """gymnasium's ``wrap``: shift by whole periods into [low, high] (values on a bound stay there)."""
    period = high - low
    above = torch.ceil((x - high) / period).clamp_min(0)
    below = torch.ceil((low - x) / period).clamp_min(0)
    return x - above * period + below * period


class PendulumVector(NativeVectorEnv):
    """gymnasium ``Pendulum-v1``: swing-up with torque in [-2, 2]; never terminates, 200-step limit."""

    gym_id = "Pendulum-v1"
    max_episode_steps = 200
    max_speed, max_torque, dt, m, length = 8.0, 2.0, 0.05, 1.0, 1.0
    single_observation_space = gym.spaces.Box(
        -np.array([1.0, 1.0, 8.0], dtype=np.float32), np.array([1.0, 1.0, 8.0], dtype=np.float32), dtype=np.float32
    )
    single_action_space = gym.spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)

    def __init__(self, num_envs: int, *, g: float = 10.0, **kwargs: Any):
        self.g = finite_kwarg("g", g, 0.0, 100.0)
        super().__init__(num_envs, **kwargs)

    def _initial_state(self, n: int) -> torch.Tensor:
        return self._uniform(n, [-math.pi, -1.0], [math.pi, 1.0], 2)

    def _transition(self, state, action):
        th, thdot = state.unbind(-1)
        u = action[:, 0]  # float32, as gymnasium computes the torque terms
        angle = (th + math.pi) % (2 * math.pi) - math.pi
        costs = angle.square() + 0.1 * thdot.square() + (0.001 * u.square()).to(torch.float64)
        torque_term = (3.0 / (self.m * self.length**2) * u).to(torch.float64)
        newthdot = thdot + (3 * self.g / (2 * self.length) * torch.sin(th) + torque_term) * self.dt
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = th + newthdot * self.dt
        return torch.stack((newth, newthdot), -1), -costs, torch.zeros_like(th, dtype=torch.bool)

    def _observe(self, state):
        th, thdot = state.unbind(-1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), -1).to(torch.float32)


def finite_kwarg(name: str, value: Any, low: float, high: float) -> float:
    """``env.kwargs.<name>`` as a float in ``[low, high]`` (finite), else a :class:`UserError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise UserError(f"env.kwargs.{name}: a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


class MountainCarVector(NativeVectorEnv):
    """gymnasium ``MountainCar-v0``: push left / none / right, -1 a step until the flag at 0.5."""

    gym_id = "MountainCar-v0"
    max_episode_steps = 200
    min_position, max_position, max_speed, goal_position = -1.2, 0.6, 0.07, 0.5
    force, gravity = 0.001, 0.0025
    single_observation_space = gym.spaces.Box(
        np.array([-1.2, -0.07], dtype=np.float32), np.array([0.6, 0.07], dtype=np.float32), dtype=np.float32
    )
    single_action_space = gym.spaces.Discrete(3)

    def __init__(self, num_envs: int, *, goal_velocity: float = 0.0, **kwargs: Any):
        self.goal_velocity = finite_kwarg("goal_velocity", goal_velocity, -self.max_speed, self.max_speed)
        super().__init__(num_envs, **kwargs)

    def _initial_state(self, n: int) -> torch.Tensor:
        position = self._uniform(n, -0.6, -0.4, 1)
        return torch.cat((position, torch.zeros_like(position)), -1)

    def _accelerate(self, state, push: torch.Tensor):
        position, velocity = state.unbind(-1)
        velocity = velocity + push - self.gravity * torch.cos(3 * position)
        velocity = velocity.clamp(-self.max_speed, self.max_speed)
        position = (position + velocity).clamp(self.min_position, self.max_position)
        velocity = torch.where((position == self.min_position) & (velocity < 0), 0.0, velocity)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        return position, velocity, terminated

    def _transition(self, state, action):
        position, velocity, terminated = self._accelerate(state, (action - 1).to(torch.float64) * self.force)
        return torch.stack((position, velocity), -1), -torch.ones_like(position), terminated


class MountainCarContinuousVector(MountainCarVector):
    """gymnasium ``MountainCarContinuous-v0``: force in [-1, 1], +100 at the flag (0.45), -0.1 a² a step."""

    gym_id = "MountainCarContinuous-v0"
    max_episode_steps = 999
    goal_position, power = 0.45, 0.0015
    single_action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def _transition(self, state, action):
        force = action[:, 0].to(torch.float64)
        position, velocity, _ = self._accelerate(state, force * self.power)
        # gymnasium keeps this env's state in float32 after every step (and tests the goal on it)
        next_state = torch.stack((position, velocity), -1).to(torch.float32).to(torch.float64)
        position, velocity = next_state.unbind(-1)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        reward = 100.0 * terminated.to(torch.float64) - 0.1 * force.square()
        return next_state, reward, terminated


# standard gymnasium id -> native implementation (env.backend=native)
NATIVE_ENVS: dict[str, type[NativeVectorEnv]] = {
    cls.gym_id: cls
    for cls in (
        CartPoleVector,
        CartPoleV0Vector,
        AcrobotVector,
        PendulumVector,
        MountainCarVector,
        MountainCarContinuousVector,
    )
}


def make_native_vector_env(
    env_id: str,
    num_envs: int,
    *,
    device: torch.device | str = "cpu",
    max_episode_steps: int | None = None,
    kwargs: dict | None = None,
) -> NativeVectorEnv:
    if env_id not in NATIVE_ENVS:
        raise UserError(
            f"env.backend=native: no native implementation of '{env_id}' "
            f"(available: {', '.join(NATIVE_ENVS)}); use env.backend=auto"
        )
    return NATIVE_ENVS[env_id](num_envs, device=device, max_episode_steps=max_episode_steps, **(kwargs or {}))


def native_action(action: torch.Tensor, space: gym.Space, *, one_hot: bool) -> torch.Tensor:
    """Policy actions as a native env takes them: categorical indices, or Box actions (clipped there).

    ``one_hot`` decodes as :func:`rlpilot.envs.gym_vector.to_numpy_action` does (``argmax(-1)``,
    including its silent all-zeros on a categorical index) so both backends behave alike.
    """
    if one_hot:
        if action.ndim == len(space.shape):
            action = action.unsqueeze(-1)
        return action.long().argmax(-1)
    return action


class NativeEnv(EnvBase):
    """TorchRL env of batch size ``[num_envs]`` over a :class:`NativeVectorEnv`: tensors in, tensors out.

    ``NativeEnv(CartPoleVector(4096, device="cuda"))``, or a named subclass: ``CartPole(4096, device="cuda")``.
    Partial resets follow TorchRL's ``"_reset"`` mask, so ``rollout``, ``step_and_maybe_reset`` and
    collectors work unchanged.
    """

    vector_class: type[NativeVectorEnv] | None = None

    def __init__(
        self,
        vector_env: NativeVectorEnv | int,
        *,
        device: torch.device | str = "cpu",
        one_hot_actions: bool = False,
        **kwargs: Any,
    ):
        if isinstance(vector_env, int):
            assert self.vector_class is not None, "pass a NativeVectorEnv"
            vector_env = self.vector_class(vector_env, device=device, **kwargs)
        super().__init__(batch_size=torch.Size([vector_env.num_envs]), device=vector_env.device)
        self.vector_env = vector_env
        self.num_envs = vector_env.num_envs
        set_batched_specs(self, vector_env, one_hot_actions=one_hot_actions)
        self.one_hot_actions = one_hot_actions and vector_env.discrete
        self._seed: int | None = None

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        return native_action(action, self.vector_env.single_action_space, one_hot=self.one_hot_actions)

    def _done_entries(self, terminated: torch.Tensor, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
        term, trunc = terminated.view(self.num_envs, 1), truncated.view(self.num_envs, 1)
        return {"terminated": term, "truncated": trunc, "done": term | trunc}

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        reset_mask = None if tensordict is None else tensordict.get("_reset", None)
        if reset_mask is not None:
            obs, _ = self.vector_env.reset(options={"reset_mask": reset_mask.view(-1)})
        else:
            seed, self._seed = self._seed, None  # a fresh seed applies to the next full reset only
            obs, _ = self.vector_env.reset(seed=seed)
        falses = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return TensorDict(
            {"observation": obs, **self._done_entries(falses, falses)}, batch_size=self.batch_size, device=self.device
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, reward, terminated, truncated, _ = self.vector_env.step(self.env_action(tensordict.get("action")))
        return TensorDict(
            {"observation": obs, "reward": reward.view(self.num_envs, 1), **self._done_entries(terminated, truncated)},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        self._seed = seed
        if seed is not None:
            self.vector_env.seed(seed)
        self.vector_env.reset(seed=seed)


class CartPole(NativeEnv):
    vector_class = CartPoleVector


class Acrobot(NativeEnv):
    vector_class = AcrobotVector


class Pendulum(NativeEnv):
    vector_class = PendulumVector


class MountainCar(NativeEnv):
    vector_class = MountainCarVector


class MountainCarContinuous(NativeEnv):
    vector_class = MountainCarContinuousVector


class NativeGymEnv(gym.Env):
    """One native env seen as a plain ``gymnasium.Env`` (numpy in, numpy out), for gymnasium tooling."""

    metadata = {"render_modes": []}

    def __init__(self, env_id: str, **kwargs: Any):
        self.native = make_native_vector_env(env_id, 1, kwargs=kwargs)
        self.observation_space = self.native.single_observation_space
        self.action_space = self.native.single_action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is None and not hasattr(self, "_seeded"):
            seed = int(self.np_random.integers(2**31))
        self._seeded = True
        obs, _ = self.native.reset(seed=seed)
        return obs[0].numpy(), {}

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.native.step(np.asarray(action).reshape(1, -1))
        return obs[0].numpy(), float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}


def gymnasium_view(env_id: str, **kwargs: Any) -> NativeGymEnv:
    """A single native env behind gymnasium's ``Env`` API (``gymnasium.utils.env_checker.check_env`` passes)."""
    return NativeGymEnv(env_id, **kwargs)
