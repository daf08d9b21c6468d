"""The heated tank's discrete PID and its textbook tuning, SIMC (Skogestad 2003), against rlpilot's controller
protocol (docs/your-controller.md): the classical baseline a process engineer would commission.

**The law**, per control period ``dt``, in parallel form::

    u = kp * e + integral(ki * e) - kd * filtered d(measurement)/dt,    clipped to [0, 1]

- the derivative acts on the *measurement*, not the error, so a set-point step gives no derivative kick, and it
  is filtered (first order, ``derivative_filter`` s) against the sensor's noise; it is zero on an episode's
  first step (no earlier measurement);
- anti-windup by conditional integration: the integral stands still while the output is saturated and the
  error pushes it further (above 1 and ``e > 0``; at or below 0 and ``e < 0``: the heater cannot cool), and
  it is kept in [0, 1] (the heater power the integral may hold);
- ``gain_names = ("kp", "ki", "kd")``: a gain schedule's multipliers scale them per row. The integral term is
  integrated *after* ``ki`` (``integral(ki * e)``, the heater power it holds), so a ``ki`` that changes scales
  what is integrated from then on, never what the integral already holds: a schedule's changes are bumpless.
  (The textbook ``ki * integral(e)`` is the same law under fixed gains, but there every change of ``ki``
  rescales the held power at once: on the tank, gain multipliers that jitter from step to step by 0.075 decades
  (19%) double the settled error, by 0.3 decades (2x) make it 5x; integrated after ``ki``, +0% and +10%.)

State (4 numbers per env, zeros at an episode's start): the integral term (heater power), the last measurement, the
filtered derivative and a flag that an earlier measurement exists. Torch operations only, so it exports with a
policy as one artifact.

**SIMC** (:func:`simc`) turns a first-order-plus-dead-time model (gain ``K``, time constant ``tau``, dead time
``theta``) into PI settings: ``Kc = tau / (K (tau_c + theta))``, ``tau_I = min(tau, 4 (tau_c + theta))``, the
closed-loop time constant ``tau_c = theta`` by default (Skogestad's "tight but robust" choice). A second time
constant ``tau2`` adds the derivative (``tau_D = tau2``, series form, converted to the parallel gains here).
:class:`TankPID`'s default gains are SIMC at the tank's nominal condition: K 40 K, tau 60 s, theta 4 s.
"""

from __future__ import annotations

import torch

from rlpilot.controllers import Controller

NOMINAL_MODEL = {"K": 40.0, "tau": 60.0, "theta": 4.0}  # heated_tank.plant.NOMINAL, in SIMC's names


def simc(K: float, tau: float, theta: float, tau_c: float | None = None, *, tau2: float = 0.0) -> dict[str, float]:
    """SIMC settings (Skogestad 2003) for ``K e^(-theta s) / ((tau s + 1)(tau2 s + 1))``, as the parallel
    gains ``{"kp", "ki", "kd"}`` of :class:`TankPID` (``ki = kp / tau_I``, ``kd = kp * tau_D``).

    ``tau_c`` (s): the desired closed-loop time constant, ``theta`` by default. With no dead time SIMC leaves
    it free; the default is then ``tau / 10`` (a loop ten times faster than the open one), since ``tau_c + theta``
    must be above 0. ``tau2 > 0`` (a second-order model): ``tau_D = tau2`` in series form, whose parallel
    equivalent is ``Kc (1 + tau_D / tau_I)``, ``tau_I + tau_D``, ``tau_I tau_D / (tau_I + tau_D)``."""
    if K == 0 or tau <= 0 or theta < 0 or tau2 < 0:
        raise ValueError(f"SIMC needs K != 0, tau > 0, theta >= 0, tau2 >= 0; got {K=}, {tau=}, {theta=}, {tau2=}")
    if tau_c is None:
        tau_c = theta if theta > 0 else tau / 10.0
    if tau_c + theta <= 0:
        raise ValueError(f"SIMC needs tau_c + theta > 0; got {tau_c=}, {theta=}")
    kc = tau / (K * (tau_c + theta))
    tau_i = min(tau, 4.0 * (tau_c + theta))
    if tau2 > 0:  # series (cascade) PID -> parallel
        kc, tau_i, tau_d = kc * (1.0 + tau2 / tau_i), tau_i + tau2, tau_i * tau2 / (tau_i + tau2)
    else:
        tau_d = 0.0
    return {"kp": kc, "ki": kc / tau_i, "kd": kc * tau_d}


NOMINAL_SIMC = simc(**NOMINAL_MODEL)  # kp 0.1875 per K, ki 0.00586 per K·s (tau_I 32 s), kd 0


class TankPID(Controller):
    gain_names = ("kp", "ki", "kd")  # what a gain schedule (env.residual_mode=gains) may scale
    state_size = 4  # integral, last measurement, filtered derivative, "a last measurement exists"

    def __init__(
        self,
        kp: float = NOMINAL_SIMC["kp"],
        ki: float = NOMINAL_SIMC["ki"],
        kd: float = NOMINAL_SIMC["kd"],
        derivative_filter: float = 2.0,
        dt: float = 1.0,
    ):
        super().__init__()
        self.kp, self.ki, self.kd, self.dt = kp, ki, kd, dt
        self.smoothing = dt / (derivative_filter + dt)  # the filter's step: 1 - exp(-dt / T_f), backward Euler

    def step(self, observation, state, gains=None):
        error, measured = observation[:, 0:1], observation[:, 1:2]
        integral, last, derivative, started = state[:, 0:1], state[:, 1:2], state[:, 2:3], state[:, 3:4]
        kp = torch.full_like(error, self.kp)
        ki = torch.full_like(error, self.ki)
        kd = torch.full_like(error, self.kd)
        if gains is not None:  # a gain schedule's multipliers, one column per gain_names entry
            kp, ki, kd = kp * gains[:, 0:1], ki * gains[:, 1:2], kd * gains[:, 2:3]
        raw = torch.where(started > 0, (measured - last) / self.dt, torch.zeros_like(measured))
        derivative = torch.where(started > 0, derivative + self.smoothing * (raw - derivative), raw)
        unsaturated = kp * error + integral - kd * derivative
        winding = ((unsaturated >= 1.0) & (error > 0)) | ((unsaturated <= 0.0) & (error < 0))
        integral = torch.where(winding, integral, integral + ki * error * self.dt).clamp(0.0, 1.0)  # power held
        action = (kp * error + integral - kd * derivative).clamp(0.0, 1.0)
        return action, torch.cat([integral, measured, derivative, torch.ones_like(started)], dim=1)
