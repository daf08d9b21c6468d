"""``train.compile``: every compiled update gives the eager update's values and gradients.

Each case builds a learner with ``train.compile=on`` and runs, on minibatches from real collected transitions, the
compiled update program the learner trains with (loss, gradients and clip in one program) and the eager gradients
it replaces, over the same networks, call after call (the first compiles; later ones skip Dynamo's guards).
Randomness inside a loss (SAC's reparameterised actions, TD3's target smoothing, the squashed Gaussian's entropy
sample) is drawn from the same generator state on both sides (inductor's ``fallback_random``). Tolerances:
values within 1e-5 relative (+1e-6 absolute), gradients within 1e-4 relative (+1e-6 absolute): inductor reorders
float sums. Each program compiles (about 3-8 s on the 2-core machine); the TorchRL reference tests
(``tests/unit/test_ppo.py``, ``test_dqn.py``, ``test_sac_td3.py``) pin the eager losses, so the compiled ones meet
the references through these.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch._inductor.config as inductor_config

from rlpilot.config import load_config
from rlpilot.control import compiled
from rlpilot.control.algos.dqn import DQN, n_step_transitions
from rlpilot.control.algos.offpolicy import planned_updates
from rlpilot.control.algos.ppo import MINIBATCH_KEYS, PPO, gae, ppo_loss
from rlpilot.control.algos.sac import SAC
from rlpilot.control.algos.td3 import TD3
from rlpilot.control.collect import BatchCollector
from rlpilot.control.compiled.adam import CompiledStep
from rlpilot.control.compiled.decide import AUTO_EAGER_UPDATES, PAYS_BACK_AFTER, wanted
from rlpilot.control.compiled.trace import CompiledGradients, Gradients
from rlpilot.envs import make_env
from rlpilot.guard import adam_step, drop_grads

VALUE_TOLERANCE = dict(rtol=1e-5, atol=1e-6)
GRADIENT_TOLERANCE = dict(rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory):
    """One compile cache for this module's tests, empty at the start of the session (a compile is tested cold,
    never against what an earlier session left): a graph two tests build alike is compiled once."""
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture(autouse=True)
def same_random_numbers_and_a_cold_shared_cache(monkeypatch, inductor_cache):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    torch._dynamo.reset()
    with inductor_config.patch(fallback_random=True):
        yield


def learner(preset: str, cls, *overrides: str):
    torch.manual_seed(0)
    config = load_config(preset, overrides=["train.compile=on", "model.hidden_sizes=[32, 32]", *overrides])
    env = make_env(config.env, seed=0)
    algo = cls(config, env, torch.device("cpu"))
    batch = BatchCollector.for_run(env, algo.act, config, seed=0).collect()
    return config, algo, batch


def run(gradients: Gradients, args: tuple, parameters: list, seed: int):
    torch.manual_seed(seed)
    loss, norm, stats = gradients(*args)
    grads = [torch.zeros(()) if p.grad is None else p.grad.clone() for p in parameters]
    return loss, norm, {key: value.detach().clone() for key, value in stats.items()}, grads


def assert_equal_to_eager(program: Gradients, *argument_lists: tuple) -> None:
    """The program's loss, clipped gradients, norm and statistics equal the eager ``Gradients`` of the same loss over
    the same modules, call after call: the first call compiles, the later ones take the unguarded fast path."""
    assert isinstance(program, CompiledGradients), "train.compile=on compiled nothing"
    eager, calls = program.eager, []
    for seed, args in enumerate(argument_lists, start=1):
        loss, norm, stats, grads = run(eager, args, program.parameters, seed)
        loss_c, norm_c, stats_c, grads_c = run(program, args, program.parameters, seed)
        if seed == 1:  # compiled by this call: count the later calls that reach the program
            traced = program.program
            program.program = lambda *leaves, _traced=traced: calls.append(len(leaves)) or _traced(*leaves)
        torch.testing.assert_close(loss_c, loss, **VALUE_TOLERANCE)
        torch.testing.assert_close(norm_c, norm, **GRADIENT_TOLERANCE)
        assert stats_c.keys() == stats.keys()
        for key in stats:
            torch.testing.assert_close(stats_c[key], stats[key], **VALUE_TOLERANCE)
        for g_c, g in zip(grads_c, grads, strict=True):
            torch.testing.assert_close(g_c, g, **GRADIENT_TOLERANCE)
    program.program = traced
    assert len(calls) == len(argument_lists) - 1, "a call of the traced shapes ran eagerly"


def test_dqn_compiled_update_equals_eager():
    config, algo, batch = learner("dqn-cartpole", DQN, "dqn.steps_per_env=64", "dqn.max_grad_norm=0.5")
    flat = n_step_transitions(batch, 1, config.dqn.gamma).reshape(-1)
    assert_equal_to_eager(algo.gradients, (flat[:32],), (flat[32:64],), (flat[16:48],))


def test_td3_compiled_updates_equal_eager():
    config, algo, batch = learner("td3-pendulum", TD3, "td3.steps_per_env=32")
    flat = batch.reshape(-1)
    assert_equal_to_eager(algo.critic_gradients, (flat[:16],), (flat[16:32],))
    assert_equal_to_eager(algo.both_gradients, (flat[:16],), (flat[16:32],))
    algo.updates = 1
    assert algo.gradients is algo.critic_gradients
    algo.updates = 2
    assert algo.gradients is algo.both_gradients


def test_td3s_two_programs_share_autos_eager_updates():
    """Under ``auto``, TD3's two programs (critics; critics and actor, every ``policy_delay``-th update) compile once
    AUTO_EAGER_UPDATES updates have run in all, each after its share of them."""
    _, algo, _ = learner("td3-pendulum", TD3, "train.compile=auto", "train.total_frames=100000", "td3.policy_delay=3")
    critic, both = algo.critic_gradients, algo.both_gradients
    assert isinstance(critic, CompiledGradients) and isinstance(both, CompiledGradients)
    assert critic.eager_first + both.eager_first == AUTO_EAGER_UPDATES
    assert both.eager_first == AUTO_EAGER_UPDATES // 3


def test_the_program_draws_new_random_numbers_at_every_call():
    """With inductor's own random numbers (as in a run), TD3's target smoothing noise is drawn anew at each call of
    the program, from the global generator: a reseed repeats it, no reseed does not (nothing was baked in)."""
    with inductor_config.patch(fallback_random=False):
        config, algo, batch = learner("td3-pendulum", TD3, "td3.steps_per_env=32")
        sample = batch.reshape(-1)[:16]
        losses = []
        for seed in (1, 1, None):  # the first call traces and compiles, then runs the program
            if seed is not None:
                torch.manual_seed(seed)
            losses.append(algo.critic_gradients(sample)[0])
    assert losses[0] == losses[1]  # tracing drew nothing from the generator
    assert losses[2] != losses[1]  # the next call drew new noise


def test_sac_compiled_update_equals_eager():
    config, algo, batch = learner("sac-pendulum", SAC, "sac.steps_per_env=32")
    flat = batch.reshape(-1)
    assert_equal_to_eager(algo.gradients, (flat[:16],), (flat[16:32],))


@pytest.mark.parametrize("preset", ["ppo-cartpole", "ppo-pendulum"])
def test_ppo_compiled_update_equals_eager(preset):
    config, algo, batch = learner(preset, PPO)
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    flat = batch.reshape(-1)
    first, second = ({key: flat.get(key)[part] for key in MINIBATCH_KEYS} for part in (slice(0, 64), slice(64, 128)))
    assert_equal_to_eager(algo.gradients, (first, *algo.log_ratio_range(0.2)), (second, *algo.log_ratio_range(0.1)))
    out = ppo_loss(algo, first, config.ppo, 0.2)  # the eager side is the loss the TorchRL reference tests pin
    total, _ = algo.loss(first, math.log1p(-0.2), math.log1p(0.2))
    torch.testing.assert_close(total, out["loss_objective"] + out["loss_critic"] + out["loss_entropy"])


@pytest.mark.parametrize("algo_name", ["mappo", "ippo"])
def test_mappo_and_ippo_compiled_updates_equal_eager(algo_name):
    """MAPPO/IPPO train through PPO's program over group minibatches (``[M, n_agents, ...]``: every agent of an env
    step); with ``train.compile=on`` the program equals the eager gradients, the centralised critic included."""
    from rlpilot.multiagent.envs import make_vector
    from rlpilot.multiagent.mappo import MAPPO
    from rlpilot.multiagent.trainable import AgentCollector

    torch.manual_seed(0)
    overrides = [
        "train.compile=on",
        "model.hidden_sizes=[32, 32]",
        "env.num_envs=4",
        "ppo.steps_per_env=25",
        "ppo.minibatch_size=50",
    ]
    config = load_config(algo=algo_name, env_id="mpe2.simple_spread_v3", overrides=overrides)
    env = make_vector(config.env, 4, seed=0)
    agents = MAPPO(config, env, torch.device("cpu"))
    batch = AgentCollector(env, agents.act, steps=25).collect()
    with torch.no_grad():
        gae(batch, agents.critic_net, config.ppo.gamma, config.ppo.gae_lambda, time_dim=agents.time_dim)
    flat = batch.reshape(-1)
    first, second = ({key: flat.get(key)[part] for key in MINIBATCH_KEYS} for part in (slice(0, 50), slice(50, 100)))
    assert first["observation"].shape[1] == env.n_agents
    assert_equal_to_eager(
        agents.gradients, (first, *agents.log_ratio_range(0.2)), (second, *agents.log_ratio_range(0.1))
    )


def library_step_then_program_step(algo, gradients, args, seed):
    """From the same parameters and optimiser state: the eager gradients and the library's fused Adam step, then the
    compiled program's step (gradients, guard test and Adam in one call). Returns both results."""
    optimizer, params = algo.optimizer, gradients.parameters
    before = [p.detach().clone() for p in params]
    saved = copy.deepcopy(optimizer.state_dict())

    def after():
        states = [optimizer.state[p] for p in params]
        return [p.detach().clone() for p in params], [{k: v.clone() for k, v in s.items()} for s in states]

    torch.manual_seed(seed)
    drop_grads(optimizer)
    loss, norm, _ = gradients.eager(*args)
    adam_step(optimizer)
    library = (loss, norm, *after())
    with torch.no_grad():
        for p, b in zip(params, before):
            p.copy_(b)
    optimizer.load_state_dict(saved)
    torch.manual_seed(seed)
    loss_c, norm_c, _, applied = gradients.step(*args)
    assert applied
    return library, (loss_c, norm_c, *after())


