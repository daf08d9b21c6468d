"""The end-of-run curve, drawn by a helper process that imported matplotlib while the run trained.

Importing matplotlib and drawing the first figure cost ~0.5 s on this project's 2-core machine (measured
with the machine otherwise idle: `benchmarks/startup.py`), paid after the last frame of every run, in the
user's wait. A run trains on one torch thread by default, so the second core is idle: :func:`start`
launches ``python -m rlpilot.loop.curve_helper`` there at the beginning of the run; it imports matplotlib,
warms the Agg canvas and its fonts, and waits. At the end :meth:`CurveHelper.draw` sends it the run
directory, and it draws ``RUN/curve.png`` with :func:`rlpilot.plot.plot_run` (the same code, the same
atomic write) and replies. Whatever goes wrong with the helper (it could not start, died, answered with
an error, or took longer than ``TIMEOUT_S``), the curve is drawn in this process as before: the helper
can only make the end faster, never change the figure or lose it.

The helper reads run directories only (metrics.csv, config.yaml): nothing executable crosses the pipe.
It exits when its standard input closes, so a killed run leaves no helper behind. A process that has
matplotlib already draws its runs' curves itself (:func:`for_this_run`).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

from rlpilot.runs import Run

TIMEOUT_S = 60.0


class CurveHelper:
    def __init__(self, process: subprocess.Popen | None):
        self.process = process

    def draw(self, run: Run, *, solved_at: float | None) -> Path:
        """``RUN/curve.png``, by the helper when it can, else here."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                process.stdin.write(json.dumps({"run": str(run.path), "solved_at": solved_at}) + "\n")
                process.stdin.flush()
                ready, _, _ = select.select([process.stdout], [], [], TIMEOUT_S)
                reply = process.stdout.readline().strip() if ready else ""
            except (OSError, ValueError):
                reply = ""
            _stop(process)
            if reply == "ok":
                return run.curve_path
        from rlpilot.plot import plot_run

        return plot_run(run, solved_at=solved_at)

    def close(self) -> None:
        """Ends the helper if :meth:`draw` was never called (a run that raised)."""
        process, self.process = self.process, None
        if process is not None:
            _stop(process)


def _stop(process: subprocess.Popen) -> None:
    try:
        process.stdin.close()
        process.wait(timeout=2)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()


def for_this_run() -> CurveHelper:
    """What draws a run's curve: a helper process (:func:`start`), unless this process has imported matplotlib's
    figure already (a notebook, a sweep or a test session training one run after another): a warm process
    draws a curve in ~0.1-0.2 s, less than a tiny run waits for a helper still importing matplotlib, and
    without a second interpreter importing it on a busy core (``benchmarks/startup.py`` measures the CLI's
    fresh process, which still gets a helper)."""
    if "matplotlib.figure" in sys.modules:
        return CurveHelper(None)
    return start()


def start() -> CurveHelper:
    """A helper process importing matplotlib now; a helper that cannot start is no helper (the curve is
    then drawn in this process)."""
    source = str(Path(__file__).resolve().parents[1])  # rlpilot's folder on sys.path, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "rlpilot.loop.curve_helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,  # Ctrl-C stops the run, not the helper its end still needs
        )
    except OSError:
        process = None
    return CurveHelper(process)


def _warm_up() -> None:
    """Imports and first-use costs paid before any request: matplotlib, the Agg canvas, the fonts."""
    import io

    from rlpilot.plot import new_axes

    fig, ax = new_axes()
    ax.plot([0, 1], [0, 1], label="warm-up")
    ax.set_title("warm-up")
    ax.legend()
    fig.tight_layout()
    fig.savefig(io.BytesIO(), format="png")


def serve() -> int:
    """The helper's side: one JSON request a line, ``ok`` or ``error ...`` back, until stdin closes."""
    _warm_up()
    from rlpilot.plot import plot_run
    from rlpilot.runs import load_run

    for line in sys.stdin:
        try:
            request = json.loads(line)
            plot_run(load_run(request["run"]), solved_at=request.get("solved_at"))
            reply = "ok"
        except Exception as exc:  # noqa: BLE001  any failure: the caller draws the curve itself
            reply = f"error {type(exc).__name__}: {str(exc)[:200]}"
        print(reply, flush=True)
    return 0


if __name__ == "__main__":
    code = serve()
    sys.stdout.flush()
    # No interpreter teardown (freeing matplotlib's modules: 0.12-0.18 s on this project's 2-core machine,
    # 2026-12-02), which the run's end waits for in ``_stop``: every curve was written atomically and
    # answered before stdin closed, so nothing is left to flush or close.
    os._exit(code)
