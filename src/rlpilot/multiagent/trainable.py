"""``MultiAgentTrainable``: MAPPO/IPPO on a batched multi-agent env, as the loop sees it.

One ``step``: ``[num_envs, steps]`` env steps collected with every agent acting (one policy call per
env step for the whole group), then one PPO learning phase. A frame is one env step (all agents
acting once), as in TorchRL's and BenchMARL's frame counts. An episode's return is the mean over the
group of each agent's summed reward (BenchMARL's ``episode_reward_mean``); per-agent returns are
logged beside it (``train/return_agent<i>``, ``eval/return_agent<i>``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDict

from rlpilot import registry
from rlpilot.common.bounds import FLOAT_BYTES, Allocation, networks
from rlpilot.config.schema import Config
from rlpilot.control.collect import EpisodeTracker
from rlpilot.envs.make import BATCH_COPIES, PER_FRAME_EXTRA_BYTES
from rlpilot.loop.trainable import Evaluation, EventSink, Step
from rlpilot.multiagent.envs import group_env_bytes, make_vector, task_metrics

EVAL_SEED_OFFSET = 10_000


class AgentCollector:
    """Collects ``[num_envs, steps]`` batches of a group; finished envs are reset with a mask."""

    def __init__(self, env, act: Callable, *, steps: int, reward_scale: float = 1.0):
        self.env, self.act, self.steps, self.reward_scale = env, act, steps, reward_scale
        self.episodes = EpisodeTracker(env.num_envs, env.device, agents=env.n_agents)
        self.observation = env.reset()

    def collect(self) -> TensorDict:
        columns: dict[str, list[torch.Tensor]] = {}
        for _ in range(self.steps):
            observation = self.observation
            action, extra = self.act(observation)
            next_observation, reward, terminated, truncated = self.env.step(action)
            done = terminated | truncated
            self.episodes.update(reward, done)
            self.observation = self.env.reset(mask=done) if bool(done.any()) else next_observation
            per_agent = (self.env.num_envs, self.env.n_agents, 1)
            step = {
                "observation": observation,
                "action": action,
                **extra,
                "next_observation": next_observation,
                "reward": reward.unsqueeze(-1) * self.reward_scale,  # what the learner sees; returns stay unscaled
                "terminated": terminated.view(-1, 1, 1).expand(per_agent),
                "done": done.view(-1, 1, 1).expand(per_agent),
            }
            for key, value in step.items():
                columns.setdefault(key, []).append(value)
        data = {key: torch.stack(values, 1) for key, values in columns.items()}
        next_keys = ("next_observation", "reward", "terminated", "done")
        nxt = {key.removeprefix("next_"): data.pop(key) for key in next_keys}
        return TensorDict({**data, "next": nxt}, batch_size=[self.env.num_envs, self.steps], device=self.env.device)


def greedy_episodes(env, policy: Callable, *, seed: int) -> tuple[np.ndarray, dict[str, float]]:
    """One greedy episode per env of ``env`` (seeded): per-agent returns ``[episodes, n_agents]`` and the
    task's own end-of-episode measures (simple_spread: landmarks covered, distances, collisions)."""
    observation = env.reset(seed=seed)
    returns = torch.zeros(env.num_envs, env.n_agents, dtype=torch.float64)
    finished = torch.zeros(env.num_envs, dtype=torch.bool)
    final = torch.zeros_like(observation)
    while not bool(finished.all()):  # the policy runs in inference mode, the env not: it updates its state in place
        observation, reward, terminated, truncated = env.step(policy(observation))
        done = (terminated | truncated).cpu()
        returns += reward.cpu().double() * (~finished).unsqueeze(-1)
        ending = done & ~finished
        final[ending] = observation[ending]
        finished |= done
        if bool(done.any()) and not bool(finished.all()):
            observation = env.reset(mask=done)
    return returns.numpy(), task_metrics(env, final)


