"""Cost of one gradient update (forward, backward, clip, Adam) per loss implementation: PPO and DQN presets.

python benchmarks/update_cost.py [--minibatch 256] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from rlpilot.config import load_config
from rlpilot.control.algos.ppo import PPO
from rlpilot.control.collect import BatchCollector
from rlpilot.envs import make_env


def time_updates(impl: str, minibatch: int, repeats: int) -> tuple[float, float]:
    """Seconds per gradient update (GAE excluded) and per GAE pass over a 256-frame batch."""
    torch.manual_seed(0)
    config = load_config(
        "ppo-cartpole",
        overrides=[
            f"ppo.loss_impl={impl}",
            "ppo.epochs=10",
            f"ppo.minibatch_size={minibatch}",
            "env.num_envs=8",
            f"ppo.steps_per_env={max(32, minibatch // 8)}",
        ],
    )
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    batch = BatchCollector(env, algo.act, steps=config.ppo.steps_per_env, seed=0).collect()
    algo.learn(batch, 0)  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        with torch.no_grad():
            algo.advantage(batch)
    gae = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(repeats // 10):
        algo.learn(batch, 0)
    learn = (time.perf_counter() - start) / (repeats // 10)
    updates = config.ppo.epochs * config.minibatches_per_epoch
    return (learn - gae) / updates, gae


def time_dqn_updates(impl: str, repeats: int) -> float:
    """Seconds per DQN gradient update with the dqn-cartpole preset (uniform replay, 1-step targets)."""
    from rlpilot.control.algos.dqn import DQN

    torch.manual_seed(0)
    config = load_config("dqn-cartpole", overrides=[f"dqn.loss_impl={impl}", "dqn.n_step=1", "dqn.learning_starts=0"])
    env = make_env(config.env, seed=0)
    algo = DQN(config, env, torch.device("cpu"))
    collector = BatchCollector(env, algo.act, steps=config.dqn.steps_per_env, seed=0)
    for i in range(8):
        algo.learn(collector.collect(), (i + 1) * config.frames_per_batch)
    batch = collector.collect()
    start = time.perf_counter()
    for _ in range(repeats):
        algo.learn(batch, 10**6)
    return (time.perf_counter() - start) / (repeats * config.dqn_updates_per_batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {impl: time_updates(impl, args.minibatch, args.repeats) for impl in ("torchrl", "lean")}
    for impl, (update, gae) in results.items():
        print(
            f"{impl:<8} {update * 1e3:6.2f} ms per update (minibatch {args.minibatch}, {args.threads} thread); "
            f"GAE {gae * 1e3:.2f} ms per batch"
        )
    print(f"ratio torchrl / lean per update: {results['torchrl'][0] / results['lean'][0]:.2f}x")
    dqn = {impl: time_dqn_updates(impl, max(2, args.repeats // 60)) for impl in ("torchrl", "lean")}
    for impl, seconds in dqn.items():
        print(f"dqn {impl:<8} {seconds * 1e3:6.2f} ms per update (dqn-cartpole preset: batch 64, 64-64 MLP)")
    print(f"ratio torchrl / lean per DQN update: {dqn['torchrl'] / dqn['lean']:.2f}x")


if __name__ == "__main__":
    main()
