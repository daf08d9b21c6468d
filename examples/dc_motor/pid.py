"""The axis's PID, written by hand against rlpilot's controller protocol (docs/your-controller.md).

``u = kp * e + integral(ki * e) + kd * de + kv * reference velocity``, clipped to the command range, with
anti-windup (the integral stops while the command is saturated in the error's direction) and the integral
bounded. The integral is taken after ``ki`` (the command it holds), so a gain schedule's changing ``ki`` scales
what is integrated from then on, not what is held: bumpless (the same law as ``ki * integral(e)`` under fixed
gains). ``e`` is the position error and ``de`` the velocity error, both read from the observation; ``kv`` is a
velocity feed-forward. Torch operations only, so it exports with a policy as one artifact.
"""

from __future__ import annotations

import torch

from rlpilot.controllers import Controller


class AxisPID(Controller):
    gain_names = ("kp", "ki", "kd")  # what a gain schedule (env.residual_mode=gains) may scale
    state_size = 1  # the integral term: ki times the position error, integrated (command units)

    def __init__(
        self, kp: float = 4.0, ki: float = 2.0, kd: float = 0.5, kv: float = 0.1, limit: float = 0.5, dt: float = 0.02
    ):
        super().__init__()
        self.kp, self.ki, self.kd, self.kv, self.limit, self.dt = kp, ki, kd, kv, limit, dt

    def step(self, observation, state, gains=None):
        error, rate, reference_velocity = observation[:, 0:1], observation[:, 1:2], observation[:, 3:4]
        kp, ki, kd = self.kp, self.ki, self.kd
        if gains is not None:  # a gain schedule's multipliers, one column per gain_names entry
            kp, ki, kd = kp * gains[:, 0:1], ki * gains[:, 1:2], kd * gains[:, 2:3]
        unsaturated = kp * error + state + kd * rate + self.kv * reference_velocity
        winding = (unsaturated.abs() >= 1.0) & (torch.sign(unsaturated) == torch.sign(error))
        integral = torch.where(winding, state, state + ki * error * self.dt).clamp(-self.limit, self.limit)
        action = kp * error + integral + kd * rate + self.kv * reference_velocity
        return action.clamp(-1.0, 1.0), integral
