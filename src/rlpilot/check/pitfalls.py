"""The single-agent env's pitfalls as findings, and the random-policy probes that find them: the observation and
action specs (float64, a categorical index over one-hot actions), observation scales, rewards, seeding (the same
seed gives the same rollout, another seed another) and whether actions reach the env."""

from __future__ import annotations

import numpy as np
import torch
from torchrl.data import Categorical

from rlpilot.config.sections import EnvConfig
from rlpilot.envs.make import make_vector_env
from rlpilot.findings import Finding


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


def action_findings(env_cfg: EnvConfig, base, seed: int) -> list[Finding]:
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
        outcomes.append(flat_observation(obs, 1))
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
