"""Time to solve CartPole-v1: rlpilot against Stable-Baselines3 with RL Zoo's tuned hyperparameters.

Pairs: rlpilot ppo-cartpole vs SB3 PPO (Zoo: 8 envs, n_steps 32, batch 256, lambda 0.8, gamma 0.98,
20 epochs, linear lr 1e-3 and clip 0.2; budget 100k frames), and rlpilot dqn-cartpole vs SB3 DQN
(Zoo: lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000, target_update_interval 10,
train_freq 256, gradient_steps 128, exploration 0.16 -> 0.04, net [256, 256]; budget 50k frames).

Both sides use the same evaluation rule: greedy (deterministic) policy, 20 episodes run side by side
(rlpilot: its vectorised evaluator; SB3: ``evaluate_policy`` on a 20-env ``DummyVecEnv``, SB3's own
fastest way), every ``--eval-every`` frames, evaluation time counted. Solved = mean >= 475.
Time runs from the start of training (after imports and construction) to the solved evaluation;
the whole process (imports included) is timed beside it. Runs happen one after another, each in its
own child process, so neither side warms the other's caches.

    python benchmarks/time_to_solve.py --seeds 5 [--algos ppo,dqn]   # needs the [bench] extra
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from functools import partial

THRESHOLD = 475.0

# RL Baselines3 Zoo, hyperparams/ppo.yml, CartPole-v1
SB3_PPO_ZOO = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    n_envs=8,
    schedule="linear",  # Zoo's lin_1e-3 / lin_0.2: learning rate and clip range decay to 0
)


def worker_rlpilot(
    preset: str,
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    threshold: float = THRESHOLD,
    max_seconds: float | None = None,
) -> dict:
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    overrides = [
        f"train.seed={seed}",
        f"train.eval_every_frames={eval_every}",
        f"train.total_frames={budget}",
        f"train.eval_episodes={episodes}",
        f"train.solved_at={threshold}",
    ]
    if max_seconds is not None:
        overrides.append(f"train.max_seconds={max_seconds}")
    config = load_config(preset, overrides=overrides)
    result = train(config, run_root="runs/bench", show_progress=False)
    return {
        "solved": result.status == "solved",
        "frames": result.solved_at_frames or result.frames,
        "train_s": result.elapsed_s,
        "last_eval": result.last_eval,
        "run": str(result.path),
    }


# RL Baselines3 Zoo, hyperparams/dqn.yml, CartPole-v1 (one env; budget 50k)
SB3_DQN_ZOO = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)


def make_sb3(algo: str, seed: int, *, env_id: str = "CartPole-v1", hyperparams: dict | None = None):
    """SB3 PPO or DQN with RL Zoo's hyperparameters (``hyperparams``; default: the CartPole ones)."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import LinearSchedule

    if algo == "ppo":
        hp = dict(hyperparams or SB3_PPO_ZOO)
        env = make_vec_env(env_id, n_envs=hp.pop("n_envs"), seed=seed)
        if hp.pop("schedule", "constant") == "linear":
            hp["learning_rate"] = LinearSchedule(hp["learning_rate"], 0.0, 1.0)
            hp["clip_range"] = LinearSchedule(hp["clip_range"], 0.0, 1.0)
        return PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **hp)
    env = make_vec_env(env_id, n_envs=1, seed=seed)
    return DQN("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **(hyperparams or SB3_DQN_ZOO))


def worker_sb3(
    algo: str,
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    env_id: str = "CartPole-v1",
    hyperparams: dict | None = None,
    threshold: float = THRESHOLD,
    max_seconds: float | None = None,
) -> dict:
    """SB3 learning until its greedy evaluation reaches ``threshold``, the budget, or ``max_seconds``."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)  # as rlpilot; small MLPs run fastest on one thread here
    model = make_sb3(algo, seed, env_id=env_id, hyperparams=hyperparams)
    eval_env = make_vec_env(env_id, n_envs=episodes, seed=seed + 10_000)
    start = time.perf_counter()

    class EvalEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = eval_every
            self.solved_frames = None

            self.last_eval = None

        def _on_step(self) -> bool:
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                return False  # wall cap, checked every step (SB3 DQN can take minutes between evaluations)
            if self.num_timesteps < self.next_eval:
                return True
            self.next_eval += eval_every
            mean, _ = evaluate_policy(self.model, eval_env, n_eval_episodes=episodes, deterministic=True)
            self.last_eval = float(mean)
            if mean >= threshold:
                self.solved_frames = self.num_timesteps
                return False
            return True

    callback = EvalEvery()
    start = time.perf_counter()
    model.learn(total_timesteps=budget, callback=callback)
    elapsed = time.perf_counter() - start
    return {
        "solved": callback.solved_frames is not None,
        "frames": callback.solved_frames or model.num_timesteps,
        "train_s": elapsed,
        "last_eval": callback.last_eval,
    }


WORKERS = {
    "rlpilot-ppo": partial(worker_rlpilot, "ppo-cartpole"),
    "sb3-ppo-zoo": partial(worker_sb3, "ppo"),
    "rlpilot-dqn": partial(worker_rlpilot, "dqn-cartpole"),
    "sb3-dqn-zoo": partial(worker_sb3, "dqn"),
}
# peers compared pairwise, with each pair's frame budget (RL Zoo's n_timesteps)
PAIRS = {"ppo": ("rlpilot-ppo", "sb3-ppo-zoo", 100_000), "dqn": ("rlpilot-dqn", "sb3-dqn-zoo", 50_000)}


def run_child(
    name: str, seed: int, args, script: str = __file__, timeout: float | None = None, extra: tuple = ()
) -> dict:
    """``script --worker name [extra...]`` in a fresh process; its last stdout line is the JSON result."""
    cmd = [
        sys.executable,
        script,
        "--worker",
        name,
        "--seed",
        str(seed),
        "--eval-every",
        str(args.eval_every),
        "--budget",
        str(args.budget),
        "--episodes",
        str(args.episodes),
        *extra,
    ]
    start, cpu_start = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    process_s = time.perf_counter() - start
    cpu_end = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds: robust to other load on the machine
    cpu_s = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"{name} seed {seed} failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = process_s
    result["process_cpu_s"] = cpu_s
    return result


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):8.2f}  [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=2048, help="frames between evaluations (both sides)")
    parser.add_argument("--episodes", type=int, default=20, help="greedy episodes per evaluation")
    parser.add_argument("--algos", default="ppo,dqn", help="comma-separated: ppo, dqn")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.seed, args.eval_every, args.budget, args.episodes)))
        return
    for algo in args.algos.split(","):
        ours, peer, budget = PAIRS[algo]
        args.budget = budget
        results: dict[str, list[dict]] = {ours: [], peer: []}
        for seed in range(args.seeds):
            for name in (ours, peer):
                r = run_child(name, seed, args)
                results[name].append(r)
                print(
                    f"  {name:<12} seed {seed}: solved={r['solved']} frames={r['frames']:>7} "
                    f"train {r['train_s']:.2f} s  process {r['process_s']:.2f} s",
                    flush=True,
                )
        report(results, ours, peer, args)


def report(results: dict, ours: str, peer: str, args) -> None:
    print(
        f"\nCartPole-v1, {args.seeds} seeds, greedy eval of {args.episodes} episodes every {args.eval_every} "
        f"frames (eval time counted), budget {args.budget:,} frames\n"
    )
    print(
        f"{'peer':<12} {'solved':>6}  {'wall s to solve: median [range]':>32}  "
        f"{'frames to solve: median [range]':>34}  {'process s median':>16}"
    )
    medians = {}
    for name in (ours, peer):
        solved = [r for r in results[name] if r["solved"]]
        walls = [r["train_s"] for r in solved]
        frames = [float(r["frames"]) for r in solved]
        medians[name] = (
            statistics.median(walls) if walls else float("nan"),
            statistics.median(frames) if frames else float("nan"),
        )
        print(
            f"{name:<12} {len(solved):>3}/{len(results[name]):<2}  {summary(walls):>32}  "
            f"{summary(frames):>34}  {statistics.median(r['process_s'] for r in results[name]):>16.2f}"
        )
    (a_wall, a_frames), (b_wall, b_frames) = medians[ours], medians[peer]
    print(
        f"\nratio {peer} / {ours} (medians over solved seeds): wall {b_wall / a_wall:.2f}x, "
        f"frames {b_frames / a_frames:.2f}x (above 1: rlpilot is faster / needs fewer frames)\n",
        flush=True,
    )


if __name__ == "__main__":
    main()
