"""Writes the generated result tables and figures into README.md and docs/*.md from the stamped result files.

    python tools/gen_results.py          # rewrite the tables between their markers
    python tools/gen_results.py --check  # exit 1 if a table differs from its result file (a unit test runs this)

Each table lives between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` in any page; nothing between
the markers is typed by hand. Sources: the newest stamped file of each pattern in ``SOURCES`` (for example
``benchmarks/results/time_to_solve-*.json``, written by ``benchmarks/time_to_solve.py --out``); the figures are
drawn by ``results_figures`` and copied by ``results_compare`` into ``docs/img/``.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_adapt  # noqa: E402  (what the first step costs a history policy: docs/adapt.md)
import results_compare  # noqa: E402  (the compare answers' blocks and figures)
import results_figures  # noqa: E402  (the figures of the result files)
import results_locomotion  # noqa: E402  (the MuJoCo locomotion presets against the published scores)
from result_stamps import stamp_value  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGETS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
"""Every page a block may live in: a block is found by its name, whichever page holds it."""
ARM_NAMES = {
    "preset": "preset vs preset (what a user gets)",
    "same": "same settings (implementation speed)",
    "sbx": "same settings, SBX's computation",
}


def newest(pattern: str) -> Path | None:
    found = sorted(RESULTS.glob(pattern))
    return found[-1] if found else None


def shown(path: Path) -> Path:
    """``path`` as a page names it: relative to the repository where it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def source_line(path: Path, stamp: list[str]) -> str:
    """Where a table's numbers come from: the file, its commit, date, load and command."""
    load = stamp_value(stamp, "load at start").split(" (")[0]
    return (
        f"Source: `{shown(path)}` (commit {stamp_value(stamp, 'commit')[:12]}, "
        f"{stamp_value(stamp, 'date')}, load at start {load}); command: `{stamp_value(stamp, 'command')}`."
    )


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
        f" Rows for {', '.join(a.upper() for a in entry['algos'])} copied from `{Path(entry['from']).name}` "
        f"(commit {stamp_value(entry['stamp'], 'commit')[:12]}, {stamp_value(entry['stamp'], 'date')}, "
        f"command: `{stamp_value(entry['stamp'], 'command')}`)."
        for entry in carried_entries(data)
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
        cells += [f"{c[key][0]:.2f}x [{c[key][1]:.2f}-{c[key][2]:.2f}]" for key in ("train_s", "process_s", "frames")]
        lines.append("| " + " | ".join(cells) + " |")
    seeds = next(iter(data["tasks"].values()))["seeds"]
    if only_sb3:
        lines += [
            "",
            f"Ratios are SB3 time / rlpilot time per seed (above 1: rlpilot is faster), median over the seeds both "
            f"solved, with a 95% bootstrap interval; seeds {seeds[0]}-{seeds[-1]} (no preset was tuned on them). "
            + source_line(path, data["stamp"]),
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
        f"solved, with a 95% bootstrap interval; seeds {seeds[0]}-{seeds[-1]} (no preset was tuned on them). "
        + cores_line(data)
        + "Peers, all with RL Zoo's hyperparameters: "
        + ", ".join(text for kind, text in PEER_NOTES.items() if kind in present)
        + ". "
        + source_line(path, data["stamp"])
        + carried_line(data),
    ]
    return "\n".join(lines)


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
    its intervals and the files' stamps are in docs/results.md (``time_to_solve``)."""
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


