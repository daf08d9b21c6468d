"""``train.cuda_graphs``: on CUDA, a compiled update replayed as one CUDA graph does what the program it replays does,
and the policy step replayed as a graph acts as the network does. Skipped without a CUDA device (run on the lent
GPU machine by ``benchmarks/gpu/cuda_graphs.sh``; CI has none).

Each case builds two learners of the same seed at the RL Zoo's settings (``benchmarks/time_to_solve.py``'s same
arm: the networks SBX is compared on), one with graphs and one without, and makes the same updates on the same
minibatches from the same generator state. The graph replays the program's own kernels, and PyTorch's graph-safe
random numbers give the same draws, so parameters, Adam's moments and step counters, losses and statistics are
expected equal to within float32 rounding (1e-6 relative): any difference would mean the graph read or wrote memory
other than the program's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from rlpilot.config import load_config
from rlpilot.control.algos import build
from rlpilot.control.algos.dqn import n_step_transitions
from rlpilot.control.algos.ppo import MINIBATCH_KEYS, gae
from rlpilot.control.collect import BatchCollector
from rlpilot.control.compiled.adam import CompiledStep
from rlpilot.control.compiled.cuda_graph import CudaGraph
from rlpilot.envs import make_env

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from time_to_solve import SAME_SETTINGS  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")
TOLERANCE = dict(rtol=1e-6, atol=1e-7)
PRESETS = {"dqn": "dqn-cartpole", "sac": "sac-pendulum", "td3": "td3-pendulum", "ppo": "ppo-cartpole"}


def learner(algo: str, graphs: bool, *extra: str):
    torch.manual_seed(0)
    overrides = [*SAME_SETTINGS[algo], "train.compile=on", "train.device=cuda", f"train.cuda_graphs={graphs}", *extra]
    config = load_config(PRESETS[algo], overrides=overrides)
    env = make_env(config.env, seed=0, device=CUDA)
    return config, env, build(config, env, CUDA)


def minibatches(algo: str, config, env, agent, count: int) -> list[tuple]:
    """``count`` argument tuples of the learner's update, from real transitions of the task's env."""
    batch = BatchCollector(env, agent.act, steps=256, seed=0).collect()
    if algo == "ppo":
        with torch.no_grad():
            gae(batch, agent.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
        flat = batch.reshape(-1)
        return [
            ({key: flat.get(key)[i * 256 : (i + 1) * 256] for key in MINIBATCH_KEYS}, *agent.log_ratio_range(0.2))
            for i in range(count)
        ]
    if algo == "dqn":
        batch = n_step_transitions(batch, 1, config.dqn.gamma)
    flat = batch.reshape(-1)
    size = config.dqn.batch_size if algo == "dqn" else getattr(config, algo).batch_size
    index = torch.Generator(device="cpu").manual_seed(1)
    return [(flat[torch.randint(0, flat.shape[0], (size,), generator=index)],) for _ in range(count)]


def programs(agent) -> list[CompiledStep]:
    parts = [agent.critic_gradients, agent.both_gradients] if hasattr(agent, "both_gradients") else [agent.gradients]
    assert all(isinstance(part, CompiledStep) for part in parts)
    return parts


def update(agent, args: tuple, index: int):
    torch.manual_seed(100 + index)
    if hasattr(agent, "both_gradients"):
        agent.updates = index + 1  # TD3: every policy_delay-th update is the critic-and-actor program
    grad_norm, stats = agent.guard.update(agent.optimizer, agent.gradients, *args, update=index + 1)
    assert grad_norm is not None
    return stats


def state(agent) -> list[torch.Tensor]:
    values = []
    for param in agent.parameters:
        values.append(param.detach().clone())
        values.extend(value.clone() for value in agent.optimizer.state[param].values())
    return values


@pytest.mark.parametrize("algo", ["dqn", "sac", "td3", "ppo"])
def test_a_graphed_update_equals_the_program_it_replays(algo):
    config, env, graphed = learner(algo, True)
    _, _, plain = learner(algo, False)
    calls = minibatches(algo, config, env, graphed, 8)
    for index, args in enumerate(calls):
        stats_g = update(graphed, args, index)
        stats_p = update(plain, args, index)
        assert stats_g.keys() == stats_p.keys()
        for key in stats_g:
            torch.testing.assert_close(stats_g[key], stats_p[key], **TOLERANCE)
    for value_g, value_p in zip(state(graphed), state(plain), strict=True):
        torch.testing.assert_close(value_g, value_p, **TOLERANCE)
    graphs = [part.graph for part in programs(graphed)]
    assert all(graph is not None for graph in graphs) and not any(graph.failed for graph in graphs)
    assert sum(graph.replays for graph in graphs) == len(calls) - len(graphs)  # each graph's first call warms up
    assert all(part.graph is None for part in programs(plain))


def test_a_loaded_optimiser_state_is_captured_again():
    """A checkpoint's optimiser state replaces Adam's moment tensors: the graph, which baked their addresses in, is
    captured again, and the updates go on equal to the program's."""
    config, env, graphed = learner("dqn", True)
    _, _, plain = learner("dqn", False)
    calls = minibatches("dqn", config, env, graphed, 8)
    for index, args in enumerate(calls):
        if index == 4:
            for agent in (graphed, plain):
                agent.optimizer.load_state_dict(agent.optimizer.state_dict())
        update(graphed, args, index)
        update(plain, args, index)
    for value_g, value_p in zip(state(graphed), state(plain), strict=True):
        torch.testing.assert_close(value_g, value_p, **TOLERANCE)
    assert graphed.gradients.graph.replays == 8 - 1  # the call after the load captured again, then replayed


