"""SB3 or SBX with the RL Zoo's MuJoCo settings on a locomotion env, a greedy evaluation every N frames: the peers'
learning curves beside rlpilot's locomotion presets (docs/locomotion.md), on the same held-out seeds.

The settings are the Zoo's ``mujoco-defaults`` (hyperparams/sac.yml, td3.yml): SAC with SB3's defaults and 10k
warm-up steps; TD3 with lr 1e-3, batch 256, 400-300 networks, Gaussian noise 0.1, 10k warm-up steps. Each
evaluation plays ``--episodes`` deterministic episodes on envs seeded ``seed + 10000`` (``evaluate_policy``), after
the update of the frames counted so far. One torch (or JAX) thread, as the presets' one-thread runs. The result file
has seed_runs.py's layout (``rows`` of ``curve``), so tools/gen_results.py draws both alike.

    python benchmarks/locomotion_peers.py sac HalfCheetah-v5 --library sb3 --seeds 100 --budget 300000 \\
        --out benchmarks/results/locomotion_peers-sb3-sac-halfcheetah-DATE.txt
    .venv-sbx/bin/python benchmarks/locomotion_peers.py sac HalfCheetah-v5 --library sbx ...   (make bench-sbx-venv)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402
from zoo import MUJOCO_ZOO as ZOO  # noqa: E402
from zoo import jax_on_cpu_threads, learn_until_solved, make_sb3  # noqa: E402


def run(algo: str, env_id: str, library: str, seed: int, budget: int, every: int, episodes: int) -> dict:
    """One seed to ``budget`` frames, evaluated as time_to_solve.py's peers are (``learn_until_solved``, never
    solved: no threshold)."""
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    model = make_sb3(algo, seed, env_id=env_id, hyperparams=dict(ZOO[algo]), library=library)
    eval_env = make_vec_env(env_id, n_envs=episodes, seed=seed + 10_000)
    result = learn_until_solved(model, eval_env, every, budget, episodes, float("inf"), None)
    curve = result["curve"]
    if not curve or curve[-1]["frames"] < result["frames"]:  # the budget's last frames: evaluated after learning
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
        curve.append({"frames": int(result["frames"]), "eval": float(mean)})
    return {"seed": seed, "status": "finished", "frames": result["frames"], "wall_s": result["train_s"], "curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algo", choices=sorted(ZOO))
    parser.add_argument("env", help="a gymnasium MuJoCo id, e.g. HalfCheetah-v5")
    parser.add_argument("--library", choices=("sb3", "sbx"), default="sb3")
    parser.add_argument("--seeds", default="100", help="comma-separated held-out seeds")
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--every", type=int, default=10_000, help="frames between evaluations")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    args = parser.parse_args()
    if args.library == "sbx":
        jax_on_cpu_threads()
    header, lines, rows = stamp.header(), [], []
    for seed in (int(s) for s in args.seeds.split(",")):
        row = run(args.algo, args.env, args.library, seed, args.budget, args.every, args.episodes)
        rows.append(row)
        last = row["curve"][-1]["eval"]
        lines.append(f"seed {seed}: {row['frames']:,} frames in {row['wall_s']:.0f} s; last greedy eval {last:.1f}")
        print(lines[-1], flush=True)
    if args.out:
        name = f"{args.library}-{args.algo}-{args.env.split('-')[0].lower()}"
        data = {"preset": name, "library": args.library, "env": args.env, "settings": ZOO[args.algo], "threads": 1}
        stamp.write_result(args.out, header, lines, {**data, "metrics": [], "rows": rows})


if __name__ == "__main__":
    main()