# SAC's, TD3's and PPO's (25 s, 36 s and 15 s on a 2-core VM, their programs compiled cold) run in make test-all:
# the Adam step is the same code in every program, and their compiled updates' equality with eager has fast tests
@pytest.mark.parametrize(
    "preset",
    [
        "dqn-cartpole",
        pytest.param("sac-pendulum", marks=pytest.mark.slow),
        pytest.param("td3-pendulum", marks=pytest.mark.slow),
        pytest.param("ppo-pendulum", marks=pytest.mark.slow),
    ],
)
def test_the_program_steps_adam_as_the_library_does(preset):
    """Parameters, both moments and the step counters after a compiled step equal the library's fused Adam after the
    eager gradients, from the same state, for three minibatches and every program (within 1e-4 relative)."""
    cls = {"dqn": DQN, "sac": SAC, "td3": TD3, "ppo": PPO}[preset.split("-")[0]]
    name = cls.__name__.lower()
    steps = [] if cls is PPO else [f"{name}.steps_per_env=64"]
    config, algo, batch = learner(preset, cls, f"{name}.max_grad_norm=1.0", *steps)
    if cls is PPO:
        with torch.no_grad():
            gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
        flat = batch.reshape(-1)
        args_list = [
            ({key: flat.get(key)[i : i + 32] for key in MINIBATCH_KEYS}, *algo.log_ratio_range(0.2))
            for i in (0, 32, 64)
        ]
        programs = [algo.gradients]
    else:
        flat = (n_step_transitions(batch, 1, config.dqn.gamma) if cls is DQN else batch).reshape(-1)
        args_list = [(flat[i : i + 16],) for i in (0, 16, 32)]
        programs = [algo.critic_gradients, algo.both_gradients] if cls is TD3 else [algo.gradients]
    for gradients in programs:
        assert isinstance(gradients, CompiledStep)
        for seed, args in enumerate(args_list, start=1):
            library, program = library_step_then_program_step(algo, gradients, args, seed)
            torch.testing.assert_close(program[0], library[0], **VALUE_TOLERANCE)
            torch.testing.assert_close(program[1], library[1], **GRADIENT_TOLERANCE)
            for p_c, p in zip(program[2], library[2], strict=True):
                torch.testing.assert_close(p_c, p, **GRADIENT_TOLERANCE)
            for s_c, s in zip(program[3], library[3], strict=True):
                assert s_c.keys() == s.keys()
                for key in s:
                    torch.testing.assert_close(s_c[key], s[key], **GRADIENT_TOLERANCE)


