"""Collection throughput, frames per second, per env and path, with ratios against raw gymnasium.

    python benchmarks/throughput.py [--envs CartPole-v1,...] [--sizes 1,8,64,512,4096] [--seconds 2]
                                    [--device cpu|cuda] [--out FILE]

For each env (default: the five with a native implementation):
- ``gymnasium, 1 env``: ``gym.make(id)`` stepped in a Python loop with random actions (the baseline);
- ``gymnasium numpy-vectorised`` (CartPole only: gymnasium ships no other) with random actions;
- ``TorchRL GymEnv``: one env, random actions, ``rollout`` (TorchRL's per-step TensorDict path);
- ``native env, random actions``: :mod:`rlpilot.envs.native` stepped directly (the env alone);
- ``rlpilot collect``: :class:`rlpilot.control.collect.BatchCollector` with the PPO policy in the loop
  (policy forward and sampling, stepping, masked resets, episode bookkeeping, one TensorDict per
  batch) on the default gymnasium backend and on ``env.backend=native``.
One torch thread (``torch.set_num_threads(1)``); on ``--device cuda`` the native rows run on the GPU.
Ratios are against the 1-env gymnasium row of the same env, measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch

from rlpilot.envs.native import NATIVE_ENVS, make_native_vector_env

DEFAULT_ENVS = "CartPole-v1,Acrobot-v1,Pendulum-v1,MountainCar-v0,MountainCarContinuous-v0"


def timed(fn, seconds: float, sync=lambda: None) -> float:
    """Calls ``fn`` (returning frames done) until ``seconds`` pass; frames per second."""
    fn()  # warm-up
    sync()
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        frames += fn()
    sync()
    return frames / (time.perf_counter() - start)


def raw_single(env_id: str, seconds: float) -> float:
    env = gym.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(1000)]

    def run():
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return len(actions)

    return timed(run, seconds)


def raw_numpy_vector(n: int, seconds: float) -> float:
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


def torchrl_gymenv(env_id: str, seconds: float) -> float:
    from torchrl.envs import GymEnv

    env = GymEnv(env_id)
    env.set_seed(0)

    def run():
        return env.rollout(200, break_when_any_done=False).numel()

    return timed(run, seconds)


def native_random(env_id: str, n: int, seconds: float, device: str) -> float:
    env = make_native_vector_env(env_id, n, device=device)
    env.reset(seed=0)
    space = env.single_action_space
    generator = torch.Generator(device=device).manual_seed(0)

    def random_actions() -> torch.Tensor:
        if isinstance(space, gym.spaces.Discrete):
            return torch.randint(int(space.n), (n,), device=device, generator=generator)
        low, high = float(space.low[0]), float(space.high[0])
        return torch.rand(n, 1, device=device, generator=generator) * (high - low) + low

    def run():
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(random_actions())
            env.reset(options={"reset_mask": terminated | truncated})
        return 100 * n

    return timed(run, seconds, _sync(device))


def rlpilot_collect(env_id: str, n: int, seconds: float, backend: str, device: str) -> float:
    from rlpilot.config import load_config
    from rlpilot.control.algos.ppo import PPO
    from rlpilot.control.collect import BatchCollector
    from rlpilot.envs import make_env

    algo_name = "ppo"
    overrides = [f"env.num_envs={n}", "ppo.minibatch_size=1", f"env.backend={backend}", f"train.device={device}"]
    config = load_config(algo=algo_name, env_id=env_id, overrides=overrides)
    env = make_env(config.env, seed=0, device=device)
    algo = PPO(config, env, torch.device(device))
    steps = max(8, 4096 // n)
    collector = BatchCollector(env, algo.act, steps=steps, seed=0)

    def run() -> int:
        batch = collector.collect()
        collector.episodes.drain()  # what the training loop does once per batch
        return batch.numel()

    return timed(run, seconds, _sync(device))


def _sync(device: str):
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=DEFAULT_ENVS)
    parser.add_argument("--sizes", default="1,8,64,512,4096")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-gym-backend", action="store_true", help="only native rows for rlpilot collect")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = [
        f"device: {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else "")
        + f"; torch {torch.__version__}; one torch thread; {args.seconds:g} s per row",
        f"{'env':<25} {'path':<46} {'envs':>6} {'frames/s':>13} {'vs gym 1-env':>13}",
    ]
    print(*lines, sep="\n", flush=True)

    def row(env_id: str, path: str, n: int, fps: float, base: float) -> None:
        line = f"{env_id:<25} {path:<46} {n:>6} {fps:>13,.0f} {fps / base:>12.2f}x"
        lines.append(line)
        print(line, flush=True)

    for env_id in args.envs.split(","):
        base = raw_single(env_id, args.seconds)
        row(env_id, "gymnasium, 1 env, Python loop", 1, base, base)
        row(env_id, "TorchRL GymEnv, 1 env, rollout", 1, torchrl_gymenv(env_id, args.seconds), base)
        if env_id.startswith("CartPole"):
            for n in sizes:
                row(env_id, "gymnasium numpy-vectorised, random", n, raw_numpy_vector(n, args.seconds), base)
        if env_id in NATIVE_ENVS:
            for n in sizes:
                row(env_id, "native env, random", n, native_random(env_id, n, args.seconds, args.device), base)
        if not args.skip_gym_backend:
            for n in sizes:
                fps = rlpilot_collect(env_id, n, args.seconds, "auto", args.device)
                row(env_id, "rlpilot collect + PPO, gymnasium backend", n, fps, base)
        if env_id in NATIVE_ENVS:
            for n in sizes:
                fps = rlpilot_collect(env_id, n, args.seconds, "native", args.device)
                row(env_id, "rlpilot collect + PPO, native backend", n, fps, base)
    if args.out:
        from pathlib import Path

        from rlpilot.common.files import atomic_write

        atomic_write(Path(args.out), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
