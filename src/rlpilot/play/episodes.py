"""Playing a policy: greedy episodes of a run, an exported artifact or a classical controller, side by
side in one vector env; per-episode CSV rows; one episode on video."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torchrl.envs import TransformedEnv

from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, file_name, own_file
from rlpilot.conditions import SAMPLED
from rlpilot.config.sections import BACKENDS, EnvConfig
from rlpilot.control.evaluate import EvalResult, evaluate
from rlpilot.envs.make import declaration, make_env, single_spaces
from rlpilot.play.bounded_step import STEP_LIMIT_S
from rlpilot.play.load import load_artifact, load_policy
from rlpilot.play.signature import check_signature_fits
from rlpilot.registry import resolve_env
from rlpilot.runs import load_run


@dataclass
class PlayablePolicy:
    """What evaluation needs: the env to build and a greedy function of that env's observations."""

    env_config: EnvConfig
    obs_norm: dict | None
    act: Callable[[torch.Tensor], torch.Tensor] | None
    default_csv: Path | None
    controller: str | None = None
    """A controller (``pd``, ``pid``, ``random`` or a user's ``package.module:Class``; ``rlpilot.envs.catalogue``)
    played instead of ``act``, on raw observations."""
    controller_kwargs: dict | None = None
    """What ``controller`` is built with (``--controller-kwargs``; a run's ``env.base_controller_kwargs`` for
    its own base controller)."""

    def policy_for(self, env: TransformedEnv) -> Callable[[torch.Tensor], torch.Tensor]:
        """``act``, or the controller built for ``env`` (the random one samples ``env``'s seeded action space)."""
        if self.controller is None:
            return self.act
        from rlpilot.envs.catalogue import build_controller

        return build_controller(self.controller, self.env_config.id, env.base_env.vector_env, self.controller_kwargs)

    def make_env(
        self, *, num_envs: int, seed: int | None = None, render: bool = False, backend: str | None = None
    ) -> TransformedEnv:
        env_config = self.env_config if backend is None else replace(self.env_config, backend=backend)
        if render:  # one gymnasium env with rgb_array frames
            env_config = replace(env_config, backend="sync", kwargs={**env_config.kwargs, "render_mode": "rgb_array"})
        return make_env(env_config, num_envs=num_envs, seed=seed, obs_norm_state=self.obs_norm)


def playable(
    path: str | Path,
    checkpoint: str = "last",
    controller: str | None = None,
    controller_kwargs: dict | None = None,
    *,
    step_limit_s: float = STEP_LIMIT_S,
) -> PlayablePolicy:
    """A run directory (its last checkpoint) or an exported artifact (``rlpilot export``; each of its steps
    bounded by ``step_limit_s``, :func:`rlpilot.play.load.load_artifact`).

    With ``controller``: that controller on the env of a run directory, or on a gymnasium id.
    """
    if controller is not None:
        return controlled(str(path), controller, controller_kwargs)
    path = Path(path)
    if not path.exists() and _is_env_id(str(path)):
        raise UserError(
            f"'{path}' is an env id, not a run: add --controller random (or pid) to evaluate a baseline on it"
        )
    if path.exists() and not path.is_dir():  # an artifact (a pipe or a device there: one line saying so)
        run_artifact, signature = load_artifact(path, step_limit_s=step_limit_s)
        env = signature["env"]
        env_config = EnvConfig(
            id=env["id"],
            kwargs=env.get("kwargs", {}),
            max_episode_steps=env.get("max_episode_steps"),
            action_encoding=env.get("action_encoding", "categorical"),
        )
        try:
            resolve_env(env_config.id)  # an env that does not exist (here): one line naming it
        except UserError as exc:
            raise UserError(f"{path.name}.json names an env that cannot be built here: {exc}") from None
        check_signature_fits(signature, f"{path.name}.json", *single_spaces(env_config))

        def act(observation: torch.Tensor) -> torch.Tensor:  # its outputs checked every step (CheckedStep)
            return torch.as_tensor(run_artifact(observation.numpy()))

        if hasattr(run_artifact, "reset"):  # a controller with state: eval's loop starts each episode from zeros
            act.reset = run_artifact.reset

        return PlayablePolicy(env_config, None, act, path.with_name(path.name + ".eval.csv"))
    policy = load_policy(path, checkpoint)
    return PlayablePolicy(
        policy.run.config().env, policy.obs_norm, policy.algo.greedy_action, policy.run.path / "eval.csv"
    )


