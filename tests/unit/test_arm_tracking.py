"""rlpilot/ReacherTrack-v0: each disturbance changes the MuJoCo model as stated; the reference; the PID's
anti-windup; residual RL starts exactly at the base controller; the exported residual is base + residual."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
import gymnasium as gym  # noqa: E402

from rlpilot.config import load_config  # noqa: E402
from rlpilot.envs.arm.controllers import TrackPD, TrackPDFF, TrackPID  # noqa: E402
from rlpilot.envs.arm.disturbances import NOMINAL, RANDOMIZE_RANGES  # noqa: E402
from rlpilot.envs.arm.env import ReacherTrackEnv, register_envs  # noqa: E402

register_envs()
ENV_ID = "rlpilot/ReacherTrack-v0"


def make(**kwargs) -> ReacherTrackEnv:
    return gym.make(ENV_ID, **kwargs).unwrapped


def gain_schedule_env(**fields):
    """The arm's vector env with the PD's gains scheduled by the policy (raw observations), ``fields`` on top."""
    from rlpilot.config import EnvConfig

    base = dict(
        id=ENV_ID, backend="sync", normalize_obs=False, base_controller="pd", residual_mode="gains", residual_scale=1.0
    )
    return EnvConfig(**{**base, **fields})


def test_each_disturbance_is_in_the_model_after_reset():
    nominal = make()
    nominal.reset(seed=0)
    tip = nominal.model.body("fingertip").id
    mass, gear = float(nominal.model.body_mass[tip]), nominal.model.actuator_gear[:, 0].copy()
    assert tuple(nominal.model.opt.gravity) == (0.0, -9.81, 0.0)  # in the arm's plane
    assert nominal.disturbances == {k: float(v) if k != "action_delay" else 0 for k, v in NOMINAL.items()}
    env = make(payload=2.5, friction=4.0, damping=2.0, gain=0.7)
    env.reset(seed=0)
    model = env.model
    assert model.body_mass[tip] == pytest.approx(mass + 2.5)
    assert list(model.dof_frictionloss[:2]) == [4.0, 4.0] and list(model.dof_frictionloss[2:]) == [0.0, 0.0]
    assert list(model.dof_damping[:2]) == [2.0, 2.0]
    assert np.allclose(model.actuator_gear[:, 0], gear * 0.7)
    # ranges are drawn per episode, inside the range; a fixed value never moves
    env = make(payload=[0.0, 4.0], gain=[0.6, 1.4], friction=1.0)
    drawn = []
    for seed in range(20):
        env.reset(seed=seed)
        drawn.append((env.disturbances["payload"], env.disturbances["gain"], env.disturbances["friction"]))
        assert env.model.body_mass[tip] == pytest.approx(mass + env.disturbances["payload"])
        assert np.allclose(env.model.actuator_gear[:, 0], gear * env.disturbances["gain"])
    payloads, gains, frictions = map(np.array, zip(*drawn))
    assert payloads.min() >= 0 and payloads.max() <= 4 and payloads.std() > 0.5
    assert gains.min() >= 0.6 and gains.max() <= 1.4 and set(frictions) == {1.0}
    every = make(randomize="all")
    every.reset(seed=3)
    for name, (low, high) in RANDOMIZE_RANGES.items():
        assert low <= every.disturbances[name] <= high


def test_the_disturbances_act():
    """Payload pulls the arm down (gravity along -y), weaker motors move it less, the delay holds the first
    action back one step, noise makes the measured angles differ from the true ones."""

    def after(env, action, steps=5):
        env.reset(seed=0)
        for _ in range(steps):
            env.step(action)
        return env.data.qpos[:2].copy(), env.data.qvel[:2].copy()

    zero = np.zeros(2)
    free, _ = after(make(), zero)
    loaded, _ = after(make(payload=4.0), zero)
    assert not np.allclose(free, loaded)
    push = np.array([0.5, 0.0])
    _, strong = after(make(), push)
    _, weak = after(make(gain=0.5), push)
    assert abs(weak[0]) < abs(strong[0])
    delayed, plain, pushed = make(action_delay=1), make(), make()
    for env, action in ((delayed, [1.0, 1.0]), (plain, [0.0, 0.0]), (pushed, [1.0, 1.0])):
        env.reset(seed=0)
        env.step(np.array(action))
    assert np.allclose(delayed.data.qvel[:2], plain.data.qvel[:2])  # the first step ran the zero action
    assert not np.allclose(pushed.data.qvel[:2], plain.data.qvel[:2])
    delayed.step(np.zeros(2))  # ...and the second step the first action
    assert delayed.data.qvel[0] > plain.data.qvel[0] + 1.0
    noisy = make(obs_noise=0.05)
    observation, _ = noisy.reset(seed=0)
    q = noisy.data.qpos[:2]
    assert not np.allclose(observation[:2], np.cos(q), atol=1e-4)
    clean = make()
    observation, _ = clean.reset(seed=0)
    assert np.allclose(observation[:2], np.cos(clean.data.qpos[:2]), atol=1e-6)


@pytest.mark.parametrize("kind", ["circle", "figure8", "p2p"])
def test_reference_is_smooth_inside_reach_and_its_velocity_is_its_derivative(kind):
    env = make(trajectory=kind)
    for seed in range(5):
        env.reset(seed=seed)
        times = np.arange(0, 200) * env.dt
        positions = np.stack([env._reference(env._path, t)[0] for t in times])
        velocities = np.stack([env._reference(env._path, t)[1] for t in times])
        radius = np.linalg.norm(positions, axis=-1)
        assert radius.min() >= 0.04 - 1e-9 and radius.max() <= 0.19 + 1e-9
        numeric = np.gradient(positions, env.dt, axis=0)
        assert np.abs(numeric[2:-2] - velocities[2:-2]).max() < 0.01  # m/s
        assert env._path["kind"] == kind
        # the reset's reach test computes the same distances for all the times at once
        assert np.allclose(env._radius(env._path, times), radius, rtol=0, atol=1e-14)
        assert not np.allclose(env._radius(env._path, times + 0.5), radius, rtol=0, atol=1e-6)


def test_observation_layout_and_info():
    env = gym.make(ENV_ID)
    observation, _ = env.reset(seed=1)
    arm = env.unwrapped
    reference, velocity = arm.reference_now()
    assert observation.shape == (12,) and observation.dtype == np.float32
    assert np.allclose(observation[6:8], reference, atol=1e-6) and np.allclose(observation[8:10], velocity, atol=1e-6)
    tip = arm.get_body_com("fingertip")[:2]
    assert np.allclose(observation[10:12], tip - reference, atol=1e-5)
    errors = []
    for _ in range(200):
        _, reward, terminated, truncated, info = env.step(np.zeros(2))
        errors.append(info["error"])
        assert reward == pytest.approx(-info["error"])
    assert truncated and not terminated
    assert info["track_rmse"] == pytest.approx(math.sqrt(np.mean(np.square(errors))))
    assert info["track_max"] == pytest.approx(max(errors))


def test_pid_integral_winds_up_only_while_it_can_act():
    pid = TrackPID(kp=0.0, kd=0.0, ki=1.0, integral_limit=10.0)
    observation = torch.zeros(2, 12)
    observation[:, 0] = observation[:, 1] = 1.0  # q = 0
    observation[:, 6] = 0.15  # reference straight ahead at 0.15 m: q2 > 0 wanted
    pid(observation)
    first = pid.integral.clone()
    for _ in range(2000):
        action = pid(observation)
    assert (first.abs() > 0).all()
    assert (action.abs() <= 1.0).all() and torch.isclose(action[:, 1].abs(), torch.tensor(1.0)).all()
    # saturated in the error's direction: the integral stopped growing near ki * integral = 1
    assert pid.integral[:, 1].abs().max() <= 1.0 / pid.ki + 0.1
    pid.reset(np.array([True, False]))
    assert pid.integral[0].abs().sum() == 0 and pid.integral[1].abs().sum() > 0


@pytest.mark.parametrize(
    "algo,mode", [("sac", "add"), ("td3", "add"), ("ppo", "add"), ("sac", "gains"), ("ppo", "gains")]
)
def test_residual_at_initialisation_is_the_base_controller(algo, mode):
    from rlpilot.control.algos import build
    from rlpilot.control.evaluate import evaluate
    from rlpilot.envs import make_env

    overrides = ["env.base_controller=pd", "env.backend=sync", f"env.residual_mode={mode}", "env.residual_scale=1.0"]
    config = load_config(algo=algo, env_id=ENV_ID, overrides=overrides)
    residual_env = make_env(config.env, num_envs=4, seed=7)
    algorithm = build(config, residual_env, torch.device("cpu"))
    observations = torch.randn(64, 12)
    assert torch.equal(algorithm.greedy_action(observations), torch.zeros(64, 2))  # exactly zero
    learned = evaluate(residual_env, algorithm.greedy_action, episodes=4, seed=7)
    plain_config = load_config(algo=algo, env_id=ENV_ID, overrides=["env.backend=sync", "env.normalize_obs=false"])
    plain_env = make_env(plain_config.env, num_envs=4, seed=7)
    base = evaluate(plain_env, TrackPD(), episodes=4, seed=7)
    assert np.array_equal(learned.returns, base.returns)  # the same episodes, bit for bit
    assert np.array_equal(learned.final["tracking_error"], base.final["tracking_error"])


def test_a_gain_schedule_scales_kp_and_kd_and_is_the_pd_at_zero():
    """``env.residual_mode=gains``: the policy's 2 actions are decades of kp and kd; the env gets exactly the PD
    law with those gains (action 0: the PD itself), never an added torque."""
    from rlpilot.envs import make_env
    from rlpilot.envs.residual import gain_multipliers

    observation = torch.as_tensor(make().reset(seed=4)[0])[None].repeat(3, 1)
    actions = torch.tensor([[0.0, 0.0], [-1.0, 0.0], [0.5, -0.5]])
    gains = gain_multipliers(actions, 1.0)
    assert torch.equal(gains[0], torch.ones(2)) and gains[1].tolist() == pytest.approx([0.1, 1.0])
    scheduled = TrackPD()(observation, gains)
    assert torch.equal(scheduled[0], TrackPD()(observation)[0])
    assert torch.allclose(scheduled[1], TrackPD(kp=1.0, kd=0.2)(observation)[0])
    assert torch.allclose(scheduled[2], TrackPD(kp=10 * 10**0.5, kd=0.2 * 10**-0.5)(observation)[0])
    # through the vector env: the motors get the scheduled PD's action (the last command, observed, says so)
    env_cfg = gain_schedule_env(kwargs={"obs_last_action": True})
    env = make_env(env_cfg, num_envs=1, seed=4)
    td = env.reset()
    before = td["observation"][:, :12].clone()
    sent = env.step(td.set("action", torch.tensor([[-1.0, 0.0]])))["next", "observation"][0, 12:]
    assert torch.allclose(sent, TrackPD(kp=1.0, kd=0.2)(before)[0], atol=1e-6)
    assert not torch.allclose(sent, TrackPD()(before)[0], atol=1e-3)
    with pytest.raises(Exception, match="residual_mode"):
        load_config(algo="sac", env_id=ENV_ID, overrides=["env.residual_mode=torque"])


def test_check_shows_the_disturbances_and_the_base():
    from rlpilot.check.env import check_env
    from rlpilot.config import EnvConfig

    env_cfg = EnvConfig(id=ENV_ID, kwargs={"payload": [0.0, 4.0], "action_delay": 1}, base_controller="pd")
    text = check_env(env_cfg, episodes=2, progress=None).render()
    assert "payload       [0, 4] kg at the fingertip (drawn at each reset)" in text
    assert "action_delay  1 step(s) of action delay" in text and "friction      0 N·m" in text
    assert "residual RL: the env adds the pd controller's action" in text
    gated = EnvConfig(
        id=ENV_ID, kwargs={"obs_error_peak": 0.9}, base_controller="pd", residual_mode="gains", residual_gate=0.005
    )
    text = check_env(gated, episodes=2, progress=None).render()
    assert "residual gate: the policy acts only where the error monitor reads above 0.005 m" in text


def test_a_pid_base_exports_as_a_pure_function_of_observation_and_state():
    """The PID keeps an integral between steps: as a module it takes the integral in and gives the next one
    out, and stepping it that way is exactly the live controller, step after step."""
    from rlpilot.controllers import ControllerModule
    from rlpilot.envs.catalogue import base_controller

    module = ControllerModule(base_controller("pid", ENV_ID))
    assert module.stateful and module.state_size == 2
    live = TrackPID()
    env = gym.make(ENV_ID)
    observation, _ = env.reset(seed=3)
    state = torch.zeros(1, 2)
    integrals = []
    for _ in range(60):
        obs = torch.as_tensor(observation, dtype=torch.float32)[None]
        expected = live(obs)
        action, state = module(obs, state)
        assert torch.equal(action, expected) and torch.equal(state, live.integral)
        integrals.append(float(state.abs().max()))
        observation, *_ = env.step(np.array([0.3, -0.2]))  # a fixed push, not the PID: its errors persist
    assert max(integrals) > 0  # the integral did move
    pd = ControllerModule(base_controller("pd", ENV_ID))
    assert not pd.stateful
    assert torch.equal(pd(torch.zeros(3, 12)), TrackPD()(torch.zeros(3, 12)))


def _rmse(controller, condition: dict, episodes: int) -> float:
    env = gym.make(ENV_ID)
    errors = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=700 + episode, options={"condition": condition})
        controller.reset()
        done = False
        while not done:
            action = controller(torch.as_tensor(observation, dtype=torch.float32)[None])[0].numpy()
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        errors.append(info["tracking_error"])
    return float(np.mean(errors))


def test_pd_ff_is_the_pd_plus_the_references_acceleration_fed_forward():
    """``pd-ff`` is the PD exactly where ka is 0 and at an episode's first step; then its feed-forward is ka x the
    change of the desired joint velocity over a step (carried as state), scheduled by the third gain; exported, it
    is a pure function of observation and state that steps as the live controller does; and on the arm, at the
    same kp and kd, it tracks closer than the PD on the nominal arm and under a one-step delay."""
    from rlpilot.controllers import ControllerModule
    from rlpilot.envs.catalogue import base_controller

    env = gym.make(ENV_ID)
    observation, _ = env.reset(seed=5)
    batch = [torch.as_tensor(observation, dtype=torch.float32)[None]]
    for action in ([0.2, -0.1], [-0.3, 0.4], [0.0, 0.1]):
        observation, *_ = env.step(np.array(action))
        batch.append(torch.as_tensor(observation, dtype=torch.float32)[None])
    observations = torch.cat(batch)
    assert torch.equal(TrackPDFF(ka=0.0)(observations), TrackPD()(observations))
    ff, pd = TrackPDFF(kp=1.0, kd=0.05, ka=0.002), TrackPD(kp=1.0, kd=0.05)
    first, state = ff.step(observations, torch.zeros(4, 3))
    _, desired = TrackPD.desired(observations)
    assert torch.equal(first, pd(observations)) and torch.equal(state, torch.cat([desired, torch.ones(4, 1)], -1))
    previous = torch.cat([torch.randn(4, 2), torch.ones(4, 1)], -1)
    fed = pd(observations) + 0.002 * (desired - previous[:, :2]) / 0.02
    assert torch.allclose(ff.step(observations, previous)[0], fed.clamp(-1.0, 1.0), atol=1e-6)
    halved = torch.tensor([[1.0, 1.0, 0.5]]).expand(4, 3)
    fed_half = pd(observations) + 0.001 * (desired - previous[:, :2]) / 0.02
    assert torch.allclose(ff.step(observations, previous, halved)[0], fed_half.clamp(-1.0, 1.0), atol=1e-6)
    module = ControllerModule(base_controller("pd-ff", ENV_ID))
    live, state = TrackPDFF(), torch.zeros(1, 3)
    assert module.stateful and module.state_size == 3
    for row in observations:
        action, state = module(row[None], state)
        assert torch.equal(action, live(row[None])) and torch.equal(state, live.state)
    for condition in ({}, {"action_delay": 1}):
        kp, kd = (2.732, 0.1601) if condition else (19.9, 0.4977)  # compare's robust PD; the nominal arm's oracle
        assert _rmse(TrackPDFF(kp, kd), condition, 6) < 0.9 * _rmse(TrackPD(kp, kd), condition, 6)


def test_last_action_in_the_observation():
    env = gym.make(ENV_ID, obs_last_action=True)
    observation, _ = env.reset(seed=0)
    assert observation.shape == (14,) and list(observation[12:]) == [0.0, 0.0]
    observation, *_ = env.step(np.array([0.3, -2.0]))  # clipped to the box, as the motors get it
    assert np.allclose(observation[12:], [0.3, -1.0])
    assert TrackPD()(torch.as_tensor(observation)[None]).shape == (1, 2)  # the controllers read the first 12


def test_observation_history_pairs_past_motions_with_commands():
    env = gym.make(ENV_ID, obs_last_action=True, obs_history=2)
    first, _ = env.reset(seed=0)
    assert first.shape == (22,) and not first[14:].any()  # no past at the start of an episode
    second, *_ = env.step(np.array([0.3, -0.2]))
    third, *_ = env.step(np.array([-0.1, 0.4]))
    # newest first: (dq, command before) of the previous step, then of the one before it
    assert np.allclose(third[14:18], np.concatenate([second[4:6], second[12:14]]))
    assert np.allclose(third[18:22], np.concatenate([first[4:6], first[12:14]]))
    assert np.allclose(third[12:14], [-0.1, 0.4]) and np.allclose(second[12:14], [0.3, -0.2])
    again, _ = env.reset(seed=1)
    assert not again[14:].any()  # the history does not leak across episodes
    with pytest.raises(ValueError, match="obs_history needs obs_last_action"):
        gym.make(ENV_ID, obs_history=2)


def test_error_peak_holds_the_largest_recent_tracking_error_and_decays():
    env = gym.make(ENV_ID, obs_last_action=True, obs_error_peak=0.5)
    first, _ = env.reset(seed=0)
    assert first.shape == env.observation_space.shape == (15,)
    assert np.isclose(first[14], np.linalg.norm(first[10:12]))  # the first observation: the error itself
    peak = float(first[14])
    for action in ([1.0, -1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]):
        observation, *_ = env.step(np.array(action))
        error = float(np.linalg.norm(observation[10:12]))
        peak = max(0.5 * peak, error)
        assert np.isclose(observation[14], peak, rtol=1e-5)
    env.unwrapped._error_peak = 1.0  # a large error a moment ago: the monitor shows it, decayed once
    observation, *_ = env.step(np.zeros(2))
    assert np.linalg.norm(observation[10:12]) < 0.5 and np.isclose(observation[14], 0.5)
    again, _ = env.reset(seed=1)  # no memory across episodes
    assert np.isclose(again[14], np.linalg.norm(again[10:12]))
    assert TrackPD()(torch.as_tensor(again)[None]).shape == (1, 2)  # the controllers read the first 12
    for bad in (1.0, -0.1, "0.5", True):
        with pytest.raises(ValueError, match="obs_error_peak"):
            gym.make(ENV_ID, obs_error_peak=bad)


def test_randomize_prob_leaves_each_disturbance_nominal_as_often_as_asked():
    env = make(randomize="all", randomize_prob=0.5, friction=2.0)
    tip = env.model.body("fingertip").id
    mass = float(env.model.body_mass[tip])
    present = {name: 0 for name in RANDOMIZE_RANGES}
    nominal_arms = 0
    env.reset(seed=0)
    for _ in range(400):
        env._apply_disturbances()  # what each reset draws (without drawing a reference path 400 times)
        drawn = env.disturbances
        assert drawn["friction"] == 2.0  # a value given is never left out
        assert env.model.body_mass[tip] == pytest.approx(mass + drawn["payload"])  # the model follows
        for name, (low, high) in RANDOMIZE_RANGES.items():
            if name == "friction":
                continue
            assert drawn[name] == NOMINAL[name] or low <= drawn[name] <= high
            present[name] += drawn[name] != NOMINAL[name]
        nominal_arms += all(drawn[n] == NOMINAL[n] for n in RANDOMIZE_RANGES if n != "friction")
    for name, count in present.items():
        if name == "action_delay":  # present half the time, then 0 or 1 steps
            assert 60 <= count <= 140, (name, count)
        elif name != "friction":
            assert 160 <= count <= 240, (name, count)
    # the nominal arm: 4 absent (1/16) and no delay (3/4): 4.7% of 400 = 18.75 (sd 4.2); it is part of training
    assert 4 <= nominal_arms <= 34
    always = make(randomize="all")  # the default, 1: every disturbance drawn, the stream as before
    always.reset(seed=3)
    assert all(always.disturbances[n] != NOMINAL[n] for n in ("payload", "friction", "gain", "obs_noise"))
    assert any("payload       [0, 4]" in line and "(drawn at 0.5 of resets" in line for line in env.describe_dynamics())
    for bad in (0, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="randomize_prob"):
            make(randomize="all", randomize_prob=bad)


def test_residual_penalty_costs_the_squared_policy_action_and_nothing_else():
    from rlpilot.envs import make_env

    def steps(penalty: float) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Two steps from two resets (the same seeds for either penalty): a schedule, then the PD itself."""
        env_cfg = gain_schedule_env(residual_penalty=penalty)
        env = make_env(env_cfg, num_envs=2, seed=4)
        out = []
        for action in ([0.5, -0.25], [0.0, 0.0]):
            step = env.step(env.reset().set("action", torch.tensor([action, action])))["next"]
            out.append((step["reward"].flatten(), step["observation"]))
        return out

    (plain, seen), (plain_base, _) = steps(0.0)
    (paid, seen_paid), (paid_base, _) = steps(0.03)
    assert torch.allclose(plain - paid, torch.full((2,), 0.03 * (0.25 + 0.0625)), atol=1e-6)
    assert torch.equal(seen, seen_paid)  # the same motion: a cost in the reward only
    assert torch.equal(paid_base, plain_base)  # the base controller itself costs nothing
    with pytest.raises(Exception, match="residual_penalty"):
        load_config(algo="ppo", env_id=ENV_ID, overrides=["env.residual_penalty=-1"])
    with pytest.raises(Exception, match="env.residual_penalty acts on a residual policy"):
        load_config(algo="ppo", env_id=ENV_ID, overrides=["env.residual_penalty=0.1"])  # no base controller


