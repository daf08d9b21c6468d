"""A heated tank as a gymnasium env (numpy only): the process-control plant of the "does RL replace my PID
tuning?" question, whose gain, time constant and dead time vary from batch to batch.

Liquid flows through a stirred tank and an electric heater warms it; the temperature is measured downstream, so
the heater acts on the measurement a dead time late. First order plus dead time (FOPDT), in the temperature rise
``T - T_in`` above the inlet (kelvin)::

    tau * dT/dt = -(T - T_in) + K * u(t - theta) + d(t)

``u`` is the heater power in [0, 1] (a fraction of the rated power: the action box is **[0, 1]**, not symmetric:
the heater cannot cool, the tank cools only by its throughflow), clipped by the plant. ``d`` is an unmeasured
load: at a random time the inflow turns colder (``d = -load``, the kelvin the tank would lose at constant power).
Integrated exactly over each control period (the power held, 1 s).

An episode: 400 s from a cold start (the tank at inlet temperature, heater off), four set-points held 100 s each
(drawn in 10-20 K above the inlet: the start-up, then three steps up or down), one load step at a random second.

Observation: ``[set-point - measured temperature, measured temperature, set-point, the heater power last
applied]`` (K, K, K, fraction); the measurement carries a little noise (``noise``, K, standard deviation). Reward
per step: ``-|error| - 0.1 * u^2`` (the true error, K; ``u`` as applied).

**Conditions** (rlpilot's protocol, :mod:`rlpilot.conditions`; ``condition_ranges``, ``named_conditions``,
``reset(options={"condition": {...}})``, ``info["condition"]`` at reset): ``gain`` K (K at full power),
``time_constant`` tau (s), ``dead_time`` theta (control periods = s; whole numbers), ``load`` (K). Each is fixed
by a constructor argument (a number) or drawn at every reset (``[low, high]``; ``randomize=True`` or
:class:`RandomizedHeatedTank`: every one over its declared range), else nominal. A condition given at reset
overrides them *after* the episode is drawn, so one seed plays the same set-points, load time and noise under
every condition (paired comparisons).

**Measures** (``info[name]`` at every step, the episode's value so far):

- ``tracking_error``: the *settled* error, the mean ``|set-point - T|`` over the steps more than ``SETTLE`` s
  after a set-point change (start-up included). Chosen over the plain mean because the transient right after a
  step is mostly physics (the dead time, the heater at full power), the same for every controller, and
  dominated by how large the steps happen to be; what a controller decides is how well it holds the set-point
  and rejects the load. The load step is always scored except where it lands within ``SETTLE`` s of a change.
- ``mean_abs_error``: the plain mean ``|error|`` over every step, for those who want the transients too.
- ``effort``: the mean squared heater power as applied (after clipping).
- ``moves``: the mean ``|u_k - u_(k-1)|`` of the applied power (chatter: what wears a relay or a thyristor).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

DT = 1.0  # control period, s
STEPS = 400  # s per episode
SEGMENT = 100  # s each set-point is held
SETPOINTS = (10.0, 20.0)  # K above the inlet, drawn per segment
SETTLE = 40  # s after a set-point change not scored by tracking_error
LOAD_WINDOW = (20, STEPS - 20)  # s: the load step's time is drawn in here
EFFORT_WEIGHT = 0.1  # reward: -|error| - EFFORT_WEIGHT * u^2

NOMINAL = {"gain": 40.0, "time_constant": 60.0, "dead_time": 4, "load": 5.0}
RANGES = {"gain": (30.0, 60.0), "time_constant": (20.0, 150.0), "dead_time": (1, 12), "load": (0.0, 10.0)}


class HeatedTank(gym.Env):
    metadata = {"render_modes": []}

    trace = ("setpoint", "temperature", "heater")  # what rlpilot compare draws step by step
    condition_ranges = RANGES
    named_conditions = {
        "nominal": dict(NOMINAL),
        "slow": {"time_constant": 150.0},  # a large batch: SIMC's tau_I = 4 (tau_c + theta) < tau
        "fast-dead-time": {"time_constant": 20.0, "dead_time": 12},  # theta / tau = 0.6: delay-dominant
        "high-gain": {"gain": 60.0},  # 1.5x the loop gain a nominal tuning expects
        "big-load": {"load": 10.0},
    }
    measures = {
        "tracking_error": f"mean |set-point - temperature| more than {SETTLE} s after a set-point change (K)",
        "mean_abs_error": "mean |set-point - temperature| over every step (K)",
        "effort": "mean squared heater power as applied, after clipping (fraction^2)",
        "moves": "mean |change of the applied heater power| per step (fraction per s)",
    }

    def __init__(
        self,
        gain=None,
        time_constant=None,
        dead_time=None,
        load=None,
        randomize: bool = False,
        noise: float = 0.05,
    ):
        given = {"gain": gain, "time_constant": time_constant, "dead_time": dead_time, "load": load}
        self.ranges = {}
        for name, value in given.items():
            if value is None:
                value = RANGES[name] if randomize else NOMINAL[name]
            low, high = (value, value) if np.isscalar(value) else value
            self._check(name, low)
            self._check(name, high)
            self.ranges[name] = (low, high)
        self.noise = float(noise)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    @staticmethod
    def _check(name: str, value) -> None:
        if name not in RANGES:
            raise ValueError(f"no condition '{name}' (the tank's: {', '.join(RANGES)})")
        if not math.isfinite(float(value)):
            raise ValueError(f"{name}: a finite number, got {value!r}")
        if name == "dead_time" and not (float(value).is_integer() and value >= 0):
            raise ValueError(f"dead_time: whole control periods (0 or more), got {value!r}")
        if name == "time_constant" and value <= 0:
            raise ValueError(f"time_constant: seconds, above 0, got {value!r}")

    def describe_dynamics(self) -> list[str]:
        """What ``rlpilot check`` prints under Dynamics."""
        return [
            f"{name:<14} {lo:g}" + ("" if lo == hi else f" to {hi:g} (drawn at each reset)")
            for name, (lo, hi) in self.ranges.items()
        ]

    def _draw(self, name: str) -> float:
        low, high = self.ranges[name]
        if name == "dead_time":
            return int(self.np_random.integers(int(low), int(high) + 1))
        return float(self.np_random.uniform(low, high)) if high > low else float(low)

    def _measured(self) -> float:
        return self.temperature + self.noise * float(self.np_random.standard_normal())

    def _obs(self) -> np.ndarray:
        measured = self._measured()
        return np.array([self.setpoint - measured, measured, self.setpoint, self.heater], dtype=np.float32)

    @property
    def setpoint(self) -> float:
        return float(self.setpoints[min(self.t // SEGMENT, len(self.setpoints) - 1)])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.now = {name: self._draw(name) for name in self.ranges}
        self.setpoints = self.np_random.uniform(*SETPOINTS, size=math.ceil(STEPS / SEGMENT))
        self.load_time = int(self.np_random.integers(*LOAD_WINDOW))
        for name, value in dict((options or {}).get("condition") or {}).items():
            self._check(name, value)
            self.now[name] = int(value) if name == "dead_time" else float(value)
        self.temperature, self.heater, self.t = 0.0, 0.0, 0
        self.queue = [0.0] * self.now["dead_time"]  # the power on its way to the sensor
        self.sums = {"settled": 0.0, "settled_steps": 0, "abs": 0.0, "effort": 0.0, "moves": 0.0}
        return self._obs(), {"condition": dict(self.now)}

    def step(self, action):
        power = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], 0.0, 1.0))
        self.queue.append(power)
        arriving = self.queue.pop(0)
        disturbance = -self.now["load"] if self.t >= self.load_time else 0.0
        decay = math.exp(-DT / self.now["time_constant"])  # exact for a power held over the period
        self.temperature = decay * self.temperature + (1.0 - decay) * (self.now["gain"] * arriving + disturbance)
        setpoint = self.setpoint  # the one this step was taken for (the next observation may show a new one)
        error = setpoint - self.temperature
        moved, self.heater = abs(power - self.heater), power
        self.t += 1
        sums = self.sums
        if (self.t - 1) % SEGMENT >= SETTLE:
            sums["settled"] += abs(error)
            sums["settled_steps"] += 1
        sums["abs"] += abs(error)
        sums["effort"] += power * power
        sums["moves"] += moved
        info = {
            "tracking_error": sums["settled"] / max(sums["settled_steps"], 1),
            "mean_abs_error": sums["abs"] / self.t,
            "effort": sums["effort"] / self.t,
            "moves": sums["moves"] / self.t,
            "temperature": self.temperature,
            "setpoint": setpoint,
            "heater": power,
        }
        reward = -abs(error) - EFFORT_WEIGHT * power * power
        return self._obs(), reward, False, self.t >= STEPS, info


class RandomizedHeatedTank(HeatedTank):
    """The same tank with every condition drawn at each reset over its declared range (``condition_ranges``):
    what a robust tuning and an RL policy trained across batches face."""

    def __init__(self, **kwargs):
        super().__init__(randomize=True, **kwargs)
