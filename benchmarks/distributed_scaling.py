"""Collection throughput on N Ray actors with a simulator that costs 10 ms a step (issue 39, Done-when 1).

``rlpilot/SlowCartPole-v0`` sleeps ``step_ms`` in every step (no CPU burned), so N actors can be measured on
a machine with fewer cores than actors. For N = 1, 2, 4, 8, 16 actors (``collect.workers``) on one local Ray
cluster: each actor steps ``--envs-per-actor`` envs, PPO's acting weights are broadcast before every batch
and the learner takes batches as training does:

- ``sync`` (PPO's schedule): every actor collects one batch with the same weights, the learner waits for all;
- ``async`` (DQN/SAC/TD3's schedule): the learner takes what has arrived, each arrived actor starts again.

Throughput is frames received / wall seconds over ``--batches`` batches an actor after one warm-up step,
learning left out (what collection alone delivers), in ``--rounds`` rounds where the two schedules take
turns. The target: N actors reach at least 0.8 x N x the one-actor rate.
The ideal per actor is ``1000 / step_ms`` frames/s whatever its envs (a SyncVectorEnv steps them in turn);
more envs an actor share its per-step overhead (the policy forward) over more frames.

    python benchmarks/distributed_scaling.py --out benchmarks/results/distributed_scaling-DATE.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

sys.path.insert(0, str(stamp.ROOT / "tools"))
from gen_results import scaling_rows  # noqa: E402


def measure(workers: int, args, ray) -> dict:
    import torch

    from rlpilot.config.load import load_config
    from rlpilot.control.algos import build
    from rlpilot.control.distributed import RayCollection
    from rlpilot.envs.make import make_env

    config = load_config(
        algo="ppo",
        env_id="rlpilot/SlowCartPole-v0",
        overrides=[
            f"env.kwargs={{step_ms: {args.step_ms}}}",
            f"env.num_envs={workers * args.envs_per_actor}",
            f"ppo.steps_per_env={args.steps}",
            f"ppo.minibatch_size={args.steps}",
            f"collect.workers={workers}",
        ],
    )
    device = torch.device("cpu")
    env = make_env(config.env, num_envs=1, seed=0, device=device)  # specs only: the learner steps no env
    algo = build(config, env, device)
    started = time.perf_counter()
    collection = RayCollection(config, seed=100, obs_norm=None, device=device, synchronous=True)
    startup = time.perf_counter() - started
    rounds: dict[str, list[dict]] = {"sync": [], "async": []}
    for _ in range(args.rounds):  # the schedules take turns, so a change in the machine's load touches both
        for schedule in ("sync", "async"):
            rounds[schedule].append(time_schedule(collection, algo, schedule, workers, args))
            if collection.pending:  # async leaves one batch in flight per actor: let it land before sync
                ray.get(list(collection.pending))
                collection.pending.clear()
    rates = {}
    for schedule, measured in rounds.items():
        frames = sum(r["frames"] for r in measured)
        seconds = sum(r["seconds"] for r in measured)
        rates[schedule] = {
            "fps": frames / seconds,
            "fps_rounds": [r["frames"] / r["seconds"] for r in measured],
            "frames": frames,
            "seconds": seconds,
            "lag": sum(r["lag"] for r in measured) / len(measured),
            "actor_fps": frames / sum(r["actor_seconds"] for r in measured),  # the env's rate plus our overhead
            "actor_cpu_ms_per_frame": 1000 * sum(r["actor_cpu"] for r in measured) / frames,
        }
        print(f"N={workers:2d} {schedule:5s}: {frames / seconds:8.1f} frames/s ({frames} frames, {seconds:.1f} s)")
    collection.close()
    env.close()
    return {"workers": workers, "startup_s": startup, **rates}


def time_schedule(collection, algo, schedule: str, workers: int, args) -> dict:
    """One round of one schedule: a warm-up learner step, then ``--batches`` actor batches an actor, timed."""
    collection.synchronous = schedule == "sync"
    collection.publish(algo.acting_state())
    collection.collect()  # warm-up (the first batch also pays for imports and env resets)
    frames, lags, start, actor_seconds, actor_cpu = 0, [], time.perf_counter(), 0.0, 0.0
    steps = args.batches * workers
    while steps > 0:
        batch = collection.collect()
        collection.publish(algo.acting_state())
        frames += batch.numel()
        lags.append(collection.metrics()["collect/policy_lag"])
        actor_seconds += sum(result["seconds"] for result in collection.last_results)
        actor_cpu += sum(result["cpu_seconds"] for result in collection.last_results)
        steps -= batch.shape[0] // args.envs_per_actor
    seconds = time.perf_counter() - start
    return {
        "frames": frames,
        "seconds": seconds,
        "lag": sum(lags) / len(lags),
        "actor_seconds": actor_seconds,
        "actor_cpu": actor_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8,16", help="actor counts, comma-separated")
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--envs-per-actor", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50, help="steps per env per batch")
    parser.add_argument("--batches", type=int, default=4, help="batches an actor, timed per round and schedule")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the schedules take turns in each")
    parser.add_argument("--out", help="result file (stamped, JSON beside it); default: print only")
    args = parser.parse_args()
    header = stamp.header()
    counts = [int(n) for n in args.workers.split(",")]

    from rlpilot.cluster import ray_session

    with ray_session("local", max(counts)) as ray:
        results = [measure(n, args, ray) for n in counts]
    ideal = 1000.0 / args.step_ms  # a SyncVectorEnv steps an actor's envs one after another
    body = [
        f"# slow env: rlpilot/SlowCartPole-v0, step_ms={args.step_ms:g}, {args.envs_per_actor} env(s) an actor, "
        f"{args.steps} steps an env a batch; ideal {ideal:g} frames/s an actor",
        "",
        *scaling_rows(results),
    ]
    print("\n".join(body))
    if args.out:
        stamp.write_result(args.out, header, body, {"args": vars(args), "results": results, "ideal_fps": ideal})


if __name__ == "__main__":
    main()
