"""``ControlTrainable``: an algorithm on a vectorised env, as the loop sees it (``rlpilot.loop.trainable``).

One ``step``: the collector gathers a ``[num_envs, steps]`` batch with the algorithm's ``act``, the
algorithm learns from it. ``evaluate`` plays greedy episodes side by side on a separate env (one
episode per env, fresh seeds each evaluation).
"""

from __future__ import annotations

import torch

from rlpilot import registry
from rlpilot.common.bounds import Allocation, networks
from rlpilot.config.schema import Config
from rlpilot.control.algos import build
from rlpilot.control.collect import BatchCollector
from rlpilot.control.evaluate import evaluate
from rlpilot.envs.make import env_allocations, make_env, obs_norm_state
from rlpilot.loop.trainable import Evaluation, EventSink, Step

EVAL_SEED_OFFSET = 10_000


class ControlTrainable:
    def __init__(
        self,
        config: Config,
        *,
        device: torch.device,
        seed: int,
        state: dict | None,
        event: EventSink,
        remote: bool = False,
    ):
        """``remote``: collect on ``config.collect.workers`` Ray actors (a Ray session is open:
        ``rlpilot.control.distributed``); else in this process."""
        self.config = config
        self.env = make_env(config.env, seed=seed, device=device, obs_norm_state=state["obs_norm"] if state else None)
        self.eval_env = make_env(
            config.env,
            num_envs=config.train.eval_episodes,
            seed=config.train.seed + EVAL_SEED_OFFSET,
            device=device,
            obs_norm_state=obs_norm_state(self.env),
        )
        self.algo = build(config, self.env, device)
        self.frames = 0
        if state is not None:
            self.load_state_dict(state)
        self.guard = self.algo.guard
        self.remote = remote
        if remote:
            from rlpilot.control.distributed import RayCollection

            self.collector = RayCollection(
                config, seed=seed, obs_norm=obs_norm_state(self.env), device=device, synchronous=self.algo.on_policy
            )
            self.collector.publish(self.algo.acting_state())
        else:
            self.collector = BatchCollector.for_run(self.env, self.algo.act, config, seed=seed)
        # an algorithm may size the batches collected here (``Algorithm.batch_steps``: off-policy random warm-up)
        self.batch_steps = None if remote else getattr(self.algo, "batch_steps", None)

    @staticmethod
    def allocations(config: Config) -> list[Allocation]:
        """What the run's envs, batches, replay buffer and networks would hold, from one env's spaces."""
        algo = config.algo_config
        section = registry.settings_section(config.algo)
        parts, (observation, action) = env_allocations(
            config.env,
            steps_per_env=algo.steps_per_env,
            section=section,
            eval_envs=config.train.eval_episodes,
            replay_frames=getattr(algo, "buffer_size", 0),
        )
        inputs, inputs_sized_by = max(
            (config.frames_per_batch, ("env.num_envs", f"{section}.steps_per_env")),  # PPO values the whole batch
            (getattr(algo, "batch_size", 0), (f"{section}.batch_size",)),
            (config.train.eval_episodes, ("train.eval_episodes",)),  # one greedy call for every episode
        )
        critics = {"ppo": [(observation, 1)], "dqn": []}.get(config.algo, [(observation + action, 1)] * 2)
        shapes = [(observation, action), *critics]  # the actor (DQN: the Q-network), the critics
        return [*parts, *networks(shapes, config.model.hidden_sizes, inputs=inputs, inputs_sized_by=inputs_sized_by)]

    def step(self) -> Step:
        batch = self.collector.collect(self.batch_steps(self.frames) if self.batch_steps else None)
        self.frames += batch.numel()
        metrics = self.algo.learn(batch, self.frames)
        if self.remote:
            self.collector.publish(self.algo.acting_state())
            metrics.update(self.collector.metrics())
        reward = batch.get(("next", "reward"))  # what the learner sees (after reward scaling)
        # one host sync for both; a one-frame batch (the RL Zoo's one env, one step) has no spread: 0, not NaN
        mean, std = torch.stack([reward.mean(), reward.std() if reward.numel() > 1 else reward.new_zeros(())]).tolist()
        metrics.update({"train/reward_mean": mean, "train/reward_std": std})
        returns, lengths = self.collector.episodes.drain()
        events, self.collector.events = self.collector.events, []
        return Step(batch.numel(), metrics, returns, lengths, events)

    def evaluate(self, index: int) -> Evaluation:
        result = evaluate(
            self.eval_env,
            self.algo.greedy_action,
            episodes=self.config.train.eval_episodes,
            seed=self.config.train.seed
            + EVAL_SEED_OFFSET
            + (0 if self.config.train.eval_same_episodes else 1000 * index),
        )
        return Evaluation(result.mean, result.std, result.metrics(), {"actions_seen": result.actions_seen})

    def facts(self) -> dict:
        """What ``doctor`` needs to know of the env: action space and time limit."""
        from torchrl.data import Categorical, OneHot

        spec = self.env.full_action_spec_unbatched["action"]
        if isinstance(spec, (Categorical, OneHot)):
            action = {"type": "discrete", "n": int(spec.space.n), "encoding": self.config.env.action_encoding}
        else:
            action = {"type": "box", "dim": int(spec.shape[-1])}
        _, env_id = registry.resolve_env(self.config.env.id)  # the env is built: its module is imported already
        registered = registry.registered_spec(env_id) if env_id else None
        limit = self.config.env.max_episode_steps or (registered.max_episode_steps if registered else None)
        return {"env_facts": {"action": action, "max_episode_steps": limit}}

    def state_dict(self) -> dict:
        return {"algo": self.algo.state_dict(), "obs_norm": obs_norm_state(self.env), "frames": self.frames}

    def load_state_dict(self, state: dict) -> None:
        self.algo.load_state_dict(state["algo"])
        self.frames = int(state["frames"])

    def close(self) -> None:
        if self.remote:
            self.collector.close()
        self.env.close()
        self.eval_env.close()
