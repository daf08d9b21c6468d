"""The speed tables of docs/speed.md, README.md and docs/locomotion.md: time to solve against the peers, an update's
cost and its physical limit, throughput, start-up, compiled presets and CUDA graphs (tools/gen_results.py runs this).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from result_stamps import RESULTS, ROOT, source_line, stamp_value

ARM_NAMES = {
    "preset": "preset vs preset (what a user gets)",
    "same": "same settings (implementation speed)",
    "sbx": "same settings, SBX's computation",
}


def task_label(algo: str, task: dict) -> str:
    """``SAC``: a task's algorithm as a table names it (a locomotion task's key is its preset, e.g. sac-hopper)."""
    return task.get("algo", algo).upper()


def tasks_in_order(data: dict) -> list[tuple[str, dict]]:
    """A time-to-solve result's tasks as the tables list them (PPO, DQN, SAC, TD3), whichever were carried."""
    order = ("ppo", "dqn", "sac", "td3")
    return sorted(data["tasks"].items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))


def carried_entries(data: dict) -> list[dict]:
    """A time-to-solve file's carried rows, one ``{"from", "algos", "stamp"}`` per file that measured them (a file
    written before carries were lists holds one, as a dict)."""
    carried = data.get("carried") or []
    return [e for e in ([carried] if isinstance(carried, dict) else carried) if e["algos"]]


def carried_line(data: dict) -> str:
    """A result file that re-measured some tasks and copied the others from earlier ones says which, and each copied
    row's own stamp."""
    return "".join(
        f" Rows for {', '.join(a.upper() for a in entry['algos'])} copied from {_cited(entry)}."
        for entry in carried_entries(data)
    )


def _cited(entry: dict) -> str:
    """An earlier result file a table takes rows from (``{"from", "stamp"}``): its name, commit, date and command."""
    stamp = entry["stamp"]
    return (
        f"`{Path(entry['from']).name}` (commit {stamp_value(stamp, 'commit')[:12]}, {stamp_value(stamp, 'date')}, "
        f"command: `{stamp_value(stamp, 'command')}`)"
    )


PEER_LABELS = {"sb3": "SB3 + Zoo", "sbx": "SBX + Zoo", "cleanrl": "CleanRL-style + Zoo"}
PEER_NOTES = {
    "sb3": "SB3 (PyTorch)",
    "sbx": "SBX (SB3 in JAX; JAX's compilation counted in the training clock)",
    "cleanrl": "CleanRL-style single-file PyTorch (`benchmarks/peers/`, PPO and DQN)",
}


def _fastest(results: dict[str, list[dict]], *, every_seed: bool) -> str | None:
    """The side with the lowest median training clock over the seeds it solved; ``every_seed``: only sides
    that solved every seed compete. None when no side qualifies."""
    timed = {
        name: [r["train_s"] for r in runs if r["solved"]]
        for name, runs in results.items()
        if runs and any(r["solved"] for r in runs) and (not every_seed or all(r["solved"] for r in runs))
    }
    return min(timed, key=lambda name: statistics.median(timed[name])) if timed else None


def _peer_label(peer: str) -> str:
    return PEER_LABELS.get(peer.split("-")[0], peer)


def _ratio_cell(c: dict, key: str) -> str:
    """A comparison's median ratio on one clock and its interval (one seed solved by both: no interval to give)."""
    mid, low, high = c[key]
    if c["both_solved"] < 2:
        return f"{mid:.2f}x (one seed: no interval)" if c["both_solved"] else "-"
    return f"{mid:.2f}x [{low:.2f}-{high:.2f}]"


def _seeds_named(seeds: list[int]) -> str:
    if len(seeds) == 1:
        return f"seed {seeds[0]} (no preset was tuned on it)"
    return f"seeds {seeds[0]}-{seeds[-1]} (no preset was tuned on them)"


