"""``rlpilot check``: preflight of an environment before any training (:func:`check_env`).

It steps the env within a time budget: its specs in words, a short rollout's layout, random-policy episodes and
observation scales, ``env.base_controller`` alone; then the pitfalls (``pitfalls.py``) and the printed report
(``report.py``). Each pitfall found is a :class:`~rlpilot.common.findings.Finding` (the type ``rlpilot doctor`` reports
too): a severity (``error`` fails the check with exit 1, ``warning`` and ``info`` do not), the evidence that raised
it, the likely cause, and the fix.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch
from torchrl.data import Bounded, Categorical, Composite, TensorSpec
from torchrl.envs import CatFrames, GrayScale, Resize, ToTensorImage, check_env_specs

from rlpilot.check.pitfalls import (
    action_findings,
    random_rollout,
    reward_findings,
    scale_findings,
    seeding_findings,
    spec_notes,
)
from rlpilot.check.report import CheckReport, plan_budget
from rlpilot.common.files import atomic_write, file_name
from rlpilot.common.findings import Finding
from rlpilot.config.sections import EnvConfig
from rlpilot.control.evaluate import evaluate
from rlpilot.envs.gym_vector import reset_checked
from rlpilot.envs.make import make_env, make_vector_env, observation_reader
from rlpilot.envs.pixels import frame_png, is_image_spec
from rlpilot.registry import registered_spec


def describe_spec(spec: TensorSpec) -> str:
    shape = tuple(spec.shape[1:])  # drop the env batch dimension
    if isinstance(spec, Categorical):
        return f"Discrete({spec.n}): a categorical index in 0..{spec.n - 1}, shape {shape}, {spec.dtype}"
    if isinstance(spec, Bounded):
        low, high = spec.space.low.reshape(-1), spec.space.high.reshape(-1)
        bounds = ", ".join(f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(low[:6].tolist(), high[:6].tolist()))
        more = " ..." if low.numel() > 6 else ""
        return f"Box{shape} {spec.dtype}, bounds {bounds}{more}"
    if isinstance(spec, Composite):
        return "dict of " + ", ".join(f"{k}: {describe_spec(v)}" for k, v in spec.items())
    return f"{type(spec).__name__}{shape} {spec.dtype} (unbounded)"


def _layout(env) -> list[str]:
    rollout = env.rollout(3)
    rows = []
    names = {(key if isinstance(key, str) else "/".join(key)): key for key in rollout.keys(True, True)}
    for name in sorted(names, key=lambda n: (n.count("/"), n)):
        value = rollout.get(names[name])
        rows.append(f"{name:<28} {str(tuple(value.shape)):<14} {str(value.dtype).replace('torch.', '')}")
    return rows


def _seconds_per_step(env_cfg: EnvConfig, seed: int, probe_steps: int = 10) -> float:
    vector_env = make_vector_env(env_cfg, 1)
    vector_env.action_space.seed(seed)
    reset_checked(vector_env, env_cfg.id, seed=seed)  # the first reset: a broken env fails in one line
    start = time.perf_counter()
    for _ in range(probe_steps):
        _, _, terminated, truncated, _ = vector_env.step(vector_env.action_space.sample())
        if (terminated | truncated).any():
            vector_env.reset(options={"reset_mask": terminated | truncated})
    seconds = (time.perf_counter() - start) / probe_steps
    vector_env.close()
    return seconds


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_env(
    env_cfg: EnvConfig,
    *,
    episodes: int | None = None,
    seed: int = 0,
    steps: int = 512,
    frame_png: str | None = None,
    max_seconds: float | None = 30.0,
    progress: Callable[[str], None] | None = _stderr,
) -> CheckReport:
    """``episodes``: random-policy episodes (default: up to 20, fewer, or cut short, so the whole check
    takes about ``max_seconds``; ``None`` for no limit). ``frame_png``: for image observations, where to
    write the sample frame (default ``check-<env id>.png`` in the current folder). ``progress`` gets a
    line per phase (stderr by default; ``None``: quiet)."""
    say = progress or (lambda line: None)
    report = CheckReport(env_cfg.id)
    spec = registered_spec(env_cfg.id)
    time_limit = env_cfg.max_episode_steps or (spec.max_episode_steps if spec is not None else None)
    budget = plan_budget(
        _seconds_per_step(env_cfg, seed), time_limit, episodes=episodes, max_seconds=max_seconds, steps=steps
    )
    report.budget = budget
    env = make_env(env_cfg, num_envs=1, seed=seed)
    base = env.base_env
    image = len(base.observation_spec.keys()) == 1 and is_image_spec(base.observation_spec["observation"])
    report.specs = {
        "observation": describe_spec(
            base.observation_spec if len(base.observation_spec.keys()) > 1 else base.observation_spec["observation"]
        ),
        **({"network in": _describe_pixel_input(env)} if image else {}),
        "action": describe_spec(env.action_spec),
        "reward": f"{tuple(env.reward_spec.shape[1:])} {env.reward_spec.dtype}",
        "done": "done = terminated | truncated, each (1,) bool; truncated marks the time limit (bootstrap there)",
    }
    envs = getattr(getattr(getattr(base, "vector_env", None), "unwrapped", None), "envs", None)
    single = envs[0].unwrapped if envs else None  # a SyncVectorEnv's first env (numpy/native vector envs: none)
    describe = getattr(single, "describe_dynamics", None)  # envs with settings worth reading (envs/arm/env.py)
    report.dynamics = list(describe()) if describe is not None else []
    if env_cfg.base_controller != "none" and env_cfg.residual_mode == "gains":
        report.dynamics.append(
            f"residual RL (gain schedule): the env runs the {env_cfg.base_controller} controller with its gains "
            f"times 10 ** ({env_cfg.residual_scale:g} * the policy's actions, one per gain)"
        )
    elif env_cfg.base_controller != "none":
        report.dynamics.append(
            f"residual RL: the env adds the {env_cfg.base_controller} controller's action; the policy's action "
            f"(the action box centred at zero), times {env_cfg.residual_scale:g}, is the correction (clipped to "
            "the action box)"
        )
    if env_cfg.base_controller != "none" and env_cfg.residual_gate:
        law = getattr(getattr(base, "vector_env", None), "law", None)
        gate, fully = f"{env_cfg.residual_gate:g}", f"{2 * env_cfg.residual_gate:g}"
        if law is not None and law.gate_reads_controller:
            where = f"|{env_cfg.base_controller}.gate_signal(observation)| reads above {gate} (fully from {fully})"
        elif env_cfg.residual_gate_index is None:
            where = f"the error monitor reads above {gate} m (fully from {fully} m)"
        else:
            where = f"|observation[{env_cfg.residual_gate_index}]| reads above {gate} (fully from {fully})"
        report.dynamics.append(
            f"residual gate: the policy acts only where {where}; the {env_cfg.base_controller} controller exactly below"
        )
    report.check_env_specs, findings = specs_check(env, seed, "fix the env's observation_space/action_space")
    report.findings += findings
    report.layout = _layout(env)
    if image:
        report.frame_png = str(frame_png or f"check-{file_name(env_cfg.id)}.png")
        _write_sample_frame(env, env_cfg, report.frame_png, seed)
    env.close()

    say(f"[check] {env_cfg.id}: {budget.describe()}")
    episode_cfg = env_cfg if budget.episode_steps is None else replace(env_cfg, max_episode_steps=budget.episode_steps)
    eval_env = make_env(episode_cfg, num_envs=min(budget.episodes, 16), seed=seed)
    action_spec = eval_env.action_spec
    result = evaluate(eval_env, lambda obs: action_spec.rand(), episodes=budget.episodes, seed=seed)
    eval_env.close()
    if env_cfg.base_controller != "none":
        say(f"[check] the {env_cfg.base_controller} controller alone")
        report.controller = controller_report(episode_cfg, episodes=budget.episodes, seed=seed)
    say("[check] observation scales, seeding and actions")
    report.random_policy = {
        "episodes": budget.episodes,
        "return_mean": result.mean,
        "return_std": result.std,
        "return_min": float(result.returns.min()),
        "return_max": float(result.returns.max()),
        "length_mean": float(result.lengths.mean()),
        "length_min": float(result.lengths.min()),
        "length_max": float(result.lengths.max()),
    }
    if image:  # statistics per channel over all pixels; a few steps are plenty (and frames are large)
        observations, rewards = random_rollout(env_cfg, seed=seed, steps=min(budget.rollout_steps, 64), keep_shape=True)
        report.scale_unit = "channel"
    else:
        observations, rewards = random_rollout(env_cfg, seed=seed, steps=budget.rollout_steps)
    flat = observations.reshape(-1, observations.shape[-1]).astype(np.float64)
    report.observation_scale = [
        {"mean": float(m), "std": float(s), "min": float(lo), "max": float(hi)}
        for m, s, lo, hi in zip(flat.mean(0), flat.std(0), flat.min(0), flat.max(0))
    ]
    report.findings += spec_notes(base, image=image)
    report.findings += scale_findings(env_cfg, flat, image=image)
    report.findings += reward_findings(rewards, result)
    report.findings += seeding_findings(env_cfg, seed, budget.seeding_steps)
    report.findings += action_findings(env_cfg, base, seed, budget.seeding_steps)
    return report


def controller_report(env_cfg: EnvConfig, *, episodes: int, seed: int) -> list[str]:
    """``env.base_controller`` alone on the plain env (what a residual policy starts from): its return over
    ``episodes`` episodes, the range of its actions per dimension against the action box, and the share of
    action entries at or beyond the box (saturated: a correction on top of it has no room that way)."""
    from rlpilot.envs.catalogue import build_controller

    plain = replace(env_cfg, base_controller="none", normalize_obs=False, residual_gate=0.0, residual_penalty=0.0)
    env = make_env(plain, num_envs=min(episodes, 16), seed=seed)
    vector_env = env.base_env.vector_env
    controller = build_controller(env_cfg.base_controller, env_cfg.id, vector_env, env_cfg.base_controller_kwargs)
    box = vector_env.single_action_space
    actions: list[torch.Tensor] = []

    def act(observation: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            action = controller(observation)
        actions.append(action.reshape(len(action), -1))
        return action

    act.reset = controller.reset if hasattr(controller, "reset") else None
    try:
        result = evaluate(env, act, episodes=episodes, seed=seed)
    finally:
        env.close()
    taken = torch.cat(actions).double()
    low = torch.as_tensor(box.low, dtype=torch.float64).reshape(-1)
    high = torch.as_tensor(box.high, dtype=torch.float64).reshape(-1)
    saturated = float(((taken <= low) | (taken >= high)).double().mean())
    ranges = ", ".join(f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(taken.min(0).values, taken.max(0).values))
    box_text = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(low.tolist(), high.tolist()))
    return [
        f"Controller {env_cfg.base_controller} alone over {episodes} episodes (what a residual policy starts from)",
        f"  return  mean {result.mean:.2f}  std {result.std:.2f}  min {float(result.returns.min()):.2f}  "
        f"max {float(result.returns.max()):.2f}",
        f"  actions per dim {ranges} (action box {box_text})",
        f"  saturated {100 * saturated:.1f}% of action entries (at or beyond the box)",
    ]


def specs_check(env, seed: int, fix: str) -> tuple[str, list[Finding]]:
    """TorchRL's ``check_env_specs`` on ``env``: ``passed``, or ``FAILED: ...`` with an error finding."""
    try:
        logging.getLogger("torchrl").setLevel(logging.WARNING)  # its success line would interleave the report
        check_env_specs(env, seed=seed)
        return "passed", []
    except Exception as exc:  # reported as a finding, not a crash
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        finding = Finding(
            rule="specs_mismatch",
            severity="error",
            title="specs do not match data",
            evidence={"check_env_specs": first},
            cause="the env's declared spaces and the data it returns disagree (shape, dtype or bounds)",
            fix=f"{fix} to describe what it returns",
        )
        return f"FAILED: {first}", [finding]


