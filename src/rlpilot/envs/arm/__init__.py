"""The robot arm (docs/robot-arm.md) in one place: ``rlpilot/ReacherTrack-v0`` and the classical controllers
an RL policy is measured against and built on.

- ``env``: ``ReacherTrackEnv`` (the MuJoCo arm tracking a moving reference) and ``register_envs`` (rlpilot's
  gymnasium ids); numpy and gymnasium only.
- ``disturbances``: what payload, friction, damping, gain, noise and delay may be, how a value is read, what a
  reset draws (``DisturbanceSpec``); numpy only.
- ``geometry``: link lengths, reach, the numpy kinematics the env measures with.
- ``controllers``: the ``pd`` / ``pid`` controllers (``ReacherPD``, ``TrackPD``, ``TrackPID``), their gains,
  the batched torch kinematics, ``ARM_ERROR_MONITOR`` (the observation column ``env.residual_gate`` reads);
  torch, never MuJoCo.
- ``adaptive``: ``adaptive-pd`` (``TrackAdaptivePD``), the tracking PD retuned every step from an online
  identification of the arm (delay, actuator strength, noise); torch.
- ``history``: ``obs_history`` carried as an exported controller's state (``HistoryState``, ``HistoryPolicy``;
  what ``rlpilot export`` builds for a run with it); torch, and the env module's column constants.

Which class each built-in controller name is, for which env: :mod:`rlpilot.envs.catalogue`, above the arm.
This file imports nothing: the controllers load without the simulator, and the env without torch. How a
residual policy's action enters a controller (the arm's or a user's) is :mod:`rlpilot.envs.residual`.
"""
