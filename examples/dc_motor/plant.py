"""A conveyor axis driven by a DC motor through a gearbox, as a gymnasium env (numpy only).

The axis must follow a position reference made of point-to-point moves (minimum-jerk profiles between random
positions, one every 0.75 s) for 3 s at 50 Hz. The motor's torque is proportional to the command (a current
loop is assumed); the axis has inertia (the belt, plus a load on it), viscous damping, Coulomb friction and a
constant load torque (an inclined belt: the load pulls it back), and the command reaches the motor a number
of control periods late (the fieldbus)::

    J(load) * dw/dt = k * u(t - delay) - c * w - friction * sign(w) - load_torque

Observation: ``[reference - position, reference velocity - velocity, reference, reference velocity]`` (rad,
rad/s). Action: the motor command in [-1, 1] (1: the torque at rated current). Reward per step:
``-|position error| - 0.01 * u^2``.

Each disturbance is a number (fixed) or ``[low, high]`` (drawn at every reset): ``load`` (kg on the belt, adds
inertia), ``friction`` (N·m Coulomb), ``load_torque`` (N·m), ``delay`` (control periods).

The axis follows rlpilot's conditions protocol (:mod:`rlpilot.conditions`): it declares the disturbances as
``condition_ranges`` (``RANDOMIZED``), a few ``named_conditions``, and its ``measures``; ``reset(options=
{"condition": {...}})`` plays an episode under those values (set after the episode is drawn, so one seed gives the
same reference under every condition), and the reset's ``info["condition"]`` (also ``info["dynamics"]``, its
older name) is what the episode runs under. ``info`` at every step: ``tracking_error`` and ``track_rmse``, the
episode's position RMSE so far (rad), and ``effort``, the mean squared command the motor received (after clipping
and the delay).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

DT = 0.02  # control period, s (50 Hz)
SUBSTEPS = 10  # integration steps per control period
STEPS = 150  # 3 s
SEGMENT = 0.75  # s per point-to-point move
TORQUE = 6.0  # N·m at command 1 (after the gearbox)
DAMPING = 0.5  # N·m·s/rad, viscous
INERTIA = 0.2  # kg·m², belt and rollers, seen at the output shaft
LOAD_INERTIA = 0.05  # kg·m² per kg on the belt (roller radius ~0.22 m)
NOMINAL = {"load": 1.0, "friction": 0.3, "load_torque": 0.0, "delay": 0}
RANDOMIZED = {"load": [0.0, 8.0], "friction": [0.0, 1.5], "load_torque": [-1.5, 1.5], "delay": [0, 2]}


class ConveyorAxis(gym.Env):
    metadata = {"render_modes": []}

    condition_ranges = {
        name: (int(low), int(high)) if name == "delay" else (float(low), float(high))
        for name, (low, high) in RANDOMIZED.items()
    }
    named_conditions = {
        "nominal": dict(NOMINAL),
        "heavy-load": {"load": 8.0},
        "high-friction": {"friction": 1.5},
        "incline": {"load_torque": 1.5},
        "delay": {"delay": 2},
        "heavy": {"load": 8.0, "friction": 1.5, "load_torque": 1.5},  # docs/your-controller.md's comparison
    }
    measures = {
        "tracking_error": "the episode's position RMSE so far (rad)",
        "track_rmse": "the same as tracking_error (its older name)",
        "effort": "mean squared motor command as received, after clipping and the delay",
    }

    def __init__(self, load=None, friction=None, load_torque=None, delay=None, randomize: bool = False):
        given = {"load": load, "friction": friction, "load_torque": load_torque, "delay": delay}
        self.ranges = {}
        for name, value in given.items():
            if value is None:
                value = RANDOMIZED[name] if randomize else NOMINAL[name]
            low, high = (value, value) if np.isscalar(value) else value
            if name == "delay" and not (float(low).is_integer() and float(high).is_integer() and low >= 0):
                raise ValueError(f"delay: whole control periods (0 or more), got {value!r}")
            self.ranges[name] = (float(low), float(high))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def describe_dynamics(self) -> list[str]:
        """What ``rlpilot check`` prints under Dynamics."""
        return [
            f"{name:<12} {lo:g}" + ("" if lo == hi else f" to {hi:g} (drawn at each reset)")
            for name, (lo, hi) in self.ranges.items()
        ]

    def _draw(self, name: str) -> float:
        low, high = self.ranges[name]
        if name == "delay":
            return int(self.np_random.integers(int(low), int(high) + 1))
        return float(self.np_random.uniform(low, high)) if high > low else low

    def _reference(self, t: float) -> tuple[float, float]:
        index = min(int(t // SEGMENT), len(self.points) - 2)
        tau = min(max((t - index * SEGMENT) / SEGMENT, 0.0), 1.0)
        shape = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
        rate = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / SEGMENT
        start, end = self.points[index], self.points[index + 1]
        return start + (end - start) * shape, (end - start) * rate

    def _obs(self) -> np.ndarray:
        ref, ref_velocity = self._reference(self.t * DT)
        return np.array([ref - self.position, ref_velocity - self.velocity, ref, ref_velocity], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.now = {name: self._draw(name) for name in self.ranges}
        self.points = self.np_random.uniform(-1.0, 1.0, size=int(math.ceil(STEPS * DT / SEGMENT)) + 2)
        self.points[1] = self.points[0]  # hold the start for one segment
        self.position, self.velocity, self.t = float(self.points[0]), 0.0, 0
        for name, value in dict((options or {}).get("condition") or {}).items():
            self.now[name] = self._condition(name, value)
        self.queue = [0.0] * self.now["delay"]
        self.squared_errors, self.squared_commands = 0.0, 0.0
        return self._obs(), {"condition": dict(self.now), "dynamics": dict(self.now)}

    def _condition(self, name: str, value) -> float:
        if name not in RANDOMIZED:
            raise ValueError(f"no condition '{name}' (the axis's: {', '.join(RANDOMIZED)})")
        if not math.isfinite(float(value)):
            raise ValueError(f"{name}: a finite number, got {value!r}")
        if name == "delay":
            if not (float(value).is_integer() and value >= 0):
                raise ValueError(f"delay: whole control periods (0 or more), got {value!r}")
            return int(value)
        return float(value)

    def step(self, action):
        command = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        self.queue.append(command)
        applied = self.queue.pop(0)
        inertia = INERTIA + LOAD_INERTIA * self.now["load"]
        h = DT / SUBSTEPS
        for _ in range(SUBSTEPS):  # semi-implicit Euler; friction opposes motion, holds the axis when it can
            drive = TORQUE * applied - DAMPING * self.velocity - self.now["load_torque"]
            friction = self.now["friction"]
            if abs(self.velocity) > 1e-6:
                torque = drive - friction * math.copysign(1.0, self.velocity)
            else:
                torque = 0.0 if abs(drive) <= friction else drive - friction * math.copysign(1.0, drive)
            new_velocity = self.velocity + h * torque / inertia
            if self.velocity != 0.0 and new_velocity * self.velocity < 0 and abs(drive) <= friction:
                new_velocity = 0.0  # friction stops the axis, it does not reverse it
            self.velocity = new_velocity
            self.position += h * self.velocity
        self.t += 1
        observation = self._obs()
        error = float(observation[0])
        self.squared_errors += error * error
        self.squared_commands += applied * applied
        rmse = math.sqrt(self.squared_errors / self.t)
        info = {"tracking_error": rmse, "track_rmse": rmse, "effort": self.squared_commands / self.t}
        return observation, -abs(error) - 0.01 * command**2, False, self.t >= STEPS, info


class RandomizedConveyorAxis(ConveyorAxis):
    """The same axis with every disturbance drawn at each reset (``RANDOMIZED``): what a robust controller and
    an RL policy trained across conditions face."""

    def __init__(self, **kwargs):
        super().__init__(randomize=True, **kwargs)