def test_residual_gate_keeps_the_base_controller_exactly_inside_the_error_envelope():
    """env.residual_gate: below the gate the motors get the PD's action whatever the policy says; at twice the
    gate and above, the full schedule; the same in the env and in the exported controller."""
    from rlpilot.common.errors import UserError
    from rlpilot.controllers import ControllerModule
    from rlpilot.envs import make_env
    from rlpilot.envs.residual import ResidualLaw, gain_multipliers
    from rlpilot.play.export import DeployedPolicy

    law = ResidualLaw(mode="gains", scale=1.0, gate=0.005)  # the signal: the arm's error monitor, the last float
    peaks = torch.tensor([[0.0], [0.004], [0.005], [0.0075], [0.01], [0.3]])
    assert law.gate_weight(peaks).flatten().tolist() == pytest.approx([0, 0, 0, 0.5, 1, 1])
    env_cfg = gain_schedule_env(residual_gate=0.005, kwargs={"obs_last_action": True, "obs_error_peak": 0.9})
    env = make_env(env_cfg, num_envs=1, seed=2)
    td = env.reset()
    before = td["observation"].clone()
    assert before[0, -1] < 0.005  # the arm starts on the path: inside the envelope
    sent = env.step(td.set("action", torch.tensor([[-1.0, 0.5]])))["next", "observation"][0, 12:14]
    assert torch.allclose(sent, TrackPD()(before[:, :12])[0], atol=1e-6)  # the PD, not the schedule
    opened = make_env(env_cfg, num_envs=1, seed=4)  # this episode starts 7 mm off the path: the gate part open
    td = opened.reset()
    start = td["observation"].clone()
    share = float(start[0, -1] / 0.005 - 1)
    assert 0.2 < share < 0.8
    sent = opened.step(td.set("action", torch.tensor([[-1.0, 0.5]])))["next", "observation"][0, 12:14]
    partial = gain_multipliers(torch.tensor([[-1.0, 0.5]]) * share, 1.0)
    assert torch.allclose(sent, TrackPD()(start[:, :12], partial)[0].clamp(-1, 1), atol=1e-5)
    assert not torch.allclose(sent, TrackPD()(start[:, :12])[0].clamp(-1, 1), atol=1e-4)
    # the exported controller: rows inside the envelope are the PD, rows far outside the scheduled PD
    observations = before.repeat(3, 1)
    observations[:, -1] = torch.tensor([0.002, 0.0075, 0.05])
    deployed = DeployedPolicy(
        lambda obs: torch.tensor([[-1.0, 0.5]]).repeat(len(obs), 1),
        None,
        observations.shape[-1],
        base=ControllerModule(TrackPD()),
        law=law,
        bounds=(-torch.ones(2), torch.ones(2)),
    )
    out = deployed(observations)
    half, full = gain_multipliers(torch.tensor([[-0.5, 0.25], [-1.0, 0.5]]), 1.0)
    assert torch.equal(out[0], TrackPD()(observations[:1])[0].clamp(-1, 1))
    assert torch.allclose(out[1], TrackPD()(observations[1:2], half[None])[0].clamp(-1, 1))
    assert torch.allclose(out[2], TrackPD()(observations[2:], full[None])[0].clamp(-1, 1))
    with pytest.raises(UserError, match="obs_error_peak"):
        make_env(dataclasses.replace(env_cfg, kwargs={"obs_last_action": True}), num_envs=1, seed=2)
    with pytest.raises(UserError, match="obs_error_peak"):  # refused when the config is read, before any env
        load_config("ppo-reacher-track-gated", overrides=["env.kwargs={randomize: all}"])


