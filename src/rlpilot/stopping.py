"""A stop request (SIGINT, SIGTERM) as process state, so that work inside a step can end early.

The trainer's signal handlers (:func:`rlpilot.loop.lifecycle.stop_on_signals`) record the signal here;
the loop ends the run at the next batch boundary, and the long inner loops (PPO and MAPPO epochs over
minibatches, DQN/SAC/TD3 update phases, GRPO epochs, the SFT warm-up) check :func:`requested` before
each gradient step and return early, so a run with a huge setting still stops within one gradient step.
Torch-free and import-free: the lowest layers may read it.
"""

from __future__ import annotations

_requested: str | None = None


class Interrupted(KeyboardInterrupt):
    """A signal during start-up (before the loop runs): building stops at once; ``signal`` names it."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal = signal_name


def request(signal_name: str) -> None:
    global _requested
    _requested = signal_name


def requested() -> str | None:
    """The name of the signal that asked the run to stop (``SIGTERM``), or None."""
    return _requested


def clear() -> None:
    global _requested
    _requested = None
