"""Collection throughput on CartPole-v1 (random or PPO policy), frames per second, one torch thread.

    python benchmarks/throughput.py [--sizes 1,8,64,512,4096] [--seconds 2]

Rows: raw gymnasium (one env, Python loop), gymnasium's numpy-vectorised CartPole (random actions),
TorchRL ``GymEnv`` (one env, random actions, ``rollout``), and rlpilot's collection path
(``BatchCollector`` with the PPO policy in the loop: policy forward, sampling, stepping, episode
bookkeeping, one TensorDict per batch). Ratios are against raw single-env gymnasium measured in the
same run. Native batched torch envs (issue 7) are not part of rlpilot yet.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch


def timed(fn, seconds: float) -> float:
    """Calls ``fn`` (returning frames done) until ``seconds`` pass; frames per second."""
    fn()  # warm-up
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        frames += fn()
    return frames / (time.perf_counter() - start)


def raw_single(seconds: float) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def run():
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
            if terminated or truncated:
                env.reset()
        return 1000

    return timed(run, seconds)


def raw_vector(n: int, seconds: float) -> float:
    from rlpilot.envs.gym_vector import CartPoleVectorEnvNoAutoreset

    env = CartPoleVectorEnvNoAutoreset(num_envs=n)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def run():
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(rng.integers(0, 2, n))
            done = terminated | truncated
            if done.any():
                env.reset(options={"reset_mask": done})
        return 100 * n

    return timed(run, seconds)


def torchrl_gymenv(seconds: float) -> float:
    from torchrl.envs import GymEnv

    env = GymEnv("CartPole-v1")
    env.set_seed(0)

    def run():
        return env.rollout(200, break_when_any_done=False).numel()

    return timed(run, seconds)


def rlpilot_collect(n: int, seconds: float) -> float:
    from rlpilot.algos.ppo import PPO
    from rlpilot.collect import BatchCollector
    from rlpilot.config import load_config
    from rlpilot.envs import make_env

    config = load_config("ppo-cartpole", overrides=[f"env.num_envs={n}", "ppo.minibatch_size=1"])
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    steps = max(8, 4096 // n)
    collector = BatchCollector(env, algo.act, steps=steps, seed=0)
    return timed(lambda: collector.collect().numel(), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,64,512,4096")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    base = raw_single(args.seconds)
    rows = [
        ("gymnasium CartPole-v1, 1 env, Python loop", 1, base),
        ("TorchRL GymEnv, 1 env, rollout", 1, torchrl_gymenv(args.seconds)),
    ]
    for n in sizes:
        rows.append(("gymnasium numpy-vectorised CartPole, random actions", n, raw_vector(n, args.seconds)))
    for n in sizes:
        rows.append(("rlpilot BatchCollector, PPO policy in the loop", n, rlpilot_collect(n, args.seconds)))
    print(f"{'path':<55} {'envs':>5} {'frames/s':>12} {'vs raw 1-env gymnasium':>24}")
    for name, n, fps in rows:
        print(f"{name:<55} {n:>5} {fps:>12,.0f} {fps / base:>23.2f}x")


if __name__ == "__main__":
    main()