def test_a_privileged_observation_carries_the_true_dynamics_read_back_from_the_model():
    """obs_privileged: 6 floats before the error monitor, each disturbance 0 at nominal and 1 at the top of its
    range, equal to what the MuJoCo model holds after the reset (mass, friction, damping, gear), the drawn noise
    and the delay line; the monitor stays the last column."""
    nominal = make()
    nominal_mass = float(nominal.model.body_mass[nominal.model.body("fingertip").id])
    nominal_gear = float(nominal.model.actuator_gear[0, 0])
    env = make(randomize="all", randomize_prob=0.5, obs_privileged=True, obs_error_peak=0.9)
    assert env.observation_space.shape == (12 + 6 + 1,)
    seen = set()
    for seed in range(40):
        observation, _ = env.reset(seed=seed)
        model = env.model
        payload = float(model.body_mass[model.body("fingertip").id]) - nominal_mass
        expected = [
            payload / RANDOMIZE_RANGES["payload"][1],
            float(model.dof_frictionloss[0]) / RANDOMIZE_RANGES["friction"][1],
            (float(model.dof_damping[1]) - 1.0) / (RANDOMIZE_RANGES["damping"][1] - 1.0),
            (float(model.actuator_gear[1, 0]) / nominal_gear - 1.0) / (RANDOMIZE_RANGES["gain"][1] - 1.0),
            env.disturbances["obs_noise"] / RANDOMIZE_RANGES["obs_noise"][1],
            float(env.disturbances["action_delay"]),
        ]
        np.testing.assert_allclose(observation[12:18], expected, rtol=1e-5, atol=1e-6)
        seen.add(tuple(np.asarray(expected) == 0))
        for _ in range(3):  # the same all episode; the monitor stays last
            observation, *_ = env.step(np.zeros(2))
            np.testing.assert_allclose(observation[12:18], expected, rtol=1e-5, atol=1e-6)
        assert observation[-1] >= np.linalg.norm(observation[10:12]) - 1e-6  # the peak-hold of the error
    assert len(seen) > 10  # disturbances present and absent in many combinations
    with pytest.raises(ValueError, match="obs_privileged"):
        make(obs_privileged="yes")