class MultiAgentTrainable:
    def __init__(self, config: Config, *, device: torch.device, seed: int, state: dict | None, event: EventSink):
        self.config = config
        self.env = make_vector(config.env, config.env.num_envs, seed=seed, device=device)
        self.eval_env = make_vector(
            config.env,
            config.train.eval_episodes,
            seed=config.train.seed + EVAL_SEED_OFFSET,
            device=device,
            sized_by=("train.eval_episodes",),
        )
        self.algo = registry.load_object(registry.algorithm(config.algo).implementation)(config, self.env, device)
        self.frames = 0
        if state is not None:
            self.load_state_dict(state)
        self.guard = self.algo.guard
        self.collector = AgentCollector(
            self.env, self.algo.act, steps=config.ppo.steps_per_env, reward_scale=config.env.reward_scale
        )

    @staticmethod
    def allocations(config: Config) -> list[Allocation]:
        """What the run's envs, batches and networks would hold, from one copy of the env (its agents and
        observation size). MAPPO's critic reads every agent's observation for each agent: its input over a batch
        grows with the square of the agents."""
        probe = make_vector(config.env, 1, seed=0)
        agents, observation, actions = probe.n_agents, probe.obs_dim, probe.num_actions
        probe.close()
        fewer_agents = tuple(f"env.kwargs.{name}" for name in registry.MULTIAGENT_KWARG_BOUNDS.get(config.env.id, {}))
        sized = ("env.num_envs", "ppo.steps_per_env", *fewer_agents)
        frames, shared = config.frames_per_batch * agents, config.marl.share_parameters
        per_agent = 2 * observation * FLOAT_BYTES + PER_FRAME_EXTRA_BYTES  # observation and next observation
        critic_in = observation * (agents if config.algo == "mappo" else 1) + agents
        envs = config.env.num_envs + config.train.eval_episodes
        shapes = [(observation + agents, actions), (critic_in, 1)] * (1 if shared else agents)
        return [
            Allocation(
                f"batches of {config.frames_per_batch:,} frames x {agents} agents",
                frames * per_agent * BATCH_COPIES,
                sized,
            ),
            Allocation(
                f"the critic's input over a batch ({critic_in:,} numbers an agent)",
                2 * frames * critic_in * FLOAT_BYTES,
                sized,
            ),
            Allocation(
                f"{envs:,} env copies",
                envs * group_env_bytes(agents, observation),
                ("env.num_envs", "train.eval_episodes"),
            ),
            *networks(
                shapes,
                config.model.hidden_sizes,
                inputs=frames if shared else config.frames_per_batch,
                inputs_sized_by=sized,
            ),
        ]

    def step(self) -> Step:
        batch = self.collector.collect()
        self.frames += batch.numel()
        metrics = self.algo.learn(batch, self.frames)
        reward = batch.get(("next", "reward"))
        metrics.update({"train/reward_mean": float(reward.mean()), "train/reward_std": float(reward.std())})
        per_agent, lengths = self.collector.episodes.drain()
        if per_agent:
            means = np.mean(per_agent, axis=0)
            metrics.update({f"train/return_agent{i}": float(value) for i, value in enumerate(means)})
        returns = [float(np.mean(episode)) for episode in per_agent]
        return Step(batch.numel(), metrics, returns, lengths)

    def evaluate(self, index: int) -> Evaluation:
        seed = self.config.train.seed + EVAL_SEED_OFFSET + 1000 * index
        per_agent, task = greedy_episodes(self.eval_env, self.algo.greedy_action, seed=seed)
        returns = per_agent.mean(1)
        metrics = {"eval/return_mean": float(returns.mean()), "eval/return_std": float(returns.std())}
        metrics.update({f"eval/return_agent{i}": float(v) for i, v in enumerate(per_agent.mean(0))})
        metrics.update({f"eval/{key}": value for key, value in task.items()})
        return Evaluation(float(returns.mean()), float(returns.std()), metrics)

    def facts(self) -> dict:
        """What doctor and eval need to know of the env: the group, its agents, actions, episode length."""
        env = self.env
        return {
            "env_facts": {
                "action": {"type": "discrete", "n": env.num_actions, "encoding": "categorical"},
                "max_episode_steps": env.max_cycles,
                "agents": {"group": env.group, "names": list(env.agent_names), "obs_dim": env.obs_dim},
            }
        }

    def state_dict(self) -> dict:
        return {"algo": self.algo.state_dict(), "frames": self.frames}

    def load_state_dict(self, state: dict) -> None:
        self.algo.load_state_dict(state["algo"])
        self.frames = int(state["frames"])

    def close(self) -> None:
        self.env.close()
        self.eval_env.close()