def _describe_pixel_input(env) -> str:
    """The transformed observation the CNN receives, and the TorchRL transforms that made it."""
    spec = env.observation_spec["observation"]
    chain = " -> ".join(
        repr(t).split("(")[0] + (f"(N={t.N})" if hasattr(t, "N") else f"({t.w}x{t.h})" if hasattr(t, "w") else "")
        for t in env.transform
        if isinstance(t, (ToTensorImage, GrayScale, Resize, CatFrames))
    )
    return f"{tuple(spec.shape[1:])} {spec.dtype} in [0, 1] (C x H x W) after {chain}"


def _write_sample_frame(env, env_cfg: EnvConfig, path: str, seed: int) -> None:
    """A frame some random steps into an episode: raw, and the stacked frames the network receives."""
    vector_env = env.base_env.vector_env
    read = observation_reader(env)
    vector_env.action_space.seed(seed)
    raw, _ = vector_env.reset(seed=seed)
    observation = read(raw, reset=True)
    for _ in range(50):  # past CarRacing's opening zoom
        raw, _, terminated, truncated, _ = vector_env.step(vector_env.action_space.sample())
        observation = read(raw)
        if (terminated | truncated).any():
            raw, _ = vector_env.reset(options={"reset_mask": terminated | truncated})
            observation = read(raw, reset=terminated | truncated)
    atomic_write(path, frame_png(np.asarray(raw)[0], observation[0], env_cfg.frame_stack))
