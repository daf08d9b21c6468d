"""Native batched envs reproduce gymnasium: transitions, rewards, flags, time limits, reset distributions."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from torchrl.envs.utils import check_env_specs

from rlpilot.envs.native import NATIVE_ENVS, NativeEnv, gymnasium_view, make_native_vector_env

ENV_IDS = ["CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0"]
TRANSITIONS = 10_000

# gymnasium's reset distributions: independent uniforms on these bounds (MountainCar velocity: 0)
RESET_BOUNDS = {
    "CartPole-v1": ([-0.05] * 4, [0.05] * 4),
    "Acrobot-v1": ([-0.1] * 4, [0.1] * 4),
    "Pendulum-v1": ([-np.pi, -1.0], [np.pi, 1.0]),
    "MountainCar-v0": ([-0.6, 0.0], [-0.4, 0.0]),
    "MountainCarContinuous-v0": ([-0.6, 0.0], [-0.4, 0.0]),
}


# boxes of states to draw from directly (besides random-policy episodes): every branch of the
# dynamics is hit (termination, Acrobot's angle wrapping and speed bounds, MountainCar's walls)
STATE_BOXES = {
    "CartPole-v1": [2.5, 3.0, 0.25, 3.5],
    "Acrobot-v1": [np.pi, np.pi, 4 * np.pi, 9 * np.pi],
    "Pendulum-v1": [2 * np.pi, 8.0],
    "MountainCar-v0": ([-1.2, -0.07], [0.6, 0.07]),
    "MountainCarContinuous-v0": ([-1.2, -0.07], [0.6, 0.07]),
}


def gym_state(env: gym.Env) -> np.ndarray:
    return np.asarray(env.unwrapped.state, dtype=np.float64).copy()


def random_action(space: gym.Space, rng: np.random.Generator):
    if isinstance(space, gym.spaces.Discrete):
        return int(rng.integers(space.n))
    # beyond the bounds too: both sides must clip the same way
    return rng.uniform(space.low * 1.5, space.high * 1.5).astype(np.float32)


def as_sent(action, space: gym.Space):
    """What rlpilot sends a gymnasium env (``to_numpy_action`` clips Box actions); native envs clip themselves."""
    return np.clip(action, space.low, space.high) if isinstance(space, gym.spaces.Box) else action


def gym_transitions(env_id: str, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """(state, action) pairs along random-policy episodes and what gymnasium does with each."""
    env = gym.make(env_id).unwrapped
    limit = gym.spec(env_id).max_episode_steps
    rng = np.random.default_rng(seed)
    rows = {k: [] for k in ("state", "action", "next_state", "next_obs", "reward", "terminated")}
    env.reset(seed=seed)
    steps = 0
    box = STATE_BOXES[env_id]
    low, high = (np.array(box[0]), np.array(box[1])) if isinstance(box, tuple) else (-np.array(box), np.array(box))
    while len(rows["state"]) < count:
        action = random_action(env.action_space, rng)
        if len(rows["state"]) >= count // 2:  # second half: states drawn from the box
            env.state = rng.uniform(low, high)
        rows["state"].append(gym_state(env))
        obs, reward, terminated, _, _ = env.step(as_sent(action, env.action_space))
        rows["action"].append(np.asarray(action))
        rows["next_state"].append(gym_state(env))
        rows["next_obs"].append(obs)
        rows["reward"].append(reward)
        rows["terminated"].append(terminated)
        steps += 1
        if terminated or steps >= limit:
            env.reset()
            steps = 0
    return {k: np.stack([np.asarray(v) for v in values]) for k, values in rows.items()}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_transitions_match_gymnasium(env_id):
    data = gym_transitions(env_id, TRANSITIONS)
    native = make_native_vector_env(env_id, TRANSITIONS)
    native.set_state(data["state"])
    obs, reward, terminated, truncated, _ = native.step(torch.as_tensor(data["action"]))
    assert native.state.numpy() == pytest.approx(data["next_state"], abs=1e-5, rel=0)
    assert obs.numpy() == pytest.approx(data["next_obs"], abs=1e-5, rel=0)
    assert obs.dtype == torch.float32 and reward.dtype == torch.float32
    # rewards: identical (float32 is what rlpilot stores; Pendulum's costs are float64 in gymnasium)
    np.testing.assert_array_equal(reward.numpy(), data["reward"].astype(np.float32))
    np.testing.assert_array_equal(terminated.numpy(), data["terminated"])
    assert data["terminated"].any() or env_id == "Pendulum-v1"
    assert not truncated.any()  # one step into each episode's clock


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episodes_with_time_limit_match_gymnasium(env_id):
    """Step by step beside gymnasium's TimeLimit: same flags (truncation included) and rewards."""
    env = gym.make(env_id)
    native = make_native_vector_env(env_id, 1)
    rng = np.random.default_rng(1)
    limit = gym.spec(env_id).max_episode_steps
    env.reset(seed=1)
    native.set_state(gym_state(env))
    truncations = 0
    for _ in range(limit * 2 + 7):
        action = random_action(env.action_space, rng)
        native.set_state(gym_state(env))  # no drift: each step starts from gymnasium's state
        obs, reward, terminated, truncated, _ = env.step(as_sent(action, env.action_space))
        n_obs, n_reward, n_terminated, n_truncated, _ = native.step(torch.as_tensor(np.asarray(action)).view(1, -1))
        assert n_obs[0].numpy() == pytest.approx(obs, abs=1e-5, rel=0)
        assert float(n_reward[0]) == np.float32(reward)
        assert (bool(n_terminated[0]), bool(n_truncated[0])) == (terminated, truncated)
        truncations += truncated
        if terminated or truncated:
            env.reset()
            native.reset(options={"reset_mask": torch.ones(1, dtype=torch.bool)})
    assert truncations >= 1 or env_id in ("CartPole-v1", "Acrobot-v1")


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    values = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), values, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), values, side="right") / len(b)
    return float(np.abs(cdf_a - cdf_b).max())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_distribution_matches_gymnasium(env_id):
    native = make_native_vector_env(env_id, 10_000)
    native.reset(seed=0)
    states = native.state.numpy()
    low, high = (np.array(b) for b in RESET_BOUNDS[env_id])
    assert (states >= low).all() and (states <= high).all()
    env = gym.make(env_id).unwrapped
    reference = []
    for seed in range(2000):
        env.reset(seed=seed)
        reference.append(gym_state(env))
    reference = np.stack(reference)
    assert (reference >= low).all() and (reference <= high).all()  # the bounds above are gymnasium's
    n, m = len(states), len(reference)
    critical = 1.949 * np.sqrt((n + m) / (n * m))  # alpha = 0.001
    for dim in range(states.shape[1]):
        if low[dim] == high[dim]:
            np.testing.assert_array_equal(states[:, dim], low[dim])
            continue
        assert ks_statistic(states[:, dim], reference[:, dim]) < critical, f"state[{dim}]"
    # and not a degenerate draw: the native draw spans the interval
    spread = states.max(0) - states.min(0)
    assert (spread >= 0.99 * (high - low)).all()