def test_observation_history_across_a_partial_reset_of_the_vector_env():
    """In rlpilot's vector env a partial reset (TorchRL's ``_reset`` mask) empties the history of the envs it resets
    and only theirs: the others keep pairing their past motions with their commands."""
    from tensordict import TensorDict

    from rlpilot.config import EnvConfig
    from rlpilot.envs import make_env

    kwargs = {"obs_last_action": True, "obs_history": 2}
    env = make_env(EnvConfig(id=ENV_ID, backend="sync", normalize_obs=False, kwargs=kwargs), num_envs=3, seed=0)
    td = env.reset()
    assert not td["observation"][:, 14:].any()
    for command in ([0.3, -0.2], [-0.1, 0.4]):
        td["action"] = torch.tensor([command] * 3, dtype=torch.float32)
        td = env.step(td)["next"].exclude("reward", "done", "terminated", "truncated")
    before = td["observation"].clone()
    assert before[:, 14:].abs().sum(-1).gt(0).all()
    mask = torch.tensor([[False], [True], [False]])
    td = env.reset(td.update(TensorDict({"_reset": mask}, batch_size=[3])))
    after = td["observation"].clone()
    assert not after[1, 14:].any()  # the reset env starts with no past
    assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])  # the others are untouched
    td["action"] = torch.tensor([[0.5, 0.1]] * 3)
    stepped = env.step(td)["next", "observation"]
    # the reset env's history now holds exactly its one step since the reset (its motion, no command yet), then zeros
    assert torch.allclose(stepped[1, 14:18], torch.cat([after[1, 4:6], torch.zeros(2)]))
    assert not stepped[1, 18:22].any()
    assert stepped[0, 18:22].abs().sum() > 0  # an env that kept its past still has two steps of it
    env.close()