def time_to_solve_table(path: Path) -> str:
    """One row per task, rlpilot arm and peer. A file with SB3 as its only peer (those before SBX and the
    CleanRL-style peers) keeps its table without the peer column."""
    data = json.loads(path.read_text())
    rows = [  # comparison keys: the arm for SB3 (as before the other peers), "arm/peer" for the others
        (algo, task, key.split("/")[0], c)
        for algo, task in tasks_in_order(data)
        for key, c in task["comparisons"].items()
    ]
    only_sb3 = all(c["peer"].startswith("sb3-") for *_, c in rows)
    columns = ["task", "arm"] + ([] if only_sb3 else ["peer"]) + ["seeds solved by both", "rlpilot train s (median)"]
    columns += [
        "SB3 + Zoo train s (median)" if only_sb3 else "peer train s (median)",
        "ratio, training clock [95% CI]",
        "ratio, whole process [95% CI]",
        "ratio, frames [95% CI]",
    ]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for algo, task, arm, c in rows:
        ours, peer, results = c["ours"], c["peer"], task["results"]
        solved = [i for i, r in enumerate(results[ours]) if r["solved"] and results[peer][i]["solved"]]
        ours_s = statistics.median(results[ours][i]["train_s"] for i in solved) if solved else float("nan")
        peer_s = statistics.median(results[peer][i]["train_s"] for i in solved) if solved else float("nan")
        cells = [f"{task_label(algo, task)} on {task['env_id']}", ARM_NAMES.get(arm, arm)]
        cells += [] if only_sb3 else [_peer_label(peer)]
        cells += [f"{c['both_solved']}/{c['seeds']}", f"{ours_s:.2f}", f"{peer_s:.2f}"]
        cells += [_ratio_cell(c, key) for key in ("train_s", "process_s", "frames")]
        lines.append("| " + " | ".join(cells) + " |")
    seeds = next(iter(data["tasks"].values()))["seeds"]
    if only_sb3:
        lines += [
            "",
            f"Ratios are SB3 time / rlpilot time per seed (above 1: rlpilot is faster), median over the seeds both "
            f"solved, with a 95% bootstrap interval; {_seeds_named(seeds)}. " + source_line(path, data["stamp"]),
        ]
        return "\n".join(lines)
    present = {c["peer"].split("-")[0] for *_, c in rows}
    fastest = []
    for algo, task in tasks_in_order(data):
        peers = task.get("peers") or sorted({c["peer"] for c in task["comparisons"].values()})
        best = _fastest({p: task["results"][p] for p in peers}, every_seed=False)
        if best:
            times = [r["train_s"] for r in task["results"][best] if r["solved"]]
            fastest.append(
                f"{task_label(algo, task)} on {task['env_id']}: {_peer_label(best)}, {statistics.median(times):.2f} s "
                f"({len(times)}/{len(task['results'][best])} seeds solved)"
            )
        else:
            fastest.append(f"{task_label(algo, task)} on {task['env_id']}: none solved")
    lines += [
        "",
        "Fastest peer per task (median training clock over the seeds it solved): " + "; ".join(fastest) + ".",
        "",
        f"Ratios are peer time / rlpilot time per seed (above 1: rlpilot is faster), median over the seeds both "
        f"solved, with a 95% bootstrap interval; {_seeds_named(seeds)}. "
        + cores_line(data)
        + "Peers, all with RL Zoo's hyperparameters: "
        + ", ".join(text for kind, text in PEER_NOTES.items() if kind in present)
        + ". "
        + source_line(path, data["stamp"])
        + carried_line(data)
        + pooled_line(data),
    ]
    return "\n".join(lines)


def pooled_line(data: dict) -> str:
    """A file pooled from runs of a few seeds each (benchmarks/pool_seeds.py) names each run: its seeds, file,
    commit, date and command (the source line above is the pooling's)."""

    def seeds(entry: dict) -> str:
        return ", ".join(str(s) for s in sorted({s for seeds in entry["seeds"].values() for s in seeds}))

    return "".join(f" Seed(s) {seeds(entry)} measured in {_cited(entry)}." for entry in data.get("pooled", []))


def cores_line(data: dict) -> str:
    """The thread budget of a time-to-solve file that gave each run more than one core (none said: one)."""
    cores = data.get("cores", 1)
    if cores == 1:
        return ""
    return (
        f"Every run pinned to {cores} CPUs and computing on {cores} threads (rlpilot's learner, SB3's torch, SBX's "
        "XLA client). "
    )


