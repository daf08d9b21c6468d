"""The learning phase's cost per gradient step at the RL Zoo's settings: rlpilot against SB3 and SBX, the same
computation timed the same way (issue 38: which implementation is fastest, apart from how many frames it needs).

Each library learns from a replay already holding random transitions of the task's env, with the Zoo's network,
batch and updates per phase (time_to_solve.py's ``same`` arm): DQN CartPole (128 gradient steps of batch 64 a phase,
256-256), SAC Pendulum (1 step of batch 256, 256-256), TD3 Pendulum (1 step of batch 256, 400-300; the mean over
critic-only and critic+actor steps). Timed: what the library's own loop calls for a phase (rlpilot's ``learn`` on
a freshly collected batch: replay write, minibatch sampling, the updates, target updates, statistics; SB3's and
SBX's ``train(gradient_steps, batch_size)``: sampling, the updates, target updates, logging), after a warm-up that
compiles (rlpilot: ``train.compile=on``; SBX: JAX's jit), divided by the gradient steps. Collection is not in it.
Each library runs in its own process, pinned to one CPU with one intra-op thread (JAX as time_to_solve.py sets it),
as its users run it: rlpilot with subnormal floats flushed to zero (``train.flush_denormal``, on by default: Adam's
moments decay into subnormals, and the compiled DQN update's elementwise kernel took 0.42 ms instead of 0.06 ms
with them), SB3 and SBX with their own defaults.

    python benchmarks/peer_update_cost.py [--algos dqn,sac,td3] [--phases 200] [--rounds 3] \\
        --out benchmarks/results/FILE.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stamp  # noqa: E402
import time_to_solve as tts  # noqa: E402
import zoo  # noqa: E402

LIBRARIES = ("rlpilot", "sbx", "sb3")
GPU_VARIANTS = ("rlpilot-nographs", "rlpilot-eager")
"""With ``--device cuda``: rlpilot's compiled update without CUDA graphs, and its eager update."""
LABELS = {"dqn": "DQN 256-256, batch 64", "sac": "SAC 256-256, batch 256", "td3": "TD3 400-300, batch 256"}


def phase_shape(algo: str) -> tuple[int, int]:
    """(frames collected, gradient steps) of one learning phase at the Zoo's settings."""
    return (256, 128) if algo == "dqn" else (1, 1)


def time_rlpilot(algo: str, phases: int, device: str = "cpu", variant: str = "") -> list[float]:
    """``variant`` (CUDA): "" compiled and replayed as CUDA graphs, "nographs" compiled alone, "eager" neither."""
    import torch

    from rlpilot.config import load_config
    from rlpilot.control.algos import build
    from rlpilot.control.collect import BatchCollector
    from rlpilot.envs import make_env

    torch.set_num_threads(1)
    torch.manual_seed(0)
    task = tts.TASKS[algo]
    frames, steps = phase_shape(algo)
    settings = {"": ["train.compile=on"], "nographs": ["train.compile=on", "train.cuda_graphs=false"]}
    overrides = [*tts.SAME_SETTINGS[algo], f"train.device={device}", *settings.get(variant, ["train.compile=off"])]
    config = load_config(task.preset, overrides=overrides)
    torch.set_flush_denormal(config.train.flush_denormal)  # as a run does (the trainer's default: on)
    env = make_env(config.env, seed=0, device=device)
    agent = build(config, env, torch.device(device))
    cfg = getattr(config, algo)
    warm = BatchCollector(env, agent.act, steps=cfg.learning_starts, seed=0).collect()
    agent.learn(warm, cfg.learning_starts - 1)  # the replay holds the warm-up; nothing learns yet
    collector = BatchCollector(env, agent.act, steps=frames, seed=1)
    batches = [collector.collect() for _ in range(phases + 20)]
    total = cfg.learning_starts
    per_step = []
    for index, batch in enumerate(batches):
        total += frames
        start = time.perf_counter()
        agent.learn(batch, total)
        if index >= 20:  # the first phases compile the programs (TD3: both kinds)
            per_step.append((time.perf_counter() - start) / steps)
    return per_step


def time_peer(library: str, algo: str, phases: int, device: str = "cpu") -> list[float]:
    import numpy as np

    if library == "sbx" and device == "cpu":  # on CUDA, JAX's default: its GPU backend
        zoo.jax_on_cpu_threads()
    import torch

    torch.set_num_threads(1)
    task = tts.TASKS[algo]
    model = zoo.make_sb3(algo, 0, env_id=task.env_id, hyperparams=task.sb3, library=library, device=device)
    frames, steps = phase_shape(algo)
    model.learn(total_timesteps=1)  # sets up the logger and the env; nothing trains (learning_starts)
    env = model.get_env()
    obs = env.reset()

    def add_random_frames(count: int) -> None:  # SB3 writes its replay one frame at a time, as in a run
        nonlocal obs
        for _ in range(count):
            action = np.array([env.action_space.sample() for _ in range(env.num_envs)])
            next_obs, reward, done, infos = env.step(action)
            model.replay_buffer.add(obs, next_obs, action, reward, done, infos)
            obs = next_obs

    add_random_frames(max(model.learning_starts, model.batch_size) + 1)
    per_step = []
    for index in range(phases + 20):
        add_random_frames(frames)  # the replay grows as in a run
        start = time.perf_counter()
        model.train(gradient_steps=steps, batch_size=model.batch_size)
        if index >= 20:  # SBX: the first calls compile
            per_step.append((time.perf_counter() - start) / steps)
    return per_step