def test_a_refused_update_changes_nothing_and_is_recorded():
    """The guard's test inside the program: a loss above ``guard.max_loss`` leaves parameters, moments and step
    counters as they were, and the guard records the refusal (event, lr cut) as it does for an eager update."""
    config, algo, batch = learner("dqn-cartpole", DQN, "guard.max_loss=1e-12")
    flat = n_step_transitions(batch, 1, config.dqn.gamma).reshape(-1)
    assert algo.gradients.step(flat[:16])[-1] is False  # traces and compiles: refused, the state stays at zero
    before = [p.detach().clone() for p in algo.parameters]
    moments = [algo.optimizer.state[p]["exp_avg"].clone() for p in algo.parameters]
    grad_norm, _ = algo.guard.update(algo.optimizer, algo.gradients, flat[16:32], update=7)
    assert grad_norm is None
    assert all(torch.equal(p, b) for p, b in zip(algo.parameters, before))
    assert all(torch.equal(algo.optimizer.state[p]["exp_avg"], m) for p, m in zip(algo.parameters, moments))
    assert all(float(algo.optimizer.state[p]["step"]) == 0 for p in algo.parameters)
    event = algo.guard.drain()[-1]
    assert event["event"] == "guard_skip" and event["update"] == 7 and "loss above" in event["reason"]
    assert algo.guard.lr_scale == config.guard.lr_cut  # the one refusal that went through the guard