def seed_runs_table(path: Path) -> str:
    """benchmarks/seed_runs.py: one row per seed (status, first solve, first and final greedy evaluation,
    frames and wall time of the whole run)."""
    data = json.loads(path.read_text())
    lines = [
        "| seed | status | first solved at (greedy mean) | first evaluation | final evaluation | frames | wall |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        if r["status"] == "crashed":
            lines.append(f"| {r['seed']} | crashed | | | | | |")
            continue
        evals = {p["frames"]: p["eval"] for p in r["curve"]}
        solved = r.get("solved_at_frames")
        solved_cell = f"{solved:,} frames ({evals[solved]:.2f})" if solved in evals else "-"
        first = f"{r['curve'][0]['eval']:.3g} ({r['curve'][0]['frames']:,})" if r["curve"] else "-"
        final = f"{r['curve'][-1]['eval']:.3g} ({r['curve'][-1]['frames']:,})" if r["curve"] else "-"
        cells = [str(r["seed"]), r["status"], solved_cell, first, final, f"{r['frames']:,}", f"{r['wall_s']:.0f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    settings = ", ".join(f"`{s}`" for s in data["settings"]) or "none"
    lines += [
        "",
        f"`{data['preset']}`, {data['threads']} torch thread(s), one run at a time; overrides: {settings}. "
        "Evaluations: (greedy mean, frames). " + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def seed_curve_table(path: Path) -> str:
    """benchmarks/seed_runs.py: the first seed's evaluations with the training metrics recorded beside them."""
    data = json.loads(path.read_text())
    run = data["rows"][0]
    metrics = data["metrics"]
    lines = [
        "| frames | greedy evaluation | " + " | ".join(f"`{m}`" for m in metrics) + " |",
        "|---|---|" + "---|" * len(metrics),
    ]
    for point in run["curve"]:
        cells = ["" if point.get(m) is None else f"{point[m]:.3g}" for m in metrics]
        lines.append(f"| {point['frames']:,} | {point['eval']:.3f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"`{data['preset']}` seed {run['seed']}; training metrics: the last row logged at or before each evaluation. "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def llm_cost_table(path: Path) -> str:
    """benchmarks/llm_gpu.py, every ``llm_cost-*/llm_gpu.json``: one row per measured setting."""
    lines = [
        "| device | model | parameters | dtype | responses x new tokens | step (sample+score / learn) | generation "
        "| peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sources = []
    for source in sorted(RESULTS.glob("llm_cost-*/llm_gpu.json")):  # every setting, not only the newest
        r = json.loads(source.read_text())
        memory = (
            f"{r['peak_memory_gib']:.1f} GiB GPU"
            if r.get("peak_memory_gib") is not None
            else f"{r['peak_resident_gib']:.1f} GiB resident"
        )
        step = f"{r['step_s_mean']:.2f} s ({r['sample_and_score_s_mean']:.2f} / {r['learn_s_mean']:.2f})"
        cells = [
            r["device"],
            r["model"],
            f"{r['parameters']:,}",
            r["dtype"],
            f"{r['prompts_per_step']} x {r['group_size']} x {r['max_new_tokens']}",
            f"{step}, mean of {r['steps_measured']}",
            f"{r['generation_tokens_per_s_mean']:,.0f} tokens/s",
            memory,
        ]
        lines.append("| " + " | ".join(cells) + " |")
        sources.append(source_line(source, r["stamp"]))
    return "\n".join([*lines, "", *sources])


def reacher_sb3_table(path: Path) -> str:
    """benchmarks/reacher_sb3.py, every result file of the newest's date and kind (``reacher_sb3-*.json`` or
    ``llc_sb3-*.json``, ``reacher_td3_sb3-*.json``): per seed, rlpilot's preset against SB3's same algorithm (Zoo
    setting), frames and wall time to the threshold or to the cap."""
    kind, rest = path.stem.split("-", 1)
    sources = sorted(path.parent.glob(f"{kind}-{rest[:10]}*.json"))
    sb3, ours, stamps = {}, {}, []
    for source in sources:
        data = json.loads(source.read_text())
        sb3.update({r["seed"]: r for r in data["sb3"]})
        ours.update({r["seed"]: r for r in data["rlpilot"]})
        stamps.append(source_line(source, data["stamp"]))
    cap = data["max_seconds"]
    preset = data.get("preset", "sac-reacher")
    algo = data.get("algo", "sac").upper()  # files before --algo were SAC's

    def cell(r: dict | None, seconds: str) -> str:
        if r is None:
            return "-"
        if r["solved"]:
            return f"{r['frames']:,} frames, {r[seconds]:.0f} s"
        return f"not solved: {r['frames']:,} frames in {r[seconds]:.0f} s (last greedy {r['last_eval']:.2f})"

    at_cap = any(r.get("at_cap") for r in ours.values())
    extra = f" rlpilot at {cap:.0f} s of run clock |" if at_cap else ""
    lines = [
        f"| seed | rlpilot `{preset}`: solved at | SB3 {algo}, Zoo setting: solved at |{extra}",
        "|---|---|---|" + ("---|" if at_cap else ""),
    ]
    for seed in sorted(set(sb3) | set(ours)):
        row = f"| {seed} | {cell(ours.get(seed), 'wall_s')} | {cell(sb3.get(seed), 'train_s')} |"
        if at_cap:
            mark = (ours.get(seed) or {}).get("at_cap")
            row += f" {int(mark['frames']):,} frames, last greedy {mark['eval']:.2f} |" if mark else " - |"
        lines.append(row)
    lines += [
        "",
        f"{data['env']}: greedy mean of 20 episodes every {data['eval_every']:,} frames (after the update), solved "
        f"at >= {data['threshold']:g}; budget {data['budget']:,} frames, SB3 runs capped at {cap:.0f} s of wall "
        "time. Wall: rlpilot's run clock (its evaluations included), SB3's training clock (the same). "
        + " ".join(stamps),
    ]
    return "\n".join(lines)


def fault_soak_table(path: Path) -> str:
    data = json.loads(path.read_text())
    counts: dict[str, int] = {}
    for fault in data["faults"]:
        counts[fault["fault"]] = counts.get(fault["fault"], 0) + 1
    growth = data["rss_growth_percent_per_process"]
    rows = [
        ("minutes of training", f"{data['minutes']:g}"),
        ("faults injected", ", ".join(f"{name} x{n}" for name, n in counts.items())),
        ("frames trained", f"{data['frames']:,.0f}"),
        ("metrics.csv rows; frames strictly increasing", f"{data['rows']:,}; {data['frames_strictly_increasing']}"),
        (
            "restarts; resume events; meta.json resumes",
            f"{data['restarts']}; {data['resume_events']}; {data['meta_resumes']}",
        ),
        ("NaN observation events (reset, training went on)", f"{data['nonfinite_observation_events']:,}"),
        (
            "resident memory growth after warm-up, per process (max)",
            f"{max(growth.values()):+.2f}% over {len(growth)} processes" if growth else "-",
        ),
        ("final greedy evaluation", data["final_eval_100_episodes"]),
    ]
    lines = ["| measure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def fault_soak_ray_table(path: Path) -> str:
    """benchmarks/fault_soak.py --ray: the run collected on two Ray actors; actor kills, learner signals, and the
    processes of its local cluster left after each end of the learner."""
    data = json.loads(path.read_text())
    faults = data["faults"]
    counts: dict[str, int] = {}
    for fault in faults:
        counts[fault["fault"]] = counts.get(fault["fault"], 0) + 1
    kills = [fault for fault in faults if fault["fault"] == "actor_kill"]
    signals = [fault for fault in faults if fault["fault"] in ("sigterm", "sigkill", "startup_signal")]
    exits = (
        ", ".join(
            f"{fault['fault']} {fault['startup_exit'] if fault['fault'] == 'startup_signal' else fault['exit']}"
            for fault in signals
        )
        or "-"
    )  # a start-up signal: how the resume it stopped ended (the run before it was SIGKILLed to make room)
    rows = [
        ("minutes of training (2 actors of a local Ray cluster)", f"{data['minutes']:g}"),
        ("faults injected", ", ".join(f"{name} x{n}" for name, n in counts.items())),
        ("actors killed; replacements logged", f"{len(kills)}; {sum(k['replaced'] for k in kills)}"),
        ("learner exits", exits),
        ("learner ends checked; Ray processes left 60 s after", f"{data['learner_exits_checked_for_leftovers']}; "
         f"{data['leftover_processes']}"),
        ("frames trained", f"{data['frames']:,.0f}"),
        ("metrics.csv rows; frames strictly increasing", f"{data['rows']:,}; {data['frames_strictly_increasing']}"),
        ("restarts; resume events; meta.json resumes",
         f"{data['restarts']}; {data['resume_events']}; {data['meta_resumes']}"),
        ("final greedy evaluation", data["final_eval_100_episodes"]),
    ]  # fmt: skip
    lines = ["| measure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    lines += ["", source_line(path, data["stamp"])]
    return "\n".join(lines)


def scaling_rows(results: list[dict]) -> list[str]:
    """benchmarks/distributed_scaling.py's table: throughput of N actors against N x one actor, per schedule."""
    base = {schedule: results[0][schedule]["fps"] / results[0]["workers"] for schedule in ("sync", "async")}
    lines = [
        "| actors | sync frames/s | x one actor | share of N x one actor | async frames/s | x one actor | "
        "share of N x one actor | async policy lag | frames/s an actor while collecting (sync) | "
        "actor CPU ms a frame | actor start-up s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        n = result["workers"]
        cells = [str(n)]
        for schedule in ("sync", "async"):
            fps = result[schedule]["fps"]
            cells += [f"{fps:.0f}", f"{fps / base[schedule]:.2f}", f"{fps / (base[schedule] * n):.2f}"]
        cells += [f"{result['async']['lag']:.2f}", f"{result['sync']['actor_fps']:.0f}"]
        cells += [f"{result['sync']['actor_cpu_ms_per_frame']:.2f}", f"{result['startup_s']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def distributed_scaling_table(path: Path) -> str:
    """docs/distributed.md: the newest scaling measurement, with its settings and stamp."""
    data = json.loads(path.read_text())
    args = data["args"]
    settings = (
        f"`rlpilot/SlowCartPole-v0` at {args['step_ms']:g} ms a step, {args['envs_per_actor']} env(s) an actor, "
        f"{args['steps']} steps an env a batch (ideal {data['ideal_fps']:g} frames/s an actor), "
        f"{args['rounds']} rounds of {args['batches']} batches an actor per schedule:"
    )
    return "\n".join([settings, "", *scaling_rows(data["results"]), "", source_line(path, data["stamp"])])


def suite_time_table(_newest: Path) -> str:
    """Every stamped run of ``benchmarks/suite_time.py``, oldest first: the test suite's history."""
    rows = []
    for path in sorted(RESULTS.glob("suite_time-*.json")):
        data = json.loads(path.read_text())
        stamp = data["stamp"]
        counts = ", ".join(f"{n} {kind}" for kind, n in data["counts"].items()) or "no pytest summary"
        minutes, seconds = divmod(round(data["wall_s"]), 60)
        busy = f" beside {data['busy']} busy processes" if data.get("busy") else ""
        busy += f" beside {data['beside']}" if data.get("beside") else ""
        rows.append(
            f"| `make {data['target']}`{busy} | {minutes} min {seconds:02d} s | {counts} | exit {data['returncode']} | "
            f"{stamp_value(stamp, 'date')[:16]} | {stamp_value(stamp, 'commit')[:12]} | "
            f"{stamp_value(stamp, 'load at start').split(' (')[0]} | `{path.name}` |"
        )
    header = [
        "| command | wall time | tests | result | date | commit | load at start | result file |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(header + rows)


def _num(value) -> str:
    return "-" if value is None else (f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}")


def tune_acrobot_table(path: Path) -> str:
    """Issue 20's acceptance: the search's cost, its best trial, and the check on fresh seeds."""
    data = json.loads(path.read_text())
    summary = data["summary"]
    rows, check = summary["rows"], summary["check"]
    complete = [r for r in rows if r["state"] == "complete"]
    best = complete[0]
    params = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items())
    lines = [
        f"Start: {data['start']}. Search: {len(complete)} complete and {len(rows) - len(complete)} pruned trials, "
        f"3 tuning seeds each (0-2), whole command **{data['wall_s'] / 60:.1f} min** on this machine "
        f"(closing check included). Best trial {best['number']}: `{params}` (IQM over its seeds "
        f"{_num(best['value'])} frames).",
        "",
        "| configuration | seeds solved | IQM frames to solved [95% CI] | per seed (unsolved: the 200k budget) |",
        "|---|---|---|---|",
    ]
    for arm, values in check["arms"].items():
        low, high = values["interval"]
        lines.append(
            f"| {arm} | {values['solved']}/{len(check['seeds'])} | "
            f"{_num(values['value'])} [{_num(low)}, {_num(high)}] | "
            f"{', '.join(_num(v) for v in values['scores'])} |"
        )
    low, high = check["ratio_interval"]
    lines += [
        "",
        f"Check seeds {check['seeds'][0]}-{check['seeds'][-1]}, none of them a tuning seed. Paired ratio start/best "
        f"per seed: median {check['ratio_median']:.2f}x [{low:.2f}, {high:.2f}] (95% bootstrap; above 1: the best "
        "configuration needs fewer frames"
        + (
            "; a lower bound: unsolved start seeds are scored at the budget"
            if check["arms"]["start"]["solved"] < len(check["seeds"])
            else ""
        )
        + "). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def arm_gains_table(path: Path) -> str:
    """benchmarks/arm_gains.py: the gains per condition (nominal = what the controllers ship with)."""
    data = json.loads(path.read_text())
    lines = [
        "| condition | disturbance | PD kp, kd | PD mean return | PID kp, kd, ki | PID mean return |",
        "|---|---|---|---|---|---|",
    ]
    for name, gains in data["gains"].items():
        pd, pid = gains["pd"], gains["pid"]
        if name == "robust":  # tuned on randomised dynamics: every disturbance drawn per episode
            disturbance = "randomised: each disturbance drawn from its range per episode"
        else:
            disturbance = ", ".join(f"{k} {v:g}" for k, v in data["conditions"][name].items()) or "none"
        lines.append(
            f"| {name} | {disturbance} | {pd['kp']:g}, {pd['kd']:g} | {pd['score']:.3f} | "
            f"{pid['kp']:g}, {pid['kd']:g}, {pid['ki']:g} | {pid['score']:.3f} |"
        )
    lines += [
        "",
        f"Best of the grid on tuning seeds {data['tuning_seeds']} (mean return over those episodes). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def robot_arm_track_table(path: Path) -> str:
    """benchmarks/robot_arm_track.py: one table per condition, every controller and RL group a row."""
    data = json.loads(path.read_text())
    blocks = []
    for condition, rows in data["conditions"].items():
        measures = [k for k in next(iter(rows.values())) if not k.endswith(" CI") and k != "runs"]
        lines = [
            f"**{condition}**",
            "",
            "| controller | " + " | ".join(measures) + " |",
            "|---|" + "---|" * len(measures),
        ]
        for name, row in rows.items():
            cells = []
            for measure in measures:
                cell = f"{row[measure]:.3g}"
                interval = row.get(f"{measure} CI")
                if interval and interval[0] == interval[0]:  # not NaN
                    cell += f" [{interval[0]:.3g}, {interval[1]:.3g}]"
                cells.append(cell)
            lines.append(f"| {track_label(name, row)} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + (
        f"\n\n{data['episodes']} episodes per row (seeds {data['seed']}-{data['seed'] + data['episodes'] - 1}); "
        f"RL groups: {track_groups(data)}; gains from `{data['gains']}`"
        + (f" and `{data['autotune']}`" if "autotune" in data else "")
        + ". "
        + source_line(path, data["stamp"])
    )


RENAMED_PRESETS = {"(ppo-reacher-track-adaptive)": "(ppo-reacher-track-history)"}
"""Presets renamed since their result files were written (the files' group names keep the old one): the end-to-end
PPO history student's name went to the preset of ``train adapt``."""


def track_label(name: str, row: dict) -> str:
    """A robot_arm_track row's name (under its preset's present name), with its number of runs for an RL group."""
    for old, new in RENAMED_PRESETS.items():
        name = name.replace(old, new)
    return f"{name} ({row['runs']} runs, IQM)" if "runs" in row else name


def track_groups(data: dict) -> str:
    """The RL groups of a robot_arm_track result: runs each, and where a reused group was measured."""
    reused = data.get("reused", {})
    parts = []
    for name, runs in data.get("groups", {}).items():
        where = ""
        if name in reused:
            where = f", measured earlier: `{reused[name]['file']}`, commit {reused[name]['commit']}"
        parts.append(f"{track_label(name, {})}: {len(runs)} runs{where}")
    return "; ".join(parts) or "none"


TRACK_DETAIL = "intervals and the other measures in the tables per condition below"


ORACLE_ROW = "PD oracle (gains for this condition)"
NOT_MEASURED = "n/m"
"""A robot_arm_track cell a reused RL group has no measure for (a condition added after its runs were gone)."""


def ratio_to_oracle_lines(data: dict, reference: str = ORACLE_ROW) -> list[str]:
    """Every row's tracking RMSE over the per-condition retuned PD's (issue 37's bar: at most 1.2x), or over
    another ``reference`` row's."""
    conditions = list(data["conditions"])
    names = [n for n in next(iter(data["conditions"].values())) if n != reference]
    lines = ["| controller | " + " | ".join(conditions) + " |", "|---|" + "---|" * len(conditions)]
    for name in names:
        cells = [
            f"{data['conditions'][c][name]['RMSE (mm)'] / data['conditions'][c][reference]['RMSE (mm)']:.2f}x"
            if name in data["conditions"][c]
            else NOT_MEASURED
            for c in conditions
        ]
        lines.append(f"| {track_label(name, data['conditions'][conditions[0]][name])} | " + " | ".join(cells) + " |")
    return lines


def robot_arm_track_summary(path: Path, detail: str = TRACK_DETAIL, ratios: bool = True) -> str:
    """benchmarks/robot_arm_track.py at a glance: tracking RMSE (mm) and effort, every row by condition; with
    ``ratios``, each row's RMSE as a ratio to the per-condition retuned PD's."""
    data = json.loads(path.read_text())
    conditions = list(data["conditions"])
    names = list(next(iter(data["conditions"].values())))
    lines = [
        "| controller | " + " | ".join(conditions) + " |",
        "|---|" + "---|" * len(conditions),
    ]
    for name in names:
        cells = []
        for condition in conditions:
            row = data["conditions"][condition].get(name)
            cells.append(f"{row['RMSE (mm)']:.3g} ({row['effort']:.2g})" if row else NOT_MEASURED)
        lines.append(f"| {track_label(name, data['conditions'][conditions[0]][name])} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + (
        f"\n\nTracking RMSE in mm (motor effort, mean |a|^2, in brackets; {NOT_MEASURED}: not measured, a group reused "
        "from a file without that condition, or the relay auto-tune, which tunes one arm, where every episode has its "
        "own); "
        f"{data['episodes']} episodes per cell "
        f"(seeds {data['seed']}-{data['seed'] + data['episodes'] - 1}); {detail}. " + source_line(path, data["stamp"])
    )
    if ratios and all(ORACLE_ROW in rows for rows in data["conditions"].values()):
        text += "\n\nThe same rows' RMSE as a ratio to the PD retuned for each condition (the oracle):\n\n"
        text += "\n".join(ratio_to_oracle_lines(data))
    return text


ROBUST_ROW = "PD robust (gains for randomised dynamics)"
ANSWER_ROWS = {  # the page's question, per condition: these rows of the comparison, by what they are
    "PD oracle (gains for this condition)": "PD retuned for the condition (oracle)",
    ROBUST_ROW: "PD tuned once on randomised dynamics (robust)",
    "PID Optuna (randomised arm)": "PID searched by Optuna on the randomised arm",
    "PD adaptive (online identification, adaptive-pd)": "PD retuned online from an identification (adaptive-pd)",
}
ANSWER_ADAPTIVE = "PD adaptive (online identification, adaptive-pd)"
"""The classical adaptive row: its verdict and its effort are shown beside the RL student's."""
ANSWER_TEACHER = "privileged teacher, PPO schedule from the true dynamics (ppo-reacher-track-teacher)"
"""The RL bound, not deployable: shown where the comparison measured it."""
ANSWER_RL = "PPO gain schedule on PD from measured history (ppo-reacher-track-adaptive)"
"""The deployable RL student the question is asked of, on the fixed PD."""
ANSWER_RL_ADAPTIVE = "PPO gain schedule on adaptive-pd from measured history (ppo-reacher-track-adaptive-pd)"
"""The deployable RL student on the classical adaptive controller: PPO refining adaptive-pd's gains."""
ANSWER_STUDENTS = {
    ANSWER_RL: "RL student (PPO schedule from measured history)",
    ANSWER_RL_ADAPTIVE: "RL student on adaptive-pd (PPO refining its gains)",
}
ANSWER_VERDICTS = {  # the rows the bar is asked of: (label, question, whether the effort clause gets its own line)
    ANSWER_ADAPTIVE: ("adaptive-pd", "meets the bar", True),
    ANSWER_RL: ("RL student", "replaces the tuning", False),  # far from the bar: its effort would not decide it
    ANSWER_RL_ADAPTIVE: ("RL on adaptive-pd", "replaces the tuning", True),
}


def robot_arm_answer(path: Path, answer: Path | None = None) -> str:
    """docs/robot-arm.md's answer, per condition, against the **fine oracle** of ``rlpilot compare`` (the newest
    ``compare-arm-*/compare.json``: the PD searched continuously per condition): each row of the benchmark script's
    comparison as the ratio of its mean tracking RMSE to the oracle's, on the same 100 evaluation episodes (the two
    play the same episodes: their PD and adaptive-pd rows agree to 4-5 digits), and whether the rows the question is
    asked of meet the bar (at most 1.2x the oracle, below compare's robust PD). ``answer``: that compare.json
    (default: the newest)."""
    data = json.loads(path.read_text())
    answer = answer or results_compare.newest("arm")
    if answer is None:
        return "No `rlpilot compare` answer for the arm yet (benchmarks/results/compare-arm-*/compare.json)."
    compared = json.loads(answer.read_text())
    # the named conditions only: the script's "random" arm draws other dynamics than compare's "sampled" one
    conditions = [c for c in data["conditions"] if c in compared["conditions"]]
    cells = {c: compared["conditions"][c]["cells"] for c in conditions}
    oracle = {c: cells[c]["oracle"]["error"] * 1e3 for c in conditions}  # m -> mm
    robust = {c: cells[c]["robust"]["error"] * 1e3 for c in conditions}
    lines = ["| | " + " | ".join(conditions) + " |", "|---|" + "---|" * len(conditions)]
    lines.append("| fine oracle RMSE (mm) | " + " | ".join(f"{oracle[c]:.3g}" for c in conditions) + " |")
    lines.append("| robust PD (compare's) | " + " | ".join(f"{robust[c] / oracle[c]:.2f}x" for c in conditions) + " |")
    rows = [*ANSWER_ROWS.items(), (ANSWER_TEACHER, "RL teacher (told the true dynamics: not deployable)")]
    for name, label in [*rows, *ANSWER_STUDENTS.items()]:
        if name in (ORACLE_ROW, ROBUST_ROW) or not any(name in data["conditions"][c] for c in conditions):
            continue
        ratio = [data["conditions"][c].get(name) for c in conditions]
        text = [f"{row['RMSE (mm)'] / oracle[c]:.2f}x" if row else NOT_MEASURED for row, c in zip(ratio, conditions)]
        lines.append(f"| {label} | " + " | ".join(text) + " |")
    for name, (label, question, with_effort) in ANSWER_VERDICTS.items():
        if not any(name in data["conditions"][c] for c in conditions):
            continue
        verdicts = []
        for c in conditions:
            row = data["conditions"][c].get(name)
            within = row is not None and row["RMSE (mm)"] <= 1.2 * oracle[c] and row["RMSE (mm)"] < robust[c]
            verdicts.append(NOT_MEASURED if row is None else "**yes**" if within else "no")
        lines.append(f"| {label} {question} (<= 1.2x oracle, < robust)? | " + " | ".join(verdicts) + " |")
        if with_effort:  # the bar's effort clause (within 20% of the oracle's)
            effort = [
                f"{data['conditions'][c][name]['effort'] / cells[c]['oracle']['effort']:.2f}x"
                if name in data["conditions"][c]
                else NOT_MEASURED
                for c in conditions
            ]
            lines.append(f"| {label}'s motor effort / oracle's | " + " | ".join(effort) + " |")
    return "\n".join(lines) + (
        f"\n\nRatios of mean tracking RMSE to the fine oracle's on the same {data['episodes']} evaluation episodes "
        "per cell (the named conditions, played alike by both; the randomised arm draws its dynamics differently in "
        "each and is in compare's table below as `sampled`); the RL rows are the IQM over their held-out training "
        "seeds. " + source_line(path, data["stamp"]) + f" The fine oracle and the robust PD: `{shown(answer.parent)}/`."
    )


def arm_adaptive_tune_table(path: Path) -> str:
    """benchmarks/arm_adaptive_tune.py: the adaptive PD's constants as searched, the cost, the tuning RMSE (with the
    ratio objective, also each condition's RMSE and effort as ratios to the oracle PD's on the tuning episodes)."""
    data = json.loads(path.read_text())
    best = {k: v for k, v in data["best"].items() if k != "score"}
    constants = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in best.items())
    conditions = list(data["tuning_rmse_mm"])
    if data.get("objective", "return") == "ratio":
        score = (
            f"Worst RMSE ratio to the oracle PD over the conditions, relative to the bar there, plus the effort "
            f"penalty, on the tuning episodes (0-{data['episodes'] - 1} per condition): {data['best']['score']:.3f} "
            f"(below 1: every condition within the bar; the hand-set start: {data['start_score']:.3f}; the first "
            f"search's constants, 2026-12-03: {data['history'][1]['score']:.3f})"
        )
    else:
        score = (
            f"Mean return on the training arm's tuning episodes {data['best']['score']:.3f} "
            f"(the hand-set start: {data['start_score']:.3f})"
        )
    lines = [
        f"Constants found (trial {data['best_trial']} of {data['trials']}): {constants}. {score}. "
        f"Cost: {data['wall_s']:.0f} s of wall time, {data['simulated_s']:,.0f} simulated seconds "
        f"({data['trials']} trials of {data['episodes']} episodes"
        + (f" on each of {len(data['ratios'])} conditions)." if "ratios" in data else ")."),
        "",
        "| tuning episodes 0-31 | " + " | ".join(conditions) + " |",
        "|---|" + "---|" * len(conditions),
        "| RMSE (mm) | " + " | ".join(f"{data['tuning_rmse_mm'][c]:.3g}" for c in conditions) + " |",
    ]
    if "ratios" in data:
        ratios = data["ratios"]
        lines[-3:] = [
            f"| tuning episodes 0-{data['episodes'] - 1} | " + " | ".join(ratios) + " |",
            "|---|" + "---|" * len(ratios),
            "| RMSE (mm) | "
            + " | ".join(f"{ratios[c]['rmse_ratio'] * data['references'][c]['oracle_rmse_mm']:.3g}" for c in ratios)
            + " |",
            "| oracle PD's RMSE (mm) | "
            + " | ".join(f"{data['references'][c]['oracle_rmse_mm']:.3g}" for c in ratios)
            + " |",
            "| RMSE / oracle's | " + " | ".join(f"{ratios[c]['rmse_ratio']:.2f}x" for c in ratios) + " |",
            "| bar there | " + " | ".join(f"{data['references'][c]['bar']:.2f}x" for c in ratios) + " |",
            "| effort / oracle's | " + " | ".join(f"{ratios[c]['effort_ratio']:.2f}x" for c in ratios) + " |",
        ]
    return "\n".join([*lines, "", source_line(path, data["stamp"])])


def robot_arm_beyond(path: Path) -> str:
    """benchmarks/robot_arm_track.py on levels and combinations beyond the named conditions: RMSE and effort, then
    each row's RMSE as a ratio to the robust PD's (no oracle was tuned there)."""
    data = json.loads(path.read_text())
    text = robot_arm_track_summary(path, "no per-condition oracle was tuned for these", ratios=False)
    text += "\n\nThe same rows' RMSE as a ratio to the robust PD's (one set of gains tuned on randomised dynamics):\n\n"
    return text + "\n".join(ratio_to_oracle_lines(data, ROBUST_ROW))


def arm_ratio_spread_table(path: Path) -> str:
    """benchmarks/arm_ratio_spread.py: adaptive-pd's ratio to the oracle on many episodes, with a paired interval,
    its spread over blocks of 100 episodes and the typical episode's ratio."""
    data = json.loads(path.read_text())
    conditions = data["conditions"]
    names = list(conditions)
    block = data["block"]

    def row(label: str, cell) -> str:
        return f"| {label} | " + " | ".join(cell(conditions[n]) for n in names) + " |"

    def ratio(c: dict, who: str) -> str:
        r = c[who]
        return f"{r['ratio']:.2f}x [{r['ratio_ci'][0]:.2f}-{r['ratio_ci'][1]:.2f}]"

    def meets(c: dict) -> str:
        r = c["adaptive-pd"]
        if r["ratio_ci"][1] <= c["bar"]:
            return "**yes**"
        return "no" if r["ratio_ci"][0] > c["bar"] else "undecided"

    lines = [
        f"| {data['episodes']:,} episodes per condition | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        row("oracle PD's RMSE (mm)", lambda c: f"{c['rmse_mm']['oracle']:.3g}"),
        row("adaptive-pd's RMSE (mm)", lambda c: f"{c['rmse_mm']['adaptive-pd']:.3g}"),
        row("adaptive-pd / oracle, 95% interval", lambda c: ratio(c, "adaptive-pd")),
        row(
            f"the same on each block of {block} (first: the comparison's)",
            lambda c: (
                f"{min(c['adaptive-pd']['blocks']):.2f}-{max(c['adaptive-pd']['blocks']):.2f} "
                f"({c['adaptive-pd']['blocks'][0]:.2f})"
            ),
        ),
        row("median of the per-episode ratios", lambda c: f"{c['adaptive-pd']['median_episode_ratio']:.2f}x"),
        row("robust PD / oracle", lambda c: ratio(c, "robust")),
        row("bar there", lambda c: f"{c['bar']:.2f}x"),
        row("adaptive-pd within the bar (interval)?", meets),
        row("adaptive-pd's effort / oracle's", lambda c: f"{c['adaptive_effort_ratio']:.2f}x"),
        row(
            "worst episode, oracle / adaptive-pd (mm)",
            lambda c: f"{c['oracle_max_mm']:.3g} / {c['adaptive_max_mm']:.3g}",
        ),
        "",
        f"Ratios of mean tracking RMSE over {data['episodes']:,} episodes (seeds {data['seed']}-"
        f"{data['seed'] + data['episodes'] - 1}; the comparison's 100 are the first block), the interval a paired "
        f"bootstrap over episodes; the oracle is the PD retuned per condition (the robust PD on the randomised arm). "
        + source_line(path, data["stamp"]),
    ]
    return "\n".join(lines)


def arm_schedule_tuning(path: Path) -> str:
    """The tries behind ppo-reacher-track-gains: training seed 0 (one try also 1), on tuning episodes."""
    return robot_arm_track_summary(
        path, "training seed 0 for every RL row but the one marked training seed 1, one run each", ratios=False
    )


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


def reacher_table(path: Path) -> str:
    """benchmarks/robot_arm.py's table, copied from its stamped result file (older files: from the raw output
    and the comment lines written above it)."""
    if path.with_suffix(".json").exists():
        data = json.loads(path.with_suffix(".json").read_text())
        table = [line for line in path.read_text().splitlines() if line.startswith("|")]
        return "\n".join(table) + "\n\n" + source_line(path, data["stamp"])
    text = path.read_text().splitlines()
    table = [line for line in text if line.startswith("|")]
    header = [line.lstrip("# ") for line in text if line.startswith("#")]
    return "\n".join(table) + f"\n\nSource: `{path.relative_to(ROOT)}`: " + "; ".join(header) + "."


def _at_frames(evals: list[dict], frames: int) -> dict:
    """The first evaluation at or past ``frames`` (evaluations fall on batch boundaries)."""
    return next((e for e in evals if e["frames"] >= frames), evals[-1])


def _spread(values: list[float], fmt: str = ".2f") -> str:
    """Mean over seeds and the per-seed range."""
    return f"{statistics.mean(values):{fmt}} [{min(values):{fmt}}, {max(values):{fmt}}]"


def multiagent_spread_table(path: Path) -> str:
    """Issue 19: MAPPO/IPPO presets, BenchMARL's MAPPO at its budget, and the reference policies."""
    data = json.loads(path.read_text())
    peer_frames, seeds = data["peer_frames"], data["seeds"]
    refs = data["references"]
    lines = [
        "| policy | frames | greedy return (mean [min, max] over seeds) | landmarks covered | training wall s |",
        "|---|---|---|---|---|",
    ]
    for name, ref in refs.items():
        lines.append(
            f"| {name} policy (1000 episodes) | - | {ref['return_mean']:.2f} | {ref['landmarks_covered']:.2f} | - |"
        )
    ratios = {}
    for preset in ("mappo-spread", "ippo-spread"):
        runs = [r for r in data["runs"] if r.get("preset") == preset]
        if not runs:
            continue
        for label, pick in (("at the peer's budget", lambda ev: _at_frames(ev, peer_frames)), ("preset budget", None)):
            points = [pick(r["evals"]) if pick else r["evals"][-1] for r in runs]
            lines.append(
                f"| rlpilot {preset} ({label}) | {statistics.mean(p['frames'] for p in points):,.0f} | "
                f"{_spread([p['return_mean'] for p in points])} | "
                f"{_spread([p['landmarks_covered'] for p in points])} | "
                f"{_spread([p['elapsed_s'] for p in points], '.0f')} |"
            )
        ratios[preset] = runs
    peers = [r for r in data["runs"] if r.get("peer") == "benchmarl"]
    if peers:
        finals = [r["evals"][-1] for r in peers]
        lines.append(
            f"| BenchMARL 1.5.2 MAPPO (its configuration) | {peers[0]['frames']:,} | "
            f"{_spread([f['return_mean'] for f in finals])} | - | {_spread([r['train_s'] for r in peers], '.0f')} |"
        )
        mine = {r["seed"]: _at_frames(r["evals"], peer_frames)["elapsed_s"] for r in ratios.get("mappo-spread", [])}
        per_seed = [r["train_s"] / mine[r["seed"]] for r in peers if r["seed"] in mine]
        if per_seed:
            lines += [
                "",
                f"Wall time to {peer_frames:,} frames, BenchMARL / rlpilot mappo-spread, per seed: "
                + ", ".join(f"{v:.1f}x" for v in per_seed)
                + f" (median {statistics.median(per_seed):.1f}x; training clocks, evaluations included).",
            ]
    lines += ["", f"Seeds {seeds[0]}-{seeds[-1]} (presets tuned on seed 0). " + source_line(path, data["stamp"])]
    return "\n".join(lines)


SOURCES = {
    "time_to_solve": ("time_to_solve-*.json", time_to_solve_table),
    "update_cost": ("update_cost-*.json", update_cost_table),
    "update_limit": ("update_cost-*.json", update_limit_table),
    "update_limit_mujoco": ("update_cost_mujoco-*.json", update_limit_table),
    "stays_solved": ("stays_solved-*.json", stays_solved_table),
    "fault_soak": ("fault_soak-*.json", fault_soak_table),
    "fault_soak_ray": ("fault_soak_ray-*.json", fault_soak_ray_table),
    "distributed_scaling": ("distributed_scaling-*.json", distributed_scaling_table),
    "suite_time": ("suite_time-*.json", suite_time_table),
    "tune_acrobot": ("tune_acrobot-*.json", tune_acrobot_table),
    "arm_gains": ("arm_gains-*.json", arm_gains_table),
    "throughput": ("throughput-20*.txt", throughput_table),
    "lunarlander": ("lunarlander-*.jsonl", lunarlander_table),
    "reacher": ("robot_arm-*.txt", reacher_table),
    "throughput_gpu": ("throughput-h200-*.txt", throughput_gpu_table),
    "robot_arm_track": ("robot_arm_track-*.json", robot_arm_track_table),
    "robot_arm_track_summary": ("robot_arm_track-*.json", robot_arm_track_summary),
    "robot_arm_beyond": ("robot_arm_beyond-*.json", robot_arm_beyond),
    "robot_arm_answer": ("robot_arm_track-*.json", robot_arm_answer),
    "arm_adaptive_tune": ("arm_adaptive_tune-*.json", arm_adaptive_tune_table),
    "arm_ratio_spread": ("arm_ratio_spread-*.json", arm_ratio_spread_table),
    "arm_schedule_tuning": ("arm_schedule_tuning-*.json", arm_schedule_tuning),
    "multiagent_spread": ("multiagent_spread-*.json", multiagent_spread_table),
    "startup": ("startup-*.json", startup_table),
    "time_to_solve_summary": ("time_to_solve-*.json", time_to_solve_summary),
    "time_to_solve_ppo20": ("time_to_solve_ppo20-*.json", time_to_solve_table),
    "time_to_solve_sbx": ("time_to_solve_sbx-*.json", time_to_solve_table),
    "time_to_solve_td3": ("time_to_solve_td3-*.json", time_to_solve_table),
    "demo_holds": ("demo_holds-*.json", demo_holds_table),
    "seed_runs_minatar": ("seed_runs-ppo-minatar-breakout-*.json", seed_runs_table),
    "seed_runs_grpo": ("seed_runs-grpo-reverse-*.json", seed_runs_table),
    "seed_curve_grpo": ("seed_runs-grpo-reverse-*.json", seed_curve_table),
    "seed_curve_grpo_arithmetic": ("seed_runs-grpo-arithmetic-*.json", seed_curve_table),
    "llm_cost": ("llm_cost-*/llm_gpu.json", llm_cost_table),
    "reacher_sb3": ("reacher_sb3-*.json", reacher_sb3_table),
    "llc_sb3": ("llc_sb3-*.json", reacher_sb3_table),
    "reacher_td3_sb3": ("reacher_td3_sb3-*.json", reacher_sb3_table),
}


def dc_motor_table(path: Path) -> str:
    """docs/your-controller.md: examples/dc_motor/compare.py's table and its stamp."""
    record = json.loads(path.read_text())
    reused = record.get("reused")
    command = record["command"].split(" --group")[0] + (
        " with the two groups above" if "--group" in record["command"] else ""
    )
    kept = (
        f"; the RL rows' episodes kept from `{Path(reused['file']).name}` (commit {reused['commit']}), where "
        "they were played"
        if reused
        else ""
    )
    return (
        f"{record['table']}\n\nSource: `{path.relative_to(ROOT)}` (commit {record['commit']}, {record['date']}); "
        f"command: `cd examples && {command}`{kept}."
    )


SOURCES["dc_motor"] = ("dc_motor-*.json", dc_motor_table)


def preset_compile_table(path: Path) -> str:
    """docs/results.md: each preset's time to solve with ``train.compile=auto`` against ``off`` (paired per seed), the
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
    """docs/results.md: a learning phase's cost per gradient step, rlpilot against SBX and SB3."""
    data = json.loads(path.read_text())
    return "\n".join(data["table"]) + "\n\n" + source_line(path, data["stamp"])


SOURCES["preset_compile"] = ("preset_compile-*.json", preset_compile_table)
SOURCES["peer_update_cost"] = ("peer_update_cost-*.json", peer_update_cost_table)
SOURCES["time_to_solve_compiled"] = ("time_to_solve_compiled-*.json", time_to_solve_table)
SOURCES["time_to_solve_compiled_td3"] = ("time_to_solve_compiled_td3-*.json", time_to_solve_table)
SOURCES["time_to_solve_overhead"] = ("time_to_solve_overhead-*.json", time_to_solve_table)


def cuda_graphs_table(path: Path) -> str:
    """docs/results.md: CUDA graphs on the lent GPU machine (``benchmarks/gpu/cuda_graphs.sh``'s logs): a learning
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


SOURCES["cuda_graphs"] = ("cuda_graphs-h200-*.log", cuda_graphs_table)


def tables() -> dict[str, str]:
    found = {}
    for name, (pattern, table) in SOURCES.items():
        source = newest(pattern)
        if source is not None:
            found[name] = table(source)
    return {**found, **results_compare.tables(), **results_locomotion.tables(), **results_adapt.tables()}


def render(text: str, generated: dict[str, str]) -> str:
    for name, table in generated.items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", re.S)
        text = pattern.sub(lambda m, t=table: f"{m.group(1)}{t}\n{m.group(2)}", text)
    return text


def main() -> int:
    generated = tables()
    stale = []
    for target in TARGETS:
        text = target.read_text()
        new = render(text, generated)
        if new != text:
            stale.append(target)
            if "--check" not in sys.argv:
                target.write_text(new)
    stale += results_compare.stale_figures(write="--check" not in sys.argv)
    stale += results_figures.stale_figures(write="--check" not in sys.argv)
    if "--check" in sys.argv and stale:
        print(
            f"stale generated tables in {', '.join(str(p.relative_to(ROOT)) for p in stale)}: "
            "run python tools/gen_results.py"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
