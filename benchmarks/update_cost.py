"""Cost of one gradient update (loss forward, backward, clip, Adam): TorchRL's loss module against rlpilot's
plain-torch update, on the same networks and minibatch (PPO and DQN presets), and GAE per batch.

The TorchRL modules are built over the algorithm's own networks by ``tests/torchrl_references.py`` (the
references the tests prove rlpilot's updates equal to).

    python benchmarks/update_cost.py [--minibatch 256] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
import stamp  # noqa: E402

from rlpilot.config import load_config  # noqa: E402
from rlpilot.control.algos.dqn import DQN, dqn_loss, n_step_transitions  # noqa: E402
from rlpilot.control.algos.ppo import MINIBATCH_KEYS, PPO, gae, ppo_loss  # noqa: E402
from rlpilot.control.collect import BatchCollector  # noqa: E402
from rlpilot.envs import make_env  # noqa: E402
from torchrl_references import dqn_reference, ppo_reference  # noqa: E402


def seconds_per_call(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def ppo_costs(minibatch: int, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    config = load_config(
        "ppo-cartpole",
        overrides=[f"ppo.minibatch_size={minibatch}", "env.num_envs=8", f"ppo.steps_per_env={max(32, minibatch // 8)}"],
    )
    env = make_env(config.env, seed=0)
    algo = PPO(config, env, torch.device("cpu"))
    batch = BatchCollector(env, algo.act, steps=config.ppo.steps_per_env, seed=0).collect()
    reference, reference_gae = ppo_reference(algo, clip_epsilon=0.2)
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    sample = batch.reshape(-1)[:minibatch]
    columns = {key: sample.get(key) for key in MINIBATCH_KEYS}

    def step(out) -> None:
        loss = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
        algo.guard.step(algo.optimizer, algo.parameters, loss, config.ppo.max_grad_norm, 0)

    def gae_module() -> None:
        with torch.no_grad():
            reference_gae(batch)

    def gae_ours() -> None:
        with torch.no_grad():
            gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)

    return {
        "ClipPPOLoss update": seconds_per_call(lambda: step(reference(sample)), repeats),
        "rlpilot ppo_loss update": seconds_per_call(lambda: step(ppo_loss(algo, columns, config.ppo, 0.2)), repeats),
        "GAE module per batch": seconds_per_call(gae_module, max(10, repeats // 10)),
        "rlpilot gae per batch": seconds_per_call(gae_ours, max(10, repeats // 10)),
    }


def dqn_costs(repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    config = load_config("dqn-cartpole", overrides=["dqn.n_step=1"])
    env = make_env(config.env, seed=0)
    algo = DQN(config, env, torch.device("cpu"))
    batch = n_step_transitions(BatchCollector(env, algo.act, steps=32, seed=0).collect(), 1, config.dqn.gamma)
    sample = batch.reshape(-1)[: config.dqn.batch_size]
    reference = dqn_reference(algo)

    def step(out) -> None:
        algo.guard.step(algo.optimizer, algo.parameters, out["loss"], config.dqn.max_grad_norm, 0)

    return {
        "DQNLoss update": seconds_per_call(lambda: step(reference(sample.clone())), repeats),
        "rlpilot dqn_loss update": seconds_per_call(
            lambda: step(dqn_loss(algo.q_net, algo.target_net, sample, config.dqn)), repeats
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--out", help="result file (stamped)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lines = stamp.header()
    ppo, dqn = ppo_costs(args.minibatch, args.repeats), dqn_costs(args.repeats)
    for name, seconds in {**ppo, **dqn}.items():
        lines.append(f"{name:<26} {seconds * 1e3:7.3f} ms")
    lines += [
        f"ratio ClipPPOLoss / ppo_loss per update (minibatch {args.minibatch}): "
        f"{ppo['ClipPPOLoss update'] / ppo['rlpilot ppo_loss update']:.2f}x",
        f"ratio GAE module / gae per batch: {ppo['GAE module per batch'] / ppo['rlpilot gae per batch']:.2f}x",
        f"ratio DQNLoss / dqn_loss per update (batch 64): "
        f"{dqn['DQNLoss update'] / dqn['rlpilot dqn_loss update']:.2f}x",
        *stamp.footer(),
    ]
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        data = {"stamp": lines[: len(stamp.header())] + stamp.footer(), "minibatch": args.minibatch, "ms": {}}
        data["ms"] = {name: seconds * 1e3 for name, seconds in {**ppo, **dqn}.items()}
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