def worker(library: str, algo: str, phases: int, device: str) -> None:
    if library.startswith("rlpilot"):
        per_step = time_rlpilot(algo, phases, device, library.partition("-")[2])
    else:
        per_step = time_peer(library, algo, phases, device)
    print(json.dumps({"per_step_ms": [s * 1e3 for s in per_step]}))


def run(library: str, algo: str, phases: int, device: str) -> dict:
    # on the GPU machine every library is installed in its one Python (no .venv-sbx there)
    python = str(tts.SBX_PYTHON) if library == "sbx" and device == "cpu" else sys.executable
    cmd = [python, __file__, "--worker", library, "--algos", algo, "--phases", str(phases), "--device", device]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, preexec_fn=tts.one_core)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["(no output)"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="dqn,sac,td3")
    parser.add_argument("--phases", type=int, default=200, help="timed learning phases (after 20 of warm-up)")
    parser.add_argument("--rounds", type=int, default=3, help="every library once per round, rounds in sequence")
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="cuda: every library on the GPU (SBX: JAX's GPU backend), the host side still pinned to one core; "
        "rlpilot also without CUDA graphs and eagerly",
    )
    parser.add_argument(
        "--libraries", help=f"which of {', '.join(LIBRARIES + GPU_VARIANTS)} to time (default: all the device has)"
    )
    parser.add_argument("--worker", choices=LIBRARIES + GPU_VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help="result file (stamped)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.algos, args.phases, args.device)
        return
    header = stamp.header()
    data: dict = {"cases": {}, "rounds": args.rounds, "device": args.device}
    if args.device == "cuda":
        import torch

        data["gpu"] = torch.cuda.get_device_name()
        header.append(f"# gpu: {data['gpu']}; every library on it")
    algos = args.algos.split(",")
    libraries = LIBRARIES + (GPU_VARIANTS if args.device == "cuda" else ())
    if args.libraries:
        libraries = tuple(name for name in libraries if name in args.libraries.split(","))
    if "rlpilot" not in libraries:
        parser.error("--libraries must include rlpilot (the ratios are against it)")
    medians: dict[str, dict[str, list[float]]] = {algo: {lib: [] for lib in libraries} for algo in algos}
    for round_index in range(args.rounds):  # every library once per round: a drift of the machine touches all alike
        for algo in algos:
            for library in libraries:
                result = run(library, algo, args.phases, args.device)
                data["cases"].setdefault(algo, {}).setdefault(library, []).append(result)
                if "error" in result:
                    print(f"{library} {algo} failed: {result['error']}", file=sys.stderr, flush=True)
                    continue
                medians[algo][library].append(statistics.median(result["per_step_ms"]))
                print(
                    f"  round {round_index + 1} {algo} {library:8s} median {medians[algo][library][-1]:.3f} ms a step",
                    flush=True,
                )
    extra = {"rlpilot-nographs": "rlpilot without graphs", "rlpilot-eager": "rlpilot eager"}
    names = [extra.get(name, {"rlpilot": "rlpilot", "sbx": "SBX", "sb3": "SB3"}[name]) for name in libraries]
    peers = [name for name in libraries if name != "rlpilot"]
    rows = [
        f"| update | {' | '.join(names)} | "
        + " | ".join(f"{extra.get(name, name.upper())} / rlpilot [range over rounds]" for name in peers)
        + " |",
        "|---" * (1 + len(libraries) + len(peers)) + "|",
    ]
    for algo in algos:
        per = medians[algo]
        data["cases"][algo]["median_ms"] = per
        cells = [f"{statistics.median(per[name]):.3f} ms" if per[name] else "failed" for name in libraries]
        ratios = []
        for name in peers:
            paired = [peer / ours for peer, ours in zip(per[name], per["rlpilot"])]  # same round
            ratios.append(f"{statistics.median(paired):.2f}x [{min(paired):.2f}-{max(paired):.2f}]" if paired else "-")
        rows.append(f"| {LABELS[algo]} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    body = [
        "",
        f"Median time per gradient step of a learning phase, median over {args.rounds} rounds (each library once a "
        "round); ratios: peer / rlpilot within a round (above 1: rlpilot is faster), median and range over rounds.",
        "",
        *rows,
    ]
    print("\n".join(body))
    if args.out:
        stamp.write_result(args.out, header, body, {**data, "table": rows})


if __name__ == "__main__":
    main()
