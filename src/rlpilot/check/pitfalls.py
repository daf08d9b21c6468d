"""The single-agent env's pitfalls as findings, and the random-policy probes that find them: the observation and
action specs (float64, a categorical index over one-hot actions), observation scales, rewards, seeding (the same
seed gives the same rollout, another seed another) and whether actions reach the env."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torchrl.data import Categorical

from rlpilot.common.findings import Finding
from rlpilot.config.sections import EnvConfig
from rlpilot.envs.make import make_vector_env


def random_rollout(
    env_cfg: EnvConfig, *, seed: int, steps: int, num_envs: int = 8, keep_shape: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Raw observations and rewards of a seeded random policy (seeded action sampling too);
    ``keep_shape``: observations as the env returns them (images), else flattened per env."""
    vector_env = make_vector_env(env_cfg, num_envs)
    vector_env.action_space.seed(seed)
    obs, _ = vector_env.reset(seed=seed)
    observations, rewards, dones = [], [], []
    for _ in range(steps):
        observations.append(np.array(obs) if keep_shape else flat_observation(obs, num_envs))
        obs, reward, terminated, truncated, _ = vector_env.step(vector_env.action_space.sample())
        rewards.append(np.asarray(reward, dtype=np.float64))
        done = terminated | truncated
        dones.append(done)
        if done.any():
            obs, _ = vector_env.reset(options={"reset_mask": done})
    vector_env.close()
    return np.stack(observations), np.stack(rewards)


def flat_observation(obs, num_envs: int) -> np.ndarray:
    if isinstance(obs, dict):
        return np.concatenate([np.asarray(obs[k]).reshape(num_envs, -1) for k in sorted(obs)], -1)
    return np.asarray(obs).reshape(num_envs, -1)


def spec_notes(base, *, image: bool) -> list[Finding]:
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


def scale_findings(env_cfg: EnvConfig, flat: np.ndarray, *, image: bool) -> list[Finding]:
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


def reward_findings(rewards: np.ndarray, random_result) -> list[Finding]:
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


def seeding_findings(env_cfg: EnvConfig, seed: int, steps: int = 64) -> list[Finding]:
    first, _ = random_rollout(env_cfg, seed=seed, steps=steps, num_envs=2)
    again, _ = random_rollout(env_cfg, seed=seed, steps=steps, num_envs=2)
    other, _ = random_rollout(env_cfg, seed=seed + 1, steps=steps, num_envs=2)
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


RESPONSE_STEPS = 64
"""How far ``rlpilot check`` follows two different actions from one seeded state before it says they have no
effect: long enough for a process plant's dead time (the heated tank's 4 to 12 control periods), shared between
the candidates of a discrete space (at least 8 steps each)."""
SATURATION_WARNING = 0.2
"""The share of the probed start-up steps on which a base controller may sit at the action box's bound before
``rlpilot check`` warns that a residual correction has no room there."""


@dataclass
class Probe:
    """One constant action held from a seeded state: the flat observations after each step, ``[T, D]``, and the
    command the env received at each step, ``[T, A]`` (with a base controller: its action, the policy's entered
    and clipped)."""

    observations: np.ndarray
    commands: np.ndarray


def hold(vector_env, action: np.ndarray, seed: int, steps: int) -> Probe:
    """``action`` held for ``steps`` steps from ``reset(seed)``, or until the episode ends (the vector env
    does not reset by itself: it refuses a step)."""
    vector_env.reset(seed=seed)
    observations, commands = [], []
    for _ in range(steps):
        obs, _, terminated, truncated, _ = vector_env.step(action.astype(vector_env.action_space.dtype))
        observations.append(flat_observation(obs, 1)[0].astype(np.float64))
        applied = getattr(vector_env, "applied", None)  # a residual env's command (rlpilot.envs.residual)
        commands.append(np.asarray(action if applied is None else applied, np.float64).reshape(-1).copy())
        if np.any(terminated) or np.any(truncated):
            break
    return Probe(np.stack(observations), np.stack(commands))


