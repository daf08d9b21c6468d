"""Cost of one gradient update (loss forward, backward, clip, Adam): TorchRL's loss module against rlpilot's
plain-torch update, on the same networks and minibatch (PPO and DQN presets), and GAE per batch.

The TorchRL modules are built over the algorithm's own networks by ``tests/torchrl_references.py`` (the
references the tests prove rlpilot's updates equal to).

With ``--limit``, the physical limit of the update at the RL Zoo's settings (PPO 64-64 minibatch 256, DQN 256-256
batch 64, SAC 256-256 batch 256, TD3 400-300 batch 256; and SAC/TD3 at the presets' 64-64): per case, the
floating-point operations of one update counted by ``torch.utils.flop_counter.FlopCounterMode`` (TD3: the mean of
a critic-only and a critic+actor update), the update's time eager (``train.compile=off``) and compiled
(``train.compile=on``, after its compilation), and the same update's matrix multiplies (every ``mm``/``addmm``/
``bmm`` it dispatches, recorded with their shapes) timed alone on random tensors: their rate is this CPU's
single-thread peak at those shapes, and the achieved rate (update FLOPs / update time) is reported against it.

    python benchmarks/update_cost.py [--minibatch 256] [--threads 1] [--limit [--cases WORDS]] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
import stamp  # noqa: E402
from time_to_solve import SAME_SETTINGS  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from rlpilot.config import load_config  # noqa: E402
from rlpilot.control.algos.dqn import DQN, dqn_loss, n_step_transitions  # noqa: E402
from rlpilot.control.algos.ppo import MINIBATCH_KEYS, PPO, gae, ppo_loss  # noqa: E402
from rlpilot.control.collect import BatchCollector  # noqa: E402
from rlpilot.envs import make_env  # noqa: E402
from torchrl_references import dqn_reference, ppo_reference  # noqa: E402

MATMULS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default"}

# (label, preset, overrides): the Zoo's networks and batches (time_to_solve.py's same-settings arm), and the presets'
LIMIT_CASES = (
    ("PPO 64-64 tanh, minibatch 256", "ppo-cartpole", SAME_SETTINGS["ppo"]),
    ("DQN 256-256, batch 64", "dqn-cartpole", SAME_SETTINGS["dqn"]),
    ("SAC 256-256, batch 256", "sac-pendulum", SAME_SETTINGS["sac"]),
    ("TD3 400-300, batch 256", "td3-pendulum", SAME_SETTINGS["td3"]),
    ("SAC 64-64, batch 256", "sac-pendulum", [*SAME_SETTINGS["sac"], "model.hidden_sizes=[64, 64]"]),
    ("TD3 64-64, batch 256", "td3-pendulum", [*SAME_SETTINGS["td3"], "model.hidden_sizes=[64, 64]"]),
    # the MuJoCo locomotion presets as they ship (the Zoo's networks; HalfCheetah-v5: 17 observations, 6 torques)
    ("SAC 256-256 HalfCheetah, b 256", "sac-halfcheetah", []),
    ("TD3 400-300 HalfCheetah, b 256", "td3-halfcheetah", []),
)


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


class MatmulShapes(TorchDispatchMode):
    """Records every matrix multiply dispatched (op name, argument shapes) while active."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, list[tuple[int, ...]]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) in MATMULS:
            self.calls.append((str(func), [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]))
        return func(*args, **(kwargs or {}))


def matmul_alone(calls: list[tuple[str, list[tuple[int, ...]]]], repeats: int) -> tuple[float, float]:
    """Seconds for the recorded matrix multiplies run back to back on random tensors, and their FLOPs."""
    ops = {"aten.mm.default": torch.mm, "aten.addmm.default": torch.addmm, "aten.bmm.default": torch.bmm}
    work = [(ops[name], [torch.randn(shape) for shape in shapes]) for name, shapes in calls]
    with FlopCounterMode(display=False) as counter:
        for fn, tensors in work:
            fn(*tensors)

    def run() -> None:
        for fn, tensors in work:
            fn(*tensors)

    return seconds_per_call(run, repeats), float(counter.get_total_flops())


def learner_update(preset: str, overrides: list[str], compile_setting: str):
    """A learner at these settings, a minibatch from its replay (or batch), and one update as ``learn`` runs it."""
    from rlpilot.registry import algorithm, load_object

    torch.manual_seed(0)
    config = load_config(preset, overrides=[*overrides, f"train.compile={compile_setting}"])
    env = make_env(config.env, seed=0)
    algo = load_object(algorithm(config.algo).implementation)(config, env, torch.device("cpu"))
    if config.algo == "ppo":
        batch = BatchCollector(env, algo.act, steps=config.ppo.steps_per_env, seed=0).collect()
        with torch.no_grad():
            gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
        flat = batch.reshape(-1)
        args = ({key: flat.get(key)[: config.ppo.minibatch_size] for key in MINIBATCH_KEYS}, *algo.log_ratio_range(0.2))
    else:
        cfg = getattr(config, config.algo)
        batch = BatchCollector(env, algo.act, steps=max(cfg.batch_size, 64), seed=0).collect()
        if config.algo == "dqn":
            batch = n_step_transitions(batch, 1, cfg.gamma)
        args = (batch.reshape(-1)[: cfg.batch_size],)

    def update() -> None:
        algo.updates += 1
        algo.guard.update(algo.optimizer, algo.gradients, *args, update=algo.updates)
        if hasattr(algo, "after_step"):
            algo.after_step()

    return update


