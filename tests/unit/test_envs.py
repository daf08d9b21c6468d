import numpy as np
import pytest
import torch
from torchrl.data import Bounded, Categorical
from torchrl.envs import DoubleToFloat, ObservationNorm, check_env_specs

from rlpilot.common.errors import UserError
from rlpilot.config import EnvConfig
from rlpilot.envs import make_env, make_vector_env, observation_reader
from rlpilot.envs.gym_vector import CartPoleVectorEnvNoAutoreset


def test_cartpole_uses_the_numpy_vector_env_with_categorical_actions():
    env = make_env(EnvConfig(id="CartPole-v1", num_envs=4), seed=0)
    assert isinstance(env.base_env.vector_env, CartPoleVectorEnvNoAutoreset)
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == (4,)
    assert env.batch_size == (4,)
    check_env_specs(env, seed=0)


def test_pendulum_has_a_bounded_continuous_action():
    env = make_env(EnvConfig(id="Pendulum-v1", num_envs=3), seed=0)
    assert isinstance(env.action_spec, Bounded)
    assert env.action_spec.space.high.max().item() == pytest.approx(2.0)
    check_env_specs(env, seed=0)


def test_partial_reset_only_touches_finished_envs():
    venv = CartPoleVectorEnvNoAutoreset(num_envs=3, max_episode_steps=500)
    obs, _ = venv.reset(seed=1)
    for _ in range(5):
        obs, *_ = venv.step(np.array([1, 1, 1]))
    again, _ = venv.reset(options={"reset_mask": np.array([False, True, False])})
    assert np.array_equal(again[[0, 2]], obs[[0, 2]])
    assert np.abs(again[1]).max() <= 0.05 and not np.array_equal(again[1], obs[1])
    assert venv.steps.tolist() == [5, 0, 5]


def test_no_autoreset_step_reward_after_done():
    """Upstream NEXT_STEP autoreset would return reward 0 for the step after a termination."""
    venv = CartPoleVectorEnvNoAutoreset(num_envs=1, max_episode_steps=3)
    venv.reset(seed=0)
    rewards, truncs = [], []
    for _ in range(3):
        _, reward, _, trunc, _ = venv.step(np.array([0]))
        rewards.append(reward[0])
        truncs.append(trunc[0])
    assert truncs == [False, False, True]
    venv.reset(options={"reset_mask": np.array([True])})
    _, reward, *_ = venv.step(np.array([0]))
    assert rewards == [1.0, 1.0, 1.0] and reward[0] == 1.0


def test_same_seed_same_rollout_and_different_seed_differs():
    def rollout(seed):
        torch.manual_seed(0)
        env = make_env(EnvConfig(id="CartPole-v1", num_envs=2), seed=seed)
        return env.rollout(50, break_when_any_done=False)["next", "observation"]

    assert torch.equal(rollout(3), rollout(3))
    assert not torch.equal(rollout(3), rollout(4))


def test_fast_observation_path_matches_the_torchrl_chain():
    """BatchCollector's observation_reader must produce what the TorchRL transform chain produces."""
    env = make_env(EnvConfig(id="Pendulum-v1", num_envs=2, normalize_obs=True), seed=0)
    norm = next(t for t in env.transform if isinstance(t, ObservationNorm))
    assert norm.loc.shape == (3,) and (norm.scale > 0).all()
    td = env.reset()
    raw = np.stack([e.unwrapped._get_obs() for e in env.base_env.vector_env.envs])
    torch.testing.assert_close(observation_reader(env)(raw), td["observation"])


def test_dict_and_float64_observations_are_concatenated_and_cast():
    cfg = EnvConfig(id="envs_for_tests:DictObsEnv", num_envs=2)
    env = make_env(cfg, seed=0)
    assert any(isinstance(t, DoubleToFloat) for t in env.transform)
    td = env.reset()
    assert td["observation"].shape == (2, 3) and td["observation"].dtype == torch.float32
    assert td["position"].shape == (2, 2)  # the keys are kept too
    raw, _ = make_vector_env(cfg, 2).reset(seed=0)
    torch.testing.assert_close(observation_reader(env)(raw), td["observation"])
    check_env_specs(env, seed=0)


def test_unknown_env_gives_close_matches():
    with pytest.raises(UserError, match="unknown environment 'CartPol-v1'.*CartPole-v1"):
        make_env(EnvConfig(id="CartPol-v1"))


def test_unknown_module_is_one_clear_error():
    with pytest.raises(UserError, match="cannot import module 'no_such_pkg.envs'"):
        make_env(EnvConfig(id="no_such_pkg.envs:Thing"))


def test_numpy_backend_requires_an_implementation():
    with pytest.raises(UserError, match="no numpy-vectorised implementation"):
        make_env(EnvConfig(id="Pendulum-v1", backend="numpy"))


@pytest.mark.parametrize("envs", [7, 1])
@pytest.mark.parametrize("integrator, sutton_barto", [("euler", False), ("semi-implicit euler", True)])
def test_the_lean_cartpole_step_is_upstreams_step(integrator, sutton_barto, envs):
    """CartPoleVectorEnvNoAutoreset.step skips upstream's action assert and NEXT_STEP resets (none in
    DISABLED mode): the same observations, rewards and flags, bit for bit, and the same random stream; one env
    steps in Python floats (``_step_one``), with the same results."""
    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    class Upstream(CartPoleVectorEnvNoAutoreset):
        def step(self, action):
            self.prev_done[:] = False
            return CartPoleVectorEnv.step(self, action)

    ours, upstream = (
        cls(num_envs=envs, max_episode_steps=25, sutton_barto_reward=sutton_barto)
        for cls in (CartPoleVectorEnvNoAutoreset, Upstream)
    )
    for env in (ours, upstream):
        env.kinematics_integrator = integrator
        env.reset(seed=5)
    actions = np.random.default_rng(0).integers(0, 2, size=(2000 * 7 // envs, envs))
    terminations = truncations = 0
    for action in actions:
        got, want = ours.step(action), upstream.step(action)
        for a, b in zip(got[:4], want[:4]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        done = want[2] | want[3]
        terminations, truncations = terminations + int(want[2].sum()), truncations + int(want[3].sum())
        if done.any():
            assert np.array_equal(
                ours.reset(options={"reset_mask": done})[0], upstream.reset(options={"reset_mask": done})[0]
            )
    assert terminations > 100 and truncations > 100  # both ways an episode ends, with partial resets
