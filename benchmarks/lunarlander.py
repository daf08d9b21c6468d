"""Time to solve LunarLander-v3: rlpilot PPO and DQN beside Stable-Baselines3 with RL Zoo's hyperparameters.

Thresholds (greedy mean over 20 episodes, evaluation time counted): PPO >= 200 (gymnasium's "solved"),
DQN >= 100 (the issue's bar; RL Zoo reports DQN at 154 +- 79 after 100k frames). Peers:

- rlpilot ppo-lunarlander vs SB3 PPO with the Zoo's LunarLander setting (16 envs x 1024 steps, minibatch 64,
  4 epochs, gamma 0.999, lambda 0.98, entropy 0.01, lr 3e-4); budget 1M frames (the Zoo's).
- rlpilot dqn-lunarlander vs SB3 DQN with the Zoo's setting (lr 6.3e-4, batch 128, buffer 50k, no warm-up,
  train_freq 4 with one gradient step per frame, target every 250 frames, epsilon 1 -> 0.1 over the first
  12k frames, 256-256); budget 200k frames (the Zoo's is 100k; exploration is kept at 12k frames).

Each run is its own child process (as benchmarks/time_to_solve.py, whose workers this reuses), one after
another, each with a wall cap. Raw JSON lines go to benchmarks/results/lunarlander-*.jsonl.

    python benchmarks/lunarlander.py [--seeds 2] [--sb3-seeds 1] [--algos ppo,dqn]   # [box2d] and [bench] extras
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import time_to_solve as tts  # noqa: E402

ENV_ID = "LunarLander-v3"
THRESHOLDS = {"ppo": 200.0, "dqn": 100.0}

# RL Baselines3 Zoo, hyperparams/ppo.yml, LunarLander-v2 (constant lr and clip; default 64-64 tanh)
SB3_PPO_LUNAR = dict(
    n_envs=16, n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01,
    learning_rate=3e-4, clip_range=0.2,
)  # fmt: skip
# RL Baselines3 Zoo, hyperparams/dqn.yml, LunarLander-v2, with exploration over 12k of 200k frames
SB3_DQN_LUNAR = dict(
    learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0, gamma=0.99,
    target_update_interval=250, train_freq=4, gradient_steps=-1, exploration_fraction=0.06,
    exploration_final_eps=0.1, policy_kwargs=dict(net_arch=[256, 256]),
)  # fmt: skip

# name -> (worker, algo, budget frames, eval every frames); run in this order (rlpilot first)
RUNS = {
    "rlpilot-ppo": (
        partial(tts.worker_rlpilot, "ppo-lunarlander", threshold=THRESHOLDS["ppo"]),
        "ppo",
        1_000_000,
        32_768,
    ),
    "rlpilot-dqn": (
        partial(tts.worker_rlpilot, "dqn-lunarlander", threshold=THRESHOLDS["dqn"]),
        "dqn",
        200_000,
        10_240,
    ),
    "sb3-ppo-zoo": (
        partial(tts.worker_sb3, "ppo", env_id=ENV_ID, hyperparams=SB3_PPO_LUNAR, threshold=THRESHOLDS["ppo"]),
        "ppo",
        1_000_000,
        32_768,
    ),
    "sb3-dqn-zoo": (
        partial(tts.worker_sb3, "dqn", env_id=ENV_ID, hyperparams=SB3_DQN_LUNAR, threshold=THRESHOLDS["dqn"]),
        "dqn",
        200_000,
        10_240,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="rlpilot seeds per algorithm")
    parser.add_argument("--sb3-seeds", type=int, default=1, help="SB3 seeds per algorithm (0: skip SB3)")
    parser.add_argument("--algos", default="ppo,dqn")
    parser.add_argument("--episodes", type=int, default=20, help="greedy episodes per evaluation")
    parser.add_argument("--max-seconds", type=float, default=1500, help="wall cap per run (the run stops there)")
    parser.add_argument("--sb3-dqn-max-seconds", type=float, help="wall cap of SB3 DQN runs (default --max-seconds)")
    parser.add_argument("--out", help="JSON lines (default benchmarks/results/lunarlander-TIME.jsonl)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker = RUNS[args.worker][0]
        result = worker(args.seed, args.eval_every, args.budget, args.episodes, max_seconds=args.max_seconds)
        print(json.dumps(result))
        return
    out = Path(args.out or Path(__file__).parent / "results" / f"lunarlander-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {}
    for name, (_, algo, args.budget, args.eval_every) in RUNS.items():
        if algo not in args.algos.split(","):
            continue
        cap = args.sb3_dqn_max_seconds if name == "sb3-dqn-zoo" and args.sb3_dqn_max_seconds else args.max_seconds
        for seed in range(args.seeds if name.startswith("rlpilot") else args.sb3_seeds):
            r = run_one(name, seed, args, cap)
            r.update(name=name, seed=seed, threshold=THRESHOLDS[algo], budget=args.budget, cap_s=cap)
            results.setdefault(name, []).append(r)
            with out.open("a") as handle:
                handle.write(json.dumps(r) + "\n")
            print(
                f"  {name:<12} seed {seed}: solved={r['solved']} frames={r['frames']:>8} "
                f"train {r['train_s']:.1f} s  process {r['process_s']:.1f} s (CPU {r['process_cpu_s']:.1f} s)  "
                f"last eval {r.get('last_eval')}",
                flush=True,
            )
    report(results, args)
    print(f"raw results: {out}")


def run_one(name: str, seed: int, args, cap: float) -> dict:
    """One child run stopped by its own wall cap; a failure is recorded, so the other runs still happen."""
    try:  # the child stops itself at the cap; the timeout only catches a hung child
        return tts.run_child(name, seed, args, script=__file__, timeout=cap + 600, extra=("--max-seconds", str(cap)))
    except (Exception, SystemExit) as exc:
        nan = float("nan")
        return {"solved": False, "frames": 0, "train_s": nan, "process_s": nan, "process_cpu_s": nan, "error": str(exc)}


def report(results: dict, args) -> None:
    print(f"\n{ENV_ID}, greedy eval of {args.episodes} episodes (evaluation time counted)\n")
    print(f"{'peer':<12} {'threshold':>9} {'solved':>7}  {'frames (each seed)':>22}  {'wall s':>12}  {'CPU s':>10}")
    for name, rows in results.items():
        frames = " ".join(f"{r['frames']:,}" + ("" if r["solved"] else "*") for r in rows)
        walls = " ".join(f"{r['train_s']:.0f}" for r in rows)
        cpus = " ".join(f"{r['process_cpu_s']:.0f}" for r in rows)
        solved = sum(r["solved"] for r in rows)
        print(
            f"{name:<12} {rows[0]['threshold']:>9.0f} {solved:>3}/{len(rows):<3}  {frames:>22}  {walls:>12}  {cpus:>14}"
        )
    print("* not solved: frames reached when the budget or the wall cap ended the run")


if __name__ == "__main__":
    main()