def test_the_clip_schedule_reuses_the_program():
    """The clip range is an argument, not a constant of the program: new clip values run the same program."""
    config, algo, batch = learner("ppo-cartpole", PPO)
    with torch.no_grad():
        gae(batch, algo.critic_net, config.ppo.gamma, config.ppo.gae_lambda)
    flat = batch.reshape(-1)
    minibatch = {key: flat.get(key)[:64] for key in MINIBATCH_KEYS}
    algo.gradients(minibatch, *algo.log_ratio_range(0.2))
    traced, calls = algo.gradients.program, []
    algo.gradients.program = lambda *leaves: calls.append(len(leaves)) or traced(*leaves)
    for clip in (0.15, 0.1):
        algo.gradients(minibatch, *algo.log_ratio_range(clip))
    assert len(calls) == 2


def test_a_minibatch_of_another_shape_runs_eagerly():
    """The program applies to the traced call's shapes only: a smaller minibatch runs the eager gradients (right,
    and not compiled again); the traced shape still runs the program."""
    config, algo, batch = learner("dqn-cartpole", DQN, "dqn.steps_per_env=64")
    flat = n_step_transitions(batch, 1, config.dqn.gamma).reshape(-1)
    assert_equal_to_eager(algo.gradients, (flat[:32],))
    traced, calls = algo.gradients.program, []
    algo.gradients.program = lambda *leaves: calls.append(len(leaves)) or traced(*leaves)
    for args in ((flat[:8],), (flat[32:64],)):
        loss, *_ = algo.gradients(*args)
        torch.testing.assert_close(loss, algo.loss(*args)[0].detach(), **VALUE_TOLERANCE)
    assert len(calls) == 1  # the 8-row minibatch did not reach the program


