"""Accelerated soak with faults: one run trained for ``--minutes`` while faults are injected at random times.

The run: PPO on CartPole (8 gymnasium envs, ``soak_envs:NaNBurstCartPole``: every env step has a small
chance of returning a NaN observation, so the NaN guard is exercised all along), budget unbounded, solving
disabled. Every 2-5 minutes (seeded) one fault, in turn:

- ``sigkill``: SIGKILL, then ``rlpilot train --resume``;
- ``sigterm``: SIGTERM (must exit 143, status ``interrupted``), then resume;
- ``write_error``: the running process is replaced by a resume whose file-size limit (``RLIMIT_FSIZE``) is
  below the next checkpoint's size, so a checkpoint write fails (EFBIG) mid-run; then a normal resume;
- ``second_writer``: a second ``train --resume`` while the run trains: must be refused (exit 2, one line);
- ``startup_signal``: SIGTERM, then a ``train --resume`` that gets SIGTERM or SIGINT (seeded) 0.5-2 s after it
  starts, while it imports and builds: it must end cleanly (exit 143 or 130, no traceback) and stay resumable
  (the normal resume that follows must train on);
- ``second_sweep``: a small ``rlpilot sweep`` in a folder of its own, and a second sweep on the same folder once
  the first has a member: the second must be refused (exit 2, one line), the first must finish (exit 0) with
  its member's config.yaml, meta.json and checkpoint intact.

``--ray``: the run collects on two Ray actors of a local cluster (``--ray local``, ``collect.workers=2``), every
resume too, and one more fault joins the rotation:

- ``actor_kill``: SIGKILL of one collection actor: a ``worker_replaced`` event must follow and the run train on.

After every end of the learner's process (SIGTERM, SIGKILL, a signal while it starts, a failed write) no process
of its cluster may remain (``rlpilot.cluster.owned_processes``; counted in ``leftover_processes``).

At the end: frames in metrics.csv strictly increasing (no duplicated row), every restart accounted for by a
``resume`` event and ``meta.json``'s ``resumes``, resident memory of each process after its warm-up
(growth < 10%), the NaN events, and the final greedy return over 100 episodes (``rlpilot eval``; CartPole's
maximum is 500, which an uninterrupted ppo-cartpole run holds once trained this long).

    python benchmarks/fault_soak.py --minutes 60 --out benchmarks/results/fault_soak-DATE.txt
    python benchmarks/fault_soak.py --ray --minutes 60 --fault-every 60 150 \\
        --out benchmarks/results/fault_soak_ray-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stamp  # noqa: E402

FAULTS = ("sigkill", "sigterm", "write_error", "second_writer", "startup_signal", "second_sweep", "actor_kill")
RAY_FAULTS = ("actor_kill", "sigterm", "actor_kill", "sigkill", "actor_kill", "startup_signal", "second_writer")
RAY = ["--ray", "local", "--set", "collect.workers=2"]
SWEEP = ["ppo-cartpole", "--seeds", "1", "--workers", "1", "--set", "train.total_frames=16384"]
SWEEP += ["--set", "train.stop_when_solved=false", "--set", "train.loggers=[]"]
SETTINGS = [
    "env.num_envs=8",
    "train.stop_when_solved=false",
    "train.total_frames=10000000000",
    "train.checkpoint_every_frames=32768",
    "train.log_every_frames=16384",
    "train.eval_every_frames=65536",
]


RAY_MODE: list[str] = []  # RAY when --ray: added to every train command


def cli(*args: str, limit_bytes: int | None = None) -> subprocess.Popen:
    if args and args[0] == "train":
        args = (*args, *RAY_MODE)

    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": f"{HERE.parent / 'src'}:{HERE}"}
    return subprocess.Popen(
        [sys.executable, "-m", "rlpilot.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
        env=env,
        preexec_fn=limit,
    )


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def logged_frames(run_dir: Path) -> list[float]:
    try:
        lines = (run_dir / "metrics.csv").read_text().strip().splitlines()[1:]
    except OSError:
        return []
    return [float(line.split(",")[0]) for line in lines if line]


def wait_training(run_dir: Path, process: subprocess.Popen, after: float, timeout: float = 300) -> None:
    """Until the process has logged a row past ``after`` frames (it is in the loop, signals handled)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        frames = logged_frames(run_dir)
        if frames and frames[-1] > after:
            return
        if process.poll() is not None:
            raise SystemExit(f"the run exited: {process.stderr.read()[-2000:]}")
        time.sleep(0.5)
    raise SystemExit("the run did not log past its checkpoint in time")


def checkpoint_frames(run_dir: Path) -> float:
    import torch

    return float(torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["frames"])


def resume_events(run_dir: Path) -> int:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return sum(json.loads(line)["event"] == "resume" for line in lines if line.strip())


