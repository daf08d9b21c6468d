"""The pixel chain: TorchRL transforms in the env, the same frames on the fast path, CNNs sized from specs."""

import importlib.util

import numpy as np
import pytest
import torch
from torchrl.envs import CatFrames, GrayScale, Resize, ToTensorImage

from rlpilot.common.errors import UserError
from rlpilot.config import EnvConfig, ModelConfig
from rlpilot.control.models import ConvEncoder, network
from rlpilot.envs import make_env, observation_reader

if importlib.util.find_spec("minatar") is None:  # looked up, not imported here (it imports seaborn, scipy, pandas)
    pytest.skip("the pixels extra: pip install 'rlpilot[pixels]'", allow_module_level=True)

MINATAR = EnvConfig(id="MinAtar/Breakout-v1", num_envs=4, frame_stack=3)


def _fast_path_matches_torchrl(cfg: EnvConfig, steps: int) -> int:
    """Steps the TorchRL env (``step_and_maybe_reset``: CatFrames sees partial ``_reset`` masks) and
    replays the same raw frames through the fast path; returns how many partial resets happened."""
    env = make_env(cfg, seed=3)
    read = observation_reader(env)
    vector_env = env.base_env.vector_env
    torch.manual_seed(0)
    td = env.reset()
    expected = read(np.stack([e.unwrapped.game.state() for e in vector_env.envs]), reset=True)
    torch.testing.assert_close(expected, td["observation"])
    partial_resets = 0
    for _ in range(steps):
        td["action"] = env.action_spec.rand()
        td, td_next = env.step_and_maybe_reset(td)
        raw_next = np.stack([e.unwrapped.game.state() for e in vector_env.envs])
        done = td["next", "done"].view(-1).numpy()
        if not done.any():
            torch.testing.assert_close(read(raw_next), td["next", "observation"])
        else:  # the terminal frame was replaced by the reset already: compare what we can, then the reset
            partial_resets += int(not done.all())
            read(raw_next)  # our stacks advance (the done envs' stacks are refilled just below)
            observation = read(raw_next, reset=done)
            torch.testing.assert_close(observation[~done], td_next["observation"][~done])
            torch.testing.assert_close(observation[done], td_next["observation"][done])
        td = td_next
    env.close()
    return partial_resets


def test_fast_path_frame_stacks_match_torchrl_catframes_across_partial_resets():
    assert _fast_path_matches_torchrl(MINATAR, steps=300) > 0


def test_pixel_chain_is_built_from_torchrl_transforms_and_sized_from_the_spec():
    env = make_env(EnvConfig(id="CarRacing-v3", num_envs=2, grayscale=True, frame_size=64, frame_stack=2), seed=0)
    kinds = [type(t) for t in env.transform]
    assert kinds[:4] == [ToTensorImage, GrayScale, Resize, CatFrames]
    assert tuple(env.observation_spec["observation"].shape) == (2, 2, 64, 64)
    td = env.reset()
    assert td["observation"].dtype == torch.float32 and 0 <= td["observation"].min() <= td["observation"].max() <= 1
    net = network(env.observation_spec, 5, ModelConfig(hidden_sizes=[32]))
    assert isinstance(net[0], ConvEncoder) and net[0].convs[0].in_channels == 2
    assert net(td["observation"]).shape == (2, 5)
    assert net(torch.zeros(3, 7, 2, 64, 64)).shape == (3, 7, 5)  # leading batch dims (GAE over [envs, time])
    env.close()


def test_small_frames_get_the_minatar_cnn_and_bool_frames_stay_zero_one():
    env = make_env(EnvConfig(id="MinAtar/Breakout-v1", num_envs=2), seed=0)
    td = env.reset()
    assert set(td["observation"].unique().tolist()) <= {0.0, 1.0} and td["observation"].max() == 1.0
    net = network(env.observation_spec, 3, ModelConfig(hidden_sizes=[16]))
    assert [m.kernel_size for m in net[0].convs if isinstance(m, torch.nn.Conv2d)] == [(3, 3)]
    with pytest.raises(UserError, match="model.cnn_layers do not fit"):
        network(env.observation_spec, 3, ModelConfig(cnn_layers=[[8, 12, 1]]))
    with pytest.raises(UserError, match="needs image observations"):
        network(make_env(EnvConfig(id="CartPole-v1")).observation_spec, 2, ModelConfig(encoder="cnn"))
    with pytest.raises(UserError, match="normalize_obs"):
        make_env(EnvConfig(id="MinAtar/Breakout-v1", normalize_obs=True))


def test_async_backend_gives_the_same_frames_as_sync():
    def frames(backend):
        env = make_env(EnvConfig(id="MinAtar/Breakout-v1", num_envs=2, backend=backend), seed=5)
        vector_env = env.base_env.vector_env
        vector_env.action_space.seed(5)
        raw, _ = vector_env.reset(seed=5)
        seen = [raw.copy()]
        for _ in range(20):
            raw, _, terminated, truncated, _ = vector_env.step(np.array([1, 2]))
            seen.append(raw.copy())
            if (terminated | truncated).any():
                raw, _ = vector_env.reset(options={"reset_mask": terminated | truncated})
        env.close()
        return np.stack(seen)

    np.testing.assert_array_equal(frames("async"), frames("sync"))


def test_video_frames_from_float_renders_become_visible_uint8():
    from rlpilot.play.episodes import video_frame

    frame = np.zeros((10, 10, 3))
    frame[2, 3] = (1.0, 0.5, 0.0)  # MinAtar renders float RGB in [0, 1], 10x10
    out = video_frame(frame)
    assert out.dtype == np.uint8 and out.shape == (160, 160, 3)
    assert out[2 * 16, 3 * 16].tolist() == [255, 128, 0] and out[0, 0].tolist() == [0, 0, 0]
    big = np.full((96, 96, 3), 7, dtype=np.uint8)
    assert video_frame(big).shape == (96, 96, 3)  # 160 // 96 = 1: left as it is