def test_auto_compiles_on_cpu_when_it_pays_back_and_on_without_a_compiler_says_so(monkeypatch, capsys):
    cpu = torch.device("cpu")
    assert not wanted("auto", cpu, algo="sac", updates=PAYS_BACK_AFTER["sac"] - 1)
    assert wanted("auto", cpu, algo="sac", updates=PAYS_BACK_AFTER["sac"])
    assert not wanted("auto", cpu)  # nothing planned, or an algorithm without a measured rule
    assert not wanted("off", cpu, algo="sac", updates=10**9)
    assert wanted("on", cpu)
    monkeypatch.setenv("CXX", "no-such-c++-compiler")
    assert not wanted("auto", cpu, algo="sac", updates=10**9)
    assert capsys.readouterr().err == ""  # auto falls back quietly
    assert not wanted("on", cpu)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "C++ compiler" in lines[0] and "train.compile=off" in lines[0]


def test_the_presets_and_the_zoo_budgets_are_on_the_measured_side_of_the_rule():
    """What ``auto`` decides for what users run: the Zoo's DQN (24,500 updates) and SAC (19,900) budgets compile;
    ``ppo-cartpole`` (a few hundred updates) stays eager."""
    zoo_dqn = load_config("dqn-cartpole", overrides=["train.total_frames=50000", "dqn.learning_starts=1000"])
    assert planned_updates(50_000, zoo_dqn.dqn) == 24_500 >= PAYS_BACK_AFTER["dqn"]
    config, algo, _ = learner("ppo-cartpole", PPO, "train.compile=auto")
    assert not algo.compile and algo.num_updates() < PAYS_BACK_AFTER["ppo"]


def test_yaml_booleans_read_as_the_setting():
    """``--set train.compile=off``: YAML 1.1 reads ``off`` as False; the setting still means off."""
    assert load_config("ppo-cartpole", overrides=["train.compile=off"]).train.compile == "off"
    assert load_config("ppo-cartpole", overrides=["train.compile=on"]).train.compile == "on"


def test_a_loss_that_cannot_be_compiled_trains_eagerly_after_one_line(capsys):
    """Data-dependent Python control flow cannot be traced: the update says so once on stderr and stays eager."""
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)

    def loss(x):
        y = net(x).pow(2).mean()
        if y.item() > 1e9:  # a Python branch on a value: the tracer cannot follow it
            y = y * 2
        return y, {"y": y.detach()}

    program = compiled.gradients({"net": net}, loss, 1.0, compile=True, name="odd")
    x = torch.randn(4, 3)
    for _ in range(2):
        value, norm, _ = program(x)
        expected, expected_norm, _ = Gradients({"net": net}, loss, 1.0)(x)
        torch.testing.assert_close(value, expected.detach())
        torch.testing.assert_close(norm, expected_norm)
    lines = capsys.readouterr().err.strip().splitlines()
    assert program.failed and len(lines) == 1
    assert "could not compile the odd update" in lines[0] and "training eagerly" in lines[0]