def _median_cell(runs: list[dict] | None, short: bool = False) -> str:
    """The median over the solved seeds and how many solved (with ``short``, only where some did not)."""
    if not runs:
        return "-"
    solved = [r["train_s"] for r in runs if r["solved"]]
    if not solved:
        return f"none solved (0/{len(runs)})"
    share = "" if short and len(solved) == len(runs) else f" ({len(solved)}/{len(runs)})"
    return f"{statistics.median(solved):.2f} s{share}"


def time_to_solve_summary(path: Path) -> str:
    """README's small form of the time-to-solve file: one row per task, each side's median training clock to
    solve (the share of seeds solved only where not all did) and SB3's per seed over rlpilot's preset. Every arm,
    its intervals and the files' stamps are in docs/speed.md (``time_to_solve``)."""
    data = json.loads(path.read_text())
    if not any("peers" in task for task in data["tasks"].values()):
        return time_to_solve_table(path)  # files from before the other peers: the table as it was
    sides = {"rlpilot": "preset", "SB3": "sb3", "SBX": "sbx", "CleanRL-style": "cleanrl"}
    lines = [
        "| task | " + " | ".join(sides) + " | SB3 / rlpilot [95% CI] |",
        "|---|" + "---|" * (len(sides) + 1),
    ]
    for algo, task in tasks_in_order(data):
        names = {"preset": f"rlpilot-{algo}-preset", "sb3": f"sb3-{algo}-zoo", "sbx": f"sbx-{algo}-zoo"}
        names["cleanrl"] = f"cleanrl-{algo}-zoo"
        cells = [_median_cell(task["results"].get(names[side]), short=True) for side in sides.values()]
        c = task["comparisons"].get("preset")
        ratio = f"{c['train_s'][0]:.2f}x [{c['train_s'][1]:.2f}-{c['train_s'][2]:.2f}]" if c else "-"
        lines.append(f"| {task_label(algo, task)} on {task['env_id']} | " + " | ".join([*cells, ratio]) + " |")
    seeds = next(iter(data["tasks"].values()))["seeds"]
    lines += [
        "",
        f"Median seconds on the training clock to the first solved greedy evaluation, seeds {seeds[0]}-{seeds[-1]}; "
        f"rlpilot's preset against the peers with RL Zoo's settings; SB3 / rlpilot above 1: rlpilot is faster. "
        f"Source: `{path.relative_to(ROOT)}`.",
    ]
    return "\n".join(lines)


