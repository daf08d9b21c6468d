"""``rlpilot export``: a trained policy as a file that runs on plain tensors, checked against the live policy.

The artifact maps a float32 observation batch ``[B, obs_dim]`` (any B; dict spaces concatenated in
key order, as ``rlpilot check`` lists them) to the env action: an int64 index per row for discrete
spaces, a float32 vector inside the Box bounds for continuous ones. Observation normalisation is
baked in. A JSON signature sits beside it (``<artifact>.json``).

Why not the tutorial's ``torch.jit.trace(actor, TensorDict(...))``: tracing takes tensors, not
TensorDicts, so it raises. Exporting the plain greedy module underneath the TensorDict policy is
what works for all three formats.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rlpilot.common.errors import UserError
from rlpilot.envs.history import HistoryState
from rlpilot.envs.make import env_class, observation_reader, single_spaces, to_numpy
from rlpilot.envs.residual import ResidualLaw, schedule_width
from rlpilot.play.load import LoadedPolicy, load_policy
from rlpilot.play.write import (
    FORMATS,
    PARITY_OBSERVATIONS,
    ExportFailed,
    ExportResult,
    export_folder,
    write_checked,
)
from rlpilot.runs import load_run, versions

CONTINUOUS_TOLERANCE = 1e-5
# Residual runs: the base controller's IK (acos, atan2) and gains (kp 10 rad^-1) amplify float32 rounding, and
# onnxruntime's kernels round differently from torch's in the last bit: seen up to 1.2e-5 action units.
BASE_TOLERANCE = 1e-4


class DeployedPolicy(nn.Module):
    """Raw observation -> env action: the run's normalisation, then its greedy module; for residual RL
    (``env.base_controller``), the base controller's action with that entering it by the run's ``law``
    (:class:`rlpilot.envs.residual.ResidualLaw`, the same value the run's env applied), clipped to the action
    box: the whole controller in one artifact. A stateful base (the PID's integral) makes it
    ``(observation, state) -> (action, next state)``: the state is an input and an output of the artifact,
    zeros at the start of an episode (``state_size`` numbers per row)."""

    def __init__(
        self,
        greedy: nn.Module,
        obs_norm: dict | None,
        obs_dim: int,
        *,
        base: nn.Module | None = None,
        law: ResidualLaw | None = None,
        bounds: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        super().__init__()
        self.greedy = greedy
        loc = obs_norm["loc"] if obs_norm else torch.zeros(obs_dim)
        scale = obs_norm["scale"] if obs_norm else torch.ones(obs_dim)
        self.register_buffer("loc", loc.detach().clone().float())
        self.register_buffer("scale", scale.detach().clone().float())
        self.base = base
        self.state_size = int(getattr(base, "state_size", 0))
        # a plain value (no parameters, no buffers), traced inline; its gate signal (an observation entry, or
        # the base controller's gate_signal) goes into the artifact with the base
        self.law = law if law is not None else ResidualLaw()
        low, high = bounds if bounds is not None else (torch.zeros(0), torch.zeros(0))
        self.register_buffer("low", torch.as_tensor(low).detach().clone().float())
        self.register_buffer("high", torch.as_tensor(high).detach().clone().float())

    def forward(self, observation: torch.Tensor, state: torch.Tensor | None = None):
        action = self.greedy((observation - self.loc) / self.scale)
        if self.base is None:
            return action
        gains, added = self.law.terms(action, observation)
        if not self.state_size:
            return self._clip(self.base(observation, None, gains) + added)
        base_action, next_state = self.base(observation, state, gains)
        return self._clip(base_action + added), next_state

    def _clip(self, action: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(action, self.high), self.low)


def rollout_states(module: nn.Module, observations: torch.Tensor, starts: torch.Tensor, envs: int) -> torch.Tensor:
    """A stateful artifact's parity inputs: the state the live module carries into each of ``observations``
    (rows of ``envs`` envs a step, in rollout order), run step by step, from zeros at each episode's start
    (``starts``: the rows that begin one), as ``rlpilot eval`` and ``examples/deploy_onnx.py`` feed it."""
    states, state = [], torch.zeros(envs, module.state_size)
    with torch.inference_mode():
        for start in range(0, len(observations), envs):
            chunk = observations[start : start + envs]
            state = torch.where(starts[start : start + envs, None], 0.0, state[: len(chunk)])
            states.append(state)
            _, state = module(chunk, state)
    return torch.cat(states)


PARITY_ENVS = 8
STATEFUL_PARITY_ENVS = 4
"""A stateful artifact's parity rollout: 4 envs, so that its 1000 observations run 250 steps, past the arm's
200-step episodes: each env's state is checked across a reset too."""


def parity_observations(
    policy: LoadedPolicy, count: int, seed: int, envs: int = PARITY_ENVS, explore: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw observations from real rollouts: the greedy policy with ``explore`` (30%) random actions, ``envs`` envs
    (rows in step order, ``envs`` a step), and which rows start an episode."""
    env = policy.make_env(num_envs=envs, seed=seed)
    vector_env = env.base_env.vector_env
    read_raw, read = observation_reader(env, normalize=False), observation_reader(env)
    generator = torch.Generator().manual_seed(seed)
    raw, _ = vector_env.reset(seed=seed)
    vector_env.action_space.seed(seed)
    rows, starts, start = [], [], torch.ones(envs, dtype=torch.bool)
    while sum(len(r) for r in rows) < count:
        rows.append(read_raw(raw))
        starts.append(start)
        action = policy.algo.greedy_action(read(raw))
        explored = (torch.rand(action.shape[0], generator=generator) < explore).numpy()
        numpy_action = np.array(to_numpy(env.base_env.env_action(action)))
        numpy_action[explored] = vector_env.action_space.sample()[explored]
        raw, _, terminated, truncated, _ = vector_env.step(numpy_action)
        done = terminated | truncated
        if done.any():
            raw, _ = vector_env.reset(options={"reset_mask": done})
        start = torch.as_tensor(done)
    env.close()
    return torch.cat(rows)[:count], torch.cat(starts)[:count]


def export_run(
    run_path: str | Path,
    fmt: str,
    out_dir: str | Path | None = None,
    *,
    seed: int = 0,
    checkpoint: str = "last",
    force: bool = False,
) -> ExportResult:
    """``force``: replace another run's export in ``out_dir`` (refused otherwise)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format '{fmt}': choose one of {', '.join(FORMATS)}")
    run_path = Path(run_path)
    out_dir = export_folder(run_path, out_dir)
    if load_run(run_path).config().kind == "multiagent":  # the agents are a dimension of the artifact's input
        from rlpilot.play.group import export_group

        return export_group(run_path, fmt, out_dir, seed=seed, checkpoint=checkpoint, force=force)
    policy = load_policy(run_path, checkpoint)
    config = policy.run.config()
    probe_env = policy.make_env(num_envs=1)
    if len(probe_env.observation_spec["observation"].shape) != 2:
        probe_env.close()
        raise UserError(
            "export does not support image observations yet: the artifact would need the pixel chain "
            "(ToTensorImage, GrayScale, Resize, CatFrames) outside the network; use `rlpilot eval RUN` instead"
        )
    obs_dim = int(probe_env.observation_spec["observation"].shape[-1])
    history = carried_state(config.env, obs_dim)
    # a history of the actions the plant received holds the artifact's own: its parity rollout does not explore
    own_actions = history is not None and history.records_actions
    action_spec = probe_env.full_action_spec_unbatched["action"]
    env_box = None
    base = None
    law = None
    if config.env.base_controller != "none":  # residual RL: the base controller goes into the artifact too
        from rlpilot.controllers import ControllerModule, exportable

        residual_env = probe_env.base_env.vector_env
        env_box = residual_env.env.single_action_space  # the env's actions (a gain schedule's policy acts on gains)
        controller, law = residual_env.controller, residual_env.law  # the law the env built from the config
        gains = schedule_width(controller) if law.mode == "gains" else 0
        exportable(controller, config.env.base_controller, obs_dim, gains, gate_signal=law.gate_reads_controller)
        base = ControllerModule(controller)
    probe_env.close()
    module = DeployedPolicy(
        policy.algo.greedy_module,
        policy.obs_norm,
        obs_dim,
        base=base,
        law=law,
        bounds=(torch.as_tensor(env_box.low), torch.as_tensor(env_box.high)) if base is not None else None,
    ).eval()
    envs = STATEFUL_PARITY_ENVS if module.state_size or history is not None else PARITY_ENVS
    observations, starts = parity_observations(policy, PARITY_OBSERVATIONS, seed, envs, 0.0 if own_actions else 0.3)
    inputs = (observations,)
    if module.state_size:
        inputs = (observations, rollout_states(module, observations, starts, envs))
    reference = None
    if history is not None:  # the artifact sees the observation without the history, which it carries itself
        with torch.inference_mode():
            live = module(*inputs)
        reference = live[0] if module.state_size else live  # the run's own actions, from the env's full observations
        module = history.wrap(module).eval()
        reduced = history.reduce(observations)
        inputs = (reduced, rollout_states(module, reduced, starts, envs))
        carried, env_columns = inputs[1][:, module.base_size :], history.carried(observations)
        same = (
            torch.allclose(carried, env_columns, atol=BASE_TOLERANCE)
            if own_actions
            else torch.equal(carried, env_columns)
        )
        if not same:
            raise ExportFailed(f"the history the artifact carries differs from the env's {history.kwarg} columns")
    signature = _signature(
        fmt, FORMATS[fmt], obs_dim, action_spec, config, policy, module.state_size, env_box, law, history
    )
    tolerance = CONTINUOUS_TOLERANCE if base is None else BASE_TOLERANCE
    return write_checked(module, inputs, fmt, out_dir, signature, tolerance, force=force, reference=reference)


def carried_state(env_config, observation_size: int):
    """The observation columns an env's artifact carries as its state instead of taking them as input, or ``None``:
    ``env.history`` (:class:`rlpilot.envs.history.HistoryState`, any env), else what the env's class returns from
    its hook ``export_state(kwargs, observation_size)``, where it has one (the arm's ``obs_history``:
    :class:`rlpilot.envs.arm.history.HistoryState`). What the export reads of it: ``reduce``
    and ``carried`` (the observation without those columns, and the columns), ``wrap(policy)`` (the policy with
    them as its state, after the policy's own), ``state_size``, ``reduced_size``, ``start``, ``steps``, ``kwarg``
    (the setting that adds them), ``in_env_kwargs`` (whether that is the env's keyword argument),
    ``records_actions`` (whether its entries hold the actions returned) and ``layout()`` (the manifest's entry, its
    ``entry`` names)."""
    if env_config.history:
        _, action_space = single_spaces(env_config)  # the plant's own actions (a gain schedule's policy acts on gains)
        return HistoryState(env_config.history, observation_size, int(np.prod(action_space.shape)))
    hook = getattr(env_class(env_config), "export_state", None)
    return hook(dict(env_config.kwargs), observation_size) if callable(hook) else None


def _signature(
    fmt: str,
    file_name: str,
    obs_dim: int,
    action_spec,
    config,
    policy: LoadedPolicy,
    state_size: int = 0,
    env_box=None,
    law: ResidualLaw | None = None,
    history=None,
) -> dict:
    """The artifact's JSON signature. ``history`` (:func:`carried_state`, e.g. an arm run's ``obs_history``): the
    observation input lacks those columns, the state carries them, and the env to play it on is the run's without
    them (``env.kwargs.<history.kwarg>`` 0)."""
    from torchrl.data import Categorical, OneHot

    if isinstance(action_spec, Categorical):
        action = {
            "type": "discrete",
            "n": int(action_spec.n),
            "encoding": "index",
            "decoding": "argmax: an int64 action index per row",
        }
        output = {"name": "action", "shape": ["batch"], "dtype": "int64"}
    elif isinstance(action_spec, OneHot):
        n = int(action_spec.space.n)
        action = {
            "type": "discrete",
            "n": n,
            "encoding": "one_hot",
            "decoding": "a one-hot int64 row per observation; argmax gives the action index",
        }
        output = {"name": "action", "shape": ["batch", n], "dtype": "int64"}
    elif env_box is not None:  # controller + policy: the env's own actions, whatever the policy acts on
        action = {
            "type": "box",
            "low": env_box.low.tolist(),
            "high": env_box.high.tolist(),
            "decoding": "the controller's action, clipped to [low, high]",
        }
        output = {"name": "action", "shape": ["batch", *env_box.shape], "dtype": "float32"}
    else:
        low, high = action_spec.space.low, action_spec.space.high
        action = {
            "type": "box",
            "low": low.tolist(),
            "high": high.tolist(),
            "decoding": "low + (high - low) * (tanh(mean) + 1) / 2, clamped to [low, high]",
        }
        output = {"name": "action", "shape": ["batch", *action_spec.shape], "dtype": "float32"}
    observation = {
        "name": "observation",
        "shape": ["batch", obs_dim],
        "dtype": "float32",
        "note": "raw env observation (dict spaces: keys concatenated in sorted order); "
        "normalisation is inside the artifact",
    }
    env_kwargs = config.env.kwargs
    if history is not None:
        observation["shape"] = ["batch", history.reduced_size]
        observation["note"] += (
            f"; the env's observation without its {history.kwarg} columns ({history.state_size} floats after the "
            f"first {history.start}): the state carries them"
        )
        if history.in_env_kwargs:  # the arm's obs_history: the env's own keyword argument
            env_kwargs = {**env_kwargs, history.kwarg: 0}
    inputs, outputs, state = [observation], [output], None
    if state_size:
        state_input, state = _state_signature(state_size, history)
        inputs.append(state_input)
        outputs.append({**state_input, "name": "next_state", "note": "feed back as 'state' at the next step"})
    return {
        "format": fmt,
        "file": file_name,
        "inputs": inputs,
        "outputs": outputs,
        "state": state,
        "action": action,
        "observation_normalization": "baked in" if policy.obs_norm else "none",
        "controller": (
            {
                "base": config.env.base_controller,
                "base_kwargs": config.env.base_controller_kwargs,
                "residual_scale": config.env.residual_scale,
                "residual_mode": config.env.residual_mode,
                "residual_gate": config.env.residual_gate,
                "residual_gate_index": config.env.residual_gate_index,
                "note": f"the action is {law.describe()}: the whole controller; play it on the plain env",
            }
            if law is not None
            else None
        ),
        "env": {
            "id": config.env.id,
            "kwargs": env_kwargs,
            "max_episode_steps": config.env.max_episode_steps,
            "action_encoding": config.env.action_encoding,
            **(
                {
                    "trained_with": {history.kwarg: history.steps},
                    "note": f"the run's env appended {history.kwarg}; the artifact carries it as state, so it plays "
                    "on the env without it (these kwargs), which measures only the current step",
                }
                if history is not None
                else {}
            ),
        },
        "algo": config.algo,
        "run": str(policy.run.path),
        "frames": policy.run.frames,
        "checkpoint": policy.checkpoint,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(),
    }


def _state_signature(state_size: int, history=None) -> tuple[dict, dict]:
    """The ``state`` input's entry and the signature's ``state``: the base controller's state (the PID's
    integral), then the carried history (:func:`carried_state`); with a history, ``state.layout`` lists the parts
    in column order."""
    entry = {"name": "state", "shape": ["batch", state_size], "dtype": "float32"}
    if history is None:
        note = "the base controller's state (the PID's integral): zeros at the start of an episode, then the previous "
        return {**entry, "note": note + "step's 'next_state' output"}, {"size": state_size, "initial": 0.0}
    layout = []
    if state_size > history.state_size:
        layout.append({"name": "controller", "size": state_size - history.state_size, "note": "the PID's integral"})
    layout.append(history.layout())
    parts = ", then ".join(f"{part['name']} ({part['size']} floats)" for part in layout)
    names = ", ".join(layout[-1]["entry"])
    note = (
        f"{parts}, the history being the env's {history.kwarg}: {history.steps} steps of [{names}], newest first. "
        "Zeros at the start of an episode, then the previous step's 'next_state' output"
    )
    return {**entry, "note": note}, {"size": state_size, "initial": 0.0, "layout": layout}
