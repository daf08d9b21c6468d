"""``rlpilot check`` on a multi-agent env: the group layout in words, where the agent dimension sits, and
the pitfalls of multi-agent training (shared or individual rewards, done per agent or per group,
heterogeneous agents, the joint action space no one should enumerate).

The specs and the sample rollout come from TorchRL's ``PettingZooWrapper`` over the PettingZoo env
itself (what any TorchRL user sees); the reference returns (random policy, the hand-written heuristic
where there is one) come from the training backend (``env.backend``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torchrl.data import Categorical, Composite, OneHot

from rlpilot import registry
from rlpilot.check.env import specs_check
from rlpilot.common.findings import Finding, by_severity, count, render_finding
from rlpilot.config.sections import EnvConfig
from rlpilot.multiagent.envs import backend, env_kwargs, make_vector
from rlpilot.multiagent.trainable import greedy_episodes


@dataclass
class GroupCheckReport:
    env_id: str
    wrapper: str = "PettingZooWrapper"
    """The TorchRL wrapper the specs and the rollout come from (``PettingZooWrapper`` or ``VmasEnv``)."""
    groups: list[str] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)
    layout: list[str] = field(default_factory=list)
    check_env_specs: str = ""
    references: list[str] = field(default_factory=list)
    observation_range: str = ""
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return count(self.findings, "error") == 0

    def render(self) -> str:
        lines = [f"rlpilot check: {self.env_id} (multi-agent)", "", "Groups"]
        lines += [f"  {line}" for line in self.groups]
        lines += ["", f"Specs (per agent; TorchRL's {self.wrapper})"] + [f"  {line}" for line in self.specs]
        lines += ["", f"TorchRL check_env_specs: {self.check_env_specs}", ""]
        lines += ["Tensordict of a 3-step rollout (1 env): key, shape, dtype, what the dimensions are"]
        lines += [f"  {line}" for line in self.layout]
        lines += ["", "Reference policies (training backend; return = mean over agents of each one's summed reward)"]
        lines += [f"  {line}" for line in self.references]
        lines += ["", f"Observations under the random policy: {self.observation_range}", "", "Pitfalls"]
        if not self.findings:
            lines.append("  none found")
        for finding in by_severity(self.findings):
            lines += render_finding(finding)
        lines += ["", f"Verdict: {'healthy' if self.healthy else 'NOT healthy (errors above)'}"]
        return "\n".join(lines)


def _spec_text(spec, skip: int = 0) -> str:
    """A spec in words; ``skip`` leading (env batch) dimensions are left out."""
    shape = tuple(spec.shape)[skip:]
    if isinstance(spec, (Categorical, OneHot)):
        return f"Discrete({int(spec.space.n)}) per agent, shape {shape} {str(spec.dtype).replace('torch.', '')}"
    return f"{type(spec).__name__} shape {shape} {str(spec.dtype).replace('torch.', '')}"


def _dims(name: str, shape: tuple, group: str, n_agents: int) -> str:
    """Words for the dimensions of a rollout entry: [time, agents, features]."""
    words = ["time"]
    rest = list(shape[1:])
    if name.split("/")[-2:-1] == [group] or name.startswith(f"{group}/") or f"/{group}/" in name:
        if rest and rest[0] == n_agents:
            words.append("agent")
            rest = rest[1:]
    words += ["feature"] * len(rest)
    return "[" + ", ".join(words) + "]"


def torchrl_env(env_cfg: EnvConfig):
    """The env as TorchRL wraps it, one copy: ``PettingZooWrapper`` over the PettingZoo env, or ``VmasEnv``
    (whose batch dimension, 1 here, is dropped from the rollout shown)."""
    module = registry.resolve_multiagent_env(env_cfg.id)
    kwargs = env_kwargs(env_cfg)
    if registry.is_vmas_env(env_cfg.id):
        from torchrl.envs.libs.vmas import VmasEnv

        max_steps = kwargs.pop("max_cycles", 100)
        scenario = env_cfg.id.removeprefix("vmas.")
        return VmasEnv(scenario=scenario, num_envs=1, continuous_actions=False, max_steps=max_steps, **kwargs)
    from torchrl.envs import PettingZooWrapper

    return PettingZooWrapper(module.parallel_env(**kwargs), categorical_actions=True)


def check_group_env(env_cfg: EnvConfig, *, episodes: int | None = None, seed: int = 0) -> GroupCheckReport:
    report = GroupCheckReport(env_cfg.id)
    env = torchrl_env(env_cfg)
    report.wrapper = type(env).__name__
    batched = len(env.batch_size) > 0  # VmasEnv: [num_envs]
    group_map = env.group_map
    for group, agents in group_map.items():
        report.groups.append(f"{group}: {len(agents)} agents ({', '.join(agents)})")
    if len(group_map) > 1:
        report.findings.append(
            Finding(
                rule="heterogeneous_groups",
                severity="error",
                title=f"{len(group_map)} groups of agents",
                evidence={"groups": {g: len(a) for g, a in group_map.items()}},
                cause="agents with different observation or action spaces form separate groups; mappo/ippo "
                "here train one group of interchangeable agents",
                fix="train one group (a PettingZoo env whose agents share spaces); heterogeneous groups are not "
                "supported yet",
            )
        )
    group = next(iter(group_map))
    agents = group_map[group]
    n_agents = len(agents)
    obs_spec = env.full_observation_spec[group]
    action_spec = env.full_action_spec[group, "action"]
    for key, spec in obs_spec.items(True, True):
        name = "/".join((group, *((key,) if isinstance(key, str) else key)))
        report.specs.append(f"{name:<22} {_spec_text(spec, len(env.batch_size))}")
    report.specs.append(f"{group + '/action':<22} {_spec_text(action_spec, len(env.batch_size))}")
    reward_spec = env.full_reward_spec[group, "reward"]
    report.specs.append(f"{group + '/reward':<22} {_spec_text(reward_spec, len(env.batch_size))}: one per agent")
    skip = len(env.batch_size)
    if (group, "done") in env.full_done_spec.keys(True):
        agent_done = tuple(env.full_done_spec[group, "done"].shape)[skip:]
        where = f"; {group}/done {agent_done} per agent"
    else:
        where = ": one for the whole group (no per-agent done)"
    report.specs.append(f"{'done (root)':<22} shape (1,): the env's episode end{where}")
    for key in env.full_observation_spec.keys():
        if key != group and not isinstance(env.full_observation_spec[key], Composite):
            shared = _spec_text(env.full_observation_spec[key], len(env.batch_size))
            report.specs.append(f"{key:<22} {shared}: shared, the global state")
    report.check_env_specs, findings = specs_check(env, seed, "fix the PettingZoo env's observation/action spaces")
    report.findings += findings
    env.set_seed(seed)
    rollout = env.rollout(3, break_when_any_done=False)
    if batched:
        rollout = rollout[0]
    names = {(key if isinstance(key, str) else "/".join(key)): key for key in rollout.keys(True, True)}
    for name in sorted(names, key=lambda n: (n.count("/"), n)):
        value = rollout.get(names[name])
        shape = tuple(value.shape)
        dims = _dims(name, shape, group, n_agents)
        report.layout.append(f"{name:<28} {str(shape):<14} {str(value.dtype).replace('torch.', ''):<8} {dims}")
    env.close()
    joint = int(action_spec.space.n) ** n_agents
    report.findings.append(
        Finding(
            rule="joint_action_space",
            severity="info",
            title=f"joint action space: {int(action_spec.space.n)}^{n_agents} = {joint:,} combinations",
            evidence={"per_agent_actions": int(action_spec.space.n), "agents": n_agents},
            cause="the 'exploding action spec' of multi-agent tutorials is this joint space; each agent "
            "samples its own action from its own observation, so nothing ever enumerates it",
            fix="nothing to change: actions are [..., agents] tensors, one categorical per agent",
        )
    )
    report.references, observations, rewards, dones = _references(env_cfg, episodes or 200, seed)
    report.observation_range = (
        f"{observations.shape[-1]} numbers per agent, |x| max {np.abs(observations).max():.3g}, "
        f"std per number {observations.reshape(-1, observations.shape[-1]).std(0).min():.3g}.."
        f"{observations.reshape(-1, observations.shape[-1]).std(0).max():.3g}"
    )
    report.findings += _reward_findings(rewards, n_agents)
    report.findings.append(
        Finding(
            rule="done_per_group",
            severity="info",
            title="all agents end their episode together" if dones else "agents can end at different steps",
            evidence={"episode_ends_seen": int(dones)},
            cause="simple_spread truncates every agent at max_cycles; envs where agents leave early need a mask",
            fix="nothing to change here; the per-agent done is the env's done repeated per agent (GAE per agent)",
        )
    )
    return report


def _references(env_cfg: EnvConfig, episodes: int, seed: int):
    from rlpilot.play.group import controller

    lines = []
    env = make_vector(env_cfg, episodes, seed=seed, sized_by=("--episodes",))
    lines.append(f"backend {backend(env_cfg)}, {episodes} episodes of {env.max_cycles} steps each")
    for name in ("random", "heuristic"):
        try:
            policy = controller(name, env)
        except Exception:  # no heuristic for this env
            continue
        per_agent, task = greedy_episodes(env, policy, seed=seed)
        returns = per_agent.mean(1)
        extra = "  ".join(f"{k} {v:.3g}" for k, v in task.items())
        lines.append(f"{name:<10} return mean {returns.mean():.2f}  std {returns.std():.2f}   {extra}")
    observation = env.reset(seed=seed)
    observations, rewards, ends = [observation], [], 0
    generator = torch.Generator().manual_seed(seed)
    for _ in range(env.max_cycles or 25):
        action = torch.randint(env.num_actions, observation.shape[:-1], generator=generator)
        observation, reward, terminated, truncated = env.step(action)
        observations.append(observation)
        rewards.append(reward)
        ends += int((terminated | truncated).sum())
    env.close()
    return lines, torch.stack(observations).numpy(), torch.stack(rewards).numpy(), ends


def _reward_findings(rewards: np.ndarray, n_agents: int) -> list[Finding]:
    """Shared (every agent gets the same number) or individual rewards, from the random rollout."""
    spread = np.abs(rewards - rewards.mean(-1, keepdims=True)).max()
    if n_agents > 1 and spread < 1e-6:
        return [
            Finding(
                rule="shared_reward",
                severity="info",
                title="rewards are shared: every agent gets the same reward",
                evidence={"max_difference_between_agents": float(spread)},
                cause="a team reward gives no agent credit of its own (the credit assignment problem)",
                fix="mappo's centralised critic sees every agent's observation; an agent id helps shared parameters",
            )
        ]
    return [
        Finding(
            rule="individual_reward",
            severity="info",
            title="rewards differ between agents",
            evidence={"max_difference_between_agents": round(float(spread), 4)},
            cause="part of each agent's reward is its own (simple_spread: -1 per collision, beside the shared "
            "coverage term weighted by local_ratio)",
            fix="each agent's advantage uses its own reward and value; the group return logged is their mean",
        )
    ]