def controlled(target: str, controller: str, kwargs: dict | None = None) -> PlayablePolicy:
    """A controller on a run's env (same id, kwargs, time limit) or on a gymnasium id; raw observations."""
    from rlpilot.envs.catalogue import CONTROLLERS, is_user_controller

    if controller not in CONTROLLERS and not is_user_controller(controller):
        raise UserError(f"--controller {controller}: choose one of {', '.join(CONTROLLERS)} or package.module:Class")
    path = Path(target)
    if path.is_dir():
        env_config = load_run(path).config().env
        if kwargs is None and controller == env_config.base_controller:  # the run's own base, as it ran
            kwargs = env_config.base_controller_kwargs
        default_csv = path / f"eval-{file_name(controller)}.csv"
    elif path.is_file():
        raise UserError(f"--controller runs on a run directory's env or on an env id, not on a file ({target})")
    else:
        env_config = EnvConfig(id=target)
        default_csv = None  # an env id has no run directory: rows are written only with --csv
    # raw observations and categorical actions: what the controllers read and the action space samples
    # (and no residual base: the controller's action goes to the env as it is)
    env_config = replace(env_config, normalize_obs=False, action_encoding="categorical", base_controller="none")
    return PlayablePolicy(env_config, None, None, default_csv, controller, kwargs)


def _is_env_id(name: str) -> bool:
    import gymnasium as gym

    return name in gym.registry


def evaluate_target(
    path: str | Path,
    *,
    episodes: int,
    seed: int,
    csv_path: str | Path | None = None,
    video: str | Path | None = None,
    checkpoint: str = "last",
    backend: str | None = None,
    controller: str | None = None,
    controller_kwargs: dict | None = None,
    step_limit_s: float = STEP_LIMIT_S,
    condition: list[str] | None = None,
    trace: tuple[str, ...] = (),
) -> tuple[EvalResult, Path | None, Path | None]:
    """Greedy episodes of a run or an artifact (or ``controller`` on a run's env or an env id); per-episode
    rows to CSV (``csv_path``, else the run's or artifact's default; a controller on an env id writes none
    unless asked); optionally one episode on video.

    ``backend`` overrides the env's ``env.backend`` (e.g. a policy trained on ``native`` evaluated
    on gymnasium's own env with ``auto``). ``step_limit_s``: the longest an artifact's step may run.
    ``condition``: ``--condition`` items (a named condition, ``name=value``), every episode played under them."""
    target = playable(path, checkpoint, controller, controller_kwargs, step_limit_s=step_limit_s)
    outside: list[str] = []
    if condition:
        declared = declaration(target.env_config)
        chosen = {**target.env_config.condition, **declared.resolve(condition)}
        outside = declared.outside(chosen)
        sampled = SAMPLED in condition or target.env_config.condition_sampled
        target = replace(target, env_config=replace(target.env_config, condition=chosen, condition_sampled=sampled))
    if video is not None and Path(video).suffix.lower() not in (".gif", ".mp4"):
        raise UserError(f"--video {video}: the file must end in .gif or .mp4")
    if backend is not None and backend not in BACKENDS:
        raise UserError(f"--backend {backend}: choose from {', '.join(BACKENDS)}")
    env = target.make_env(num_envs=min(episodes, 64), seed=seed, backend=backend)
    try:
        result = evaluate(env, target.policy_for(env), episodes=episodes, seed=seed, trace=trace)
    finally:
        env.close()
    result.condition, result.outside = dict(target.env_config.condition), outside
    if target.env_config.condition_sampled:
        result.condition = {SAMPLED: "every other parameter drawn from its range", **result.condition}
    csv_path = Path(csv_path) if csv_path is not None else target.default_csv and own_file(target.default_csv)
    if csv_path is not None:
        extra = result.per_episode()
        rows = [",".join(["episode", "seed", "return", "length", *extra])] + [
            ",".join([str(i), str(seed + i), f"{ret:.6g}", str(length), *(f"{v[i]:.6g}" for v in extra.values())])
            for i, (ret, length) in enumerate(zip(result.returns, result.lengths))
        ]
        atomic_write(csv_path, "\n".join(rows) + "\n")
    video_path = None
    if video is not None:
        video_path = record_video(target, Path(video), seed=seed)
    return result, csv_path, video_path