def action_findings(env_cfg: EnvConfig, base, seed: int, steps: int = RESPONSE_STEPS) -> list[Finding]:
    """Actions drawn from the spec must be valid, and different actions must reach the env: each candidate
    (every index of a discrete space; a box's low and high) held from one seeded state for up to ``steps``
    steps, the plant's observations compared. An effect that shows only after some steps is a dead time
    (info), not "no effect". With ``env.base_controller`` the plant is probed with its own actions, and the
    controller alone is followed through the residual env: a controller at the box's bound on start-up steps
    leaves a correction no room there (warning)."""
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
    residual = env_cfg.base_controller != "none"
    if residual:  # the controller alone (action 0) on the residual env, then the plant with its own actions
        found += saturation_findings(
            env_cfg.base_controller, vector_env, hold(vector_env, np.zeros(vector_env.action_space.shape), seed, steps)
        )
        vector_env.close()
        vector_env = make_vector_env(replace(env_cfg, base_controller="none"), 1)
    if isinstance(spec, Categorical) and not residual:
        candidates = [np.array([a]) for a in range(int(spec.n))]
    else:
        candidates = [vector_env.action_space.low, vector_env.action_space.high]
    window = min(steps, max(8, 2 * steps // len(candidates)))
    probes = [hold(vector_env, action, seed, window) for action in candidates]
    vector_env.close()
    return found + response_findings(
        probes, [c.reshape(-1).tolist() for c in candidates], box=not isinstance(spec, Categorical)
    )


def response_findings(probes: list[Probe], actions: list, *, box: bool) -> list[Finding]:
    """What the probes of different actions say: no observation entry responds (error), only entries that
    carry the action back respond (warning: the plant itself did not, within the probe), or the plant responds
    k steps after the commands first differ (info: a dead time, where k > 0). An entry that equals one of the
    commands at every probed step of every probe (a box's applied action fed back in the observation) is an
    echo, not the plant responding."""
    steps = min(len(p.observations) for p in probes)
    observations = np.stack([p.observations[:steps] for p in probes])  # [candidates, T, D]
    commands = np.stack([p.commands[:steps] for p in probes])  # [candidates, T, A]
    same = (observations == observations[0]) | (np.isnan(observations) & np.isnan(observations[0]))
    responds = ~same.all(0)  # [T, D]
    echo = np.zeros(observations.shape[-1], bool)
    if box:
        matches = np.isclose(observations[..., :, None], commands[..., None, :], rtol=1e-6, atol=1e-7).any(-1)
        echo = matches.all((0, 1))
    differ = (commands != commands[0]).any((0, 2))  # [T]: the commands differ at this step
    first_command = int(np.argmax(differ)) if differ.any() else 0
    evidence = {"actions": actions, "steps_from_one_seeded_state": steps}
    plant = responds.any(0) & ~echo
    if not responds.any():
        return [
            Finding(
                rule="actions_no_effect",
                severity="error",
                title="actions have no effect",
                evidence=evidence,
                cause="the action may not reach the env (for example a Categorical distribution over a OneHot "
                f"spec always sends action 0), or a dead time longer than {steps} steps",
                fix="decode actions as the spec says, and make step() use the action",
            )
        ]
    if not plant.any():
        return [
            Finding(
                rule="actions_only_echoed",
                severity="warning",
                title=f"only the action fed back in the observation responds within {steps} steps",
                evidence={**evidence, "echo_entries": np.flatnonzero(echo).tolist()},
                cause="the observation carries the applied action, but nothing else in it changes: the plant "
                f"ignores its action, or its dead time is longer than {steps} steps",
                fix="make step() use the action; for a long dead time, nothing to fix",
            )
        ]
    first = np.where(responds.any(0), np.argmax(responds, axis=0), steps)  # each entry's first differing step
    delay = int(first[plant].min()) - first_command
    if delay <= 0:
        return []
    entries = np.flatnonzero(plant & (first == first[plant].min())).tolist()
    after = f"{delay} step{'s' * (delay > 1)}"
    return [
        Finding(
            rule="dead_time",
            severity="info",
            title=f"the plant responds {after} after an action (a dead time)",
            evidence={
                **evidence,
                "first_response_entries": entries[:8],
                **({"echo_entries": np.flatnonzero(echo).tolist()} if echo.any() else {}),
            },
            cause=f"an action shows in the observation only {after} later (a transport delay, an actuator "
            "or sensor lag): a policy's credit for an action arrives that late, and it must remember what is on "
            "its way",
            fix="nothing to fix if the plant has one; let the observation carry the last actions (those still on "
            f"their way) and keep the discount's horizon, 1 / (1 - gamma) steps, well above {delay}",
        )
    ]


def saturation_findings(name: str, residual_env, alone: Probe) -> list[Finding]:
    """The base controller alone over the probe's first steps (an episode's start-up): the share of steps its
    command sits at the action box's bound, where a correction has no room that way (warning above
    :data:`SATURATION_WARNING`)."""
    box = residual_env.env.single_action_space
    low, high = box.low.reshape(-1).astype(np.float64), box.high.reshape(-1).astype(np.float64)
    at_bound = ((alone.commands <= low) | (alone.commands >= high)).any(-1)
    share = float(at_bound.mean())
    if share < SATURATION_WARNING:
        return []
    return [
        Finding(
            rule="controller_saturates",
            severity="warning",
            title=f"the controller saturates the actuator on {100 * share:.0f}% of steps at start-up",
            evidence={
                "controller": name,
                "saturated_steps": int(at_bound.sum()),
                "steps_from_one_seeded_state": len(at_bound),
                "first_unsaturated_step": int(np.argmin(at_bound)) if not at_bound.all() else None,
            },
            cause="its command sits at the action box's bound (a cold start, a large step): a residual correction "
            "pushing further has no effect there, only one pulling back does",
            fix="expected on a start-up; if the policy must act there, start nearer the set-point or soften the "
            "controller (its gains or a set-point ramp)",
        )
    ]
