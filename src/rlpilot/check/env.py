"""``rlpilot check``: preflight of an environment before any training.

Each pitfall found is a :class:`~rlpilot.findings.Finding` (the type ``rlpilot doctor`` reports too):
a severity (``error`` fails the check with exit 1, ``warning`` and ``info`` do not), the evidence
that raised it, the likely cause, and the fix.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torchrl.data import Bounded, Categorical, Composite, TensorSpec
from torchrl.envs import CatFrames, GrayScale, Resize, ToTensorImage, check_env_specs

from rlpilot.config.schema import EnvConfig
from rlpilot.control.evaluate import evaluate
from rlpilot.envs.gym_vector import reset_checked
from rlpilot.envs.make import make_env, make_vector_env, observation_reader
from rlpilot.envs.pixels import frame_png, is_image_spec
from rlpilot.findings import Finding, by_severity, count, render_finding
from rlpilot.registry import registered_spec
from rlpilot.runs import atomic_write

SCALE_COLUMN = {"dimension": "dim", "channel": "channel"}
"""Heading of the observation-scale table's first column, per ``CheckReport.scale_unit``."""


@dataclass
class CheckReport:
    """What ``rlpilot check`` found about one env; ``render`` is the printed report."""

    env_id: str
    specs: dict[str, str] = field(default_factory=dict)
    layout: list[str] = field(default_factory=list)
    random_policy: dict[str, float] = field(default_factory=dict)
    observation_scale: list[dict[str, float]] = field(default_factory=list)
    check_env_specs: str = ""
    findings: list[Finding] = field(default_factory=list)
    """The pitfalls found, in the order they were checked (``render`` lists errors first)."""
    budget: Budget | None = None
    """How many episodes and steps the check used (fitted to its time budget)."""
    scale_unit: str = "dimension"
    """``dimension`` for vector observations; ``channel`` for images (statistics over all pixels)."""
    frame_png: str | None = None
    """Image observations: where the sample frame (raw, then the network's input) was written."""
    dynamics: list[str] = field(default_factory=list)
    """What the env says about its own dynamics settings (e.g. the arm's disturbances), and a residual base."""
    controller: list[str] = field(default_factory=list)
    """``env.base_controller`` alone on the env (no policy): its return, action range and saturation."""

    @property
    def healthy(self) -> bool:
        return count(self.findings, "error") == 0

    def _budget_note(self) -> str:
        budget = self.budget
        if budget is None or budget.episode_steps is None and budget.episodes == DEFAULT_EPISODES:
            return ""
        cut = f", each cut at {budget.episode_steps} steps" if budget.episode_steps else ""
        return (
            f" (fitted to the time budget{cut}: one step takes {budget.step_ms:.2g} ms; "
            "--episodes N runs N whole episodes)"
        )

    def render(self) -> str:
        lines = [f"rlpilot check: {self.env_id}", "", "Specs"]
        lines += [f"  {key:<12} {text}" for key, text in self.specs.items()]
        if self.dynamics:
            lines += ["", "Dynamics"] + [f"  {line}" for line in self.dynamics]
        lines += [
            "",
            f"TorchRL check_env_specs: {self.check_env_specs}",
            "",
            "Tensordict of a 3-step rollout (1 env): key, shape, dtype",
        ]
        lines += [f"  {line}" for line in self.layout]
        rp = self.random_policy
        lines += [
            "",
            f"Random policy over {int(rp['episodes'])} episodes" + self._budget_note(),
            f"  return  mean {rp['return_mean']:.2f}  std {rp['return_std']:.2f}  "
            f"min {rp['return_min']:.2f}  max {rp['return_max']:.2f}",
            f"  length  mean {rp['length_mean']:.1f}  min {rp['length_min']:.0f}  max {rp['length_max']:.0f}",
            *([""] + self.controller if self.controller else []),
            "",
            f"Observation scale under the random policy (per {self.scale_unit})",
        ]
        lines += self._scale_table()
        if self.frame_png:
            lines += ["", f"Sample frame (raw | each stacked frame the network sees): {self.frame_png}"]
        lines += ["", "Pitfalls"]
        if not self.findings:
            lines.append("  none found")
        for finding in by_severity(self.findings):
            lines += render_finding(finding)
        verdict = "healthy" if self.healthy else "NOT healthy (errors above)"
        lines += ["", f"Verdict: {verdict}"]
        return "\n".join(lines)

    def _scale_table(self) -> list[str]:
        """Mean, std, min and max per dimension (or channel), the first column as wide as its heading."""
        heading = SCALE_COLUMN[self.scale_unit]
        width = max(4, len(heading))
        lines = [f"  {heading:<{width}} {'mean':>10} {'std':>10} {'min':>11} {'max':>11}"]
        lines += [
            f"  {i:<{width}} {s['mean']:>10.3g} {s['std']:>10.3g} {s['min']:>11.3g} {s['max']:>11.3g}"
            for i, s in enumerate(self.observation_scale)
        ]
        return lines


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


