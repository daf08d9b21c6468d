"""Which class each of the arm's built-in controllers is (``env.base_controller`` / ``--controller``: ``pd``, ``pid``,
``adaptive-pd``), for which env: what :func:`rlpilot.controllers.base_controller` looks a name up in (imported by
name, so that the protocol's module does not import the arm)."""

from __future__ import annotations

from rlpilot.envs.arm.adaptive import TrackAdaptivePD
from rlpilot.envs.arm.controllers import ARM_IDS, TRACK_IDS, ReacherPD, TrackPD, TrackPID


def built_in(name: str, env_id: str) -> type | None:
    """The class of the arm's controller ``name`` for ``env_id``, None for an env it is not built for
    (:func:`built_for`). Reaching a fixed target (``Reacher-v5``) ``pd`` and ``pid`` are both :class:`ReacherPD`: a
    PD has no steady-state error to integrate there (:mod:`rlpilot.envs.arm.controllers`)."""
    if env_id not in built_for(name):
        return None
    if env_id in TRACK_IDS:
        return {"pd": TrackPD, "pid": TrackPID, "adaptive-pd": TrackAdaptivePD}[name]
    return ReacherPD


def built_for(name: str) -> tuple[str, ...]:
    """The env ids the arm's controller ``name`` is built for: ``adaptive-pd`` identifies the tracking arm's
    dynamics (:mod:`rlpilot.envs.arm.adaptive`); ``pd`` and ``pid`` serve both arms."""
    return TRACK_IDS if name == "adaptive-pd" else ARM_IDS
