"""A stop request (SIGINT, SIGTERM) as process state, so that work inside a step can end early.

The signal handlers (:func:`stop_on_signals`: the CLI's from its first line, the trainer's) record the signal here;
the loop ends the run at the next batch boundary, and the long inner loops (PPO and MAPPO epochs over
minibatches, DQN/SAC/TD3 update phases, GRPO epochs, the SFT warm-up) check :func:`requested` before
each gradient step and return early, so a run with a huge setting still stops within one gradient step.
Torch-free and import-free: the lowest layers may read it.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

_requested: str | None = None
_raised = False


class Interrupted(KeyboardInterrupt):
    """A signal during start-up (before the loop runs): building stops at once; ``signal`` names it."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal = signal_name
        global _raised
        _raised = True  # the process is unwinding: a signal now (sent again, or a second one) is only recorded


def request(signal_name: str) -> None:
    global _requested
    _requested = signal_name


def requested() -> str | None:
    """The name of the signal that asked the run to stop (``SIGTERM``), or None."""
    return _requested


def clear() -> None:
    global _requested, _raised
    _requested, _raised = None, False


DEFER_S = 0.05
MAX_DEFERRALS = 200
"""A signal that lands inside an import is sent again every :data:`DEFER_S` seconds until it lands outside
one (or after 10 s of a hung import, inside it anyway)."""
_deferred: dict[int, int] = {}


LOGGING_LOCK = frozenset({"_acquireLock", "_releaseLock", "_prepareFork", "_afterFork"})
"""logging's module-lock functions, also the hooks Python runs around every fork (``os.register_at_fork``)."""


def _inside_an_import(frame) -> bool:
    """Where an exception must not be raised. Inside an import it can leave a library half-imported, and
    libraries that import optional parts under ``try``/``except`` then carry on with it: numpy was seen running
    without ``np.logical_or`` after a SIGTERM landed in its import, the run training on as if no signal came.
    Inside logging's lock functions it would leave the lock held, and when they run as fork hooks (every
    subprocess started: Ray's, a sweep's) Python ignores it with a traceback on stderr ("Exception ignored in
    _releaseLock"), seen while Ray started."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or (
            code.co_name in LOGGING_LOCK and code.co_filename.endswith(("logging/__init__.py", "logging\\__init__.py"))
        ):
            return True
        frame = frame.f_back
    return False


_timers: list[threading.Timer] = []
"""Signals sent again and not yet delivered: cancelled when the handlers are restored, else one would reach the
default handler after a clean "interrupted" exit and kill the process (exit -15, not 143)."""


def _send_again(signum: int) -> None:
    timer = threading.Timer(DEFER_S, os.kill, (os.getpid(), signum))
    timer.daemon = True
    _timers.append(timer)
    timer.start()


class StopFlag:
    @property
    def requested(self) -> str | None:
        return requested()


@contextmanager
def stop_on_signals(*, immediate: bool = False):
    """SIGINT/SIGTERM are recorded (:func:`requested`): the step in progress ends at its next gradient step,
    then the loop writes a checkpoint and returns. ``immediate`` (start-up: imports, the run directory being
    created, envs and networks built): the signal also raises :class:`Interrupted` at once, so a slow env
    constructor is cut short and nothing is left "running"; a signal that lands inside an import, or inside
    logging's lock (a fork hook), is raised just after it (:func:`_inside_an_import`). Installed whatever the
    handler was before: a process started in the background inherits SIGINT ignored, and a supervisor's SIGINT
    must still stop it."""
    flag = StopFlag()

    def handler(signum, frame):
        name = signal.Signals(signum).name
        request(name)
        if immediate and _inside_an_import(frame) and _deferred.get(signum, 0) < MAX_DEFERRALS:
            _deferred[signum] = _deferred.get(signum, 0) + 1
            _send_again(signum)
        elif immediate and not _raised:  # once: cleanup (a run marked "interrupted") is not cut short
            _deferred.pop(signum, None)
            raise Interrupted(name)

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no handlers, Ctrl-C raises as usual
        pass
    try:
        yield flag
    finally:
        while _timers:  # before the handlers go: a deferred signal was already recorded (request)
            _timers.pop().cancel()
        for sig, old in previous.items():
            signal.signal(sig, old)
