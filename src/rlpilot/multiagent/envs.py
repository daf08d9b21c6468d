"""Multi-agent envs behind one batched tensor API, for the collector and the evaluator.

Every backend speaks the same small API (what :class:`rlpilot.multiagent.spread.SpreadVector` defines):
``reset(seed=, mask=) -> obs [E, n_agents, obs]``, ``step(action [E, n_agents]) -> obs, reward
[E, n_agents], terminated [E], truncated [E]`` (no auto-reset), and ``n_agents``, ``obs_dim``,
``num_actions``, ``agent_names``, ``group``, ``max_cycles``, ``num_envs``.

- ``native``: rlpilot's tensor implementation (``mpe2.simple_spread_v3``; parity-tested against mpe2).
- ``pettingzoo``: TorchRL's ``PettingZooWrapper`` over the PettingZoo parallel env, one copy per env,
  stepped one after the other. Any PettingZoo parallel env whose agents form one group with flat
  observations and discrete actions trains this way; it pays TorchRL's per-step TensorDict cost per copy.
- ``vmas``: TorchRL's ``VmasEnv`` over a VMAS scenario (``vmas.navigation``): VMAS steps every env as one
  batch of tensors, so one TensorDict per batch step; discrete actions (VMAS's 3 x 3 grid per agent).
  VMAS is GPL-3: an optional extra (``pip install 'rlpilot[vmas]'``), never imported otherwise.
"""

from __future__ import annotations

import warnings

import torch
from tensordict import TensorDict
from torchrl.data import Categorical, OneHot

from rlpilot import registry
from rlpilot.common.bounds import FLOAT_BYTES, Allocation, refuse_beyond
from rlpilot.common.errors import UserError
from rlpilot.config.sections import EnvConfig

# a version note from TorchRL, not a problem: the PettingZoo backend is tested here with pettingzoo 1.27
warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")


def backend(env_cfg: EnvConfig) -> str:
    """``native``, ``pettingzoo`` or ``vmas`` (``auto``: vmas for ``vmas.*`` ids, else native where rlpilot
    has it)."""
    if registry.is_vmas_env(env_cfg.id):
        if env_cfg.backend not in ("auto", "vmas"):
            raise UserError(f"{env_cfg.id} is a VMAS scenario: env.backend=auto or vmas (got {env_cfg.backend})")
        return "vmas"
    if env_cfg.backend == "vmas":
        raise UserError(f"env.backend=vmas runs VMAS scenarios (vmas.navigation, ...), not {env_cfg.id}")
    if env_cfg.backend == "auto":
        return "native" if env_cfg.id in registry.NATIVE_MULTIAGENT else "pettingzoo"
    if env_cfg.backend == "native" and env_cfg.id not in registry.NATIVE_MULTIAGENT:
        raise UserError(
            f"env.backend=native: rlpilot has no batched implementation of {env_cfg.id} "
            f"(only {', '.join(registry.NATIVE_MULTIAGENT)}); use env.backend=pettingzoo"
        )
    return env_cfg.backend


def env_kwargs(env_cfg: EnvConfig) -> dict:
    kwargs = dict(env_cfg.kwargs)
    if env_cfg.max_episode_steps is not None:
        kwargs["max_cycles"] = env_cfg.max_episode_steps
    return kwargs


GROUP_STEP_COPIES = 8
"""An env step of a group holds about this many ``[n_agents, obs]`` float arrays: the observation, its copy for
the caller, and the temporaries of the dynamics (the native simple_spread's pairwise offsets included)."""


def group_env_bytes(n_agents: int, obs_dim: int) -> int:
    """Bytes one copy of a group's env holds while it steps (:data:`GROUP_STEP_COPIES`)."""
    return GROUP_STEP_COPIES * n_agents * obs_dim * FLOAT_BYTES


def make_vector(
    env_cfg: EnvConfig,
    num_envs: int,
    *,
    seed: int,
    device: torch.device | str = "cpu",
    sized_by: tuple[str, ...] = ("env.num_envs",),
):
    """``num_envs`` copies of ``env_cfg.id`` behind the batched API, reset with ``seed``. Copies that would not fit
    in memory (their size read from one copy built first) are refused in one line naming ``sized_by``, the
    settings that asked for them."""
    if problem := registry.env_kwargs_problem(env_cfg.id, env_cfg.kwargs):  # check ENV and artifacts too
        raise UserError(problem)
    if num_envs > 1:
        probe = _build(env_cfg, 1, seed=seed, device=device)
        copies = Allocation(
            f"{num_envs:,} copies of {env_cfg.id}", num_envs * group_env_bytes(probe.n_agents, probe.obs_dim), sized_by
        )
        probe.close()
        refuse_beyond([copies], device=str(device))
    env = _build(env_cfg, num_envs, seed=seed, device=device)
    env.reset(seed=seed)
    return env


