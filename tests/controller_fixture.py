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