def update_cost_table(path: Path) -> str:
    data = json.loads(path.read_text())
    ms = data["ms"]
    rows = [
        (
            "PPO update, minibatch " + str(data["minibatch"]) + ", 64-64 tanh MLPs",
            "ClipPPOLoss update",
            "rlpilot ppo_loss update",
        ),
        ("GAE over a 256-transition batch", "GAE module per batch", "rlpilot gae per batch"),
        ("DQN update, batch 64, 64-64 ReLU MLP, double DQN", "DQNLoss update", "rlpilot dqn_loss update"),
    ]
    lines = ["| what | TorchRL module | rlpilot (plain torch) | ratio |", "|---|---|---|---|"]
    for what, theirs, ours in rows:
        lines.append(f"| {what} | {ms[theirs]:.2f} ms | {ms[ours]:.2f} ms | {ms[theirs] / ms[ours]:.2f}x |")
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def update_limit_table(path: Path) -> str:
    """``update_cost.py --limit``: FLOPs, eager and compiled time, and the share of the matmul peak per update."""
    data = json.loads(path.read_text())
    if "limit" not in data:
        return "Not measured yet (the newest update_cost result has no `--limit` rows)."
    lines = [
        "| update | MFLOP | eager | compiled (after compiling) | compiling | its matmuls alone | "
        "peak at those shapes | eager: achieved, share of peak | compiled: share of peak | compiling pays back after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["limit"]:
        compiled = f"{r['compiled_ms']:.2f} ms ({r['eager_ms'] / r['compiled_ms']:.2f}x)" if "compiled_ms" in r else "-"
        compiling = f"{r['compile_s']:.1f} s" if "compile_s" in r else "-"
        compiled_share = f"{r['compiled_share_of_peak']:.0%}" if "compiled_share_of_peak" in r else "-"
        pays_back = f"{r['pays_back_after']:,} updates" if r.get("pays_back_after") else "-"
        lines.append(
            f"| {r['case']} | {r['mflops']:.1f} | {r['eager_ms']:.2f} ms | {compiled} | {compiling} | "
            f"{r['matmul_alone_ms']:.2f} ms | {r['peak_gflops']:.0f} GFLOP/s | {r['achieved_gflops']:.0f} GFLOP/s, "
            f"{r['share_of_peak']:.0%} | {compiled_share} | {pays_back} |"
        )
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def stays_solved_table(path: Path) -> str:
    data = json.loads(path.read_text())
    lines = [
        f"| preset | seeds solved | frames to first solve (median) | share of the next {data['after']} evaluations "
        "at or above the threshold (mean over solved seeds) | per seed |",
        "|---|---|---|---|---|",
    ]
    for preset, entry in data["presets"].items():
        solved = [r for r in entry["results"] if r["solved"]]
        shares = [r["stays_solved"] for r in solved if r["stays_solved"] is not None]
        frames = f"{statistics.median(r['solved_at_frames'] for r in solved):,.0f}" if solved else "-"
        share = f"{statistics.mean(shares):.2f}" if shares else "-"
        per_seed = ", ".join("-" if r["stays_solved"] is None else f"{r['stays_solved']:.1f}" for r in entry["results"])
        lines.append(f"| `{preset}` | {len(solved)}/{len(entry['results'])} | {frames} | {share} | {per_seed} |")
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


STARTUP_LABELS = {
    "floor": "floor: `import torch, tensordict, torchrl`",
    "floor + envs": "floor + `torchrl.envs`, `torchrl.data`",
    "floor + envs, Ray and MuJoCo hidden": "the same, Ray and MuJoCo hidden from TorchRL (as rlpilot's CLI imports it)",
    "import stable_baselines3": "`import stable_baselines3` (for scale)",
    "rlpilot train ppo-cartpole": "`rlpilot train ppo-cartpole` (ready: its first frame)",
}


def startup_table(path: Path) -> str:
    """benchmarks/startup.py: medians over rounds; the first frame against the import floors, paired."""
    data = json.loads(path.read_text())
    lines = [
        "| what | ready (process start to imports done / first frame), s | whole process, s |",
        "|---|---|---|",
    ]
    for name, runs in data["rows"].items():
        ready = [r["ready_s"] for r in runs if r.get("ready_s") is not None]
        whole = [r["process_s"] for r in runs]
        cell = f"{statistics.median(ready):.2f} [{min(ready):.2f}-{max(ready):.2f}]" if ready else "-"
        label = STARTUP_LABELS.get(name) or f"`rlpilot {name.split(' (')[0]}`" + (
            f" ({name.split(' (')[1]}" if " (" in name else " (one line, exit 2)"
        )
        lines.append(f"| {label} | {cell} | {statistics.median(whole):.2f} [{min(whole):.2f}-{max(whole):.2f}] |")
    gaps = "; ".join(
        f"first frame - {floor}: **{mid:+.2f} s** [95% CI {low:+.2f}, {high:+.2f}]"
        for floor, (mid, low, high) in data["first_frame_minus"].items()
    )
    lines += [
        "",
        f"Medians [min-max] over {data['rounds']} rounds, each a fresh process, one at a time; paired per round: "
        f"{gaps}. " + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def demo_holds_table(path: Path) -> str:
    """benchmarks/demo_holds.py: make demo's two commands per seed."""
    data = json.loads(path.read_text())
    lines = [
        f"| seed | train | frames | `rlpilot eval --episodes {data['episodes']}`: mean | min | episodes at 500 |",
        "|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['seed']} | {r['status']} | {r['frames']:,} | {r['eval_mean']:.1f} | {r['eval_min']:.0f} | "
            f"{r['at_500']}/{r['episodes']} |"
        )
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def read_throughput(path: Path) -> tuple[str, dict[tuple[str, str, int], int]]:
    """benchmarks/throughput.py's text file: its first line, and frames/s by (env, path, envs)."""
    lines = path.read_text().splitlines()
    rows = {}
    for line in lines[2:]:
        match = re.match(r"(\S+)\s+(.+?)\s{2,}(\d+)\s+([\d,]+)\s+[\d.]+x$", line.strip())
        if match:
            env, what, envs, fps = match.groups()
            rows[(env, what.strip(), int(envs))] = int(fps.replace(",", ""))
    return lines[0], rows


def _si(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    return f"{value / 1e3:.3g}k" if value >= 1e4 else f"{value:,.0f}"


def throughput_table(path: Path) -> str:
    """CPU collection throughput: CartPole by number of envs, then every native env at 4,096 envs."""
    first, rows = read_throughput(path)
    gym1 = rows[("CartPole-v1", "gymnasium, 1 env, Python loop", 1)]
    torchrl = rows[("CartPole-v1", "TorchRL GymEnv, 1 env, rollout", 1)]
    lines = [
        f"CartPole-v1 (gymnasium 1 env: {gym1:,}/s; TorchRL `GymEnv` `rollout`: {torchrl:,}/s, {torchrl / gym1:.2f}x):",
        "",
        "| envs | gymnasium numpy-vectorised, random | native env, random | rlpilot collect + PPO, numpy backend "
        "| rlpilot collect + PPO, native backend |",
        "|---|---|---|---|---|",
    ]
    for envs in (8, 64, 512, 4096):
        cells = [
            _si(rows[("CartPole-v1", "gymnasium numpy-vectorised, random", envs)]),
            _si(rows[("CartPole-v1", "native env, random", envs)]),
        ]
        for backend in ("gymnasium", "native"):
            fps = rows[("CartPole-v1", f"rlpilot collect + PPO, {backend} backend", envs)]
            cells.append(f"**{_si(fps)}** ({fps / gym1:.1f}x)" if envs == 4096 else _si(fps))
        lines.append(f"| {envs:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The other native envs, rlpilot's collection with the PPO policy in the loop at 4,096 envs, against the "
        "gymnasium backend (a `SyncVectorEnv`: gymnasium has no vectorised version of these):",
        "",
        "| env | gymnasium 1 env | collect + PPO, gymnasium backend | collect + PPO, native backend |",
        "|---|---|---|---|",
    ]
    for env in ("Acrobot-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0"):
        one = rows[(env, "gymnasium, 1 env, Python loop", 1)]
        gym_fps = rows[(env, "rlpilot collect + PPO, gymnasium backend", 4096)]
        native = rows[(env, "rlpilot collect + PPO, native backend", 4096)]
        lines.append(f"| {env} | {one:,} | {gym_fps:,} ({gym_fps / one:.2f}x) | **{native:,}** ({native / one:.2g}x) |")
    lines += ["", f"Source: `{path.relative_to(ROOT)}` ({first}; written before result files carried a stamp)."]
    return "\n".join(lines)


def throughput_gpu_table(path: Path) -> str:
    """Native envs on CUDA: env alone and collection with the PPO policy, CartPole and Pendulum."""
    first, rows = read_throughput(path)
    lines = [
        "| envs | CartPole, env alone | CartPole, collection + PPO policy | Pendulum, env alone | "
        "Pendulum, collection + PPO policy |",
        "|---|---|---|---|---|",
    ]
    counts = sorted({envs for (env, what, envs) in rows if env == "CartPole-v1" and what == "native env, random"})
    for envs in [n for n in counts if n >= 1024]:
        cells = []
        for env in ("CartPole-v1", "Pendulum-v1"):
            alone = rows.get((env, "native env, random", envs))
            ppo = rows.get((env, "rlpilot collect + PPO, native backend", envs))
            one = rows.get((env, "gymnasium, 1 env, Python loop", 1))
            last = envs == counts[-1]
            cells.append("-" if alone is None else (f"**{_si(alone)}**" if last else _si(alone)))
            if ppo is None:
                cells.append("-")
            else:
                cells.append(f"**{_si(ppo)}** ({ppo / one:,.0f}x gymnasium)" if last and one else _si(ppo))
        lines.append(f"| {envs:,} | " + " | ".join(cells) + " |")
    lines += ["", f"Source: `{path.relative_to(ROOT)}` ({first}; written before result files carried a stamp)."]
    return "\n".join(lines)


LUNAR_PEERS = {
    "rlpilot-ppo": "rlpilot `ppo-lunarlander` (the Zoo's setting, unchanged)",
    "sb3-ppo-zoo": "SB3 PPO, Zoo (16 envs × 1024 steps, minibatch 64, 4 epochs, γ 0.999, λ 0.98, entropy 0.01)",
    "rlpilot-dqn": "rlpilot `dqn-lunarlander` (Zoo setting at a quarter of its updates per frame)",
    "sb3-dqn-zoo": "SB3 DQN, Zoo (lr 6.3e-4, batch 128, 50k buffer, one update per frame, target every 250 frames, "
    "256-256)",
}


def lunarlander_table(path: Path) -> str:
    """benchmarks/lunarlander.py's JSON lines: one row per peer, seeds side by side."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = [
        "| peer | solved | frames to solve (per seed) | wall s | process CPU s |",
        "|---|---|---|---|---|",
    ]
    for name, label in LUNAR_PEERS.items():
        mine = sorted((r for r in runs if r["name"] == name), key=lambda r: r["seed"])
        if not mine:
            continue
        frames = " / ".join(f"{r['frames']:,}" + ("" if r["solved"] else "*") for r in mine)
        wall = " / ".join(f"{r['train_s']:.0f}" for r in mine)
        cpu = " / ".join(f"{r['process_cpu_s']:.0f}" for r in mine)
        cpu = f"**{cpu}**" if name.startswith("rlpilot") else cpu
        lines.append(f"| {label} | {sum(r['solved'] for r in mine)}/{len(mine)} | {frames} | {wall} | {cpu} |")
    header = path.with_suffix(".txt").read_text().splitlines()[:2] if path.with_suffix(".txt").exists() else []
    lines += [
        "",
        "\\* not solved: frames reached when the budget or the wall cap ended the run. "
        f"Source: `{path.relative_to(ROOT)}`; its text file's header: "
        + "; ".join(line.lstrip("# ") for line in header)
        + ".",
    ]
    return "\n".join(lines)


def preset_compile_table(path: Path) -> str:
    """docs/speed.md: each preset's time to solve with ``train.compile=auto`` against ``off`` (paired per seed), the
    newest ``preset_compile`` file that measured it (``path``: the newest file, named for the source pattern)."""
    newest_of: dict[str, tuple[Path, dict]] = {}
    for found in sorted(RESULTS.glob("preset_compile-*.json")):
        for algo, task in json.loads(found.read_text())["tasks"].items():
            newest_of[algo] = (found, task)
    lines = [
        "| preset | seeds solved by both | auto train s (median) | off train s (median) | off / auto, training clock "
        "[95% CI] | whole process [95% CI] | frames [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    sources = []
    for found, task in newest_of.values():
        c, results = task["comparison"], task["results"]
        medians = [statistics.median(r["train_s"] for r in results[side] if r["solved"]) for side in ("auto", "off")]
        cells = [f"{c[key][0]:.2f}x [{c[key][1]:.2f}-{c[key][2]:.2f}]" for key in ("train_s", "process_s", "frames")]
        lines.append(
            f"| `{task['preset']}` | {c['both_solved']}/{c['seeds']} | {medians[0]:.2f} | {medians[1]:.2f} | "
            + " | ".join(cells)
            + " |"
        )
        if found not in sources:
            sources.append(found)
    stamps = [source_line(found, json.loads(found.read_text())["stamp"]) for found in sources]
    return "\n".join(lines) + "\n\nRatios above 1: the default (`auto`) is faster. " + " ".join(stamps)


def peer_update_cost_table(path: Path) -> str:
    """docs/speed.md: a learning phase's cost per gradient step, rlpilot against SBX and SB3."""
    data = json.loads(path.read_text())
    return "\n".join(data["table"]) + "\n\n" + source_line(path, data["stamp"])


def cuda_graphs_table(path: Path) -> str:
    """docs/speed.md: CUDA graphs on the lent GPU machine (``benchmarks/gpu/cuda_graphs.sh``'s logs): a learning
    phase's cost per gradient step (rlpilot compiled with graphs, without, eager; SBX on JAX's GPU backend), from the
    newest log that has them, and the policy step with and without its graph, from the newest log with that table."""
    texts = {log: log.read_text() for log in sorted(path.parent.glob("cuda_graphs-h200-*.log"), reverse=True)}
    step = re.compile(r"round \d+ (\w+) ([\w-]+)\s+median ([\d.]+) ms a step")
    update_log = next((log for log, text in texts.items() if step.search(text)), path)
    medians: dict[str, dict[str, float]] = {}
    for algo, library, value in step.findall(texts.get(update_log, "")):
        medians.setdefault(algo, {})[library] = float(value)
    labels = {"dqn": "DQN 256-256, batch 64", "sac": "SAC 256-256, batch 256", "td3": "TD3 400-300, batch 256"}

    def cell(algo: str, library: str) -> str:
        value = medians[algo].get(library)
        return f"{value:.3f} ms" if value is not None else "not timed"

    def ratio(algo: str, numerator: str) -> str:
        top, ours = medians[algo].get(numerator), medians[algo].get("rlpilot")
        return f"{top / ours:.2f}x" if top and ours else "-"

    lines = [
        "| update | rlpilot: compiled + CUDA graph | compiled, no graph | eager | SBX (JAX on the GPU) | "
        "eager / graph | SBX / rlpilot |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo in medians:
        cells = [cell(algo, name) for name in ("rlpilot", "rlpilot-nographs", "rlpilot-eager", "sbx")]
        lines.append(
            f"| {labels[algo]} | {' | '.join(cells)} | {ratio(algo, 'rlpilot-eager')} | {ratio(algo, 'sbx')} |"
        )
    sources = [update_log]
    policy_log = next((log for log, text in texts.items() if "| policy step |" in text), None)
    if policy_log is not None:
        lines += [""] + [row for row in texts[policy_log].splitlines() if row.startswith("|")]
        sources += [policy_log] if policy_log != update_log else []
    stamps = []
    for log in sources:
        stamp = [row for row in texts[log].splitlines() if row.startswith("# ")]
        stamps.append(f"{source_line(log, stamp)} {stamp_value(stamp, 'gpu')}. {stamp_value(stamp, 'note')}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(stamps)


SOURCES = {
    "time_to_solve": ("time_to_solve-*.json", time_to_solve_table),
    "update_cost": ("update_cost-*.json", update_cost_table),
    "update_limit": ("update_cost-*.json", update_limit_table),
    "update_limit_mujoco": ("update_cost_mujoco-*.json", update_limit_table),
    "stays_solved": ("stays_solved-*.json", stays_solved_table),
    "throughput": ("throughput-20*.txt", throughput_table),
    "lunarlander": ("lunarlander-*.jsonl", lunarlander_table),
    "throughput_gpu": ("throughput-h200-*.txt", throughput_gpu_table),
    "startup": ("startup-*.json", startup_table),
    "time_to_solve_summary": ("time_to_solve-*.json", time_to_solve_summary),
    "time_to_solve_ppo20": ("time_to_solve_ppo20-*.json", time_to_solve_table),
    "time_to_solve_sbx": ("time_to_solve_sbx-*.json", time_to_solve_table),
    "time_to_solve_td3": ("time_to_solve_td3-*.json", time_to_solve_table),
    "demo_holds": ("demo_holds-*.json", demo_holds_table),
    "preset_compile": ("preset_compile-*.json", preset_compile_table),
    "peer_update_cost": ("peer_update_cost-*.json", peer_update_cost_table),
    "time_to_solve_compiled": ("time_to_solve_compiled-*.json", time_to_solve_table),
    "time_to_solve_compiled_td3": ("time_to_solve_compiled_td3-*.json", time_to_solve_table),
    "time_to_solve_overhead": ("time_to_solve_overhead-*.json", time_to_solve_table),
    "cuda_graphs": ("cuda_graphs-h200-*.log", cuda_graphs_table),
    "time_to_solve_mujoco": ("time_to_solve_mujoco-*.json", time_to_solve_table),
    "time_to_solve_mujoco_cores2": ("time_to_solve_mujoco2-*.json", time_to_solve_table),
}
"""Each block of these pages and the newest result file of the pattern it is generated from (tools/gen_results.py)."""
