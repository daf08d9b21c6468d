"""``rlpilot/ReacherTrack-v0``: gymnasium's MuJoCo Reacher arm tracking a moving reference, under the
disturbances that break fixed controller gains on a real arm.

The arm is Reacher-v5's model (two links, 0.1 m and 0.11 m to the fingertip, torque actuators with gear
200, joint damping 1 N·m·s/rad, armature 1 kg·m²). Differences from Reacher-v5:

- **Tracking.** The target moves along a smooth reference for 4 seconds (200 steps of 20 ms; the
  registered time limit): a circle, a figure-eight (1:2 Lissajous) or point-to-point moves with a minimum-jerk
  velocity profile; size, centre, phase, direction and speed are drawn per episode, the whole path inside
  the arm's reach (0.04-0.19 m from the shoulder). ``trajectory="mixed"`` (default) draws the kind too.
- **Vertical plane.** Gravity acts in the arm's plane (along -y; Reacher-v5's arm moves in the horizontal
  plane, where a payload weighs nothing): a payload is a load the controller has to hold up.
- **Observation** (12 floats, float32): cos q1, cos q2, sin q1, sin q2, dq1, dq2 (measured: with
  ``obs_noise``), reference x, y, reference vx, vy, fingertip - reference (x, y) (from the measured
  angles through the arm's forward kinematics, as an encoder-based controller computes it).
- **Reward**: ``-|fingertip - reference| - effort_weight * |a|^2`` per step (``effort_weight`` 0.1).
- **Info** at every step: ``error`` (m, true positions), and the episode so far: ``tracking_error`` (its
  RMSE; ``track_rmse`` too), ``track_max``, ``effort`` (mean |a|^2 of the actions the motors got),
  ``smoothness`` (mean |a_t - a_{t-1}|^2); ``reward_dist`` (-error) as Reacher-v5. At reset, ``condition``:
  the disturbances the episode runs under.
- **Conditions** (:mod:`rlpilot.conditions`): the disturbances below are its uncertain parameters, their
  randomisation ranges its declared ones, and ``nominal``, ``payload``, ``friction``, ``gain``, ``noise``,
  ``delay``, ``all`` its named cases (:data:`~rlpilot.envs.arm.disturbances.NAMED_CONDITIONS`);
  ``reset(options={"condition": {...}})`` sets disturbances for one episode.

**Disturbances** (keyword arguments ``payload``, ``friction``, ``damping``, ``gain``, ``obs_noise``,
``action_delay``, ``randomize``, ``randomize_prob``; :mod:`rlpilot.envs.arm.disturbances` lists them), each a
number (fixed for every episode) or ``[low, high]`` (drawn at every reset), applied through the MuJoCo model at
reset.

``obs_last_action=True`` appends the last action the motors were sent (2 floats: 14 in all), which makes the
state Markov under a one-step delay (the classical controllers read only the first 12). ``obs_history=k``
then appends, for each of the k steps before, the joint velocities measured then and the command sent before
them (4 floats a step): what a policy needs to tell, from the motion, whether its commands act now or a step
late (a one-step delay is otherwise invisible in a single observation). ``obs_error_peak=d`` (0 <= d < 1;
0, the default: off) appends one float, a peak-hold of the measured tracking error: ``max(d * previous,
|fingertip - reference|)`` (m; 0 before the episode's first observation): how far the arm has strayed lately,
as an operator's error monitor shows it. An oscillating loop (kp too high for a delayed actuator) stays
visible in it while the error itself swings back through zero. Being last, its column is
:data:`rlpilot.envs.arm.controllers.ARM_ERROR_MONITOR` (what ``env.residual_gate`` reads on the arm).

``obs_privileged=True`` appends, before the error monitor, the episode's true dynamics, 6 floats in the order
of :data:`~rlpilot.envs.arm.disturbances.PRIVILEGED` (payload, friction, damping, gain, obs_noise,
action_delay), each 0 at nominal and 1 at the top of its randomisation range
(:func:`~rlpilot.envs.arm.disturbances.normalised`), read back from the MuJoCo model where it holds them (mass,
frictionloss, damping, gear) and from the env's own noise and delay line: what a simulator knows and a
deployed controller does not (a privileged teacher's input, ``model.actor_inputs``).

numpy and gymnasium only (no torch): a deployed artifact can run on it without torch.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.envs.mujoco.reacher_v5 import ReacherEnv

from rlpilot.envs.arm.disturbances import (
    NAMED_CONDITIONS,
    NOMINAL,
    PRIVILEGED,
    RANDOMIZE_RANGES,
    DisturbanceSpec,
    disturbance_range,
    normalised,
)
from rlpilot.envs.arm.geometry import REACH, joint_angles, tip_position

TRAJECTORIES = ("circle", "figure8", "p2p")
EPISODE_STEPS = 200


class ReacherTrackEnv(ReacherEnv):
    """Reacher-v5's arm tracking a moving reference in a vertical plane, with optional disturbances."""

    # the conditions protocol (rlpilot.conditions): the disturbances, their randomisation ranges, named cases
    condition_ranges = RANDOMIZE_RANGES
    named_conditions = NAMED_CONDITIONS
    trace = ("error",)
    measures = {
        "tracking_error": "RMS distance of the fingertip from the reference over the episode, m",
        "track_max": "largest distance of the fingertip from the reference in the episode, m",
        "effort": "mean squared motor command as the motors got it (both joints summed)",
        "smoothness": "mean squared change of the motor command from one step to the next",
    }

    def __init__(
        self,
        trajectory: str = "mixed",
        effort_weight: float = 0.1,
        payload: Any = None,
        friction: Any = None,
        damping: Any = None,
        gain: Any = None,
        obs_noise: Any = None,
        action_delay: Any = None,
        randomize: Any = None,
        randomize_prob: float = 1.0,
        obs_last_action: bool = False,
        obs_history: int = 0,
        obs_error_peak: float = 0.0,
        obs_privileged: bool = False,
        **kwargs,
    ):
        if trajectory not in (*TRAJECTORIES, "mixed"):
            raise ValueError(f"trajectory: one of {', '.join((*TRAJECTORIES, 'mixed'))}, got {trajectory!r}")
        given = {
            "payload": payload,
            "friction": friction,
            "damping": damping,
            "gain": gain,
            "obs_noise": obs_noise,
            "action_delay": action_delay,
        }
        self.disturbance_spec = DisturbanceSpec.from_kwargs(given, randomize, randomize_prob)
        self.trajectory = trajectory
        self.obs_last_action = bool(obs_last_action)
        if not isinstance(obs_history, int) or isinstance(obs_history, bool) or obs_history < 0:
            raise ValueError(f"obs_history: a whole number of steps (0 or more), got {obs_history!r}")
        if obs_history and not self.obs_last_action:
            raise ValueError("obs_history needs obs_last_action: true (the history pairs motions with commands)")
        self.obs_history = obs_history
        self._history: deque = deque(maxlen=max(obs_history, 1))
        if (
            isinstance(obs_error_peak, bool)
            or not isinstance(obs_error_peak, (int, float))
            or not (0.0 <= obs_error_peak < 1.0)
        ):
            raise ValueError(f"obs_error_peak: a decay per step in [0, 1) (0: off), got {obs_error_peak!r}")
        self.obs_error_peak = float(obs_error_peak)
        self._error_peak = 0.0
        if not isinstance(obs_privileged, bool):
            raise ValueError(f"obs_privileged: true or false, got {obs_privileged!r}")
        self.obs_privileged = obs_privileged
        if (
            isinstance(effort_weight, bool)
            or not isinstance(effort_weight, (int, float))
            or not (0.0 <= effort_weight <= 1e3)
        ):
            raise ValueError(f"effort_weight: a finite weight in [0, 1000], got {effort_weight!r}")
        self.effort_weight = float(effort_weight)
        self.episode_steps = EPISODE_STEPS
        # the episode's state (reset_model fills it), set before MujocoEnv's constructor may read it
        self.disturbances = {name: low for name, (low, _) in self.disturbance_spec.ranges.items()}
        self._path: dict[str, Any] = {}
        self._t = 0
        self._now = (np.zeros(2), np.zeros(2))  # reference position and velocity at step _t
        self._delayed: deque = deque()
        self._steps, self._squared_errors, self._max_error = 0, 0.0, 0.0
        self._effort = self._changes = 0.0
        self._previous_action: np.ndarray | None = None
        super().__init__(**kwargs)
        size = (14 if self.obs_last_action else 12) + 4 * self.obs_history + (1 if self.obs_error_peak else 0)
        size += len(PRIVILEGED) if self.obs_privileged else 0
        self.observation_space = spaces.Box(low=-np.inf, high=np.inf, shape=(size,), dtype=np.float32)
        model = self.model
        self._fingertip = model.body("fingertip").id
        self._nominal_model = {
            "mass": float(model.body_mass[self._fingertip]),
            "gear": model.actuator_gear[:, 0].copy(),
        }
        model.opt.gravity[:] = (0.0, -9.81, 0.0)  # the arm's plane is x-y: gravity in that plane

    # -- the model under the episode's disturbances ------------------------------------------------------
    @classmethod
    def export_state(cls, kwargs: dict, observation_size: int):
        """``rlpilot export``'s hook (:func:`rlpilot.play.export.carried_state`): ``obs_history`` carried as the
        artifact's state (:class:`rlpilot.envs.arm.history.HistoryState`) for an env of ``kwargs`` whose
        observation has ``observation_size`` floats; None without a history."""
        if not kwargs.get("obs_history"):
            return None
        from rlpilot.envs.arm.history import HistoryState  # torch: only when a run is exported

        return HistoryState(int(kwargs["obs_history"]), observation_size)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reacher's reset; ``options={"condition": {...}}`` sets disturbances for this episode over what the
        env draws (drawn all the same: the reference and start are the same whatever the condition), and
        ``info["condition"]`` is every disturbance the episode runs under."""
        condition = dict((options or {}).get("condition") or {})
        for name, value in condition.items():
            if name not in NOMINAL:
                raise ValueError(f"condition: no disturbance '{name}' (the arm's: {', '.join(NOMINAL)})")
            low, _ = disturbance_range(name, value)
            condition[name] = int(low) if name == "action_delay" else low
        self._condition = condition
        observation, info = super().reset(seed=seed, options=options)
        info["condition"] = dict(self.disturbances)
        return observation, info

    def _apply_disturbances(self) -> None:
        drawn = {**self.disturbance_spec.draw(self.np_random), **getattr(self, "_condition", {})}
        model = self.model
        model.body_mass[self._fingertip] = self._nominal_model["mass"] + drawn["payload"]
        model.dof_frictionloss[:2] = drawn["friction"]
        model.dof_damping[:2] = drawn["damping"]
        model.actuator_gear[:, 0] = self._nominal_model["gear"] * drawn["gain"]
        self.disturbances = drawn

    def describe_dynamics(self) -> list[str]:
        """Lines for ``rlpilot check``: each disturbance, fixed or drawn per episode, and the reference."""
        reference = f"reference: {self.trajectory} (circle, figure8, p2p or mixed), 4 s; gravity in the arm's plane"
        return [reference, *self.disturbance_spec.describe()]

    # -- the reference ------------------------------------------------------------------------------------
    def _draw_path(self) -> dict[str, Any]:
        rng = self.np_random
        kind = self.trajectory if self.trajectory != "mixed" else TRAJECTORIES[int(rng.integers(len(TRAJECTORIES)))]
        duration = self.episode_steps * self.dt
        for _ in range(1000):  # rejection: the whole path inside the reach annulus
            if kind == "p2p":
                points = [rng.uniform(-REACH[1], REACH[1], size=2) for _ in range(4)]
                segment = rng.uniform(0.7, 1.3)
                path = {"kind": kind, "points": np.array(points), "segment": segment}
            else:
                path = {
                    "kind": kind,
                    "centre": rng.uniform(-0.06, 0.06, size=2),
                    "size": rng.uniform(0.03, 0.09, size=2),
                    "omega": rng.uniform(0.5, 1.2) * 2 * math.pi / duration * (1 if rng.random() < 0.5 else -1),
                    "phase": rng.uniform(0, 2 * math.pi),
                }
                if kind == "circle":
                    path["size"][1] = path["size"][0]
            radius = self._radius(path, np.linspace(0.0, duration, 101))
            if radius.min() >= REACH[0] and radius.max() <= REACH[1]:
                return path
        raise RuntimeError("no reference path inside the arm's reach after 1000 draws")

    @staticmethod
    def _radius(path: dict[str, Any], times: np.ndarray) -> np.ndarray:
        """The reference's distance from the shoulder at each of ``times``: :meth:`_reference`'s position, computed
        for all of them at once (a reset draws ~8 paths of 101 points: one call a point cost 3 ms of a 4 ms reset)."""
        if path["kind"] == "p2p":
            points, segment = path["points"], path["segment"]
            index = np.minimum((times // segment).astype(np.int64), len(points) - 2)
            tau = np.clip((times - index * segment) / segment, 0.0, 1.0)
            shape = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
            start, end = points[index], points[index + 1]
            position = start + (end - start) * shape[:, None]
        else:
            angle = path["omega"] * times + path["phase"]
            (ax, ay), centre = path["size"], path["centre"]
            if path["kind"] == "circle":
                offset = np.stack([ax * np.cos(angle), ay * np.sin(angle)], axis=-1)
            else:
                offset = np.stack([ax * np.sin(angle), ay * np.sin(2 * angle) / 2], axis=-1)
            position = centre + offset
        return np.linalg.norm(position, axis=-1)

    @staticmethod
    def _reference(path: dict[str, Any], t: float) -> tuple[np.ndarray, np.ndarray]:
        """Reference position and velocity at time ``t`` (s)."""
        kind = path["kind"]
        if kind == "p2p":  # hold the first point, then minimum-jerk moves between consecutive points
            points, segment = path["points"], path["segment"]
            index = min(int(t // segment), len(points) - 2)
            tau = min(max((t - index * segment) / segment, 0.0), 1.0)
            shape = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
            rate = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / segment
            start, end = points[index], points[index + 1]
            return start + (end - start) * shape, (end - start) * rate
        angle = path["omega"] * t + path["phase"]
        centre, (ax, ay), omega = path["centre"], path["size"], path["omega"]
        if kind == "circle":
            offset = np.array([ax * math.cos(angle), ay * math.sin(angle)])
            velocity = np.array([-ax * math.sin(angle), ay * math.cos(angle)]) * omega
        else:  # figure-eight: x ~ sin(angle), y ~ sin(2 angle) / 2
            offset = np.array([ax * math.sin(angle), ay * math.sin(2 * angle) / 2])
            velocity = np.array([ax * math.cos(angle), ay * math.cos(2 * angle)]) * omega
        return centre + offset, velocity

    def reference_now(self) -> tuple[np.ndarray, np.ndarray]:
        """The reference's position and velocity at the current step."""
        return self._now

    # -- gymnasium API ------------------------------------------------------------------------------------
    def reset_model(self):
        self._apply_disturbances()
        self._path = self._draw_path()
        self._t = 0
        self._now = self._reference(self._path, 0.0)
        self._steps, self._squared_errors, self._max_error = 0, 0.0, 0.0
        self._effort, self._changes, self._previous_action = 0.0, 0.0, None
        self._delayed = deque([np.zeros(2)] * self.disturbances["action_delay"])
        self._history.extend([np.zeros(4)] * self.obs_history)
        self._error_peak = 0.0
        reference = self._now[0]
        q1, q2 = joint_angles(reference)  # start on the path (a tracking task, not a reach)
        qpos = self.init_qpos.copy()
        qpos[:2] = np.array([q1, q2]) + self.np_random.uniform(-0.05, 0.05, size=2)
        qpos[2:] = reference
        qvel = np.zeros(self.model.nv)
        self.set_state(qpos, qvel)
        return self._get_obs()

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self._delayed.append(action)
        applied = self._delayed.popleft()
        self.do_simulation(applied, self.frame_skip)
        self._t += 1
        self._now = self._reference(self._path, self._t * self.dt)
        reference = self._now[0]
        self._place_target(reference)
        error = float(np.linalg.norm(self.get_body_com("fingertip")[:2] - reference))
        effort = float(np.square(action).sum())
        # the episode so far, as running sums (info reports them every step)
        self._steps += 1
        self._squared_errors += error * error
        self._max_error = max(self._max_error, error)
        self._effort += effort
        if self._previous_action is not None:
            self._changes += float(np.square(action - self._previous_action).sum())
        self._previous_action = action
        reward = -error - self.effort_weight * effort
        info = {
            "error": error,
            "reward_dist": -error,
            "tracking_error": math.sqrt(self._squared_errors / self._steps),
            "track_rmse": math.sqrt(self._squared_errors / self._steps),
            "track_max": self._max_error,
            "effort": self._effort / self._steps,
            "smoothness": self._changes / max(self._steps - 1, 1),
        }
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), reward, False, False, info

    def true_dynamics(self) -> np.ndarray:
        """The episode's dynamics, normalised (``obs_privileged``): read back from the MuJoCo model (fingertip
        mass, joint friction and damping, actuator gear), the noise level and the delay line's length."""
        model = self.model
        values = {
            "payload": float(model.body_mass[self._fingertip]) - self._nominal_model["mass"],
            "friction": float(model.dof_frictionloss[0]),
            "damping": float(model.dof_damping[0]),
            "gain": float(model.actuator_gear[0, 0] / self._nominal_model["gear"][0]),
            "obs_noise": float(self.disturbances["obs_noise"]),
            "action_delay": float(len(self._delayed)),
        }
        return np.array([normalised(name, values[name]) for name in PRIVILEGED])

    def _place_target(self, reference: np.ndarray) -> None:
        """The target body shows the reference (its slide joints are set, not simulated)."""
        qpos, qvel = self.data.qpos.copy(), self.data.qvel.copy()
        qpos[2:], qvel[2:] = reference, 0.0
        self.set_state(qpos, qvel)

    def _get_obs(self):
        noise = self.disturbances["obs_noise"]
        q = self.data.qpos[:2].copy()
        dq = self.data.qvel[:2].copy()
        if noise > 0:
            q += self.np_random.normal(0.0, noise, size=2)
            dq += self.np_random.normal(0.0, noise, size=2)
        reference, velocity = self._now
        tip = tip_position(q)
        parts = [np.cos(q), np.sin(q), dq, reference, velocity, tip - reference]
        if self.obs_last_action:  # the motors' last command: Markov under a one-step delay
            last = np.zeros(2) if self._previous_action is None else self._previous_action
            parts.append(last)
            if self.obs_history:  # the steps before, newest first; then this step joins them
                parts.extend(reversed(self._history))
                self._history.append(np.concatenate([dq, last]))
        if self.obs_privileged:  # the true dynamics, before the error monitor (which stays last)
            parts.append(self.true_dynamics())
        if self.obs_error_peak:  # the error monitor: a peak-hold of the measured tracking error
            self._error_peak = max(self.obs_error_peak * self._error_peak, float(np.linalg.norm(tip - reference)))
            parts.append(np.array([self._error_peak]))
        return np.concatenate(parts).astype(np.float32)


def register_envs() -> None:
    """Registers rlpilot's gymnasium ids (called when an ``rlpilot/`` id is used): ``rlpilot/ReacherTrack-v0``
    and ``rlpilot/SlowCartPole-v0`` (:mod:`rlpilot.envs.slow`, imported only when made: registering stays
    torch-free)."""
    import gymnasium as gym

    if "rlpilot/SlowCartPole-v0" not in gym.registry:
        gym.register(
            "rlpilot/SlowCartPole-v0",
            entry_point="rlpilot.envs.slow:SlowCartPole",
            max_episode_steps=500,
            reward_threshold=475.0,
        )
    if "rlpilot/ReacherTrack-v0" not in gym.registry:
        gym.register(
            "rlpilot/ReacherTrack-v0",
            entry_point="rlpilot.envs.arm.env:ReacherTrackEnv",
            max_episode_steps=EPISODE_STEPS,
        )
