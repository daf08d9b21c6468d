"""Time to solve: rlpilot against Stable-Baselines3 with RL Zoo's tuned hyperparameters, paired per seed.

Tasks (RL Zoo's budgets): PPO and DQN on CartPole-v1 (solved: greedy mean >= 475), SAC and TD3 on
Pendulum-v1 (solved: greedy mean >= -200); and the MuJoCo locomotion presets to a return threshold
(``sac-halfcheetah``, ``td3-halfcheetah``: 5,000 within 300k frames; ``sac-hopper``, ``td3-hopper``: 2,500;
docs/locomotion.md), the peers with the Zoo's ``mujoco-defaults`` (``MUJOCO_ZOO``), 10 greedy episodes
every 10k frames. Peers, all with the Zoo's hyperparameters (``--peers``):

- ``sb3``: Stable-Baselines3 2.9.2 (PyTorch), the reference: the Zoo's settings were tuned on it;
- ``sbx``: SBX 0.28.0, Stable-Baselines3 in JAX (``worker_sb3`` with ``library="sbx"``), in its own virtualenv: ``make
  bench-sbx-venv`` builds .venv-sbx (``--sbx-python``); its rows are skipped when that is missing;
- ``cleanrl``: single-file PyTorch PPO and DQN in CleanRL's style (benchmarks/peers/cleanrl_*.py; PPO and
  DQN only).

Three arms for every task (docs/benchmarks.md):

- ``preset``: rlpilot's preset against SB3 with the Zoo's settings: what a user of each gets;
- ``same``: rlpilot run with the Zoo's exact hyperparameters, network and env count (``SAME_SETTINGS``),
  against the same SB3 run: implementation speed, nothing else (a locomotion preset is the Zoo's settings but for
  collecting 8 frames between learning phases of 8 updates; its ``same`` arm collects 1 and learns 1);
- ``sbx``: the same settings and SBX's computation where SBX's implementation differs from SB3's
  (``SBX_COMPUTATION``: Flax's init; TD3's every-update targets and min-of-twins actor): the arm to read against
  SBX.

Both sides use one evaluation rule: the greedy policy, 20 episodes side by side, every ``eval_every``
frames, evaluation time counted, evaluated AFTER the update that follows the frames collected (SB3: in
``_on_rollout_start``, which runs after ``train()``; its ``_on_step`` fires before the update). Seeds
start at 100: no preset was tuned on them (tuning seeds are listed in each preset's header). Each run is
its own child process, one after another (never two at once), on one torch thread and pinned to one CPU
(``one_core``: every thread any library starts shares that core, rlpilot's curve helper included; ``--cores N``:
pinned to N CPUs, rlpilot's learner, SB3's torch and SBX's XLA on N threads each: the whole machine); the training clock
runs from the start of training to the solved evaluation, the process clock from the command to exit.
rlpilot's rows run its CLI (``python -m rlpilot.cli train PRESET --set ...``), so their whole process is
what a user of the command waits for: imports, training, the curve, doctor's lines, exit (the CLI skips
Python's module teardown, ~0.5-1.5 s here: ``rlpilot.cli.entry``); the peers' rows run their library
from a script, as their users do, and exit normally.
Per seed, ratio = peer time / rlpilot time (above 1: rlpilot is faster); reported as the median over the
seeds both solved, with a 95% percentile-bootstrap interval, for every rlpilot arm against every peer.

    python benchmarks/time_to_solve.py --algos ppo,dqn --seeds 10 --out benchmarks/results/FILE.txt
    python benchmarks/time_to_solve.py --algos sac-halfcheetah --arms preset --seeds 2 \
        --out benchmarks/results/time_to_solve_mujoco-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import os
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
from zoo import (  # noqa: E402  (the Zoo's settings and the peers' workers; re-exported for the other benchmarks)
    MUJOCO_ZOO,
    SAME_SETTINGS,
    SB3_DQN_ZOO,
    SB3_PPO_ZOO,
    SB3_SAC_ZOO,
    SB3_TD3_ZOO,
    SBX_COMPUTATION,
    THRESHOLD,
    jax_cpu_settings,
    worker_cleanrl,
    worker_sb3,
)

BOOTSTRAP_SAMPLES = 10_000


@dataclass(frozen=True)
class Task:
    algo: str
    env_id: str
    preset: str
    threshold: float
    budget: int
    eval_every: int
    sb3: dict = field(default_factory=dict)
    key: str = ""  # its name in TASKS, --algos and the row names (the algorithm's for the CartPole/Pendulum tasks)
    episodes: int = 20  # greedy episodes an evaluation plays (--episodes overrides)

    @property
    def name(self) -> str:
        return self.key or self.algo


def _mujoco(algo: str, env: str, threshold: float) -> Task:
    """A locomotion preset to ``threshold`` within 300k frames, its greedy return every 10k frames (10 episodes, as
    the presets evaluate)."""
    preset = f"{algo}-{env.removesuffix('-v5').lower()}"
    return Task(algo, env, preset, threshold, 300_000, 10_000, MUJOCO_ZOO[algo], key=preset, episodes=10)


TASKS = {
    "ppo": Task("ppo", "CartPole-v1", "ppo-cartpole", 475.0, 100_000, 2048, SB3_PPO_ZOO),
    "dqn": Task("dqn", "CartPole-v1", "dqn-cartpole", 475.0, 50_000, 2048, SB3_DQN_ZOO),
    "sac": Task("sac", "Pendulum-v1", "sac-pendulum", -200.0, 20_000, 1000, SB3_SAC_ZOO),
    "td3": Task("td3", "Pendulum-v1", "td3-pendulum", -200.0, 20_000, 1000, SB3_TD3_ZOO),
    **{
        task.key: task
        for task in (
            _mujoco("sac", "HalfCheetah-v5", 5000.0),
            _mujoco("td3", "HalfCheetah-v5", 5000.0),
            _mujoco("sac", "Hopper-v5", 2500.0),
            _mujoco("td3", "Hopper-v5", 2500.0),
        )
    },
}


def same_settings(task: Task) -> list[str]:
    """The ``same`` arm's settings: the Zoo's exact ones (a locomotion preset has them but for its 8-frame learning
    phases: the Zoo collects one frame, then updates once)."""
    if task.key:
        return [f"{task.algo}.steps_per_env=1"]
    return SAME_SETTINGS[task.algo]


def rlpilot_settings(
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    threshold: float,
    max_seconds: float | None = None,
    overrides: tuple[str, ...] = (),
    threads: int = 1,
) -> list[str]:
    settings = [
        *overrides,
        f"train.seed={seed}",
        f"train.eval_every_frames={eval_every}",
        f"train.total_frames={budget}",
        f"train.eval_episodes={episodes}",
        f"train.solved_at={threshold}",
        "train.stop_when_solved=true",  # the locomotion presets go on past their threshold; timed here to it
        f"train.num_threads={threads}",
    ]
    if max_seconds is not None:
        settings.append(f"train.max_seconds={max_seconds}")
    return settings


def run_result(meta: dict, path: str) -> dict:
    """A finished run's ``meta.json`` as a benchmark result."""
    return {
        "solved": meta["status"] == "solved",
        "frames": meta.get("solved_at_frames") or meta["frames"],
        "train_s": meta["elapsed_s"],
        "startup_s": meta.get("startup_s"),
        "last_eval": meta.get("last_eval"),
        "run": path,
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
    """rlpilot through its Python API in this process (lunarlander.py's runs)."""
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    settings = rlpilot_settings(
        seed, eval_every, budget, episodes, threshold=threshold, max_seconds=max_seconds, overrides=overrides
    )
    result = train(load_config(preset, overrides=settings), run_root="runs/bench", show_progress=False)
    return run_result(result.meta(), str(result.path))


def rlpilot_cli(task: Task, arm: str, seed: int, args) -> tuple[list[str], Path]:
    """The command a user types, ``rlpilot train PRESET --set ...`` (as ``python -m rlpilot.cli``, the
    same entry point), and the run directory it writes: the whole process is the user's whole wait."""
    overrides = {
        "preset": (),
        "same": tuple(same_settings(task)),
        "sbx": (*same_settings(task), *SBX_COMPUTATION[task.algo]),
    }[arm]
    overrides = (*overrides, *args.set)
    settings = rlpilot_settings(
        seed,
        args.eval_every,
        args.budget,
        args.episodes,
        threshold=task.threshold,
        overrides=overrides,
        threads=getattr(args, "cores", 1),
    )
    run_dir = Path("runs/bench") / f"{task.preset}-{arm}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    command = [sys.executable, "-m", "rlpilot.cli", "train", task.preset, "--run-dir", str(run_dir), "-q"]
    for setting in settings:
        command += ["--set", setting]
    return command, run_dir


CLEANRL_ALGOS = ("ppo", "dqn")
PEERS = ("sb3", "sbx", "cleanrl")
SBX_PYTHON = Path(__file__).resolve().parents[1] / ".venv-sbx" / "bin" / "python"  # make bench-sbx-venv


def peer_names(algo: str, peers: tuple[str, ...] = PEERS) -> list[str]:
    """The peer workers of a task (its name in TASKS), in running order (CleanRL-style peers exist for PPO and DQN
    on CartPole only)."""
    return [f"{peer}-{algo}-zoo" for peer in peers if peer != "cleanrl" or algo in CLEANRL_ALGOS]


def workers(task: Task) -> dict:
    # the peers' workers (``--worker NAME`` in a child process); rlpilot's rows run its CLI (``rlpilot_cli``)
    found = {
        f"{library}-{task.name}-zoo": partial(
            worker_sb3, task.algo, env_id=task.env_id, hyperparams=task.sb3, threshold=task.threshold, library=library
        )
        for library in ("sb3", "sbx")
    }
    if task.algo in CLEANRL_ALGOS and not task.key:
        found[f"cleanrl-{task.name}-zoo"] = partial(
            worker_cleanrl, task.algo, hyperparams=task.sb3, threshold=task.threshold
        )
    return found


WORKERS = {name: fn for task in TASKS.values() for name, fn in workers(task).items()}


PINNED_CPU = 0


def pin_cores(cores: int):
    """A ``preexec_fn`` pinning the child to CPUs ``PINNED_CPU`` .. ``PINNED_CPU + cores - 1`` (``one_core`` for 1)."""
    if cores == 1:
        return one_core

    def pin() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(range(PINNED_CPU, PINNED_CPU + cores)))

    return pin


