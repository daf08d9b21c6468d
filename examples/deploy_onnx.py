"""Run an exported rlpilot policy with onnxruntime on its gymnasium env: no torch, no torchrl.

    rlpilot export runs/<run> --format onnx
    python examples/deploy_onnx.py runs/<run>/export/policy.onnx --episodes 5 --seed 0

Needs only numpy, onnxruntime and gymnasium. The JSON signature beside the model names the env and
says how the output decodes (an action index, or a value inside the Box bounds). A controller with state
(a residual policy on the PID: its integral) has a second input and output: the state starts at zeros
each episode and each step's ``next_state`` goes back in as ``state``.
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
    return gym.make(spec["id"], max_episode_steps=spec["max_episode_steps"], **spec["kwargs"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="policy.onnx written by rlpilot export")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    signature = json.loads(Path(args.model + ".json").read_text())
    session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    spec = signature["env"]
    if spec["id"].startswith("rlpilot/"):  # rlpilot's own envs (the arm): numpy + gymnasium, no torch
        from rlpilot.envs.arm.env import register_envs

        register_envs()
    env = make(spec)
    discrete = signature["action"]["type"] == "discrete"
    state_size = (signature.get("state") or {}).get("size", 0)
    returns = []
    for episode in range(args.episodes):
        observation, _ = env.reset(seed=args.seed + episode)
        state = np.zeros((1, state_size), np.float32)
        total, done = 0.0, False
        while not done:
            feed = {"observation": flatten(observation)[None, :]}
            if state_size:
                feed["state"] = state
                action, state = session.run(None, feed)
            else:
                (action,) = session.run(None, feed)
            if discrete:  # an index, or a one-hot row (signature["action"]["encoding"])
                action = int(np.argmax(action[0])) if np.ndim(action[0]) else int(action[0])
            else:
                action = action[0]
            observation, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        print(f"episode {episode}: return {total:.2f}")
    print(f"mean return over {args.episodes} episodes: {np.mean(returns):.2f}")


if __name__ == "__main__":
    main()