def startup_signal(run_dir: Path, rng: random.Random) -> dict:
    """A ``train --resume`` that gets SIGTERM or SIGINT 0.5-2 s after it starts: exit 143 or 130 and no
    traceback (the resume after it shows the run is still resumable)."""
    sig = rng.choice([signal.SIGTERM, signal.SIGINT])
    delay = rng.uniform(0.5, 2.0)
    before = resume_events(run_dir)
    starting = cli("train", "--resume", str(run_dir), "--trust-code", "-q")
    time.sleep(delay)
    starting.send_signal(sig)
    _, stderr = starting.communicate(timeout=300)
    status = json.loads((run_dir / "meta.json").read_text())["status"]
    result = {"signal": sig.name, "after_s": round(delay, 2), "startup_exit": starting.returncode, "status": status}
    result["counted"] = resume_events(run_dir) - before
    assert starting.returncode in (130, 143), (result, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]
    return result


def actor_pids(learner: int) -> list[int]:
    """The collection actors of ``learner``'s local cluster."""
    from rlpilot.cluster import owned_actors

    return owned_actors(learner)


def replaced_events(run_dir: Path) -> int:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return sum(json.loads(line)["event"] == "worker_replaced" for line in lines if line.strip())


def actor_kill(run_dir: Path, learner: subprocess.Popen, rng: random.Random) -> dict:
    """SIGKILL of one actor; the learner must log a ``worker_replaced`` event and train on past it."""
    actors = actor_pids(learner.pid)
    assert actors, "no collection actor to kill"
    before, victim = replaced_events(run_dir), rng.choice(actors)
    os.kill(victim, signal.SIGKILL)
    frames = logged_frames(run_dir)[-1]
    deadline = time.time() + 300
    while replaced_events(run_dir) == before or logged_frames(run_dir)[-1] <= frames:
        assert learner.poll() is None, learner.stderr.read()[-2000:]
        assert time.time() < deadline, "no replacement within 300 s"
        time.sleep(0.5)
    return {"actor": victim, "replaced": replaced_events(run_dir) - before}


def leftovers(learner: int) -> int:
    """Processes of ``learner``'s local cluster still running 60 s after it ended (0 is the requirement)."""
    from rlpilot.cluster import owned_processes

    deadline = time.time() + 60
    while owned_processes(learner) and time.time() < deadline:
        time.sleep(0.5)
    return len(owned_processes(learner))