def record_video(target: PlayablePolicy, path: Path, *, seed: int, fps: int = 30) -> Path:
    """One greedy episode (the first evaluation seed) rendered as rgb_array frames, to GIF or MP4."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # headless: pygame renders off-screen
    try:
        env = target.make_env(num_envs=1, seed=seed, render=True)
    except UserError:
        raise
    except Exception as exc:  # rendering backends raise their own errors (pygame missing, no display...)
        raise UserError(f"cannot render '{target.env_config.id}': {exc}; pip install 'rlpilot[video]'") from None
    single = env.base_env.vector_env.unwrapped.envs[0]  # through a ResidualVectorEnv
    frames = []
    evaluate(env, _recording(target.policy_for(env), single, frames), episodes=1, seed=seed)
    frames.append(single.render())
    env.close()
    write_frames(frames, path, fps)
    return path


def _recording(act, single_env, frames: list):
    def act_and_record(observation: torch.Tensor) -> torch.Tensor:
        frames.append(single_env.render())
        return act(observation)

    return act_and_record


def video_frame(frame) -> np.ndarray:
    """An rgb_array render as uint8 RGB: float renders in [0, 1] (MinAtar's) are scaled, and tiny
    frames (MinAtar's 10x10) are enlarged, nearest neighbour, to at least 160 px."""
    frame = None if frame is None else np.asarray(frame)
    if frame is None or frame.ndim != 3 or frame.shape[-1] not in (3, 4) or frame.dtype.kind not in "uif":
        what = "None" if frame is None else f"an array of shape {frame.shape} ({frame.dtype})"
        raise UserError(
            f"the env's render() returned {what}, not an RGB image (height, width, 3): a video needs "
            "render_mode='rgb_array' to return frames; fix the env's render(), or leave out --video"
        )
    if frame.dtype != np.uint8:
        frame = (np.clip(frame, 0.0, 1.0) * 255).round().astype(np.uint8)
    scale = max(1, 160 // max(frame.shape[:2]))
    return frame.repeat(scale, 0).repeat(scale, 1) if scale > 1 else frame


def write_frames(frames: list, path: Path, fps: int) -> None:
    frames = [video_frame(frame) for frame in frames]
    if not frames:
        raise UserError("the episode gave no frames to record; leave out --video")
    if path.suffix.lower() == ".gif":
        from PIL import Image

        buffer = io.BytesIO()
        images = [Image.fromarray(frame) for frame in frames]
        images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        atomic_write(path, buffer.getvalue())  # a pipe or a device is written as a stream, never replaced
        return
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise UserError("MP4 needs imageio and imageio-ffmpeg: pip install 'rlpilot[video]' (or use a .gif)") from None
    with tempfile.TemporaryDirectory() as scratch:  # ffmpeg writes a file; rlpilot then writes the output
        tmp = Path(scratch) / f"video{path.suffix}"
        imageio.mimwrite(tmp, frames, fps=fps, format="FFMPEG")
        atomic_write(path, tmp.read_bytes())
