"""Playing a group policy: greedy episodes with per-agent returns, reference controllers (random and the
hand-written heuristic), one episode on video, and the export of the per-agent policy.

The exported artifact takes observations ``[batch, n_agents, obs]`` and returns actions ``[batch,
n_agents]`` (int64): one file for the whole group, the agents an input dimension (a robot fleet
deploys the same file on every robot by passing its own observation as a group of one only when the
parameters are shared and no agent id is used; otherwise pass the group, as trained).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rlpilot import registry
from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, own_file
from rlpilot.config.sections import EnvConfig
from rlpilot.multiagent.envs import make_vector
from rlpilot.multiagent.trainable import greedy_episodes
from rlpilot.play.bounded_step import STEP_LIMIT_S
from rlpilot.play.load import refuse_nonfinite
from rlpilot.runs import Run, check_compatible, load_run, versions

CONTROLLERS = ("random", "heuristic")
"""Reference policies on a multi-agent env: uniform random actions, and a hand-written heuristic (simple_spread:
each agent heads for its landmark in the assignment of least total distance; VMAS navigation: each agent
heads for its goal, ignoring the others)."""


def load_group_policy(path: str | Path, checkpoint: str = "last"):
    """The run, and its algorithm with the checkpoint's weights (loaded with ``weights_only``)."""
    if checkpoint not in ("last", "best"):
        raise UserError(f"--checkpoint {checkpoint}: choose last or best")
    run = load_run(path)
    config = run.config()
    saved = run.load_checkpoint(checkpoint)
    check_compatible(saved, config, run)
    env = make_vector(config.env, 1, seed=0)
    algo = registry.load_object(registry.algorithm(config.algo).implementation)(config, env, torch.device("cpu"))
    env.close()
    try:
        algo.load_state_dict(saved["state"]["algo"])
    except (KeyError, RuntimeError) as exc:
        raise UserError(
            f"checkpoint {checkpoint}.pt does not fit the run's config: {str(exc).splitlines()[0]}"
        ) from None
    refuse_nonfinite(algo.greedy_module.state_dict(), f"{run.checkpoint_dir / checkpoint}.pt")
    return run, algo


def controller(name: str, env) -> Callable[[torch.Tensor], torch.Tensor]:
    if name not in CONTROLLERS:
        raise UserError(f"--controller {name}: on a multi-agent env choose one of {', '.join(CONTROLLERS)}")
    if name == "random":
        generator = torch.Generator().manual_seed(0)
        return lambda obs: torch.randint(env.num_actions, obs.shape[:-1], generator=generator)
    name = getattr(env, "name", "")
    if name == "navigation":
        from rlpilot.multiagent.envs import navigation_heuristic

        return navigation_heuristic
    if name != "simple_spread_v3":
        raise UserError("--controller heuristic exists for simple_spread and VMAS navigation; use random here")
    from rlpilot.multiagent.spread import heuristic_action

    return lambda obs: heuristic_action(obs, env.n_agents)


@dataclass
class GroupPlay:
    env_config: EnvConfig
    act: Callable[[torch.Tensor], torch.Tensor] | None
    default_csv: Path | None
    controller: str | None = None

    def policy_for(self, env) -> Callable[[torch.Tensor], torch.Tensor]:
        return self.act if self.controller is None else controller(self.controller, env)


def group_playable(
    target: str, checkpoint: str = "last", controller_name: str | None = None, *, step_limit_s: float = STEP_LIMIT_S
) -> GroupPlay:
    """A multi-agent run directory, an exported group artifact (each step bounded by ``step_limit_s``), or (with
    a controller) an env id."""
    path = Path(target)
    if controller_name is not None:
        env_config = load_run(path).config().env if path.is_dir() else EnvConfig(id=target)
        default = path / f"eval-{controller_name}.csv" if path.is_dir() else None  # an env id: only with --csv
        return GroupPlay(env_config, None, default, controller_name)
    if path.is_file():
        from rlpilot.play.load import load_artifact

        run_artifact, signature = load_artifact(path, step_limit_s=step_limit_s)
        env = signature["env"]
        env_config = EnvConfig(
            id=env["id"], kwargs=env.get("kwargs", {}), max_episode_steps=env.get("max_episode_steps")
        )
        return GroupPlay(
            env_config,
            lambda obs: torch.as_tensor(run_artifact(obs.numpy())),
            path.with_name(path.name + ".eval.csv"),
        )
    run, algo = load_group_policy(path, checkpoint)
    return GroupPlay(run.config().env, algo.greedy_action, run.path / "eval.csv")


def is_group_target(target: str) -> bool:
    """A multi-agent run directory, a group artifact, or a multi-agent env id (read as data: no user code)."""
    path = Path(target)
    if path.is_dir() and (path / "config.yaml").is_file():
        return load_run(path).config().kind == "multiagent"
    signature = path.with_name(path.name + ".json")
    if path.is_file() and signature.is_file():
        from rlpilot.play.signature import read_signature

        return "agents" in read_signature(signature)
    return registry.is_multiagent_env(target)