def second_sweep(out: Path) -> dict:
    """Two sweeps on ``out``: the second is refused in one line while the first trains; the first finishes
    with its member intact."""
    first = cli("sweep", *SWEEP, "--out", str(out))
    member = out / "default" / "s0"
    deadline = time.time() + 180
    while not (member / "meta.json").exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    second = cli("sweep", *SWEEP, "--out", str(out))
    _, stderr = second.communicate(timeout=300)
    first_out, first_err = first.communicate(timeout=600)
    intact = all((member / name).exists() for name in ("config.yaml", "meta.json", "checkpoints/last.pt"))
    result = {"second_exit": second.returncode, "second_stderr": stderr.strip(), "first_exit": first.returncode}
    assert second.returncode == 2 and len(stderr.strip().splitlines()) == 1, (result, stderr[-2000:])
    assert first.returncode == 0 and intact, (result, first_err[-2000:])
    return {**result, "member_intact": intact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fault-every", type=float, nargs=2, default=(120.0, 300.0), metavar=("MIN", "MAX"), help="seconds"
    )
    parser.add_argument("--out", help="result file (stamped; JSON beside it)")
    parser.add_argument(
        "--faults",
        help=f"comma-separated, injected in this order (default: {','.join(FAULTS[:-1])}; with --ray "
        f"{','.join(RAY_FAULTS)})",
    )
    parser.add_argument("--ray", action="store_true", help="collect on two actors of a local Ray cluster")
    args = parser.parse_args()
    if args.ray:
        RAY_MODE.extend(RAY)
        sys.path.insert(0, str(HERE.parent / "src"))
    default = RAY_FAULTS if args.ray else FAULTS[:-1]
    faults = [name.strip() for name in (args.faults or ",".join(default)).split(",") if name.strip()]
    if unknown := [name for name in faults if name not in FAULTS]:
        parser.error(f"unknown fault(s) {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    rng = random.Random(args.seed)
    lines = stamp.header()
    run_dir = Path(tempfile.mkdtemp(prefix="fault-soak-")) / "run"
    sets = [item for setting in SETTINGS for item in ("--set", setting)]
    process = cli("train", "ppo", "soak_envs:NaNBurstCartPole", "--run-dir", str(run_dir), "-q", *sets)
    start = time.time()
    wait_training(run_dir, process, after=0)
    log: list[dict] = []
    rss: dict[int, list[float]] = {}
    restarts, left = 0, []
    fault_index = 0
    next_fault = time.time() + rng.uniform(*args.fault_every)
    while time.time() - start < args.minutes * 60:
        time.sleep(5)
        value = rss_mb(process.pid)
        if value is not None:
            rss.setdefault(process.pid, []).append(value)
        if process.poll() is not None:
            raise SystemExit(f"the run exited on its own: {process.stderr.read()[-2000:]}")
        if time.time() < next_fault:
            continue
        fault = faults[fault_index % len(faults)]
        fault_index += 1
        event = {"fault": fault, "minute": round((time.time() - start) / 60, 2), "frames": logged_frames(run_dir)[-1]}
        if fault == "second_writer":
            second = cli("train", "--resume", str(run_dir), "--trust-code", "-q")
            _, stderr = second.communicate(timeout=300)
            event.update(exit=second.returncode, stderr=stderr.strip())
            assert second.returncode == 2 and len(stderr.strip().splitlines()) == 1, stderr
        elif fault == "second_sweep":
            event.update(second_sweep(Path(tempfile.mkdtemp(prefix="fault-soak-sweep-")) / "sweep"))
        elif fault == "actor_kill":
            event.update(actor_kill(run_dir, process, rng))
        else:
            process.send_signal(signal.SIGTERM if fault == "sigterm" else signal.SIGKILL)
            stdout, stderr = process.communicate(timeout=300)
            event["exit"] = process.returncode
            if args.ray:
                event["leftover_processes"] = leftovers(process.pid)
                left.append(event["leftover_processes"])
            if fault == "sigterm":
                assert process.returncode == 143, stderr
            if fault == "startup_signal":  # a resume signalled while it starts (imports, envs, networks)
                event.update(startup_signal(run_dir, rng))
                restarts += event["counted"]  # a resume stopped before it recorded itself is no restart
            if fault == "write_error":  # a resume that cannot write its next checkpoint
                size = (run_dir / "checkpoints" / "last.pt").stat().st_size
                failing = cli("train", "--resume", str(run_dir), "--trust-code", "-q", limit_bytes=size // 2)
                _, stderr = failing.communicate(timeout=600)
                meta = json.loads((run_dir / "meta.json").read_text())
                event.update(write_error_exit=failing.returncode, status=meta["status"], reason=meta.get("reason"))
                restarts += 1
            restarts += 1
            # past every row logged before the fault (a killed run logged rows past its checkpoint): the resumed
            # process is in its loop, its actors started
            resumed_from = max(checkpoint_frames(run_dir), logged_frames(run_dir)[-1])
            process = cli("train", "--resume", str(run_dir), "--trust-code", "-q")
            wait_training(run_dir, process, after=resumed_from)
        log.append(event)
        print(json.dumps(event), flush=True)
        next_fault = time.time() + rng.uniform(*args.fault_every)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=300)
    if args.ray:
        left.append(leftovers(process.pid))
    report(run_dir, log, rss, restarts, lines, args, left)


def report(
    run_dir: Path, log: list[dict], rss: dict[int, list[float]], restarts: int, lines: list[str], args, left: list
) -> None:
    frames = logged_frames(run_dir)
    meta = json.loads((run_dir / "meta.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    resumes = sum(e["event"] == "resume" for e in events)
    nan_events = sum(e["event"] == "nonfinite_observation" for e in events)
    growth = {
        pid: 100 * (max(values[len(values) // 5 :]) - values[len(values) // 5]) / values[len(values) // 5]
        for pid, values in rss.items()
        if len(values) >= 10
    }
    stdout, _ = cli("eval", str(run_dir), "--trust-code", "--episodes", "100").communicate(timeout=600)
    evaluation = stdout.splitlines()[0] if stdout else "eval failed"
    summary = {
        "minutes": args.minutes,
        "faults": log,
        "frames": frames[-1] if frames else 0,
        "rows": len(frames),
        "frames_strictly_increasing": all(b > a for a, b in zip(frames, frames[1:])),
        "restarts": restarts,
        "resume_events": resumes,
        "meta_resumes": meta.get("resumes"),
        "nonfinite_observation_events": nan_events,
        "rss_growth_percent_per_process": growth,
        "final_status": meta["status"],
        "ray": bool(args.ray),
        "worker_replaced_events": sum(e["event"] == "worker_replaced" for e in events),
        "learner_exits_checked_for_leftovers": len(left),
        "leftover_processes": sum(left),
        "final_eval_100_episodes": evaluation,
    }
    lines += [f"{key}: {json.dumps(value)}" for key, value in summary.items()]
    lines += stamp.footer()
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        stamped = lines[: len(stamp.header())] + stamp.footer()  # the header as written when the soak started
        out.with_suffix(".json").write_text(json.dumps({"stamp": stamped, **summary}, indent=1))


if __name__ == "__main__":
    main()
