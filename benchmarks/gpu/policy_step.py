"""The policy step on CUDA with and without its CUDA graph (``train.cuda_graphs``): microseconds a call of each
learner's ``act`` at the RL Zoo's settings (one env for DQN, SAC and TD3; eight for PPO), past the warm-up, so the
exploring path runs the network (DQN at its final epsilon). Run on the GPU machine (benchmarks/gpu/cuda_graphs.sh).

    python benchmarks/gpu/policy_step.py [--calls 3000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from time_to_solve import SAME_SETTINGS  # noqa: E402

from rlpilot.config import load_config  # noqa: E402
from rlpilot.control.algos import build  # noqa: E402
from rlpilot.envs import make_env  # noqa: E402

PRESETS = {"dqn": "dqn-cartpole", "sac": "sac-pendulum", "td3": "td3-pendulum", "ppo": "ppo-cartpole"}


def per_call_us(algo: str, graphs: bool, calls: int) -> float:
    torch.manual_seed(0)
    overrides = [*SAME_SETTINGS[algo], "train.device=cuda", f"train.cuda_graphs={graphs}"]
    config = load_config(PRESETS[algo], overrides=overrides)
    env = make_env(config.env, seed=0, device="cuda")
    agent = build(config, env, torch.device("cuda"))
    agent.frames = 10**7  # past learning_starts and the exploration schedule
    observation = torch.randn(config.env.num_envs, 4 if algo in ("dqn", "ppo") else 3, device="cuda")
    times = []
    for _ in range(5):
        for _ in range(50):
            agent.act(observation)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls // 5):
            agent.act(observation)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / (calls // 5) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| policy step | envs | plain (us a call) | CUDA graph (us a call) | plain / graph |")
    print("|---|---|---|---|---|")
    for algo in PRESETS:
        plain, graphed = per_call_us(algo, False, args.calls), per_call_us(algo, True, args.calls)
        envs = 8 if algo == "ppo" else 1
        print(f"| {algo.upper()} | {envs} | {plain:.1f} | {graphed:.1f} | {plain / graphed:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
