"""``make_env``: any gymnasium id or user class → a batched, seeded TorchRL env with the right transforms.

The TorchRL env (``TransformedEnv`` over :class:`GymVectorEnv`) is the contract: specs, ``check``,
``rollout`` and users' own TorchRL code see it. Training collects through
:class:`rlpilot.control.collect.BatchCollector`, which steps the same gymnasium vector env directly and
applies the same observation transforms (:func:`observation_reader`) once per step on plain tensors;
a test checks both paths produce identical observations.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace

import gymnasium as gym
import numpy as np
import torch
from gymnasium.error import DependencyNotInstalled
from gymnasium.vector import AutoresetMode
from torchrl.envs import (
    CatFrames,
    CatTensors,
    Compose,
    DoubleToFloat,
    GrayScale,
    ObservationNorm,
    Resize,
    RewardScaling,
    RewardSum,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
)

from rlpilot.common.bounds import FLOAT_BYTES, Allocation
from rlpilot.common.errors import UserError
from rlpilot.conditions import Declared, UnderCondition, require
from rlpilot.config.sections import EnvConfig
from rlpilot.envs.gym_vector import CartPoleVectorEnvNoAutoreset, GymVectorEnv
from rlpilot.envs.history import ObservationHistory, history_problem
from rlpilot.envs.native import NativeEnv, make_native_vector_env
from rlpilot.envs.pixels import FrameReader, frame_stack_transform, frame_transforms, is_image_spec
from rlpilot.registry import register_namespace, resolve_env

# gymnasium ids with a numpy-vectorised implementation that can run without autoreset.
NUMPY_VECTOR_ENVS: dict[str, type] = {
    "CartPole-v0": CartPoleVectorEnvNoAutoreset,
    "CartPole-v1": CartPoleVectorEnvNoAutoreset,
}

# gymnasium raises DependencyNotInstalled for these families; the extra that brings them.
EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "pygame": "classic-control", "ale_py": "atari"}
# those rlpilot declares itself (pyproject.toml), so the install line pins what rlpilot was tested with
RLPILOT_EXTRAS = {"box2d", "mujoco"}


def mujoco_warnings_to_python(entry_point: object = None) -> None:
    """MuJoCo appends its warnings to ``MUJOCO_LOG.TXT`` in the working directory (HalfCheetah-v5's model, whose
    ``settotalmass`` MuJoCo 4 deprecates, at every build): rlpilot writes nothing outside a run directory, so once
    MuJoCo is loaded (or about to be, for an ``entry_point`` in a MuJoCo module) they become Python warnings, a
    deprecation hidden as Python hides those, anything else (an unstable simulation) a ``RuntimeWarning``."""
    global _MUJOCO_ROUTED
    if _MUJOCO_ROUTED or (sys.modules.get("mujoco") is None and "mujoco" not in str(entry_point)):
        return
    try:
        import mujoco
    except ImportError:  # not installed: the env's own import says which extra brings it
        return

    def warn(text: str) -> None:
        if "deprecated" not in text:  # a deprecation in a model file is its author's to fix, not the user's
            warnings.warn(f"MuJoCo: {text}", RuntimeWarning, stacklevel=2)

    mujoco.set_mju_user_warning(warn)
    _MUJOCO_ROUTED = True


_MUJOCO_ROUTED = False


def _make_single(env_cfg: EnvConfig, sample: dict | None = None) -> Callable[[], gym.Env]:
    """A function building one env of ``env_cfg`` (``sample``: the declared ranges ``env.condition_sampled`` draws
    conditions from)."""
    env_class, env_id = resolve_env(env_cfg.id)

    def thunk() -> gym.Env:
        if env_class is not None:
            mujoco_warnings_to_python(env_class.__module__)
            env = env_class(**env_cfg.kwargs)
            if env_cfg.max_episode_steps is not None:
                env = gym.wrappers.TimeLimit(env, env_cfg.max_episode_steps)
        else:
            register_namespace(env_id)  # again here: async workers may start without the parent's registry
            mujoco_warnings_to_python(getattr(gym.envs.registry.get(env_id), "entry_point", None))
            env = gym.make(env_id, max_episode_steps=env_cfg.max_episode_steps, **env_cfg.kwargs)
        mujoco_warnings_to_python()  # an env that loaded MuJoCo itself: its next builds
        if env_cfg.frame_skip > 1:
            env = gym.wrappers.MaxAndSkipObservation(env, skip=env_cfg.frame_skip)
        if env_cfg.condition or sample:
            env = UnderCondition(env, env_cfg.condition, sample)
        return env

    return thunk


def env_class(env_cfg: EnvConfig) -> type | None:
    """The class ``env_cfg``'s env is built from (a user's ``module:Class``, or a registered id's entry point), for
    hooks it declares on the class (``export_state``: :func:`rlpilot.play.export.carried_state`); None where the
    entry point is a function."""
    found, env_id = resolve_env(env_cfg.id)
    if found is None:
        entry_point = gym.spec(env_id).entry_point
        found = gym.envs.registration.load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return found if isinstance(found, type) else None


def declaration(env_cfg: EnvConfig, *, option: str = "--condition") -> Declared:
    """What ``env_cfg``'s env declares (:mod:`rlpilot.conditions`), read from one env built and closed here; one line
    when it declares no conditions."""
    with construction_errors(env_cfg):
        probe = _make_single(replace(env_cfg, condition={}, condition_sampled=False))()
    try:
        return require(probe, env_cfg.id, option=option)
    finally:
        probe.close()


def make_vector_env(env_cfg: EnvConfig, num_envs: int, conditions: list[dict] | None = None) -> gym.vector.VectorEnv:
    """A gymnasium vector env with autoreset DISABLED (resets are driven by the caller).

    ``env.backend=native``: a :class:`rlpilot.envs.native.NativeVectorEnv` (same API, torch tensors).
    ``conditions``: one condition per env (``num_envs`` of them), env ``i`` playing every episode under
    ``conditions[i]`` over ``env.condition`` (a teacher's table of plants, :mod:`rlpilot.adapt`)."""
    numpy_class = NUMPY_VECTOR_ENVS.get(env_cfg.id)
    backend = env_cfg.backend
    conditioned = bool(env_cfg.condition) or env_cfg.condition_sampled or bool(conditions)
    if conditioned and backend in ("native", "numpy"):
        raise UserError(
            f"env.condition: env.backend={backend} plays {env_cfg.id} without conditions; use env.backend=sync"
        )
    if env_cfg.history and backend in ("native", "numpy"):
        raise UserError(f"env.history: env.backend={backend} has no history; use env.backend=sync")
    if backend == "native":  # torch tensors on the CPU; make_env puts them on the run's device
        return make_native_vector_env(
            env_cfg.id, num_envs, max_episode_steps=env_cfg.max_episode_steps, kwargs=env_cfg.kwargs
        )
    if backend == "numpy" and numpy_class is None:
        raise UserError(
            f"env.backend=numpy: no numpy-vectorised implementation of '{env_cfg.id}' "
            f"(available: {', '.join(NUMPY_VECTOR_ENVS)}); use env.backend=sync"
        )
    with construction_errors(env_cfg):
        numpy_ok = not env_cfg.kwargs and not conditioned and not env_cfg.history
        if numpy_class is not None and backend in ("auto", "numpy") and numpy_ok:
            max_steps = env_cfg.max_episode_steps or gym.spec(env_cfg.id).max_episode_steps
            return numpy_class(num_envs=num_envs, max_episode_steps=max_steps)
        sample = None
        if conditioned:  # names and values checked against what the env declares, once, here
            declared = declaration(env_cfg, option="env.condition")
            env_cfg = replace(env_cfg, condition=declared.checked(env_cfg.condition))
            if env_cfg.condition_sampled:
                sample = {k: v for k, v in declared.ranges.items() if k not in env_cfg.condition}
        if conditions is None:
            thunks = [_make_single(env_cfg, sample)] * num_envs
        else:
            if len(conditions) != num_envs:
                raise ValueError(f"{len(conditions)} conditions for {num_envs} envs")
            own = [declared.checked(dict(c), option="condition") for c in conditions]
            thunks = [_make_single(replace(env_cfg, condition={**env_cfg.condition, **c}), sample) for c in own]
        if backend == "async":
            thunks[0]().close()  # a missing dependency fails here, with its own message, not in a worker
            # fork, not TorchRL's global "spawn": a spawned worker re-imports torch and torchrl before its
            # first step (24 s to start 2 MinAtar workers on this machine, 3 s forked); workers run
            # only the gymnasium env, never torch.
            vector_env = gym.vector.AsyncVectorEnv(thunks, autoreset_mode=AutoresetMode.DISABLED, context="fork")
        else:
            vector_env = gym.vector.SyncVectorEnv(thunks, autoreset_mode=AutoresetMode.DISABLED)
    check_action_space(vector_env.single_action_space, env_cfg.id, close=vector_env.close)
    check_observation_space(vector_env.single_observation_space, env_cfg.id, close=vector_env.close)
    if env_cfg.history:  # under the base controller: it records what the plant received
        if problem := history_problem(vector_env.single_observation_space, vector_env.single_action_space):
            vector_env.close()
            raise UserError(problem)
        vector_env = ObservationHistory(vector_env, env_cfg.history)
    if env_cfg.base_controller != "none":
        vector_env = residual_vector_env(vector_env, env_cfg)
    return vector_env


def residual_vector_env(vector_env: gym.vector.VectorEnv, env_cfg: EnvConfig) -> gym.vector.VectorEnv:
    """``env.base_controller`` inside the vector env (residual RL), the controller checked against the env's
    spaces first (one line, the env closed, where it does not fit)."""
    from rlpilot.controllers import check_controller
    from rlpilot.envs.catalogue import base_controller
    from rlpilot.envs.residual import ResidualLaw, ResidualVectorEnv, averaged

    try:
        if problem := env_cfg.gate_problem():
            raise UserError(problem)
        controller = base_controller(env_cfg.base_controller, env_cfg.id, env_cfg.base_controller_kwargs)
        check_controller(
            controller,
            env_cfg.base_controller,
            vector_env.single_observation_space,
            vector_env.single_action_space,
            gains=env_cfg.residual_mode == "gains",
        )
        if env_cfg.residual_mode == "gains":
            controller = averaged(
                controller,
                env_cfg.gain_average,
                weighted=env_cfg.gain_weights,
                excitation=env_cfg.gain_excitation,
                action_size=int(np.prod(vector_env.single_action_space.shape)),
            )
        appended = vector_env.appended if isinstance(vector_env, ObservationHistory) else 0
        law = ResidualLaw.from_config(env_cfg, controller, vector_env.single_observation_space, appended=appended)
        return ResidualVectorEnv(vector_env, controller, law, env_cfg.base_controller)
    except UserError:
        vector_env.close()
        raise


@contextmanager
def construction_errors(env_cfg: EnvConfig):
    """Whatever building ``env_cfg``'s env raises (a missing extra, bad kwargs, a user constructor that
    raises) becomes one :class:`UserError` naming the env."""
    try:
        yield
    except UserError:
        raise
    except DependencyNotInstalled as exc:
        text = str(exc)
        extra = next((name for key, name in EXTRAS.items() if key in text.lower()), None)
        if extra in RLPILOT_EXTRAS:
            fix = f"pip install 'rlpilot[{extra}]'"
        else:
            fix = f'pip install "gymnasium[{extra}]"' if extra else "install the missing package"
        raise UserError(f"'{env_cfg.id}' needs an optional dependency: {fix}") from None
    except TypeError as exc:
        raise UserError(f"cannot construct '{env_cfg.id}' with env.kwargs={env_cfg.kwargs}: {exc}") from None
    except MemoryError:
        raise UserError(f"env '{env_cfg.id}': no memory for env.num_envs={env_cfg.num_envs:,}; lower it") from None
    except Exception as exc:  # the user's constructor (or gymnasium's make) failed
        raise UserError(f"env '{env_cfg.id}' raised while being built: {type(exc).__name__}: {exc}") from None


SUPPORTED_ACTION_SPACES = (gym.spaces.Discrete, gym.spaces.Box)


def check_observation_space(space: gym.Space, env_id: str, *, close: Callable[[], None] | None = None) -> None:
    """A Dict observation is read one level deep (its keys concatenated): one holding a Dict or a Tuple is
    refused here, in one line (it failed deep inside the first step before)."""
    leaves = space.spaces.values() if isinstance(space, gym.spaces.Dict) else []
    nested = [leaf for leaf in leaves if isinstance(leaf, (gym.spaces.Dict, gym.spaces.Tuple))]
    if not nested:
        return
    if close is not None:
        close()
    raise UserError(
        f"env '{env_id}' has observation space {space}: rlpilot reads a Dict one level deep, not "
        f"a {type(nested[0]).__name__} inside it; flatten it (gymnasium.wrappers.FlattenObservation)"
    )


def check_action_space(space: gym.Space, env_id: str, *, close: Callable[[], None] | None = None) -> None:
    """The algorithms act in ``Discrete`` or ``Box`` spaces; any other is refused here, in one line."""
    if isinstance(space, SUPPORTED_ACTION_SPACES):
        return
    if close is not None:
        close()
    raise UserError(
        f"env '{env_id}' has action space {space}: rlpilot's algorithms act in Discrete or Box spaces; "
        "wrap the env so it takes one (e.g. a Discrete index over the combinations, or a Box thresholded at 0.5)"
    )


# Collection keeps each frame a few times: the batch TensorDict, the algorithm's minibatch copies and
# its targets (advantages, returns), so the estimate counts this many batch-sized buffers.
BATCH_COPIES = 4
PER_FRAME_EXTRA_BYTES = 64  # action, reward, done flags, log-prob, value: a few numbers a frame
PER_ENV_BYTES = {"sync": 16 * 1024, "async": 16 * 1024}  # a gymnasium env object (vector backends: arrays)


def single_spaces(env_cfg: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """One env's observation and action spaces, from one env built for the purpose (and closed)."""
    if env_cfg.backend == "native":
        native = make_native_vector_env(env_cfg.id, 1, kwargs=env_cfg.kwargs)
        return native.single_observation_space, native.single_action_space
    with construction_errors(env_cfg):
        single = _make_single(env_cfg)()
        spaces = single.observation_space, single.action_space
        single.close()
    return spaces


def single_observation_space(env_cfg: EnvConfig) -> gym.Space:
    return single_spaces(env_cfg)[0]


def observation_bytes(env_cfg: EnvConfig, space: gym.Space) -> int:
    """Bytes of one observation of ``space`` as the learner holds it (float32; images after resizing, gray
    scale and frame stacking)."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:  # [H, W, C] frames
        height, width, channels = space.shape
        if env_cfg.frame_size is not None:
            height = width = env_cfg.frame_size
        channels = 1 if env_cfg.grayscale else channels
        return FLOAT_BYTES * height * width * channels * env_cfg.frame_stack
    return FLOAT_BYTES * int(gym.spaces.flatdim(space))


def env_allocations(env_cfg: EnvConfig, *, steps_per_env: int, section: str, eval_envs: int, replay_frames: int = 0):
    """What a control run's envs and buffers hold (:class:`rlpilot.common.bounds.Allocation`, from one env's
    spaces): the collected batches, the replay buffer, the env objects; and the observation and action sizes the
    networks are built for. ``section``: the config section of ``steps_per_env`` and ``buffer_size``."""
    observation_space, action_space = single_spaces(env_cfg)
    if env_cfg.history and history_problem(observation_space, action_space) is None:  # the columns it appends
        own, action = observation_space.shape[0], int(np.prod(action_space.shape))
        high = np.full(own + env_cfg.history * (own + action), np.inf, np.float32)
        observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
    per_frame = 2 * observation_bytes(env_cfg, observation_space) + PER_FRAME_EXTRA_BYTES  # observation and next
    frames = env_cfg.num_envs * steps_per_env
    envs = env_cfg.num_envs + eval_envs
    per_env = PER_ENV_BYTES.get(env_cfg.backend if env_cfg.id not in NUMPY_VECTOR_ENVS else "numpy", per_frame)
    parts = [
        Allocation(
            f"batches of env.num_envs={env_cfg.num_envs:,} x {section}.steps_per_env={steps_per_env:,} frames",
            frames * per_frame * BATCH_COPIES,
            ("env.num_envs", f"{section}.steps_per_env"),
        ),
        Allocation(
            f"a replay buffer of {replay_frames:,} frames", replay_frames * per_frame, (f"{section}.buffer_size",)
        ),
        Allocation(f"{envs:,} envs", envs * per_env, ("env.num_envs", "train.eval_episodes")),
        Allocation(  # the random rollout that measures the normalisation (a TensorDict of its frames)
            f"the rollout of env.obs_norm_frames={env_cfg.obs_norm_frames:,}",
            env_cfg.obs_norm_frames * per_frame * env_cfg.normalize_obs,
            ("env.obs_norm_frames",),
        ),
    ]
    sizes = observation_bytes(env_cfg, observation_space) // FLOAT_BYTES, int(gym.spaces.flatdim(action_space))
    return parts, sizes


def _observation_keys(base: GymVectorEnv) -> list:
    return list(base.observation_spec.keys(True, True))


def make_env(
    env_cfg: EnvConfig,
    *,
    num_envs: int | None = None,
    seed: int | None = None,
    device: torch.device | str = "cpu",
    obs_norm_state: dict | None = None,
) -> TransformedEnv:
    """Builds the batched TorchRL env with its transform chain, seeded.

    Chain (each piece only where the specs need it): ``DoubleToFloat`` for float64 observations;
    ``CatTensors`` of all keys into ``"observation"`` for dict spaces (the keys stay too);
    ``ObservationNorm`` when ``env_cfg.normalize_obs`` (statistics from ``obs_norm_state`` when
    resuming or evaluating, else measured on random rollouts); ``StepCounter`` and ``RewardSum``
    (``episode_reward``) for episode bookkeeping.
    """
    one_hot = env_cfg.action_encoding == "one_hot"
    if env_cfg.backend == "native":
        native = make_native_vector_env(
            env_cfg.id,
            num_envs or env_cfg.num_envs,
            device=device,
            max_episode_steps=env_cfg.max_episode_steps,
            kwargs=env_cfg.kwargs,
        )
        base = NativeEnv(native, one_hot_actions=one_hot)
    else:
        base = GymVectorEnv(
            make_vector_env(env_cfg, num_envs or env_cfg.num_envs),
            device=device,
            one_hot_actions=one_hot,
            env_id=env_cfg.id,
        )
    transforms = []
    obs_keys = _observation_keys(base)
    if obs_keys == ["observation"] and is_image_spec(base.observation_spec["observation"]):
        return _make_pixel_env(base, env_cfg, seed=seed)
    doubles = [k for k in obs_keys if base.observation_spec[k].dtype == torch.float64]
    if doubles:
        transforms.append(DoubleToFloat(in_keys=doubles))
    if obs_keys != ["observation"]:
        for key in obs_keys:
            if len(base.observation_spec[key].shape) != 2:
                raise UserError(
                    f"dict observation entry '{key}' has shape {tuple(base.observation_spec[key].shape[1:])}; "
                    "only flat (vector) entries can be concatenated into one observation"
                )
        transforms.append(CatTensors(in_keys=obs_keys, out_key="observation", del_keys=False))
    env = TransformedEnv(base, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)  # statistics are measured on seeded episodes too
    if env_cfg.normalize_obs:
        stats = obs_norm_state or measure_observation_stats(env, env_cfg.obs_norm_frames)
        env.append_transform(
            ObservationNorm(
                loc=stats["loc"].to(device),
                scale=stats["scale"].to(device),
                in_keys=["observation"],
                standard_normal=True,
            )
        )
    env.append_transform(StepCounter())
    env.append_transform(RewardSum())  # episode_reward: the unscaled return
    if env_cfg.reward_scale != 1.0:
        env.append_transform(RewardScaling(loc=0.0, scale=env_cfg.reward_scale, standard_normal=False))
    if seed is not None:
        env.set_seed(seed)  # after measuring statistics: the run starts from the seed's first reset
    return env


def _make_pixel_env(base: GymVectorEnv, env_cfg: EnvConfig, *, seed: int | None) -> TransformedEnv:
    """Image observations: the frame chain of :mod:`rlpilot.envs.pixels`, then episode bookkeeping."""
    env = TransformedEnv(base, Compose(*frame_transforms(base.observation_spec["observation"], env_cfg)))
    stack = frame_stack_transform(env_cfg)
    if stack is not None:
        env.append_transform(stack)
    env.append_transform(StepCounter())
    env.append_transform(RewardSum())
    if env_cfg.reward_scale != 1.0:
        env.append_transform(RewardScaling(loc=0.0, scale=env_cfg.reward_scale, standard_normal=False))
    if seed is not None:
        env.set_seed(seed)
    return env


def measure_observation_stats(env: TransformedEnv, frames: int) -> dict:
    """loc/scale of ``"observation"`` under a random policy, over all envs (episodes reset as they end)."""
    rollout = env.rollout(max(2, frames // env.batch_size.numel()), break_when_any_done=False)
    flat = rollout.get("observation").reshape(-1, rollout.get("observation").shape[-1])
    return {"loc": flat.mean(0), "scale": flat.std(0).clamp_min(1e-4)}


def observation_reader(env: TransformedEnv, *, normalize: bool = True) -> Callable[..., torch.Tensor]:
    """Maps the gymnasium vector env's raw observation to the chain's ``"observation"`` tensor.

    The fast path for :class:`BatchCollector` and evaluation: the same casts, concatenation and
    ``ObservationNorm`` (its own loc/scale buffers) as the TorchRL chain, without a TensorDict per step.
    ``normalize=False`` stops before the normalisation: what an exported policy takes as input.
    Image observations get a :class:`~rlpilot.envs.pixels.FrameReader` (stateful when frames are
    stacked): callers pass ``reset=mask`` (or ``True``) when ``raw`` comes from a (partial) reset.
    """
    base: GymVectorEnv | NativeEnv = env.base_env
    device = base.device
    if _observation_keys(base) == ["observation"] and is_image_spec(base.observation_spec["observation"]):
        stack = next((t for t in env.transform if isinstance(t, CatFrames)), None)
        frames = [t for t in env.transform if isinstance(t, (ToTensorImage, GrayScale, Resize))]
        return FrameReader(frames, stack.N if stack is not None else 1, device)
    keys = [k for k in _observation_keys(base)]
    norm = next((t for t in env.transform if isinstance(t, ObservationNorm)), None) if normalize else None

    def read(raw, reset=None) -> torch.Tensor:  # reset: which envs were just reset (only frame stacks care)
        if isinstance(raw, dict):
            parts = [np.asarray(raw[k]).reshape(base.num_envs, -1) for k in keys]
            array = np.concatenate(parts, axis=-1)
        else:
            array = raw
        obs = torch.as_tensor(array, device=device)
        if obs.dtype != torch.float32:
            obs = obs.to(torch.float32)
        if norm is not None:
            obs = (obs - norm.loc) / norm.scale
        return obs

    return read


def obs_norm_state(env: TransformedEnv) -> dict | None:
    norm = next((t for t in env.transform if isinstance(t, ObservationNorm)), None)
    if norm is None:
        return None
    return {"loc": norm.loc.detach().cpu(), "scale": norm.scale.detach().cpu()}


def to_numpy(value) -> np.ndarray:
    """A gymnasium (numpy) or native (tensor, any device) batch value as a numpy array."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def set_obs_norm(env: TransformedEnv, stats: dict) -> None:
    """``env``'s ``ObservationNorm`` (an env of ``env.normalize_obs``) set to ``stats`` (``loc``, ``scale``) in place:
    statistics measured elsewhere (``rlpilot train adapt`` fits them on its DAgger data)."""
    norm = next(t for t in env.transform if isinstance(t, ObservationNorm))
    norm.loc.copy_(stats["loc"].to(norm.loc.device))
    norm.scale.copy_(stats["scale"].to(norm.scale.device))