def one_core() -> None:
    """Every child (rlpilot and each peer) runs pinned to one CPU: the same thread budget on both sides, whatever
    threads a library starts (XLA's runtime and Eigen pools, torch's inter-op pool, Ray's and gymnasium's none
    here). Without the pin SBX's runs used 1.4x their wall time in CPU seconds on this 2-core machine (2026-12-01)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {PINNED_CPU})


def run_child(
    name: str,
    seed: int,
    args,
    script: str = __file__,
    timeout: float | None = None,
    extra: tuple = (),
    python: str | None = None,
    cli: tuple[list[str], Path] | None = None,
) -> dict:
    """``python script --worker name [extra...]`` in a fresh process (``python``: this interpreter unless
    given, e.g. .venv-sbx's for SBX); its last stdout line is the JSON result. ``cli``: a command and the
    run directory it writes instead (rlpilot's own CLI); the result is read from its ``meta.json``."""
    cmd = (
        cli[0]
        if cli
        else [
            python or sys.executable,
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
            *(["--cores", str(args.cores)] if getattr(args, "cores", 1) != 1 else []),
            *extra,
        ]
    )
    start, cpu_start = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        preexec_fn=pin_cores(getattr(args, "cores", 1)),
    )
    process_s = time.perf_counter() - start
    cpu_end = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds: robust to other load on the machine
    cpu_s = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    if out.returncode != 0:  # recorded, not fatal: one crashed run must not cost the whole benchmark
        error = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{name} seed {seed} failed (exit {out.returncode}): {error}", file=sys.stderr, flush=True)
        return {
            "solved": False,
            "frames": 0,
            "train_s": float("nan"),
            "process_s": process_s,
            "process_cpu_s": cpu_s,
            "error": error,
        }
    if cli:
        result = run_result(json.loads((cli[1] / "meta.json").read_text()), str(cli[1]))
    else:
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


def fastest_peer(results: dict[str, list[dict]], peers: list[str]) -> str:
    """The peer with the lowest median training clock over the seeds it solved (fewer solved seeds: says so)."""
    timed = {name: [r["train_s"] for r in results[name] if r["solved"]] for name in peers if name in results}
    timed = {name: times for name, times in timed.items() if times}
    if not timed:
        return "fastest peer: none solved"
    name = min(timed, key=lambda n: statistics.median(timed[n]))
    return (
        f"fastest peer (median training clock over the seeds it solved): {name}, "
        f"{statistics.median(timed[name]):.2f} s, {len(timed[name])}/{len(results[name])} solved"
    )


def report(
    task: Task,
    results: dict[str, list[dict]],
    seeds: list[int],
    comparisons: dict,
    episodes: int,
    peers: list[str] | None = None,
) -> list[str]:
    lines = [
        "",
        f"## {task.name} on {task.env_id}: seeds {seeds[0]}-{seeds[-1]}, greedy eval of {episodes} episodes every "
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
    if peers and len(peers) > 1:
        lines += ["", fastest_peer(results, peers)]
    for comparison in comparisons.values():
        lines += ["", *comparison_lines(comparison)]
    return lines


def comparison_key(arm: str, peer: str) -> str:
    """SB3 comparisons keep their old key (the arm: result files before the other peers read the same)."""
    return arm if peer.startswith("sb3-") else f"{arm}/{peer}"


def interpreter_line(python: Path, cores: int = 1) -> str:
    """The SBX interpreter, its package versions (the stamp's are this interpreter's) and JAX's settings."""
    names = ("sbx-rl", "jax", "jaxlib", "flax", "optax", "stable-baselines3", "torch", "gymnasium", "numpy")
    code = (
        "import importlib.metadata as m, platform; "
        f"print(', '.join(['python ' + platform.python_version()] + [n + ' ' + m.version(n) for n in {names!r}]))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    versions = out.stdout.strip() or f"versions unknown ({out.stderr.strip()[-200:]})"
    flags = " ".join(f"{key}={value}" for key, value in jax_cpu_settings(cores).items())
    return f"# sbx interpreter: {python} ({versions}); {flags}"


def carried_rows(earlier: dict, path: str, tasks: dict) -> list[dict]:
    """Copies into ``tasks`` the earlier file's tasks this run did not measure; returns, per file that measured them,
    ``{"from", "algos", "stamp"}``: the earlier file's own rows under its stamp, and the rows it had itself carried
    under theirs (each row keeps the stamp it was measured under). A file written before carries were lists holds
    one entry, as a dict."""
    inherited = earlier.get("carried") or []
    inherited = [inherited] if isinstance(inherited, dict) else inherited
    entries = []
    for source, algos, source_stamp in (
        *((e["from"], e["algos"], e["stamp"]) for e in inherited),
        (path, [a for a in earlier["tasks"] if not any(a in e["algos"] for e in inherited)], earlier["stamp"]),
    ):
        kept = [algo for algo in algos if algo not in tasks]
        if kept:
            entries.append({"from": source, "algos": kept, "stamp": source_stamp})
    for entry in entries:
        for algo in entry["algos"]:
            tasks[algo] = earlier["tasks"][algo]
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="ppo,dqn", help=f"comma-separated: {', '.join(TASKS)}")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100, help="seeds no preset was tuned on start at 100")
    parser.add_argument("--arms", default="preset,same", help="comma-separated: preset, same, sbx")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated: sb3, sbx, cleanrl")
    parser.add_argument(
        "--sbx-python",
        help=f"interpreter with SBX installed (default: {SBX_PYTHON.relative_to(SBX_PYTHON.parents[2])} "
        "when it exists: make bench-sbx-venv); the SBX rows are skipped without one",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting added to every rlpilot arm (e.g. train.compile=off); repeatable",
    )
    parser.add_argument(
        "--episodes", type=int, help="greedy episodes per evaluation (default: the task's, 20; locomotion 10)"
    )
    parser.add_argument("--out", help="result file (stamped); default: print only")
    parser.add_argument(
        "--carry",
        help="an earlier result file (.json): its tasks not run now are copied into --out with their own stamp "
        "(re-measure one task without re-running the others)",
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=1,
        help="CPUs each run is pinned to and threads it computes on (rlpilot's train.num_threads, SB3's torch "
        "threads, SBX's XLA client); default 1",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        threads = {"threads": args.cores} if args.cores != 1 else {}  # only SB3's and SBX's workers take more
        print(json.dumps(WORKERS[args.worker](args.seed, args.eval_every, args.budget, args.episodes, **threads)))
        return
    earlier = json.loads(Path(args.carry).read_text()) if args.carry else {}
    header = stamp.header()
    lines = list(header)
    data: dict = {"tasks": {}}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arms = args.arms.split(",")
    peers = tuple(args.peers.split(","))
    sbx_python = Path(args.sbx_python) if args.sbx_python else SBX_PYTHON
    if args.cores < 1 or args.cores > (os.cpu_count() or 1):
        parser.error(f"--cores {args.cores}: this machine has {os.cpu_count()} CPUs; give 1 to {os.cpu_count()}")
    if args.cores != 1 and "cleanrl" in peers:
        parser.error("--cores: the CleanRL-style peers compute on one thread; leave cleanrl out of --peers")
    data["cores"] = args.cores
    lines.append(
        f"# cores: {args.cores} (each run pinned to CPUs {PINNED_CPU}-{PINNED_CPU + args.cores - 1}; "
        f"train.num_threads={args.cores}, SB3's torch threads {args.cores}, SBX's XLA client {args.cores})"
    )
    if "sbx" in peers:
        if sbx_python.exists():
            lines.append(interpreter_line(sbx_python, args.cores))
            data["sbx_interpreter"] = lines[-1].removeprefix("# ")
        else:
            skip = f"SBX rows skipped: no interpreter at {sbx_python} (make bench-sbx-venv, or --sbx-python PATH)"
            print(skip, flush=True)
            lines.append(f"# {skip}")
            peers = tuple(peer for peer in peers if peer != "sbx")
    episodes = args.episodes
    for algo in args.algos.split(","):
        if algo not in TASKS:
            parser.error(f"--algos: no task {algo!r} (the tasks: {', '.join(TASKS)})")
        task = TASKS[algo]
        args.budget, args.eval_every, args.episodes = task.budget, task.eval_every, episodes or task.episodes
        peer_rows = peer_names(algo, peers)
        names = [*(f"rlpilot-{algo}-{arm}" for arm in arms), *peer_rows]
        results: dict[str, list[dict]] = {name: [] for name in names}
        for seed in seeds:
            for name in names:
                arm = name.removeprefix(f"rlpilot-{algo}-") if name.startswith("rlpilot-") else None
                r = run_child(
                    name,
                    seed,
                    args,
                    python=str(sbx_python) if name.startswith("sbx-") else None,
                    cli=rlpilot_cli(task, arm, seed, args) if arm else None,
                )
                results[name].append(r)
                row = (
                    f"  {name:<22} seed {seed}: solved={r['solved']} frames={r['frames']:>7} "
                    f"train {r['train_s']:.2f} s  process {r['process_s']:.2f} s  cpu {r['process_cpu_s']:.2f} s"
                )
                print(row, flush=True)
                lines.append(row)
        comparisons = {
            comparison_key(arm, peer): compare(results, f"rlpilot-{algo}-{arm}", peer, seeds)
            for arm in arms
            for peer in peer_rows
        }
        block = report(task, results, seeds, comparisons, args.episodes, peer_rows)
        print("\n".join(block), flush=True)
        lines += block
        data["tasks"][algo] = {
            "algo": task.algo,
            "env_id": task.env_id,
            "episodes": args.episodes,
            "threshold": task.threshold,
            "budget": task.budget,
            "eval_every": task.eval_every,
            "seeds": seeds,
            "peers": peer_rows,
            "results": results,
            "comparisons": comparisons,
        }
    if args.carry:
        data["carried"] = carried_rows(earlier, str(args.carry), data["tasks"])
        for entry in data["carried"]:
            lines.append(f"# carried from {entry['from']} (its own stamp in the JSON): {', '.join(entry['algos'])}")
    if args.out:
        stamp.write_result(args.out, header, lines[len(header) :], data)


if __name__ == "__main__":
    main()
