"""One control step of an exported controller at batch 1 on one thread: onnxruntime and the ``.pt2``.

A control engineer's first number: how long one call takes, in the tail. For each artifact, ``--calls``
calls after ``--warmup`` (p50, p99, p99.9, max in microseconds), the kinds interleaved in ``--rounds``
rounds so that a drift in the machine's state touches all of them alike:

- ``onnxruntime``: one ``session.run`` (``intra_op_num_threads=1``, ``inter_op_num_threads=1``, sequential
  execution), numpy row in, numpy action out;
- ``pt2``: the ``torch.export`` program loaded through rlpilot's safe loader, ``torch.set_num_threads(1)``,
  under ``torch.inference_mode()``; the numpy row in (``torch.from_numpy``) and the action out as numpy;
- ``empty call``: the same loop calling a function that returns its input: the floor of the Python loop and
  the clock, to subtract.

The inputs are observations recorded from the run's env with the controller acting (not zeros), cycled;
a controller with state (the PID's integral, a history window: every signature input after the observation)
starts from the signature's initial value (zeros) at each recorded episode start and is fed its own
``next_*`` output otherwise, as on the arm. The two artifacts are checked to act alike on those rows.

What the profile showed (cProfile, the gated controller): the ``.pt2`` module is an FX graph run one ATen
operator at a time from Python, 136 dispatches a step at ~2-3 us each, so it takes ~6x onnxruntime's time,
which runs the same graph in C++; for a control loop, deploy the onnx file.

TARGET is an export folder (``policy.onnx``, ``policy.pt2`` and their ``.json`` signatures, as ``rlpilot
export`` writes them) or a run directory: its ``export/`` when both are there, otherwise it is exported into
``--export-dir`` (default: a temporary folder; nothing is written into the run).

    python benchmarks/control_latency.py runs/arm-gated-1proc/s100 --cpu 0 \\
        --out benchmarks/results/control_latency-DATE.txt
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "examples"))
import stamp  # noqa: E402
from deploy_onnx import OnnxController, flatten, one_thread  # noqa: E402

FILES = {"onnx": "policy.onnx", "pt2": "policy.pt2"}
TARGET_P99_US = 500  # issue 37: p99 of one control step under 0.5 ms at batch 1 on one core


class Pt2Controller:
    """The ``.pt2`` as one call per control step, the state carried as :class:`OnnxController` carries it
    (the signature's inputs after the observation; each ``next_<name>`` output goes back in as ``<name>``)."""

    def __init__(self, path: Path):
        from rlpilot.play.safe_artifact import load_pt2

        self.signature = json.loads(path.with_name(path.name + ".json").read_text())
        self.module = load_pt2(path)
        self.state_inputs = self.signature["inputs"][1:]
        self.reset()

    def reset(self) -> None:
        initial = (self.signature.get("state") or {}).get("initial", 0.0)
        self.state = [
            torch.full([1 if d == "batch" else d for d in given["shape"]], float(initial))
            for given in self.state_inputs
        ]

    def raw(self, row: np.ndarray) -> np.ndarray:
        outputs = self.module(torch.from_numpy(row), *self.state)
        if not self.state:
            return outputs.numpy()
        action, *self.state = outputs
        return action.numpy()


class EmptyCall:
    """The loop's floor: a call that returns its input."""

    def reset(self) -> None:
        pass

    def raw(self, row: np.ndarray) -> np.ndarray:
        return row


def artifacts(target: Path, export_dir: Path | None) -> Path:
    """The folder holding ``policy.onnx`` and ``policy.pt2`` (with signatures) for ``target``."""
    for folder in (target, target / "export"):
        if all((folder / name).is_file() and (folder / f"{name}.json").is_file() for name in FILES.values()):
            return folder
    if not (target / "config.yaml").is_file():
        raise SystemExit(f"{target} is neither an export folder (policy.onnx and policy.pt2 with signatures) nor a run")
    from rlpilot.play.export import export_run

    out = export_dir or Path(tempfile.mkdtemp(prefix="control_latency-"))
    for fmt in FILES:
        result = export_run(target, fmt, out)
        print(f"exported {result.artifact} (parity: max |exported - live| = {result.max_abs_diff:.3g})")
    return out


def record(controller: OnnxController, count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``count`` observation rows (``[1, obs_dim]`` float32) from the controller acting on its env, and which
    of them start an episode."""
    env = controller.make_env()
    observation, _ = env.reset(seed=seed)
    controller.reset()
    rows, starts = [], np.zeros(count, bool)
    starts[0] = True
    for index in range(count):
        rows.append(np.ascontiguousarray(flatten(observation)[None, :]))
        observation, _, terminated, truncated, _ = env.step(controller(observation))
        if terminated or truncated:
            observation, _ = env.reset()
            controller.reset()
            if index + 1 < count:
                starts[index + 1] = True
    env.close()
    return rows, starts


def time_calls(controller, rows: list[np.ndarray], starts: np.ndarray, first: int, calls: int) -> np.ndarray:
    """Nanoseconds of each of ``calls`` calls, rows cycled from index ``first``, the state reset (untimed) at
    each episode start."""
    times = np.empty(calls, np.int64)
    clock, step, count = time.perf_counter_ns, controller.raw, len(rows)
    for i in range(calls):
        j = (first + i) % count
        if starts[j]:
            controller.reset()
        row = rows[j]
        began = clock()
        step(row)
        times[i] = clock() - began
    return times


def max_action_difference(a, b, rows: list[np.ndarray], starts: np.ndarray) -> float:
    """Largest |a - b| over the rows, each carrying its own state: the two artifacts act alike."""
    worst = 0.0
    for row, start in zip(rows, starts):
        if start:
            a.reset()
            b.reset()
        worst = max(worst, float(np.abs(a.raw(row).astype(np.float64) - b.raw(row)).max()))
    return worst


def summary(times: np.ndarray) -> dict:
    us = times / 1e3
    p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
    return {"p50_us": p50, "p99_us": p99, "p99.9_us": p999, "max_us": us.max(), "mean_us": us.mean()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="an export folder, or a run directory")
    parser.add_argument("--calls", type=int, default=100_000, help="timed calls per kind")
    parser.add_argument("--warmup", type=int, default=1000, help="untimed calls per kind first")
    parser.add_argument("--rounds", type=int, default=10, help="the kinds interleaved in this many rounds")
    parser.add_argument("--observations", type=int, default=2000, help="recorded rows (10 arm episodes), cycled")
    parser.add_argument("--seed", type=int, default=0, help="seed of the recorded episodes")
    parser.add_argument("--cpu", type=int, help="pin the process to this core (default: as started)")
    parser.add_argument("--no-gc", action="store_true", help="no garbage collection while timing")
    parser.add_argument(
        "--export-dir", type=Path, help="where a run without an export is exported (default: a temp folder)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / f"control_latency-{time.strftime('%Y-%m-%d')}.txt",
        help="result file (stamped; JSON beside it)",
    )
    args = parser.parse_args()
    header = stamp.header()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)

    folder = artifacts(args.target, args.export_dir)
    onnx = OnnxController(folder / FILES["onnx"], one_thread())
    pt2 = Pt2Controller(folder / FILES["pt2"])
    signature = onnx.signature
    rows, starts = record(onnx, args.observations, args.seed)
    kinds = {"onnxruntime": onnx, "pt2 (torch.export)": pt2, "empty call (loop floor)": EmptyCall()}
    with torch.inference_mode():
        agreement = max_action_difference(onnx, pt2, rows, starts)
        for controller in kinds.values():
            time_calls(controller, rows, starts, 0, args.warmup)
        per_round = -(-args.calls // args.rounds)
        times = {name: [] for name in kinds}
        if args.no_gc:
            gc.collect()
            gc.disable()
        for round_index in range(args.rounds):
            for name, controller in kinds.items():
                calls = min(per_round, args.calls - round_index * per_round)
                if calls > 0:
                    times[name].append(time_calls(controller, rows, starts, round_index * per_round, calls))
        gc.enable()
    results = {name: summary(np.concatenate(parts)) for name, parts in times.items()}

    state = signature.get("state") or {}
    carried = [f"{given['name']} {given['shape']}" for given in signature["inputs"][1:]]
    state_line = f"state fed back: {', '.join(carried)}" if carried else "no state"
    body = [
        f"# artifacts: {folder} ({signature['env']['id']}, {signature['run']}, {signature['frames']} frames; "
        f"{state_line})",
        f"# observations: {len(rows)} recorded from the env with the controller acting "
        f"({int(starts.sum())} episode starts), cycled; onnxruntime vs pt2 actions agree within {agreement:.2g}",
        f"# one control step at batch 1, one thread{f', pinned to core {args.cpu}' if args.cpu is not None else ''}; "
        f"{args.calls} calls per kind after {args.warmup} warm-up, {args.rounds} rounds interleaved; "
        f"garbage collection {'off' if args.no_gc else 'on'}",
        "",
        "| kind | p50 (us) | p99 (us) | p99.9 (us) | max (us) | mean (us) |",
        "|---|---|---|---|---|---|",
        *(f"| {name} | " + " | ".join(f"{value:.1f}" for value in r.values()) + " |" for name, r in results.items()),
        "",
        f"target (issue 37): p99 under {TARGET_P99_US} us: "
        + ", ".join(
            f"{name} {'met' if results[name]['p99_us'] < TARGET_P99_US else 'NOT met'}" for name in list(kinds)[:2]
        ),
    ]
    print("\n".join(body))
    data = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "artifacts": str(folder),
        "run": signature["run"],
        "env": signature["env"]["id"],
        "state_size": state.get("size", 0),
        "state_inputs": signature["inputs"][1:],
        "observations": len(rows),
        "max_action_difference": agreement,
        "target_p99_us": TARGET_P99_US,
        "results": results,
    }
    stamp.write_result(args.out, header, body, data)


if __name__ == "__main__":
    main()
