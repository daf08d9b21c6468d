"""Batched collection that pays TorchRL's per-step overhead once per batch.

Profile that shaped it (CartPole, 16 envs, one core): ``Collector`` over the TorchRL env with a
``ProbabilisticActor`` took ~1.3 ms per vector step and ``env.step_and_maybe_reset`` + actor ~1.0 ms
(TensorDict construction, spec checks and ``step_mdp`` each step) while the numpy env itself takes
~0.05 ms. Here the gymnasium vector env is stepped directly with plain tensors (policy call,
observation transforms from :func:`rlpilot.envs.observation_reader`, one preallocated buffer), and
one TensorDict in TorchRL's layout is built per batch, so losses and value estimators read it unchanged.

Profile at 4,096 CartPoles (2026-11-30, ~3 ms a vector step): the policy forward dominates (two
``tanh`` layers ~1 ms each on this CPU); ``torch.distributions.Categorical`` sampling took 1.3 ms and
was replaced by Gumbel-max on plain tensors (0.2 ms, in the PPO algorithm); the env step ~0.2 ms.
``torch.compile`` of the update was measured at ~25 s to compile against ~1 ms saved per update:
a CartPole run (a few hundred updates) never earns it back, so nothing here is compiled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDict
from torchrl.envs import RewardScaling, TransformedEnv

from rlpilot.common.errors import StopRun
from rlpilot.config.schema import Config
from rlpilot.envs.gym_vector import step_checked
from rlpilot.envs.make import observation_reader
from rlpilot.envs.native import NativeEnv

TRANSITION_KEYS = (
    "observation",
    "action",
    ("next", "observation"),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "done"),
)
"""What a transition of a collected batch holds (beyond the algorithm's own entries): what replay stores."""


def nested_tensordict(leaves: dict[tuple[str, ...], torch.Tensor], batch_size, device) -> TensorDict:
    """A TensorDict of ``batch_size`` holding ``leaves``, keyed by tuples (``("next", "reward")`` is nested), built
    without the constructor's per-value checks: ~2 us instead of ~15 us for a transition's leaves, paid per collected
    batch and per minibatch (at the RL Zoo's one env and one step a batch, per frame). Every leaf must already lead
    with ``batch_size``."""
    size = torch.Size(batch_size)
    top: dict = {}
    inner: dict[str, dict] = {}
    for key, value in leaves.items():
        if len(key) == 1:
            top[key[0]] = value
        else:
            inner.setdefault(key[0], {})[key[1:]] = value
    for name, values in inner.items():
        top[name] = nested_tensordict(values, size, device)
    return TensorDict._new_unsafe(top, batch_size=size, device=device)


def as_key(key: str | tuple[str, ...]) -> tuple[str, ...]:
    """A TensorDict key as a tuple (``"action"`` -> ``("action",)``)."""
    return (key,) if isinstance(key, str) else tuple(key)


ActFn = Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]


class NonFiniteObservation(StopRun):
    """An env returned NaN/inf and ``guard.on_nonfinite_obs`` is ``stop``."""


