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
import results_arm  # noqa: E402  (the robot arm's and the DC motor's tables)
import results_compare  # noqa: E402  (the compare answers' blocks and figures)
import results_figures  # noqa: E402  (the figures of the result files)
import results_locomotion  # noqa: E402  (the MuJoCo locomotion presets against the published scores)
import results_speed  # noqa: E402  (time to solve, update cost, throughput, start-up)
from result_stamps import RESULTS, ROOT, newest, source_line, stamp_value  # noqa: E402

TARGETS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
"""Every page a block may live in: a block is found by its name, whichever page holds it."""


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
    **results_speed.SOURCES,
    **results_arm.SOURCES,
    "fault_soak": ("fault_soak-*.json", fault_soak_table),
    "fault_soak_ray": ("fault_soak_ray-*.json", fault_soak_ray_table),
    "distributed_scaling": ("distributed_scaling-*.json", distributed_scaling_table),
    "suite_time": ("suite_time-*.json", suite_time_table),
    "tune_acrobot": ("tune_acrobot-*.json", tune_acrobot_table),
    "multiagent_spread": ("multiagent_spread-*.json", multiagent_spread_table),
    "seed_runs_minatar": ("seed_runs-ppo-minatar-breakout-*.json", seed_runs_table),
    "seed_runs_grpo": ("seed_runs-grpo-reverse-*.json", seed_runs_table),
    "seed_curve_grpo": ("seed_runs-grpo-reverse-*.json", seed_curve_table),
    "seed_curve_grpo_arithmetic": ("seed_runs-grpo-arithmetic-*.json", seed_curve_table),
    "llm_cost": ("llm_cost-*/llm_gpu.json", llm_cost_table),
    "reacher_sb3": ("reacher_sb3-*.json", reacher_sb3_table),
    "llc_sb3": ("llc_sb3-*.json", reacher_sb3_table),
    "reacher_td3_sb3": ("reacher_td3_sb3-*.json", reacher_sb3_table),
}


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