def _build(env_cfg: EnvConfig, num_envs: int, *, seed: int, device: torch.device | str):
    module = registry.resolve_multiagent_env(env_cfg.id, backend(env_cfg))
    kwargs = env_kwargs(env_cfg)
    try:
        if backend(env_cfg) == "native":
            return registry.load_object(registry.NATIVE_MULTIAGENT[env_cfg.id])(num_envs, device=device, **kwargs)
        if backend(env_cfg) == "vmas":
            return VmasVector(env_cfg.id.removeprefix("vmas."), num_envs, device=device, seed=seed, **kwargs)
        return PettingZooVector(module, num_envs, device=device, **kwargs)
    except TypeError as exc:  # a wrong keyword in env.kwargs
        raise UserError(f"{env_cfg.id} does not take env.kwargs {sorted(kwargs)}: {exc}") from None
    except (ValueError, AssertionError) as exc:  # a value the env refuses (N=1, local_ratio=2, ...)
        raise UserError(f"{env_cfg.id} refuses env.kwargs {kwargs}: {exc}") from None


class PettingZooVector:
    """Copies of a PettingZoo parallel env through TorchRL's ``PettingZooWrapper``, as one batch."""

    def __init__(self, module, num_envs: int, *, device: torch.device | str = "cpu", **kwargs):
        from torchrl.envs import PettingZooWrapper

        self.envs = [
            PettingZooWrapper(module.parallel_env(**kwargs), categorical_actions=True, device=device)
            for _ in range(num_envs)
        ]
        first = self.envs[0]
        groups = first.group_map
        if len(groups) != 1:
            raise UserError(
                f"{module.__name__} has {len(groups)} agent groups ({', '.join(groups)}): mappo/ippo train one "
                "group of interchangeable agents; heterogeneous groups are not supported yet (docs/multi-agent.md)"
            )
        self.group, self.agent_names = next(iter(groups.items()))
        obs_spec = first.full_observation_spec[self.group, "observation"]
        action_spec = first.full_action_spec[self.group, "action"]
        if len(obs_spec.shape) != 2 or not isinstance(action_spec, (Categorical, OneHot)):
            raise UserError(
                f"{module.__name__}: mappo/ippo need flat vector observations and discrete actions per agent "
                f"(got observation {tuple(obs_spec.shape)}, action {type(action_spec).__name__})"
            )
        self.name = module.__name__.rpartition(".")[2]
        self.num_envs, self.n_agents = num_envs, len(self.agent_names)
        self.obs_dim, self.num_actions = int(obs_spec.shape[-1]), int(action_spec.space.n)
        self.max_cycles = int(kwargs.get("max_cycles", getattr(first._env, "max_cycles", 0)) or 0) or None
        self.device = torch.device(device)
        self.obs = torch.zeros(num_envs, self.n_agents, self.obs_dim, device=self.device)

    def reset(self, *, seed: int | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        for i, env in enumerate(self.envs):
            if mask is not None and not bool(mask[i]):
                continue
            if seed is not None:
                env.set_seed(seed + i)
            self.obs[i] = env.reset()[self.group, "observation"]
        return self.obs.clone()

    def step(self, action: torch.Tensor):
        rewards = torch.zeros(self.num_envs, self.n_agents, device=self.device)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        truncated = torch.zeros_like(terminated)
        for i, env in enumerate(self.envs):
            td = TensorDict({self.group: TensorDict({"action": action[i]}, [self.n_agents])}, [])
            out = env.step(td)["next"]
            self.obs[i] = out[self.group, "observation"]
            rewards[i] = out[self.group, "reward"].squeeze(-1)
            terminated[i], truncated[i] = out["terminated"].any(), out["truncated"].any()
        return self.obs.clone(), rewards, terminated, truncated

    def close(self) -> None:
        for env in self.envs:
            env.close()


class VmasVector:
    """A VMAS scenario through TorchRL's ``VmasEnv``, behind the batched API (one group, discrete actions).

    The time limit is counted here: VMAS's own ``max_steps`` reports the limit as ``done``/``terminated``
    (TorchRL's ``VmasEnv`` has no ``truncated`` key), which would stop bootstrapping at a time-out; here
    ``terminated`` is the scenario's own end (navigation: every agent on its goal) and ``truncated`` the limit.
    """

    def __init__(self, scenario: str, num_envs: int, *, device="cpu", seed: int = 0, max_cycles: int = 100, **kwargs):
        from torchrl.envs.libs.vmas import VmasEnv

        self.name = scenario
        self.env = VmasEnv(
            scenario=scenario,
            num_envs=num_envs,
            continuous_actions=False,
            max_steps=None,
            device=device,
            seed=seed,
            **kwargs,
        )
        groups = self.env.group_map
        if len(groups) != 1:
            raise UserError(
                f"vmas.{scenario} has {len(groups)} agent groups ({', '.join(groups)}): mappo/ippo train one "
                "group; heterogeneous groups are not supported yet (docs/multi-agent.md)"
            )
        self.group, self.agent_names = next(iter(groups.items()))
        obs_spec = self.env.full_observation_spec[self.group, "observation"]
        if len(obs_spec.shape) != 3:
            raise UserError(f"vmas.{scenario}: mappo/ippo need flat observations (got {tuple(obs_spec.shape[1:])})")
        self.num_envs, self.n_agents = num_envs, len(self.agent_names)
        self.obs_dim = int(obs_spec.shape[-1])
        self.num_actions = int(self.env.full_action_spec[self.group, "action"].space.n)
        self.max_cycles = max_cycles
        self.device = torch.device(device)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def reset(self, *, seed: int | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        if seed is not None:
            self.env.set_seed(seed)
        if mask is None or bool(mask.all()):
            self.obs = self.env.reset()[self.group, "observation"]
            self.t = torch.zeros_like(self.t)
        else:  # VmasEnv resets the envs flagged in "_reset" (the others come back as zeros: kept from before)
            mask = mask.to(self.device)
            out = self.env.reset(TensorDict({"_reset": mask.view(-1, 1)}, [self.num_envs], device=self.device))
            self.obs = torch.where(mask.view(-1, 1, 1), out[self.group, "observation"], self.obs)
            self.t = self.t.masked_fill(mask, 0)
        return self.obs

    def step(self, action: torch.Tensor):
        action = action.clone()  # VMAS reshapes actions in place: never the policy's inference-mode tensor
        td = TensorDict({self.group: TensorDict({"action": action}, [self.num_envs, self.n_agents])}, [self.num_envs])
        out = self.env.step(td.to(self.device))["next"]
        self.t = self.t + 1
        terminated = out["terminated"].view(-1)
        self.obs = out[self.group, "observation"]
        return (
            self.obs,
            out[self.group, "reward"].squeeze(-1),
            terminated,
            (self.t >= self.max_cycles) & ~terminated,
        )

    def close(self) -> None:
        self.env.close()


def navigation_heuristic(obs: torch.Tensor, *, gain: float = 2.0, deadband: float = 0.1) -> torch.Tensor:
    """VMAS navigation's hand-written policy from each agent's own observation (``[pos, vel, pos - goal,
    lidar...]``): per axis, push towards the velocity ``gain x (goal - pos)`` when the velocity is more than
    ``deadband`` off it, else coast. Ignores the lidar (other agents). Returns VMAS's flat discrete action
    (3 x 3 grid: index x * 3 + y, each 0 stay, 1 minus, 2 plus)."""
    velocity, to_goal = obs[..., 2:4], -obs[..., 4:6]
    error = gain * to_goal - velocity
    axis = torch.where(error.abs() <= deadband, 0, torch.where(error > 0, 2, 1))
    return axis[..., 0] * 3 + axis[..., 1]


SPREAD_CAPTURE = 0.1  # mpe2's simple_spread: a landmark is occupied by an agent within this distance
SPREAD_COLLISION = 0.3  # two agents of size 0.15 touch


def task_metrics(env, observation: torch.Tensor) -> dict[str, float]:
    """End-of-episode measures of the task read from the last observations ``[E, n_agents, obs]``
    (simple_spread: share of landmarks occupied, summed nearest-agent distance, touching agent pairs);
    empty for tasks without any."""
    if getattr(env, "name", "") != "simple_spread_v3":
        return {}
    n = env.n_agents
    landmarks = observation[..., 4 : 4 + 2 * n].unflatten(-1, (n, 2)).norm(dim=-1)  # [E, agent, landmark]
    others = observation[..., 4 + 2 * n : 4 + 2 * n + 2 * (n - 1)].unflatten(-1, (n - 1, 2)).norm(dim=-1)
    nearest = landmarks.min(1).values  # [E, landmark]
    return {
        "landmarks_covered": float((nearest < SPREAD_CAPTURE).float().mean()),
        "min_dist_sum": float(nearest.sum(-1).mean()),
        "collisions": float((others < SPREAD_COLLISION).float().sum((-1, -2)).mean() / 2),
    }
