"""Time to solve: rlpilot against Stable-Baselines3 with RL Zoo's tuned hyperparameters, paired per seed.

Tasks (RL Zoo's budgets): PPO and DQN on CartPole-v1 (solved: greedy mean >= 475), SAC and TD3 on
Pendulum-v1 (solved: greedy mean >= -200). Two arms for every task (benchmarks/README.md):

- ``preset``: rlpilot's preset against SB3 with the Zoo's settings: what a user of each gets;
- ``same``: rlpilot run with the Zoo's exact hyperparameters, network and env count (``SAME_SETTINGS``),
  against the same SB3 run: implementation speed, nothing else.

Both sides use one evaluation rule: the greedy policy, 20 episodes side by side, every ``eval_every``
frames, evaluation time counted, evaluated AFTER the update that follows the frames collected (SB3: in
``_on_rollout_start``, which runs after ``train()``; its ``_on_step`` fires before the update). Seeds
start at 100: no preset was tuned on them (tuning seeds are listed in each preset's header). Each run is
its own child process, one after another (never two at once), on one torch thread; the training clock
runs from the start of training to the solved evaluation, the process clock from the command to exit.
Per seed, ratio = SB3 time / rlpilot time (above 1: rlpilot is faster); reported as the median over the
seeds both solved, with a 95% percentile-bootstrap interval.

    python benchmarks/time_to_solve.py --algos ppo,dqn --seeds 10 --out benchmarks/results/FILE.txt
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

THRESHOLD = 475.0  # CartPole-v1 (lunarlander.py reuses the workers with its own thresholds)
BOOTSTRAP_SAMPLES = 10_000

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
# hyperparams/dqn.yml, CartPole-v1 (one env)
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
# hyperparams/sac.yml, Pendulum-v1: lr 1e-3, SB3's defaults otherwise (buffer 1M, batch 256, tau 0.005,
# gamma 0.99, learning_starts 100, train_freq 1, gradient_steps 1, 256-256 ReLU, ent_coef auto)
SB3_SAC_ZOO = dict(learning_rate=1e-3)
# hyperparams/td3.yml, Pendulum-v1
SB3_TD3_ZOO = dict(
    gamma=0.98,
    buffer_size=200_000,
    learning_starts=10_000,
    noise_std=0.1,  # NormalActionNoise(0, 0.1) on the [-1, 1]-scaled action
    gradient_steps=1,
    train_freq=1,
    learning_rate=1e-3,
    policy_kwargs=dict(net_arch=[400, 300]),
)

# rlpilot with the Zoo's settings: the "same" arm (what each Zoo key maps to)
SAME_SETTINGS = {
    "ppo": [
        "env.num_envs=8",
        "ppo.steps_per_env=32",
        "ppo.minibatch_size=256",
        "ppo.epochs=20",
        "ppo.lr=1e-3",
        "ppo.lr_schedule=linear",
        "ppo.clip_epsilon=0.2",
        "ppo.clip_schedule=linear",
        "ppo.gamma=0.98",
        "ppo.gae_lambda=0.8",
        "ppo.entropy_coef=0.0",
        "ppo.value_coef=0.5",
        "ppo.max_grad_norm=0.5",
        "ppo.value_loss=l2",
        "model.hidden_sizes=[64, 64]",
        "model.activation=tanh",
    ],
    "dqn": [
        "env.num_envs=1",
        "dqn.steps_per_env=256",  # train_freq 256
        "dqn.updates_per_frame=0.5",  # 128 gradient steps per 256 frames
        "dqn.lr=2.3e-3",
        "dqn.batch_size=64",
        "dqn.buffer_size=100000",
        "dqn.learning_starts=1000",
        "dqn.gamma=0.99",
        "dqn.exploration_fraction=0.16",
        "dqn.eps_init=1.0",
        "dqn.eps_end=0.04",
        "dqn.double_dqn=false",  # SB3's DQN is not double DQN
        "dqn.loss=huber",
        "dqn.max_grad_norm=10",
        "dqn.n_step=1",
        "dqn.target_update=hard",
        # SB3 copies every 10 env steps, checked while collecting: with train_freq 256 that is one copy per
        # learning phase (no update happens between copies); rlpilot counts updates: 128 per phase
        "dqn.target_update_interval=128",
        "model.hidden_sizes=[256, 256]",
        "model.activation=relu",
    ],
    "sac": [
        "env.num_envs=1",
        "sac.steps_per_env=1",
        "sac.updates_per_frame=1",
        "sac.lr=1e-3",
        "sac.batch_size=256",
        "sac.buffer_size=1000000",
        "sac.learning_starts=100",
        "sac.tau=0.005",
        "sac.gamma=0.99",
        "sac.alpha_init=1.0",
        "model.hidden_sizes=[256, 256]",
        "model.activation=relu",
    ],
    "td3": [
        "env.num_envs=1",
        "td3.steps_per_env=1",
        "td3.updates_per_frame=1",
        "td3.lr=1e-3",
        "td3.batch_size=256",
        "td3.buffer_size=200000",
        "td3.learning_starts=10000",
        "td3.gamma=0.98",
        "td3.tau=0.005",
        "td3.exploration_noise=0.1",
        "td3.policy_delay=2",
        "td3.target_noise=0.2",
        "td3.target_noise_clip=0.5",
        "model.hidden_sizes=[400, 300]",
        "model.activation=relu",
    ],
}


@dataclass(frozen=True)
class Task:
    algo: str
    env_id: str
    preset: str
    threshold: float
    budget: int
    eval_every: int
    sb3: dict = field(default_factory=dict)


TASKS = {
    "ppo": Task("ppo", "CartPole-v1", "ppo-cartpole", 475.0, 100_000, 2048, SB3_PPO_ZOO),
    "dqn": Task("dqn", "CartPole-v1", "dqn-cartpole", 475.0, 50_000, 2048, SB3_DQN_ZOO),
    "sac": Task("sac", "Pendulum-v1", "sac-pendulum", -200.0, 20_000, 1000, SB3_SAC_ZOO),
    "td3": Task("td3", "Pendulum-v1", "td3-pendulum", -200.0, 20_000, 1000, SB3_TD3_ZOO),
}


def worker_rlpilot(
    preset: str,
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    threshold: float = THRESHOLD,
    max_seconds: float | None = None,
    overrides: tuple[str, ...] = (),
) -> dict:
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    settings = [
        *overrides,
        f"train.seed={seed}",
        f"train.eval_every_frames={eval_every}",
        f"train.total_frames={budget}",
        f"train.eval_episodes={episodes}",
        f"train.solved_at={threshold}",
        "train.num_threads=1",
    ]
    if max_seconds is not None:
        settings.append(f"train.max_seconds={max_seconds}")
    config = load_config(preset, overrides=settings)
    result = train(config, run_root="runs/bench", show_progress=False)
    return {
        "solved": result.status == "solved",
        "frames": result.solved_at_frames or result.frames,
        "train_s": result.elapsed_s,
        "last_eval": result.last_eval,
        "run": str(result.path),
    }


def make_sb3(algo: str, seed: int, *, env_id: str = "CartPole-v1", hyperparams: dict | None = None):
    """SB3 PPO, DQN, SAC or TD3 with RL Zoo's hyperparameters (``hyperparams``; default: the CartPole ones)."""
    from stable_baselines3 import DQN, PPO, SAC, TD3
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
    if algo == "dqn":
        return DQN("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **(hyperparams or SB3_DQN_ZOO))
    if algo == "sac":
        return SAC("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **(hyperparams or SB3_SAC_ZOO))
    from stable_baselines3.common.noise import NormalActionNoise

    hp = dict(hyperparams or SB3_TD3_ZOO)
    dim = env.action_space.shape[-1]
    noise = NormalActionNoise(np.zeros(dim), hp.pop("noise_std") * np.ones(dim))
    return TD3("MlpPolicy", env, seed=seed, verbose=0, device="cpu", action_noise=noise, **hp)


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
    """SB3 learning until its greedy evaluation reaches ``threshold``, the budget, or ``max_seconds``.

    Evaluations run in ``_on_rollout_start``: after ``train()`` has used the frames collected so far (the
    same point rlpilot evaluates at, after ``learn``). ``_on_step`` runs before the update of the frames
    it counts, which would judge a policy one update behind."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)  # as rlpilot; small MLPs run fastest on one thread here
    model = make_sb3(algo, seed, env_id=env_id, hyperparams=hyperparams)
    eval_env = make_vec_env(env_id, n_envs=episodes, seed=seed + 10_000)

    class EvalAfterUpdate(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = eval_every
            self.solved_frames = self.solved_s = self.last_eval = None
            self.stop = False

        def _on_rollout_start(self) -> None:
            if self.num_timesteps < self.next_eval or self.stop:
                return
            while self.next_eval <= self.num_timesteps:
                self.next_eval += eval_every
            mean, _ = evaluate_policy(self.model, eval_env, n_eval_episodes=episodes, deterministic=True)
            self.last_eval = float(mean)
            if mean >= threshold:
                self.solved_frames, self.solved_s = self.num_timesteps, time.perf_counter() - start
                self.stop = True

        def _on_step(self) -> bool:
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                return False  # wall cap, checked every step (SB3 DQN can take minutes between evaluations)
            return not self.stop

    callback = EvalAfterUpdate()
    start = time.perf_counter()
    model.learn(total_timesteps=budget, callback=callback)
    elapsed = time.perf_counter() - start
    return {
        "solved": callback.solved_frames is not None,
        "frames": callback.solved_frames or model.num_timesteps,
        "train_s": callback.solved_s if callback.solved_s is not None else elapsed,
        "last_eval": callback.last_eval,
    }


def workers(task: Task) -> dict:
    return {
        f"rlpilot-{task.algo}-preset": partial(worker_rlpilot, task.preset, threshold=task.threshold),
        f"rlpilot-{task.algo}-same": partial(
            worker_rlpilot, task.preset, threshold=task.threshold, overrides=tuple(SAME_SETTINGS[task.algo])
        ),
        f"sb3-{task.algo}-zoo": partial(
            worker_sb3, task.algo, env_id=task.env_id, hyperparams=task.sb3, threshold=task.threshold
        ),
    }


WORKERS = {name: fn for task in TASKS.values() for name, fn in workers(task).items()}


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


def median_ratio(peer: list[float], ours: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of per-seed ratios peer/ours and its 95% percentile-bootstrap interval."""
    ratios = np.array(peer) / np.array(ours)
    if len(ratios) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    samples = rng.choice(ratios, size=(BOOTSTRAP_SAMPLES, len(ratios)), replace=True)
    low, high = np.percentile(np.median(samples, axis=1), [2.5, 97.5])
    return float(np.median(ratios)), float(low), float(high)


CLOCKS = (("train_s", "training clock"), ("process_s", "whole process"), ("frames", "frames"))


def compare(results: dict[str, list[dict]], ours: str, peer: str, seeds: list[int]) -> dict:
    """Paired over the seeds both solved: median ratio peer/ours and its interval, per clock."""
    both = [i for i in range(len(seeds)) if results[ours][i]["solved"] and results[peer][i]["solved"]]
    out = {"ours": ours, "peer": peer, "both_solved": len(both), "seeds": len(seeds)}
    for key, _ in CLOCKS:
        out[key] = median_ratio([results[peer][i][key] for i in both], [results[ours][i][key] for i in both])
    return out


def comparison_lines(c: dict) -> list[str]:
    lines = [f"{c['ours']} vs {c['peer']}: {c['both_solved']}/{c['seeds']} seeds solved by both"]
    for key, what in CLOCKS:
        mid, low, high = c[key]
        lines.append(f"  ratio {c['peer']} / {c['ours']}, {what}: median {mid:.2f}x [95% CI {low:.2f}-{high:.2f}]")
    return lines


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):8.2f}  [{min(values):.2f}-{max(values):.2f}]"


