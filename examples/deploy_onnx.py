"""Run an exported rlpilot policy with onnxruntime on its gymnasium env: no torch, no torchrl.

    rlpilot export runs/<run> --format onnx
    python examples/deploy_onnx.py runs/<run>/export/policy.onnx --episodes 5 --seed 0

Needs only numpy, onnxruntime and gymnasium. The JSON signature beside the model names the env and
says how the output decodes (an action index, or a value inside the Box bounds). A controller with state
(a residual policy on the PID: its integral) has a second input and output: the state starts at zeros
each episode and each step's ``next_state`` goes back in as ``state``. ``OnnxController`` and
``make_env`` are the parts to reuse (``examples/fixed_rate.py`` runs the same controller at a fixed rate).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnxruntime


def flatten(observation) -> np.ndarray:
    """The model's input row: dict observations are concatenated in sorted key order."""
    if isinstance(observation, dict):
        return np.concatenate([np.asarray(observation[k], np.float32).ravel() for k in sorted(observation)])
    return np.asarray(observation, np.float32).ravel()


def make(spec: dict) -> gym.Env:
    """The env the signature names: a gymnasium id, or your own class (``package.module:Class``, imported from
    the working directory or the path, as rlpilot does; the trust was yours when you exported it)."""
    module_name, _, name = spec["id"].partition(":")
    if name:
        import importlib
        import os
        import sys

        sys.path.append(os.getcwd())
        env_class = getattr(importlib.import_module(module_name), name, None)
        if isinstance(env_class, type) and issubclass(env_class, gym.Env):
            env = env_class(**spec["kwargs"])
            steps = spec["max_episode_steps"]
            return gym.wrappers.TimeLimit(env, steps) if steps else env
    if spec["id"].startswith("rlpilot/"):  # rlpilot's own envs (the arm): numpy + gymnasium, no torch
        from rlpilot.envs.arm.env import register_envs

        register_envs()
    return gym.make(spec["id"], max_episode_steps=spec["max_episode_steps"], **spec["kwargs"])


def one_thread() -> onnxruntime.SessionOptions:
    """Session options for a control loop at batch 1: one thread, operators run in order (no thread pool to
    wake, nothing to contend with the loop for the core)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return options


class OnnxController:
    """An exported policy as one call per control step: ``controller(observation)`` is the env action for one
    observation. The inputs after the observation are the controller's state (the PID's integral, a history
    window): each starts at the signature's ``state.initial`` (zeros) with the shape the signature gives it,
    and each output ``next_<name>`` goes back in as ``<name>`` at the next step; ``reset()`` at an episode's
    start. Nothing here knows the state's size or meaning: any artifact ``rlpilot export`` writes, with or
    without state, runs the same way."""

    def __init__(self, model: str | Path, options: onnxruntime.SessionOptions | None = None):
        self.signature = json.loads(Path(f"{model}.json").read_text())
        self.session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.discrete = self.signature["action"]["type"] == "discrete"
        self.state_inputs = self.signature["inputs"][1:]
        self.outputs = [given["name"] for given in self.signature["outputs"]]  # action, then next_<state input>
        self.carried = [name.removeprefix("next_") for name in self.outputs[1:]]
        self.reset()

    def reset(self) -> None:
        """The state at an episode's start (the signature's ``state.initial``, zeros)."""
        initial = (self.signature.get("state") or {}).get("initial", 0.0)
        self.feed = {
            given["name"]: np.full([1 if d == "batch" else d for d in given["shape"]], initial, np.float32)
            for given in self.state_inputs
        }

    def raw(self, row: np.ndarray) -> np.ndarray:
        """The model's output for one flat float32 row ``[1, obs_dim]``, its state carried: one ``session.run``."""
        self.feed["observation"] = row
        action, *next_state = self.session.run(self.outputs, self.feed)
        self.feed.update(zip(self.carried, next_state))
        return action

    def __call__(self, observation):
        action = self.raw(flatten(observation)[None, :])
        if self.discrete:  # an index, or a one-hot row (signature["action"]["encoding"])
            return int(np.argmax(action[0])) if np.ndim(action[0]) else int(action[0])
        return action[0]

    def make_env(self) -> gym.Env:
        return make(self.signature["env"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="policy.onnx written by rlpilot export")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    controller = OnnxController(args.model)
    env = controller.make_env()
    returns = []
    for episode in range(args.episodes):
        observation, _ = env.reset(seed=args.seed + episode)
        controller.reset()
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(controller(observation))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        print(f"episode {episode}: return {total:.2f}")
    print(f"mean return over {args.episodes} episodes: {np.mean(returns):.2f}")


if __name__ == "__main__":
    main()
