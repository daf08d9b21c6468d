"""One step of an exported policy, bounded in time and stoppable by a signal.

A graph is data that can still run for ever: a valid ONNX ``Loop`` with a trip count of 10^15 is a few
hundred bytes. While ``session.run`` works, the main thread is inside C code, so Python's signal handlers
(the CLI's SIGINT/SIGTERM, :mod:`rlpilot.common.stopping`) wait for it to return: ``eval`` hung and ignored SIGTERM.
So each step runs on a worker thread while the main thread waits for its outputs, at most
:data:`STEP_LIMIT_S`; the wait is where a signal lands. A signal, or the limit passed, calls the step's
``stop`` (onnxruntime: ``RunOptions.terminate``, which ends a running ``session.run`` within a node) and the
signal's exception (``rlpilot: interrupted (SIGTERM)``, exit 143) or one line saying the step took too long
follows. A torch step cannot be stopped from outside: it is left to finish on its daemon thread while the
command ends.

Measured on the 2-core Xeon, an exported CartPole policy at batch 1: a plain ``session.run`` 12-26 us, the same
step through the worker (and :class:`rlpilot.play.load.CheckedStep`'s checks) 12-19 us, so no slower; a thread
started per step instead would add ~95 us.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

from rlpilot.common.errors import UserError

STEP_LIMIT_S = 10.0
"""Longest one step may run (``rlpilot eval --step-limit``): an exported policy's step takes microseconds to
milliseconds at eval's 64 envs, so a step past seconds is a graph that does more than a policy does."""
STOP_GRACE_S = 2.0
"""After ``stop``, how long to wait for the step to return before leaving it behind."""


def _serve(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        step, args, done = job
        try:
            done.put((step(*args), None))
        except Exception as exc:  # noqa: BLE001 (handed to the caller, which says what it was)
            done.put((None, exc))


class BoundedStep:
    """``step(*args)`` run on a worker thread within ``limit_s``; ``stop()`` ends a running step (or does
    nothing where that cannot be done). ``what`` names the artifact in the error lines. An exception the step
    raises is raised again here, for the caller to turn into its line."""

    def __init__(self, step: Callable[..., Any], stop: Callable[[], None], *, what: str, limit_s: float = STEP_LIMIT_S):
        self.step, self.stop, self.what, self.limit_s = step, stop, what, limit_s
        self._jobs: queue.SimpleQueue | None = None

    def _worker(self) -> queue.SimpleQueue:
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._jobs,), name="rlpilot-artifact-step", daemon=True).start()
            self._release = weakref.finalize(self, self._jobs.put, None)  # the worker ends with this object
        return self._jobs

    def __call__(self, *args: Any) -> Any:
        done: queue.SimpleQueue = queue.SimpleQueue()
        self._worker().put((self.step, args, done))
        try:
            result, error = done.get(timeout=self.limit_s)
        except queue.Empty:
            self._halt(done)
            raise UserError(
                f"{self.what}: one step ran longer than {self.limit_s:g} s and was stopped (a policy's step takes "
                "milliseconds: the graph loops or computes far more than a policy); export the run again, or raise "
                "--step-limit if it is meant to be that slow"
            ) from None
        except BaseException:  # SIGINT/SIGTERM while the step runs (common.stopping.Interrupted, KeyboardInterrupt)
            self._halt(done)
            raise
        if error is not None:
            raise error
        return result

    def _halt(self, done: queue.SimpleQueue) -> None:
        """Stops the running step; if it does not return within :data:`STOP_GRACE_S`, its worker is left to
        end with it and the next step gets a new one."""
        self.stop()
        try:
            done.get(timeout=STOP_GRACE_S)
        except queue.Empty:
            self._release()
            self._jobs = None