def limit_row(label: str, preset: str, overrides: list[str], repeats: int, compile_too: bool) -> dict:
    """One case of ``--limit``: FLOPs, eager and compiled time, matmuls alone, achieved share of the peak."""
    update = learner_update(preset, overrides, "off")
    update()  # warm-up (and, for TD3, leave the counter so the next two updates are one of each kind)
    with FlopCounterMode(display=False) as counter, MatmulShapes() as shapes:
        update()
        update()
    flops = counter.get_total_flops() / 2
    eager = seconds_per_call(update, repeats)
    matmul_s, matmul_flops = matmul_alone(shapes.calls, repeats)
    row = {
        "case": label,
        "mflops": flops / 1e6,
        "eager_ms": eager * 1e3,
        "matmul_alone_ms": matmul_s / 2 * 1e3,
        "peak_gflops": matmul_flops / matmul_s / 1e9,
        "achieved_gflops": flops / eager / 1e9,
    }
    row["share_of_peak"] = row["achieved_gflops"] / row["peak_gflops"]
    if compile_too:
        compiled_update = learner_update(preset, overrides, "on")
        start = time.perf_counter()
        compiled_update()
        compiled_update()  # TD3: both the critic-only and the critic+actor graphs
        row["compile_s"] = time.perf_counter() - start
        row["compiled_ms"] = seconds_per_call(compiled_update, repeats) * 1e3
        row["compiled_share_of_peak"] = flops / (row["compiled_ms"] / 1e3) / 1e9 / row["peak_gflops"]
        saving_ms = row["eager_ms"] - row["compiled_ms"]  # updates after which a cold compile has paid for itself
        row["pays_back_after"] = math.ceil(row["compile_s"] / (saving_ms / 1e3)) if saving_ms > 0 else None
    return row


def limit_lines(rows: list[dict]) -> list[str]:
    lines = [
        f"{'case':<42} {'MFLOP':>7} {'eager ms':>9} {'compiled':>9} {'compile s':>9} {'matmuls alone':>13} "
        f"{'peak GF/s':>9} {'achieved':>9} {'share':>6} {'compiled share':>14} {'pays back after':>15}"
    ]
    for r in rows:
        compiled_ms = f"{r['compiled_ms']:9.3f}" if "compiled_ms" in r else f"{'-':>9}"
        compile_s = f"{r['compile_s']:9.1f}" if "compile_s" in r else f"{'-':>9}"
        compiled_share = f"{r['compiled_share_of_peak']:.0%}" if "compiled_share_of_peak" in r else "-"
        pays_back = f"{r['pays_back_after']:,} upd" if r.get("pays_back_after") else "-"
        lines.append(
            f"{r['case']:<42} {r['mflops']:7.1f} {r['eager_ms']:9.3f} {compiled_ms} {compile_s} "
            f"{r['matmul_alone_ms']:13.3f} {r['peak_gflops']:9.1f} {r['achieved_gflops']:9.1f} "
            f"{r['share_of_peak']:6.0%} {compiled_share:>14} {pays_back:>15}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument(
        "--threads", default="1", help="torch threads; with --limit, comma-separated counts are each measured (1,2)"
    )
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--limit", action="store_true", help="also the physical limit at the Zoo's networks")
    parser.add_argument("--no-compile", action="store_true", help="with --limit: skip the compiled updates")
    parser.add_argument(
        "--cold", action="store_true", help="with --limit: compile into an empty inductor cache (a first run's cost)"
    )
    parser.add_argument(
        "--cases", help="with --limit: only the cases whose label contains one of these comma-separated words"
    )
    parser.add_argument("--out", help="result file (stamped)")
    args = parser.parse_args()
    if args.cold:
        import tempfile

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="rlpilot-inductor-cold-")
    threads = [int(count) for count in args.threads.split(",")]
    torch.set_flush_denormal(True)  # as a run does (train.flush_denormal, on by default)
    lines = stamp.header()
    limit = []
    for count in threads:
        torch.set_num_threads(count)
        for label, preset, overrides in LIMIT_CASES if args.limit else ():
            if not args.cases or any(word in label for word in args.cases.split(",")):
                named = label if len(threads) == 1 else f"{label}, {count} thread{'s' * (count > 1)}"
                limit.append(limit_row(named, preset, list(overrides), max(50, args.repeats // 5), not args.no_compile))
    torch.set_num_threads(threads[0])
    ppo, dqn = ppo_costs(args.minibatch, args.repeats), dqn_costs(args.repeats)
    for name, seconds in {**ppo, **dqn}.items():
        lines.append(f"{name:<26} {seconds * 1e3:7.3f} ms")
    lines += [
        f"ratio ClipPPOLoss / ppo_loss per update (minibatch {args.minibatch}): "
        f"{ppo['ClipPPOLoss update'] / ppo['rlpilot ppo_loss update']:.2f}x",
        f"ratio GAE module / gae per batch: {ppo['GAE module per batch'] / ppo['rlpilot gae per batch']:.2f}x",
        f"ratio DQNLoss / dqn_loss per update (batch 64): "
        f"{dqn['DQNLoss update'] / dqn['rlpilot dqn_loss update']:.2f}x",
        *(limit_lines(limit) if limit else []),
        *stamp.footer(),
    ]
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.write_text("\n".join(lines) + "\n")
        data = {"stamp": lines[: len(stamp.header())] + stamp.footer(), "minibatch": args.minibatch, "ms": {}}
        data["ms"] = {name: seconds * 1e3 for name, seconds in {**ppo, **dqn}.items()}
        data["limit"] = limit
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