def test_a_refused_update_in_a_graph_changes_nothing():
    """The guard's test replayed: every update of a loss above ``guard.max_loss`` leaves parameters, moments and step
    counters as they were, and each refusal reaches the guard."""
    config, env, agent = learner("dqn", True, "guard.max_loss=1e-12")
    before = [param.detach().clone() for param in agent.parameters]
    for index, args in enumerate(minibatches("dqn", config, env, agent, 5)):
        assert agent.guard.update(agent.optimizer, agent.gradients, *args, update=index + 1)[0] is None
    assert agent.gradients.graph.replays == 4
    assert all(torch.equal(param, old) for param, old in zip(agent.parameters, before, strict=True))
    for param in agent.parameters:  # Adam's state, made at the first call, still as made
        adam = agent.optimizer.state[param]
        assert float(adam["step"]) == 0 and not adam["exp_avg"].any() and not adam["exp_avg_sq"].any()
    assert agent.guard.total_trips == 5


@pytest.mark.parametrize("algo", ["dqn", "sac", "td3", "ppo"])
def test_the_graphed_policy_step_acts_as_the_network(algo):
    """The acting forward (DQN's Q-network, SAC's and TD3's actor) or PPO's whole policy step, replayed as a graph:
    the same actions as the plain call from the same generator state, for new observations each call and after the
    weights change in place (an update)."""
    config, env, graphed = learner(algo, True)
    _, _, plain = learner(algo, False)
    forward_g = (
        graphed.graphed_sample if algo == "ppo" else graphed.q_forward if algo == "dqn" else graphed.actor_forward
    )
    forward_p = plain.graphed_sample if algo == "ppo" else plain.q_forward if algo == "dqn" else plain.actor_forward
    assert isinstance(forward_g, CudaGraph) and not isinstance(forward_p, CudaGraph)
    dim = 4 if algo in ("dqn", "ppo") else 3
    for step in range(6):
        if step == 3:
            with torch.no_grad():
                for agent in (graphed, plain):
                    for param in agent.parameters:
                        param.mul_(1.01)
        observation = torch.randn(8, dim, device=CUDA)
        with torch.inference_mode():
            torch.manual_seed(step)
            out_g = forward_g(observation)
            torch.manual_seed(step)
            out_p = forward_p(observation)
        for a, b in zip(
            out_g if isinstance(out_g, tuple) else (out_g,), out_p if isinstance(out_p, tuple) else (out_p,)
        ):
            torch.testing.assert_close(a, b, **TOLERANCE)
    assert forward_g.replays == 5 and not forward_g.failed


def test_a_short_sac_run_trains_with_graphs_on_cuda(tmp_path, capfd):
    """The whole loop on CUDA with graphs (update and acting): it finishes, with no line on stderr about a capture
    that failed."""
    from rlpilot.loop.trainer import train

    overrides = [
        *SAME_SETTINGS["sac"],
        "train.device=cuda",
        "train.compile=on",
        "train.total_frames=1500",
        "sac.learning_starts=500",
        "train.loggers=[]",
    ]
    result = train(load_config("sac-pendulum", overrides=overrides), run_root=tmp_path, show_progress=False)
    assert result.status in ("finished", "solved")
    assert "could not" not in capfd.readouterr().err
