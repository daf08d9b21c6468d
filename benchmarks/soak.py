"""Soak: a long ppo-cartpole run with solving disabled; resident memory sampled over time.

    python benchmarks/soak.py --minutes 30 [--out benchmarks/results/soak]

Prints RSS after warm-up and at the end, the growth in percent (target: < 10%), and writes
``soak.csv`` (seconds, rss_mb, frames) and ``soak.png`` (memory over time) into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def frames_so_far(run_dir: Path) -> int:
    try:
        with (run_dir / "metrics.csv").open() as handle:
            *_, last = handle.read().strip().splitlines()
        return int(float(last.split(",")[0]))
    except (OSError, ValueError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--warmup-minutes", type=float, default=2.0)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--out", default="benchmarks/results/soak")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="soak-")) / "run"
    cmd = [
        sys.executable,
        "-m",
        "rlpilot.cli",
        "train",
        "ppo-cartpole",
        "--run-dir",
        str(run_dir),
        "-q",
        "--set",
        "train.stop_when_solved=false",
        "--set",
        "train.total_frames=1000000000",
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = []
    start = time.time()
    try:
        while time.time() - start < args.minutes * 60:
            time.sleep(args.every)
            if process.poll() is not None:
                raise SystemExit(f"training exited early: {process.stderr.read().decode()[-2000:]}")
            samples.append((time.time() - start, rss_mb(process.pid), frames_so_far(run_dir)))
            print(f"{samples[-1][0]:7.0f} s  rss {samples[-1][1]:7.1f} MB  frames {samples[-1][2]:,}", flush=True)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    with (out / "soak.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["seconds", "rss_mb", "frames"])
        writer.writerows(samples)
    warm = [rss for t, rss, _ in samples if t >= args.warmup_minutes * 60]
    growth = 100 * (warm[-1] - warm[0]) / warm[0]
    peak = 100 * (max(warm) - warm[0]) / warm[0]
    summary = {
        "minutes": args.minutes,
        "rss_after_warmup_mb": warm[0],
        "rss_end_mb": warm[-1],
        "rss_peak_mb": max(warm),
        "growth_percent": growth,
        "peak_growth_percent": peak,
        "frames": samples[-1][2],
        "status_after_sigterm": json.loads((run_dir / "meta.json").read_text())["status"],
    }
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    from rlpilot.plot import finish_figure, new_axes

    fig, ax = new_axes(height=3.5)
    ax.plot([t / 60 for t, _, _ in samples], [rss for _, rss, _ in samples], color="tab:blue")
    ax.axvline(args.warmup_minutes, color="gray", linestyle="--", linewidth=1, label="end of warm-up")
    ax.axhline(warm[0] * 1.1, color="tab:red", linestyle=":", linewidth=1, label="+10% of post-warm-up RSS")
    finish_figure(
        fig,
        ax,
        out / "soak.png",
        xlabel="minutes",
        ylabel="resident memory (MB)",
        title=f"ppo-cartpole soak: {samples[-1][2]:,} frames, RSS growth {growth:+.1f}% after warm-up",
    )
    print(f"verdict: {'PASS' if peak < 10 else 'FAIL'} (peak growth after warm-up {peak:+.1f}%, target < 10%)")


if __name__ == "__main__":
    main()