def test_a_phase_in_one_program_makes_the_updates_one_by_one_would():
    """``CompiledStep.steps``: DQN's learning phase in one program per target copy (a loop over the stacked
    minibatches) ends where the same updates made one program call at a time end: parameters, Adam's moments and
    step counters, the guard's refusals (events, lr cuts) and the phase's metrics; over phases with target copies
    inside them, refused and applied updates mixed, and a shorter phase (its rows padded). Tolerance: the
    one-update program's values (1e-5 relative): both are inductor's code for the same graph of one update."""
    overrides = (
        "dqn.steps_per_env=16",  # 8 envs: 128 frames, 64 updates a phase
        "dqn.learning_starts=0",
        "dqn.target_update_interval=24",  # copies after updates 24, 48, 72, ...: calls split at them
        "guard.max_loss=3.0",  # some of the losses of this case are above it
        "guard.lr_cut=0.99",
        "guard.max_trips=1000000",
    )
    sides = []
    for phases in ("one program", "one by one"):
        config, algo, batch = learner("dqn-cartpole", DQN, *overrides)
        if phases == "one by one":
            algo.gradients.steps = lambda *args: None
        metrics = [algo.learn(batch, 128), algo.learn(batch, 256), algo.learn(batch[:, :8], 320)]
        sides.append((algo, metrics, algo.guard.drain()))
    (loop, loop_metrics, loop_events), (single, single_metrics, single_events) = sides
    assert loop.gradients.loop_program is not None and loop.gradients.step_program is None
    assert single.gradients.loop_program is None
    assert loop.updates == single.updates == 64 + 64 + 32
    skipped = [m.get("guard/skipped_updates", 0) for m in single_metrics]
    assert 0 < sum(skipped) < single.updates, "the case should mix applied and refused updates"
    assert [e["update"] for e in loop_events] == [e["update"] for e in single_events]
    assert loop.guard.lr_scale == pytest.approx(single.guard.lr_scale)
    for mine, theirs in zip(loop_metrics, single_metrics, strict=True):
        assert mine.keys() == theirs.keys()
        for key in mine:
            if not key.startswith("compile/"):
                assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-6, nan_ok=True), key
    for net in ("q_net", "target_net"):
        for p, q in zip(getattr(loop, net).parameters(), getattr(single, net).parameters(), strict=True):
            torch.testing.assert_close(p, q, **VALUE_TOLERANCE)
    for p, q in zip(loop.parameters, single.parameters, strict=True):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(loop.optimizer.state[p][key], single.optimizer.state[q][key], **VALUE_TOLERANCE)


def test_an_optimiser_the_program_cannot_step_is_named_on_stderr(capsys):
    """Only a plain fused Adam is stepped inside the program; another optimiser still gets compiled gradients, and the
    slower path is one line on stderr naming why (not silent)."""
    net = torch.nn.Linear(3, 1)
    loss = lambda x: (net(x).pow(2).mean(), {})  # noqa: E731
    guard = load_config("dqn-cartpole").guard
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    program = compiled.gradients({"net": net}, loss, 1.0, compile=True, name="odd", optimizer=sgd, guard=guard)
    assert isinstance(program, CompiledGradients) and not isinstance(program, CompiledStep)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "odd program" in lines[0] and "SGD is not Adam" in lines[0]
    decayed = torch.optim.Adam(net.parameters(), lr=0.1, weight_decay=0.1, fused=True)
    compiled.gradients({"net": net}, loss, 1.0, compile=True, name="odd", optimizer=decayed, guard=guard)
    assert "weight decay" in capsys.readouterr().err
    fused = torch.optim.Adam(net.parameters(), lr=0.1, fused=True)
    program = compiled.gradients({"net": net}, loss, 1.0, compile=True, name="odd", optimizer=fused, guard=guard)
    assert isinstance(program, CompiledStep) and capsys.readouterr().err == ""
