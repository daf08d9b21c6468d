"""Relay auto-tuning (Åström-Hägglund) of the arm's PD/PID on ``rlpilot/ReacherTrack-v0``: what a commissioning
engineer runs on the arm in front of them. numpy and gymnasium only, like the env.

The experiment, one joint at a time, on the simulated arm (its disturbances included: the relay sees the arm's
payload, friction, motor strength, sensor noise and delay as they are)::

    1. hold the arm at SETPOINT with a gentle PID (the other joint stays held throughout), read the hold torque;
    2. replace the joint's controller by a relay about that torque: u = hold + d * sign(q* - q), switching
       only once the error leaves a hysteresis band (the band keeps sensor noise from chattering the relay);
    3. the loop settles into a limit cycle at the frequency where the arm's phase lag is 180 degrees; from
       its amplitude a (rad) and period Tu (s): the ultimate gain Ku = 4 d / (pi a) (action per radian).

A tuning rule turns (Ku, Tu) into gains in the controllers' convention
(:class:`~rlpilot.envs.arm.controllers.TrackPID`: ``kp * e + kd * de/dt + ki * integral(e)``, i.e. kp = Kp,
kd = Kp Td, ki = Kp / Ti). The controllers share one gain over both joints: each gain is the smaller of the two
joints' (the more sensitive joint sets the limit).

**Why two relays** (:func:`autotune`). The arm is close to a double integrator (a heavy armature with a little
viscous damping: about ``200 / (s (s + 1))`` from action to angle), so its phase sits just above -180 degrees
from 1 rad/s up, and the 20 ms step (and any delay) takes it over at a low frequency (about 7 rad/s: Tu 0.85 s,
Ku 0.25 on the nominal arm). The textbook rules (:data:`RULES`) then place the crossover there and give kp about
0.1-0.2, softer than the grid's kp 10 by fifty times and about ten times worse on tuning episodes: the rules
assume a lag-dominated process, and the derivative's phase lead, which lets this arm take far more gain, is not
in the first experiment. So a second relay runs with the derivative in the loop: the relay switches on
``e + Td de/dt`` with ZN's derivative time from the first (Td = Tu / 8), which measures the ultimate gain Ku' of
the PD loop (at tens of rad/s, where the control step and delay are what limit it), and kp = Ku' / 2 (a gain
margin of 2, ZN's own margin for a P loop), kd = kp Td; the PID adds ZN's integral time from the first relay
(ki = kp / (Tu / 2)).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np

SETPOINT = (-math.pi / 2, 0.0)
"""Joint angles (rad) the relay oscillates about: the arm hanging straight down, where gravity needs no hold
torque whatever the payload (the hold PID's integral takes up what remains, e.g. friction)."""
RELAY_AMPLITUDE = 0.1
"""d, action units (20 N·m at gear 200): well above the largest Coulomb friction tested (6-8 N·m), so the joint
does not stick, and small enough that the swing stays a few tenths of a radian."""
HYSTERESIS = 0.02
"""Relay hysteresis, rad: twice the largest measurement noise tested (0.01 rad std)."""
HOLD_GAINS = {"kp": 0.5, "kd": 0.1, "ki": 0.5}
"""The hold PID (action per rad, per rad/s, per rad·s): deliberately soft, stable with a step of delay (closed
loop about 10 rad/s, damping ratio about 1 at nominal), as an engineer jogs an arm before tuning it."""
SETTLE_S = 1.0
"""Seconds of hold before each relay (the arm starts on a reference path, not at SETPOINT)."""
RELAY_S = 5.0
"""Seconds of relay per joint; the limit cycle (period 0.8-1.1 s) forms within one or two periods."""
MEASURED_PERIODS = 3
"""Ku and Tu from the last this many full periods of the limit cycle."""

RULES: dict[str, tuple[float, float | None, float]] = {
    # name: (Kp / Ku, Ti / Tu (None: no integral), Td / Tu); Åström & Hägglund, "Advanced PID control" (2006)
    "ziegler-nichols PD": (0.8, None, 1 / 8),
    "ziegler-nichols PID": (0.6, 1 / 2, 1 / 8),
    "some overshoot PID": (0.33, 1 / 2, 1 / 3),
    "no overshoot PID": (0.2, 1 / 2, 1 / 3),
    "tyreus-luyben PID": (1 / 2.2, 2.2, 1 / 6.3),
}
"""Tuning rules from the ultimate point, in the textbooks' parametrisation (Kp, Ti, Td): the first relay's
(without derivative) gains by each, recorded beside :func:`autotune`'s (module docstring: why they are soft)."""
GAIN_MARGIN = 2.0
"""Ku' / kp in the second relay's rule: ZN's margin for a proportional loop (a margin of 3 scored worse on the
tuning episodes of each of the four arms tried while developing this: nominal, noise, delay, all)."""


@dataclass
class JointRelay:
    """One joint's relay experiment."""

    joint: int
    ku: float
    """Ultimate gain, action per radian: 4 d / (pi a)."""
    tu: float
    """Ultimate period, s."""
    amplitude: float
    """Half the peak-to-peak swing of the relay's input (the angle error, with ``derivative_time`` its
    derivative too) in the measured periods, rad."""
    hold: float
    """Hold torque the relay switches about (action units)."""
    periods: int
    """Full periods seen in the relay phase (a limit cycle: several)."""


@dataclass
class RelayExperiment:
    joints: list[JointRelay]
    simulated_s: float
    """Seconds of arm time the experiment took (hold and relay phases, both joints)."""

    @property
    def ku(self) -> float:
        return min(j.ku for j in self.joints)

    @property
    def tu(self) -> float:
        """The period of the joint with the smaller Ku (the one that limits the shared gains)."""
        return min(self.joints, key=lambda j: j.ku).tu

    def as_dict(self) -> dict:
        return {"joints": [asdict(j) for j in self.joints], "simulated_s": self.simulated_s}


def gains_from(ku: float, tu: float, rule: str) -> dict[str, float]:
    """``{"kp", "kd", "ki"}`` in the controllers' convention from the ultimate point by ``rule`` (:data:`RULES`);
    ki is 0 for a PD rule."""
    kp_ratio, ti_ratio, td_ratio = RULES[rule]
    kp = kp_ratio * ku
    return {"kp": kp, "kd": kp * td_ratio * tu, "ki": 0.0 if ti_ratio is None else kp / (ti_ratio * tu)}


def experiment_gains(experiment: RelayExperiment, rule: str) -> dict[str, float]:
    """Each gain the smaller of the two joints' (one gain serves both joints in TrackPD/TrackPID)."""
    per_joint = [gains_from(j.ku, j.tu, rule) for j in experiment.joints]
    return {name: min(g[name] for g in per_joint) for name in per_joint[0]}


def autotune(kwargs: dict, *, seed: int = 0) -> dict:
    """The two-relay auto-tune on the arm with env ``kwargs`` (module docstring): ``{"pd": gains, "pid": gains,
    "rules": {rule: gains from the first relay}, "first": ..., "second": ..., "simulated_s": arm seconds}``."""
    first = relay_experiment(kwargs, seed=seed)
    derivative_time = first.tu / 8
    second = relay_experiment(kwargs, seed=seed, derivative_time=derivative_time)
    kp = second.ku / GAIN_MARGIN
    pd = {"kp": kp, "kd": kp * derivative_time}
    return {
        "pd": pd,
        "pid": {**pd, "ki": kp / (first.tu / 2)},
        "rules": {rule: experiment_gains(first, rule) for rule in RULES},
        "first": first.as_dict(),
        "second": {**second.as_dict(), "derivative_time": derivative_time},
        "simulated_s": first.simulated_s + second.simulated_s,
    }


def _angles(observation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Measured joint angles and velocities from a ReacherTrack observation (cos q, sin q, dq first)."""
    return np.arctan2(observation[2:4], observation[0:2]), observation[4:6].astype(np.float64)


def relay_experiment(
    kwargs: dict,
    *,
    seed: int = 0,
    derivative_time: float = 0.0,
    relay_amplitude: float = RELAY_AMPLITUDE,
    hysteresis: float = HYSTERESIS,
    relay_s: float = RELAY_S,
    settle_s: float = SETTLE_S,
) -> RelayExperiment:
    """The relay experiment on the arm built with env ``kwargs`` (a condition's disturbances), both joints in
    turn; ``seed`` draws the arm's start pose (and any randomised disturbance). The relay switches on
    ``e + derivative_time * de/dt`` (0: on the angle error alone); Ku is per unit of that signal."""
    from rlpilot.envs.arm.env import register_envs

    register_envs()
    env = gym.make("rlpilot/ReacherTrack-v0", **kwargs).unwrapped  # no time limit: the experiment outlasts 4 s
    try:
        return _run(env, seed, derivative_time, relay_amplitude, hysteresis, relay_s, settle_s)
    finally:
        env.close()


def _run(
    env, seed: int, derivative_time: float, d: float, hysteresis: float, relay_s: float, settle_s: float
) -> RelayExperiment:
    dt = env.dt
    setpoint = np.array(SETPOINT)
    observation, _ = env.reset(seed=seed)
    integral = np.zeros(2)
    steps = 0

    def hold(observation: np.ndarray) -> np.ndarray:
        nonlocal integral
        q, dq = _angles(observation)
        error = np.remainder(setpoint - q + math.pi, 2 * math.pi) - math.pi
        integral = integral + error * dt
        return HOLD_GAINS["kp"] * error - HOLD_GAINS["kd"] * dq + HOLD_GAINS["ki"] * integral

    joints = []
    for joint in range(2):
        settle = int(round(settle_s / dt))
        torques = []
        for _ in range(settle):
            action = hold(observation)
            torques.append(action[joint])
            observation, *_ = env.step(action)
        steps += settle
        bias = float(np.mean(torques[settle // 2 :]))
        sign, inputs = 1.0, []
        for _ in range(int(round(relay_s / dt))):
            action = hold(observation)  # the other joint stays held
            q, dq = _angles(observation)
            angle = float(np.remainder(setpoint[joint] - q[joint] + math.pi, 2 * math.pi) - math.pi)
            error = angle - derivative_time * float(dq[joint])  # e + Td de/dt (the setpoint is still)
            if error > hysteresis:
                sign = 1.0
            elif error < -hysteresis:
                sign = -1.0
            action[joint] = bias + d * sign
            inputs.append(error)
            observation, *_ = env.step(action)
        steps += int(round(relay_s / dt))
        joints.append(_limit_cycle(joint, np.array(inputs), dt, d, bias))
    return RelayExperiment(joints=joints, simulated_s=steps * dt)


def _limit_cycle(joint: int, inputs: np.ndarray, dt: float, d: float, bias: float) -> JointRelay:
    """Ku and Tu from the last MEASURED_PERIODS periods of the relay input's swing (upward crossings of its mean,
    interpolated between steps); NaN where fewer periods than that were seen (no limit cycle)."""
    centred = inputs - inputs[len(inputs) // 2 :].mean()
    rising = np.flatnonzero((centred[:-1] < 0) & (centred[1:] >= 0))
    times = (rising + centred[rising] / (centred[rising] - centred[rising + 1])) * dt
    periods = len(times) - 1
    if periods < MEASURED_PERIODS:
        return JointRelay(joint, math.nan, math.nan, math.nan, bias, max(periods, 0))
    window = times[-MEASURED_PERIODS - 1 :]
    tu = float(np.diff(window).mean())
    start, stop = (int(round(t / dt)) for t in (window[0], window[-1]))
    swing = inputs[start : stop + 1]
    amplitude = float(swing.max() - swing.min()) / 2
    return JointRelay(joint, 4 * d / (math.pi * amplitude), tu, amplitude, bias, periods)
