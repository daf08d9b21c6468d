"""A plant and controllers written the way a user writes theirs, outside rlpilot (importable as
``tests.controller_fixture:Name`` in process, ``controller_fixture:Name`` from the tests folder).

``Axis``: one linear axis (a motor driving a load through Coulomb and viscous friction) that must follow a
reference position which steps every 25 steps; the motor command arrives one step late. Observation:
``[reference - position, velocity, reference]``; action: motor command in [-1, 1]; reward
``-|error| - 0.01 a^2``; 60 steps. ``AxisPID`` follows the protocol (``rlpilot.controllers.Controller``): kp,
kd schedulable, an integral as state. The others are wrong in one way each, for the bad-input lines."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlpilot.controllers import Controller


class Axis(gym.Env):
    def __init__(self, load: float = 1.0, friction: float = 0.2, delay: int = 1):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.load, self.friction, self.delay, self.dt = float(load), float(friction), int(delay), 0.05

    def _obs(self) -> np.ndarray:
        return np.array([self.reference - self.position, self.velocity, self.reference], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.velocity, self.t = 0.0, 0.0, 0
        self.reference = float(self.np_random.uniform(-1, 1))
        self.queue = [0.0] * self.delay
        return self._obs(), {}

    def step(self, action):
        command = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        self.queue.append(command)
        applied = self.queue.pop(0)
        force = 4.0 * applied - self.friction * np.sign(self.velocity) - 0.5 * self.velocity
        self.velocity += self.dt * force / self.load
        self.position += self.dt * self.velocity
        self.t += 1
        if self.t % 25 == 0:
            self.reference = float(self.np_random.uniform(-1, 1))
        error = self.reference - self.position
        return self._obs(), float(-abs(error) - 0.01 * command**2), False, self.t >= 60, {}


class DeadAxis(Axis):
    """The axis with its motor disconnected: every command is ignored (``rlpilot check``: actions have no
    effect, with or without a controller on top)."""

    def step(self, action):
        return super().step(np.zeros(1, np.float32))


class AxisPID(Controller):
    """PID on the position error; the integral is the state, kp and kd schedulable."""

    gain_names = ("kp", "kd")
    state_size = 1

    def __init__(self, kp: float = 2.0, kd: float = 0.6, ki: float = 0.3, dt: float = 0.05):
        super().__init__()
        self.kp, self.kd, self.ki, self.dt = kp, kd, ki, dt

    def step(self, observation, state, gains=None):
        error, velocity = observation[:, 0:1], observation[:, 1:2]
        kp, kd = (self.kp, self.kd) if gains is None else (self.kp * gains[:, 0:1], self.kd * gains[:, 1:2])
        integral = (state + error * self.dt).clamp(-2.0, 2.0)
        return (kp * error - kd * velocity + self.ki * integral).clamp(-1.0, 1.0), integral


class AxisPD(torch.nn.Module):
    """A plain module (no base class): stateless, forward(observation) only."""

    def __init__(self, kp: float = 2.0, kd: float = 0.6):
        super().__init__()
        self.kp, self.kd = kp, kd

    def forward(self, observation):
        return (self.kp * observation[:, 0:1] - self.kd * observation[:, 1:2]).clamp(-1.0, 1.0)


class NumpyPD(AxisPD):
    """Works live, but numpy inside: it cannot go into an exported artifact."""

    def forward(self, observation):
        array = observation.detach().cpu().numpy()
        return torch.as_tensor(np.clip(self.kp * array[:, 0:1] - self.kd * array[:, 1:2], -1, 1))


class TwoOutputs(AxisPD):
    """Returns two numbers per row for a one-motor axis."""

    def forward(self, observation):
        return observation[:, 0:2]


class GainsMismatch(Controller):
    """Declares one gain, reads two."""

    gain_names = ("kp",)

    def forward(self, observation, gains=None):
        kp, kd = (2.0, 0.6) if gains is None else (2.0 * gains[:, 0:1], 0.6 * gains[:, 1:2])
        return (kp * observation[:, 0:1] - kd * observation[:, 1:2]).clamp(-1.0, 1.0)


class PredictiveAxisPID(AxisPID):
    """The same PID with an error signal of its own for the gate: the position error the axis will have one
    delay later, ``error - dt * velocity`` (a callable signal, not an observation entry)."""

    def gate_signal(self, observation):
        return observation[:, 0] - self.dt * observation[:, 1]


class WideGateSignal(AxisPID):
    """A gate signal with two numbers per row."""

    def gate_signal(self, observation):
        return observation[:, 0:2]


class NumpyGateSignal(AxisPID):
    """A gate signal through numpy: works live, cannot be exported."""

    def gate_signal(self, observation):
        return torch.as_tensor(np.abs(observation.detach().cpu().numpy()[:, 0]))


class LateFault(Controller):
    """The axis PD, right for its first ``after`` calls (the zero-observation check when it is built is one), then
    wrong in one way each call: ``fault`` ``raise`` (a RuntimeError), ``nan`` / ``inf`` (in row ``row``),
    ``shape`` (a column too many), ``tuple`` (not a tensor); ``where="gate_signal"``: its ``gate_signal`` goes wrong
    instead (``raise``, ``nan``, ``shape``). kp and kd schedulable."""

    gain_names = ("kp", "kd")

    def __init__(self, after: int = 1, fault: str = "nan", where: str = "action", row: int = 0):
        super().__init__()
        self.after, self.fault, self.where, self.row = after, fault, where, row
        self.calls = {"action": 0, "gate_signal": 0}

    def _wrong(self, value: torch.Tensor, where: str):
        self.calls[where] += 1
        if where != self.where or self.calls[where] <= self.after:
            return value
        if self.fault == "raise":
            raise RuntimeError("sensor bus timeout")
        if self.fault in ("nan", "inf"):
            value = value.clone()
            value[min(self.row, len(value) - 1)] = float(self.fault)
            return value
        if self.fault == "shape":
            return torch.cat([value.reshape(len(value), -1)] * 2, dim=1)
        return (value,)

    def forward(self, observation, gains=None):
        kp, kd = (2.0, 0.6) if gains is None else (2.0 * gains[:, 0:1], 0.6 * gains[:, 1:2])
        action = (kp * observation[:, 0:1] - kd * observation[:, 1:2]).clamp(-1.0, 1.0)
        return self._wrong(action, "action")

    def gate_signal(self, observation):
        return self._wrong(observation[:, 0], "gate_signal")


class Declares(AxisPID):
    """The axis PID with one protocol attribute set from its keyword arguments (``{state_size: '1'}``)."""

    def __init__(self, **attributes):
        super().__init__()
        for name, value in attributes.items():
            setattr(self, name, value)


class FragilePD(AxisPD):
    """The axis PD with a law that breaks down past a speed it was never meant to see: NaN where ``|velocity|``
    exceeds ``limit`` (torch operations only: it exports; on the nominal axis, whose speed stays under 10, it is
    the PD exactly)."""

    def __init__(self, kp: float = 2.0, kd: float = 0.6, limit: float = 50.0):
        super().__init__(kp, kd)
        self.limit = limit

    def forward(self, observation):
        action = super().forward(observation)
        return torch.where(observation[:, 1:2].abs() > self.limit, torch.full_like(action, float("nan")), action)


class ForgetfulPID(AxisPID):
    """Returns the next integral of the first row only: a state of another shape than ``state_size`` per row."""

    def step(self, observation, state, gains=None):
        action, integral = super().step(observation, state, gains)
        return action, integral[:1]


class ResetRaises(AxisPD):
    """The axis PD with a ``reset`` (a new episode) that raises."""

    def reset(self, mask=None):
        raise RuntimeError("bus reset failed")