def test_history_state_rebuilds_the_envs_observation_from_the_current_one_and_its_state():
    """The history as a state (what ``rlpilot export`` carries for an ``obs_history`` run): from the observation
    without the history columns and the state it returned, the full observation is the env's, step after step
    and after a reset, with the privileged floats and the error monitor after it; the env without the history
    measures exactly the reduced observation."""
    from rlpilot.envs.arm.history import HistoryPolicy, HistoryState

    kwargs = {"obs_last_action": True, "obs_privileged": True, "obs_error_peak": 0.9, "randomize": "all"}
    env, deployed = gym.make(ENV_ID, obs_history=3, **kwargs), gym.make(ENV_ID, obs_history=0, **kwargs)
    history = HistoryState(3, env.observation_space.shape[0])
    assert (history.state_size, history.reduced_size) == (12, deployed.observation_space.shape[0]) == (12, 21)
    rebuild = HistoryPolicy(torch.nn.Identity(), history)  # the "policy" returns the observation it was given
    actions = np.random.default_rng(0).uniform(-1, 1, size=(30, 2))
    for seed in (0, 1):
        observation, _ = env.reset(seed=seed)
        measured, _ = deployed.reset(seed=seed)
        state = torch.zeros(1, history.state_size)  # zeros at an episode's start
        for action in actions:
            reduced = history.reduce(torch.as_tensor(observation)[None])
            assert torch.equal(reduced[0], torch.as_tensor(measured))
            full, state = rebuild(reduced, state)
            assert torch.equal(full[0], torch.as_tensor(observation))
            observation, *_ = env.step(action)
            measured, *_ = deployed.step(action)
        assert state.abs().sum() > 0