def _random_rollout(
    env_cfg: EnvConfig, *, seed: int, steps: int, num_envs: int = 8, keep_shape: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Raw observations and rewards of a seeded random policy (seeded action sampling too);
    ``keep_shape``: observations as the env returns them (images), else flattened per env."""
    vector_env = make_vector_env(env_cfg, num_envs)
    vector_env.action_space.seed(seed)
    obs, _ = vector_env.reset(seed=seed)
    observations, rewards, dones = [], [], []
    for _ in range(steps):
        observations.append(np.array(obs) if keep_shape else _flat(obs, num_envs))
        obs, reward, terminated, truncated, _ = vector_env.step(vector_env.action_space.sample())
        rewards.append(np.asarray(reward, dtype=np.float64))
        done = terminated | truncated
        dones.append(done)
        if done.any():
            obs, _ = vector_env.reset(options={"reset_mask": done})
    vector_env.close()
    return np.stack(observations), np.stack(rewards)


def _flat(obs, num_envs: int) -> np.ndarray:
    if isinstance(obs, dict):
        return np.concatenate([np.asarray(obs[k]).reshape(num_envs, -1) for k in sorted(obs)], -1)
    return np.asarray(obs).reshape(num_envs, -1)


DEFAULT_EPISODES = 20


@dataclass
class Budget:
    """How much of the env a check steps, sized so a preflight answers in about ``max_seconds``."""

    episodes: int
    episode_steps: int | None
    """Random-policy episodes are cut at this many steps (None: the env's own time limit)."""
    rollout_steps: int
    """Steps per env (8 envs) of the observation-scale rollout."""
    seeding_steps: int
    """Steps per env (2 envs, 3 rollouts) of the seeding check."""
    step_ms: float

    def describe(self) -> str:
        cut = f", cut at {self.episode_steps} steps" if self.episode_steps else ""
        return f"{self.episodes} random-policy episode(s){cut}; one env step takes {self.step_ms:.2g} ms"


def plan_budget(
    step_seconds: float, time_limit: int | None, *, episodes: int | None, max_seconds: float | None, steps: int
) -> Budget:
    """Episodes and rollout lengths that fit ``max_seconds`` at ``step_seconds`` per env step. ``episodes``
    given by the user is kept whole (no cut): they asked for it. Shares of the time: 55% episodes, 25%
    the scale rollout, 10% the seeding check."""
    available = math.inf if max_seconds is None else max_seconds / max(step_seconds, 1e-7)
    length = time_limit or 1000
    rollout = int(min(steps, max(8, 0.25 * available / 8)))
    seeding = int(min(64, max(8, 0.10 * available / 6)))
    if episodes is not None:
        return Budget(episodes, None, rollout, seeding, 1000 * step_seconds)
    share = 0.55 * available
    count = int(max(1, min(DEFAULT_EPISODES, share // length)))
    cut = None if share >= length else int(max(10, share))
    return Budget(count, cut, rollout, seeding, 1000 * step_seconds)


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
            f"residual RL: the env adds the {env_cfg.base_controller} controller's action; the policy's action, "
            f"times {env_cfg.residual_scale:g}, is the correction (clipped to the action box)"
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
        report.frame_png = str(frame_png or f"check-{env_cfg.id.replace('/', '-').replace(':', '-')}.png")
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
        observations, rewards = _random_rollout(
            env_cfg, seed=seed, steps=min(budget.rollout_steps, 64), keep_shape=True
        )
        report.scale_unit = "channel"
    else:
        observations, rewards = _random_rollout(env_cfg, seed=seed, steps=budget.rollout_steps)
    flat = observations.reshape(-1, observations.shape[-1]).astype(np.float64)
    report.observation_scale = [
        {"mean": float(m), "std": float(s), "min": float(lo), "max": float(hi)}
        for m, s, lo, hi in zip(flat.mean(0), flat.std(0), flat.min(0), flat.max(0))
    ]
    report.findings += _spec_notes(base, image=image)
    report.findings += _scale_findings(env_cfg, flat, image=image)
    report.findings += _reward_findings(rewards, result)
    report.findings += _seeding_findings(env_cfg, seed, budget.seeding_steps)
    report.findings += _action_findings(env_cfg, base, seed)
    return report


def controller_report(env_cfg: EnvConfig, *, episodes: int, seed: int) -> list[str]:
    """``env.base_controller`` alone on the plain env (what a residual policy starts from): its return over
    ``episodes`` episodes, the range of its actions per dimension against the action box, and the share of
    action entries at or beyond the box (saturated: a correction on top of it has no room that way)."""
    from rlpilot.controllers import build_controller

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


def _spec_notes(base, *, image: bool) -> list[Finding]:
    """Infos on what rlpilot does with the env's specs: images, float64 observations, discrete actions."""
    found = []
    if image:
        found.append(
            Finding(
                rule="image_observations",
                severity="info",
                title="image observations",
                evidence={"frame_shape": list(base.observation_spec["observation"].shape[1:]), "layout": "H x W x C"},
                cause="rlpilot scales frames to [0, 1] with ToTensorImage and trains a CNN (model.encoder=auto)",
                fix="see the sample frame PNG; shrink large frames with env.frame_size and env.grayscale, "
                "and give the CNN motion with env.frame_stack (docs/pixels.md)",
            )
        )
    obs_specs = {k: base.observation_spec[k] for k in base.observation_spec.keys(True, True)}
    doubles = [str(k) for k, s in obs_specs.items() if s.dtype == torch.float64]
    if doubles:
        found.append(
            Finding(
                rule="float64_observations",
                severity="info",
                title="float64 observations",
                evidence={"keys": doubles},
                fix="none in rlpilot: it adds DoubleToFloat for these keys (networks run in float32); "
                "in your own TorchRL code add DoubleToFloat()",
            )
        )
    if isinstance(base.action_spec, Categorical):
        n = base.action_spec.n
        found.append(
            Finding(
                rule="action_encoding",
                severity="info",
                title="one-hot vs categorical actions",
                evidence={
                    "rlpilot_action": "categorical index, shape ()",
                    "torchrl_gymenv_action": f"OneHot, shape ({n},)",
                },
                fix="a Q-net needs one output per action either way; with a OneHot spec use "
                "torchrl.modules.OneHotCategorical (torch Categorical sends action 0 every step)",
            )
        )
    return found


def _scale_findings(env_cfg: EnvConfig, flat: np.ndarray, *, image: bool) -> list[Finding]:
    """Non-finite observations (error), or scales a network will struggle with unless normalised (warning)."""
    if not np.isfinite(flat).all():
        return [
            Finding(
                rule="nonfinite_observations",
                severity="error",
                title="non-finite observations",
                evidence={"dimensions": sorted(set(np.argwhere(~np.isfinite(flat))[:, 1].tolist()))},
                cause="the env returned NaN/inf under a random policy",
                fix="fix the env: a NaN observation poisons every network it reaches",
            )
        ]
    std, absmax = flat.std(0), np.abs(flat).max(0)
    wide = [i for i in range(flat.shape[1]) if std[i] > 10 or absmax[i] > 100]
    spread = std.max() / max(std[std > 0].min(), 1e-12) if (std > 0).any() else 1.0
    if not (wide or spread > 100) or env_cfg.normalize_obs or image:
        return []
    return [
        Finding(
            rule="unnormalised_observations",
            severity="warning",
            title="unnormalised observation scales",
            evidence={
                "dimensions": wide or "all",
                "std_max": float(std.max()),
                "abs_max": float(absmax.max()),
                "std_ratio_between_dimensions": float(spread),
            },
            cause="a network learns slowly from inputs far from unit scale, or of very different scales",
            fix="--set env.normalize_obs=true (ObservationNorm, statistics saved with the run)",
        )
    ]


def _reward_findings(rewards: np.ndarray, random_result) -> list[Finding]:
    """Non-finite rewards (error: nothing can learn from them); a reward that never changes: fine when episode
    lengths carry the signal (info), else no signal (warning)."""
    finite = np.isfinite(rewards)
    if not finite.all():
        return [
            Finding(
                rule="reward_nonfinite",
                severity="error",
                title="the env returned NaN/inf rewards",
                evidence={
                    "nonfinite_steps": int((~finite).sum()),
                    "steps": int(finite.size),
                    "values": sorted({str(float(r)) for r in rewards[~finite].reshape(-1)}),
                },
                cause="the reward function produced NaN or inf: returns, advantages and losses become NaN, and "
                "training cannot learn (rlpilot train stops at the first batch that holds one)",
                fix="fix the env's reward (e.g. a division by zero, log(0), an unbounded term)",
            )
        ]
    if np.ptp(rewards) != 0:
        return []
    value = float(rewards.reshape(-1)[0])
    lengths = random_result.lengths
    evidence = {
        "reward_every_step": value,
        "episode_length_min": int(lengths.min()),
        "episode_length_max": int(lengths.max()),
    }
    if lengths.min() < lengths.max() or value != 0:
        return [
            Finding(
                rule="reward_constant",
                severity="info",
                title="constant reward",
                evidence=evidence,
                fix="fine for survival tasks (the signal is how long episodes last); otherwise check the reward "
                "function",
            )
        ]
    return [
        Finding(
            rule="reward_no_signal",
            severity="warning",
            title="reward constant over the rollout",
            evidence=evidence,
            cause="every step gives the same reward and every episode lasts the same: a random policy never sees "
            "a learning signal",
            fix="check the reward, or shape it",
        )
    ]


def _seeding_findings(env_cfg: EnvConfig, seed: int, steps: int = 64) -> list[Finding]:
    first, _ = _random_rollout(env_cfg, seed=seed, steps=steps, num_envs=2)
    again, _ = _random_rollout(env_cfg, seed=seed, steps=steps, num_envs=2)
    other, _ = _random_rollout(env_cfg, seed=seed + 1, steps=steps, num_envs=2)
    if not np.array_equal(first, again, equal_nan=True):
        step = int(np.argmax((first != again).reshape(first.shape[0], -1).any(1)))
        return [
            Finding(
                rule="seeding_not_reproducible",
                severity="error",
                title="seeding does not reproduce",
                evidence={"seed": seed, "diverge_at_step": step},
                cause="the env draws randomness that reset(seed=...) does not seed (the global random module, say)",
                fix="make reset(seed=...) seed every random source of the env (use self.np_random)",
            )
        ]
    if np.array_equal(first, other, equal_nan=True):
        return [
            Finding(
                rule="seed_ignored",
                severity="warning",
                title="seed is ignored",
                evidence={"seeds": [seed, seed + 1], "identical_steps": len(first)},
                cause="the env draws its randomness from a source its seed does not reach",
                fix="pass the seed to super().reset(seed=seed) and draw randomness from self.np_random",
            )
        ]
    return []


def _action_findings(env_cfg: EnvConfig, base, seed: int) -> list[Finding]:
    """Actions drawn from the spec must be valid, and different actions must reach the env."""
    spec = base.action_spec
    vector_env = make_vector_env(env_cfg, 1)
    found = []
    samples = spec.rand(torch.Size([256])).reshape(256, -1).numpy()
    single = vector_env.single_action_space
    invalid = sum(not single.contains(s.reshape(single.shape).astype(single.dtype)) for s in samples)
    if invalid:
        found.append(
            Finding(
                rule="action_spec_mismatch",
                severity="error",
                title="action spec does not match the action space",
                evidence={"invalid_actions": int(invalid), "sampled": 256, "action_space": str(single)},
                cause="the TorchRL action spec allows actions the gymnasium action space does not",
                fix="make the env's action_space describe the actions it accepts",
            )
        )
    if isinstance(spec, Categorical):
        candidates = [np.array([a]) for a in range(int(spec.n))]
    else:
        low, high = vector_env.action_space.low, vector_env.action_space.high
        candidates = [low, high]
    outcomes = []
    for action in candidates:
        obs, _ = vector_env.reset(seed=seed)
        for _ in range(3):  # until the episode ends (the vector env does not reset by itself: it refuses a step)
            obs, _, terminated, truncated, _ = vector_env.step(action.astype(vector_env.action_space.dtype))
            if np.any(terminated) or np.any(truncated):
                break
        outcomes.append(_flat(obs, 1))
    vector_env.close()
    if all(np.array_equal(outcomes[0], o) for o in outcomes[1:]):
        found.append(
            Finding(
                rule="actions_no_effect",
                severity="error",
                title="actions have no effect",
                evidence={"actions": [c.tolist() for c in candidates], "steps_from_one_seeded_state": 3},
                cause="the action may not reach the env (for example a Categorical distribution over a OneHot "
                "spec always sends action 0)",
                fix="decode actions as the spec says, and make step() use the action",
            )
        )
    return found