class EpisodeTracker:
    """Running return/length per env as tensors on the env's device; finished episodes are read
    once per batch (:meth:`drain`), so stepping never waits on the device. ``agents`` > 0: rewards
    are ``[num_envs, agents]`` and each finished episode's return is a list, one per agent."""

    def __init__(self, num_envs: int, device: torch.device | str = "cpu", *, agents: int = 0):
        shape = (num_envs, agents) if agents else (num_envs,)
        self.returns = torch.zeros(shape, dtype=torch.float64, device=device)
        self.lengths = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.episodes = 0

    def update(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        self.returns += reward
        self.lengths += 1
        self._steps.append((done, self.returns.clone(), self.lengths.clone()))
        self.returns.masked_fill_(done.view(-1, *[1] * (self.returns.dim() - 1)), 0.0)
        self.lengths.masked_fill_(done, 0)

    def drain(self) -> tuple[list, list[int]]:
        """Returns and lengths of the episodes finished since the last call, in the order they ended."""
        if not self._steps:
            return [], []
        done, returns, lengths = (torch.stack(column) for column in zip(*self._steps))
        self._steps = []
        finished_returns, finished_lengths = returns[done].tolist(), lengths[done].tolist()
        self.episodes += len(finished_returns)
        return finished_returns, finished_lengths


class HostEpisodeTracker:
    """:class:`EpisodeTracker` for a gymnasium env: numpy rewards and done flags, numpy running
    sums (a numpy operation on a few numbers costs a fraction of a torch one's dispatch: ~20 us -> ~3 us a step at
    one env on this project's 2-core machine, 2026-12-04). The same float64 sums, the same order of episodes."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self._finished_returns: list[float] = []
        self._finished_lengths: list[int] = []
        self.episodes = 0

    def update(self, reward: np.ndarray, done: np.ndarray) -> None:
        self.returns += reward
        self.lengths += 1
        if done.any():
            self._finished_returns += self.returns[done].tolist()
            self._finished_lengths += self.lengths[done].tolist()
            self.returns[done] = 0.0
            self.lengths[done] = 0

    def drain(self) -> tuple[list, list[int]]:
        """Returns and lengths of the episodes finished since the last call, in the order they ended."""
        returns, lengths = self._finished_returns, self._finished_lengths
        self._finished_returns, self._finished_lengths = [], []
        self.episodes += len(returns)
        return returns, lengths


class BatchCollector:
    """Collects ``[num_envs, steps]`` TensorDicts from a :func:`rlpilot.envs.make_env` env.

    Two backends behind one loop: a gymnasium vector env (numpy; its rewards, flags and episode sums stay numpy
    until the batch ends, then become tensors on the run's device) or a native env
    (:mod:`rlpilot.envs.native`: tensors on the run's device throughout). On a native env nothing in a step waits on
    the device: finished envs are reset with a mask, episode statistics are read once per batch, and the non-finite
    observation guard is skipped (the native dynamics are finite for any clipped action).
    """

    def __init__(
        self,
        env: TransformedEnv,
        act: ActFn,
        *,
        steps: int,
        seed: int | None,
        on_nonfinite: str = "reset",
        env_id: str = "the env",
    ):
        self.vector_env = env.base_env.vector_env
        self.env_id = env_id
        self.env_action = env.base_env.env_action
        self.num_envs = self.vector_env.num_envs
        self.device = env.device
        self.native = isinstance(env.base_env, NativeEnv)
        # masked resets without a `done.any()` test: on a GPU that test would wait for every step
        self.sync_free = self.native and self.device.type != "cpu"
        self.read_observation = observation_reader(env)
        self.act = act
        self.steps = steps
        self.reward_scale = next((t.scale for t in env.transform if isinstance(t, RewardScaling)), None)
        # a gymnasium env: a step's bookkeeping in numpy, tensors once a batch (torch's per-op dispatch was most of a
        # step at the RL Zoo's one env: ~110 of ~250 us for DQN CartPole, 2026-12-04)
        self.episodes = EpisodeTracker(self.num_envs, self.device) if self.native else HostEpisodeTracker(self.num_envs)
        self.on_nonfinite = on_nonfinite
        self.events: list[dict] = []  # drained by the training loop
        raw, _ = self.vector_env.reset(seed=seed)
        self.observation = self.read_observation(raw, reset=True)

    @classmethod
    def for_run(cls, env: TransformedEnv, act: ActFn, config: Config, *, seed: int) -> BatchCollector:
        """The collector a control run's settings ask for (steps per env, the non-finite guard, the env's name)."""
        return cls(
            env,
            act,
            steps=config.algo_config.steps_per_env,
            seed=seed,
            on_nonfinite=config.guard.on_nonfinite_obs,
            env_id=config.env.id,
        )

    def collect(self, steps: int | None = None) -> TensorDict:
        """One batch of ``steps`` env steps per env (default: the run's ``steps``)."""
        observations, next_observations, actions, extras = [], [], [], []
        rewards, terminated, truncated = [], [], []
        for _ in range(self.steps if steps is None else steps):
            observation = self.observation
            action, extra = self.act(observation)
            raw, reward, term, trunc, _ = step_checked(self.vector_env, self.env_id, self.env_action(action))
            next_observation = self.read_observation(raw)
            if self.native:
                self.observation = next_observation
                done = term | trunc
                if self.sync_free or bool(done.any()):
                    raw, _ = self.vector_env.reset(options={"reset_mask": done})
                    self.observation = self.read_observation(raw, reset=done)
            else:
                reward = np.asarray(reward, dtype=np.float32)
                term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
                if not self._finite(next_observation):
                    term = self._non_finite(next_observation, term)
                done = term | trunc
                self.observation = next_observation
                if done.any():
                    raw, _ = self.vector_env.reset(options={"reset_mask": done})
                    self.observation = self.read_observation(raw, reset=done)
            self.episodes.update(reward, done)
            observations.append(observation)
            next_observations.append(next_observation)
            actions.append(action)
            extras.append(extra)
            rewards.append(reward)
            terminated.append(term)
            truncated.append(trunc)
        return self._as_tensordict(observations, next_observations, actions, extras, rewards, terminated, truncated)

    def _finite(self, observation: torch.Tensor) -> bool:
        """Whether a gymnasium step's observation is all finite; on the CPU tested in numpy (the tensor shares the
        array's memory), a fraction of torch's cost on a few numbers."""
        if self.device.type == "cpu":
            return bool(np.isfinite(observation.numpy()).all())
        return bool(torch.isfinite(observation).all())

    def _non_finite(self, observation: torch.Tensor, terminated: np.ndarray) -> np.ndarray:
        """NaN/inf from the env: record which envs; ``stop`` raises, ``reset`` ends their episodes.

        The bad observation is replaced by zeros and the transition marked terminated, so nothing
        bootstraps from it and no NaN reaches a network; the env is reset with the others that finished.
        """
        bad = ~torch.isfinite(observation).reshape(self.num_envs, -1).all(-1)
        envs = bad.nonzero().view(-1).tolist()
        self.events.append({"event": "nonfinite_observation", "envs": envs, "action": self.on_nonfinite})
        if self.on_nonfinite == "stop":
            raise NonFiniteObservation(f"non-finite observation from env(s) {envs}")
        observation[bad] = 0.0
        return terminated | bad.cpu().numpy()

    def _as_tensordict(self, observations, next_observations, actions, extras, rewards, terminated, truncated):
        """One TensorDict ``[num_envs, steps]`` (time last, as TorchRL's value estimators expect)."""

        def stack(items: list[torch.Tensor]) -> torch.Tensor:
            return torch.stack(items, 1)

        def flags(items: list) -> torch.Tensor:
            if self.native:
                return torch.stack(items, 1).unsqueeze(-1)
            return torch.from_numpy(np.stack(items, 1)).unsqueeze(-1).to(self.device)  # numpy: once a batch

        term, trunc = flags(terminated), flags(truncated)
        reward = flags(rewards)
        if not self.native and not bool(torch.isfinite(reward).all()):  # once a batch: gymnasium rewards (CPU)
            envs = (~torch.isfinite(reward)).reshape(self.num_envs, -1).any(-1).nonzero().view(-1).tolist()
            raise StopRun(
                f"env '{self.env_id}' returned non-finite rewards (NaN or inf) in env(s) {envs}: nothing can be "
                f"learned from them; fix the env's reward (rlpilot check {self.env_id} shows it)",
                cause="nonfinite_reward",
                envs=envs,
            )
        if self.reward_scale is not None:  # the chain's RewardScaling, applied once per batch
            reward = reward * self.reward_scale
        data = {
            ("observation",): stack(observations),
            ("action",): stack(actions),
            **{as_key(key): stack([extra[key] for extra in extras]) for key in extras[0]},
            ("next", "observation"): stack(next_observations),
            ("next", "reward"): reward,
            ("next", "terminated"): term,
            ("next", "truncated"): trunc,
            ("next", "done"): term | trunc,
        }
        return nested_tensordict(data, [self.num_envs, len(observations)], self.device)