def test_partial_reset_touches_only_masked_envs():
    native = make_native_vector_env("CartPole-v1", 6)
    native.reset(seed=3)
    for _ in range(5):
        native.step(torch.ones(6, dtype=torch.long))
    before = native.state.clone()
    mask = torch.tensor([True, False, False, True, False, False])
    native.reset(options={"reset_mask": mask})
    assert torch.equal(native.state[~mask], before[~mask])
    assert not torch.equal(native.state[mask], before[mask])
    assert native.steps.tolist() == [0, 5, 5, 0, 5, 5]


def test_same_seed_same_episodes():
    a, b = (make_native_vector_env("Acrobot-v1", 4) for _ in range(2))
    assert torch.equal(a.reset(seed=7)[0], b.reset(seed=7)[0])
    assert not torch.equal(a.reset(seed=8)[0], b.reset(seed=7)[0])


@pytest.mark.parametrize("env_id", sorted(NATIVE_ENVS))
def test_gymnasium_env_checker_passes_on_a_single_env_view(env_id):
    check_env(gymnasium_view(env_id), skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_torchrl_check_env_specs(env_id):
    env = NativeEnv(make_native_vector_env(env_id, 8))
    env.set_seed(0)
    check_env_specs(env)
    gym_spaces = gym.make(env_id)
    assert env.vector_env.single_observation_space == gym_spaces.observation_space
    assert env.vector_env.single_action_space == gym_spaces.action_space


def test_kwargs_are_checked():
    assert make_native_vector_env("Pendulum-v1", 2, kwargs={"g": 9.81}).g == 9.81
    from rlpilot.common.errors import UserError

    with pytest.raises(UserError, match="does not take env.kwargs"):
        make_native_vector_env("Acrobot-v1", 2, kwargs={"torque_noise": 1})
    with pytest.raises(UserError, match="no native implementation"):
        make_native_vector_env("LunarLander-v3", 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_native_env_steps_on_cuda():
    env = NativeEnv(make_native_vector_env("CartPole-v1", 1024, device="cuda"))
    env.set_seed(0)
    rollout = env.rollout(100, break_when_any_done=False)
    assert rollout.device.type == "cuda" and rollout.get(("next", "done")).any()
