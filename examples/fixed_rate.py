"""Run an exported controller against the simulated arm in a fixed-rate loop, counting missed deadlines.

    rlpilot export runs/<run> --format onnx
    python examples/fixed_rate.py runs/<run>/export/policy.onnx --hz 1000 --steps 10000
    python examples/fixed_rate.py runs/<run>/export/policy.onnx --hz 50 --steps 10000

Needs only numpy, onnxruntime and gymnasium (the controller and the env come from ``deploy_onnx.py`` beside
this file). Step k is released at ``start + k * period`` (absolute deadlines: a late step does not shift the
ones after it, and one released late runs at once) and must be done by ``start + (k + 1) * period``. The
loop sleeps until each release, waking ``--spin-us`` early and spinning the rest for precision. A step runs
the controller (one ``session.run`` on one thread, the state fed back) and then the sim's step; both
finishing times are checked against the deadline. An episode's end resets the env and the controller's
state (zeros) between two steps: the reset is timed apart (rebuilding a randomised arm takes milliseconds;
a real arm has no such step) and the schedule starts again after it.

The sim step stands in for the real arm's I/O (reading the sensors, writing the command): its time is
MuJoCo integrating the arm, not a bus's latency, so the whole-step numbers say how much of the period the
controller leaves for that I/O, not what a real arm would see.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from deploy_onnx import OnnxController, one_thread


def run_fixed_rate(controller: OnnxController, env, *, hz: float, steps: int, seed: int, spin_ns: int) -> dict:
    """``steps`` control steps at ``hz``. Per step, in ns (int64 arrays): the release's lateness, and the time from
    the release to the controller's action and to the sim step's end; per episode end, the reset's time."""
    period = round(1e9 / hz)
    controller_done, step_done, late = (np.empty(steps, np.int64) for _ in range(3))
    resets = []
    observation, _ = env.reset(seed=seed)
    controller.reset()
    clock = time.perf_counter_ns
    start, first = clock() + period, 0  # the schedule: step k is released at start + (k - first) * period
    for k in range(steps):
        release = start + (k - first) * period
        remaining = release - clock()
        if remaining > spin_ns:
            time.sleep((remaining - spin_ns) / 1e9)
        while clock() < release:
            pass
        began = clock()
        action = controller(observation)
        acted = clock()
        observation, _, terminated, truncated, _ = env.step(action)
        finished = clock()
        late[k], controller_done[k], step_done[k] = began - release, acted - release, finished - release
        if terminated or truncated:  # a sim's episode boundary, not a control step: timed apart, schedule restarted
            observation, _ = env.reset()
            controller.reset()
            resets.append(clock() - finished)
            start, first = clock() + period, k + 1
    return {
        "period": period,
        "controller_done": controller_done,
        "step_done": step_done,
        "late": late,
        "resets": np.array(resets, np.int64),
    }


def report(result: dict, *, hz: float) -> list[str]:
    """The lines a control engineer reads first: missed deadlines and the worst overrun, then where the time went."""
    period, late = result["period"], result["late"]
    controller = result["controller_done"] - late  # from the step's start: the controller's compute
    whole = result["step_done"] - late
    sim = whole - controller
    resets = result["resets"]
    steps = len(whole)
    late_steps = result["step_done"] > period
    missed = int(late_steps.sum())
    released_late = int((late_steps & (whole <= period)).sum())  # the step fit a period but started too late
    missed_controller = int((result["controller_done"] > period).sum())
    overrun = max(0, int((result["step_done"] - period).max()))

    def us(values: np.ndarray) -> str:
        p50, p99 = np.percentile(values, [50, 99]) / 1e3
        return f"p50 {p50:.0f} us, p99 {p99:.0f} us, max {values.max() / 1e3:.0f} us"

    return [
        f"fixed-rate loop: {hz:g} Hz (period {period / 1e3:.0f} us), {steps} steps",
        f"missed deadlines: {missed} of {steps} steps ({100 * missed / steps:.2f}%; "
        f"controller alone: {missed_controller})",
        f"  of which released late (after an earlier overrun or a late wake-up), the step itself under a period: "
        f"{released_late}",
        f"worst overrun: {overrun / 1e3:.0f} us past the deadline",
        f"controller compute: {us(controller)}",
        f"sim step: {us(sim)}",
        f"whole step (controller + sim): {us(whole)}",
        f"sim share of the whole step: {100 * sim.sum() / whole.sum():.0f}% (of the summed time)",
        f"wake-up lateness: {us(late)}",
        f"episode resets: {len(resets)} (between episodes, not timed as steps; the schedule restarts after each)"
        + (f": {us(resets)}" if len(resets) else ""),
        "caveat: the sim step stands in for the real plant's I/O; its time is the simulator's, not a bus's",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="policy.onnx written by rlpilot export")
    parser.add_argument("--hz", type=float, default=1000.0, help="control rate (50 and 1000 are the issue's)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    parser.add_argument(
        "--spin-us", type=float, default=200.0, help="wake this early and spin to the release (sleep overshoots)"
    )
    parser.add_argument("--warmup", type=int, default=200, help="controller calls before the loop (not counted)")
    parser.add_argument("--no-gc", action="store_true", help="no garbage collection during the loop")
    args = parser.parse_args()

    controller = OnnxController(args.model, one_thread())
    env = controller.make_env()
    observation, _ = env.reset(seed=args.seed)
    for _ in range(args.warmup):  # onnxruntime's first calls allocate
        controller(observation)
    if args.no_gc:
        gc.collect()
        gc.disable()
    result = run_fixed_rate(
        controller, env, hz=args.hz, steps=args.steps, seed=args.seed, spin_ns=round(args.spin_us * 1e3)
    )
    gc.enable()
    print("\n".join(report(result, hz=args.hz)))


if __name__ == "__main__":
    main()