def evaluate_group(
    target: str,
    *,
    episodes: int,
    seed: int,
    csv_path: str | Path | None = None,
    video: str | Path | None = None,
    checkpoint: str = "last",
    controller_name: str | None = None,
    step_limit_s: float = STEP_LIMIT_S,
) -> tuple[np.ndarray, dict[str, float], Path | None, Path | None]:
    """``episodes`` greedy episodes side by side: per-agent returns ``[episodes, n_agents]``, the task's
    end-of-episode measures, the CSV written (one row per episode; none for a controller on an env id unless
    ``csv_path`` asks) and the video, if asked for."""
    if registry.is_multiagent_env(target) and controller_name is None and not Path(target).exists():
        raise UserError(f"'{target}' is an env id, not a run: add --controller random (or heuristic)")
    play = group_playable(target, checkpoint, controller_name, step_limit_s=step_limit_s)
    if video is not None and Path(video).suffix.lower() not in (".gif", ".mp4"):
        raise UserError(f"--video {video}: the file must end in .gif or .mp4")
    env = make_vector(play.env_config, episodes, seed=seed, sized_by=("--episodes",))
    per_agent, task = greedy_episodes(env, play.policy_for(env), seed=seed)
    env.close()
    csv_path = Path(csv_path) if csv_path is not None else play.default_csv and own_file(play.default_csv)
    if csv_path is not None:
        header = ["episode", "seed", "return", *(f"return_agent{i}" for i in range(per_agent.shape[1]))]
        rows = [",".join(header)] + [
            ",".join([str(i), str(seed), f"{row.mean():.6g}", *(f"{v:.6g}" for v in row)])
            for i, row in enumerate(per_agent)
        ]
        atomic_write(csv_path, "\n".join(rows) + "\n")
    video_path = record_group_video(play, Path(video), seed=seed) if video is not None else None
    return per_agent, task, csv_path, video_path


def record_group_video(play: GroupPlay, path: Path, *, seed: int, fps: int = 10) -> Path:
    """One greedy episode drawn by the native env's renderer (positions replayed there for PettingZoo runs
    would need mpe2's pygame renderer: only the native env renders here)."""
    from rlpilot.play.episodes import write_frames

    env_config = play.env_config
    if registry.NATIVE_MULTIAGENT.get(env_config.id) is None:
        raise UserError(f"--video: only {', '.join(registry.NATIVE_MULTIAGENT)} is drawn here")
    from dataclasses import replace

    env = make_vector(replace(env_config, backend="native"), 1, seed=seed)
    policy = play.policy_for(env)
    observation = env.reset(seed=seed)
    frames = [env.render(0)]
    while True:
        observation, _, terminated, truncated = env.step(policy(observation))
        frames.append(env.render(0))
        if bool((terminated | truncated)[0]):
            break
    write_frames(frames, path, fps)
    return path


def export_group(run_path, fmt: str, out_dir, *, seed: int = 0, checkpoint: str = "last", force: bool = False):
    """The group's greedy policy as one artifact (``[batch, n_agents, obs] -> [batch, n_agents]``),
    parity-checked on observations from real rollouts (greedy with 30% random actions)."""
    from rlpilot.play.write import FORMATS, PARITY_OBSERVATIONS, export_folder, write_checked

    run_path = Path(run_path)
    out_dir = export_folder(run_path, out_dir)
    run, algo = load_group_policy(run_path, checkpoint)
    config = run.config()
    env = make_vector(config.env, 8, seed=seed)
    observations = parity_group_observations(env, algo.greedy_action, PARITY_OBSERVATIONS // env.n_agents, seed)
    signature = _group_signature(fmt, FORMATS[fmt], env, config, run, checkpoint)
    env.close()
    return write_checked(algo.greedy_module.eval(), observations, fmt, out_dir, signature, 0.0, force=force)


def parity_group_observations(env, policy, count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    observation = env.reset(seed=seed)
    rows = []
    while sum(len(r) for r in rows) < count:
        rows.append(observation)
        action = policy(observation)
        explore = torch.rand(action.shape, generator=generator) < 0.3
        action = torch.where(explore, torch.randint(env.num_actions, action.shape, generator=generator), action)
        observation, _, terminated, truncated = env.step(action)
        done = terminated | truncated
        if bool(done.any()):
            observation = env.reset(mask=done)
    return torch.cat(rows)[:count]


def _group_signature(fmt: str, file_name: str, env, config, run: Run, checkpoint: str) -> dict:
    return {
        "format": fmt,
        "file": file_name,
        "inputs": [
            {
                "name": "observation",
                "shape": ["batch", env.n_agents, env.obs_dim],
                "dtype": "float32",
                "note": "each agent's raw observation, agents in the order of 'agents'",
            }
        ],
        "outputs": [{"name": "action", "shape": ["batch", env.n_agents], "dtype": "int64"}],
        "action": {"type": "discrete", "n": env.num_actions, "encoding": "index", "decoding": "argmax per agent"},
        "agents": {"group": getattr(env, "group", "agent"), "names": list(env.agent_names)},
        "observation_normalization": "none",
        "env": {"id": config.env.id, "kwargs": config.env.kwargs, "max_episode_steps": config.env.max_episode_steps},
        "algo": config.algo,
        "run": str(run.path),
        "frames": run.frames,
        "checkpoint": checkpoint,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(),
    }