def report(task: Task, results: dict[str, list[dict]], seeds: list[int], comparisons: dict, episodes: int) -> list[str]:
    lines = [
        "",
        f"## {task.algo} on {task.env_id}: seeds {seeds[0]}-{seeds[-1]}, greedy eval of {episodes} episodes every "
        f"{task.eval_every} frames (after the update; eval time counted), solved at {task.threshold:g}, "
        f"budget {task.budget:,} frames",
        "",
        f"{'peer':<22} {'solved':>6}  {'train s to solve: median [range]':>34}  "
        f"{'frames to solve: median [range]':>34}  {'process s median':>16}",
    ]
    for name, runs in results.items():
        solved = [r for r in runs if r["solved"]]
        lines.append(
            f"{name:<22} {len(solved):>3}/{len(runs):<2}  {summary([r['train_s'] for r in solved]):>34}  "
            f"{summary([float(r['frames']) for r in solved]):>34}  "
            f"{statistics.median(r['process_s'] for r in runs):>16.2f}"
        )
    for comparison in comparisons.values():
        lines += ["", *comparison_lines(comparison)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="ppo,dqn", help="comma-separated: ppo, dqn, sac, td3")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100, help="seeds no preset was tuned on start at 100")
    parser.add_argument("--arms", default="preset,same", help="comma-separated: preset, same")
    parser.add_argument("--episodes", type=int, default=20, help="greedy episodes per evaluation")
    parser.add_argument("--out", help="result file (stamped); default: print only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.seed, args.eval_every, args.budget, args.episodes)))
        return
    lines = stamp.header()
    data: dict = {"tasks": {}}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arms = args.arms.split(",")
    for algo in args.algos.split(","):
        task = TASKS[algo]
        args.budget, args.eval_every = task.budget, task.eval_every
        names = [*(f"rlpilot-{algo}-{arm}" for arm in arms), f"sb3-{algo}-zoo"]
        results: dict[str, list[dict]] = {name: [] for name in names}
        for seed in seeds:
            for name in names:
                r = run_child(name, seed, args)
                results[name].append(r)
                row = (
                    f"  {name:<22} seed {seed}: solved={r['solved']} frames={r['frames']:>7} "
                    f"train {r['train_s']:.2f} s  process {r['process_s']:.2f} s  cpu {r['process_cpu_s']:.2f} s"
                )
                print(row, flush=True)
                lines.append(row)
        comparisons = {arm: compare(results, f"rlpilot-{algo}-{arm}", f"sb3-{algo}-zoo", seeds) for arm in arms}
        block = report(task, results, seeds, comparisons, args.episodes)
        print("\n".join(block), flush=True)
        lines += block
        data["tasks"][algo] = {
            "env_id": task.env_id,
            "threshold": task.threshold,
            "budget": task.budget,
            "eval_every": task.eval_every,
            "seeds": seeds,
            "results": results,
            "comparisons": comparisons,
        }
    lines += ["", *stamp.footer()]
    data["stamp"] = lines[: len(stamp.header())] + stamp.footer()
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"written: {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
