"""Faults: an exported policy is data someone may have sent or edited, so ``rlpilot eval ARTIFACT`` checks it as
data before a step is played and holds every step to it (issue 55, fault class 2).

Each break below was found by a fault round; each case is one ``rlpilot: error:`` line (exit 2, no traceback),
or, for a signal, the usual interrupted exit. The artifact is a real export (PPO on CartPole, ONNX), its graph
changed with ``onnx.helper`` and its signature as JSON; hypothesis draws the changes where the input is data.
Processes that could hang or exhaust memory before the fix run as subprocesses with a timeout and a memory limit.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from test_faults import FAST, error_line

from cli_runner import TESTS, cli_command, cli_env
from rlpilot.cli import main
from rlpilot.common.bounds import MAX_NESTING
from rlpilot.common.errors import UserError
from rlpilot.play.load import load_artifact

DATA_LIMIT = 2 * 2**30
"""A subprocess's heap (RLIMIT_DATA): an eval uses ~0.9 GiB; reading a 3 GiB file whole would pass it."""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A 256-frame PPO CartPole run, exported to ONNX: ``RUN/export/policy.onnx`` and its signature."""
    path = tmp_path_factory.mktemp("exported") / "run"
    assert main([str(a) for a in ["train", "ppo-cartpole", "--frames", 256, "--run-dir", path, *FAST]]) == 0
    assert main(["export", str(path)]) == 0
    return path / "export" / "policy.onnx"


def real(exported: Path) -> tuple[onnx.ModelProto, dict]:
    return onnx.load(str(exported)), json.loads(exported.with_name("policy.onnx.json").read_text())


def write(folder: Path, model: onnx.ModelProto | None, signature: dict | str | None) -> Path:
    """``folder/policy.onnx`` and its signature (a dict as JSON, a string as it is); None leaves a file out."""
    folder.mkdir(parents=True, exist_ok=True)
    artifact = folder / "policy.onnx"
    if model is not None:
        artifact.write_bytes(model.SerializeToString())
    if signature is not None:
        text = signature if isinstance(signature, str) else json.dumps(signature)
        artifact.with_name("policy.onnx.json").write_text(text)
    return artifact


def eval_line(capsys, artifact: Path, *extra) -> str:
    return error_line(capsys, ["eval", artifact, "--episodes", 2, "--csv", artifact.with_suffix(".csv"), *extra])


# -- graphs ------------------------------------------------------------------------------------------------
def _rewire(graph, old: str, new: str, *, skip=None) -> None:
    """Every node but ``skip`` that reads ``old`` reads ``new`` instead."""
    for node in graph.node:
        if node is not skip:
            node.input[:] = [new if name == old else name for name in node.input]


def _insert_after_input(graph, op: str, *, suffix: str, constants: dict | None = None, **attrs) -> None:
    """``op`` between the first input and its readers (``constants``: extra inputs as initializers)."""
    name = graph.input[0].name
    extra = []
    for key, value in (constants or {}).items():
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), f"{name}_{key}"))
        extra.append(f"{name}_{key}")
    node = helper.make_node(op, [name, *extra], [name + suffix], **attrs)
    _rewire(graph, name, name + suffix)
    graph.node.insert(0, node)


def _producer(graph, name: str):
    return next(node for node in graph.node if name in node.output)


def _dims(value_info) -> list:
    return value_info.type.tensor_type.shape.dim


def rename_input(model) -> None:
    graph = model.graph
    old = graph.input[0].name
    graph.input[0].name = old + "_renamed"
    _rewire(graph, old, old + "_renamed")


def rename_output(model) -> None:
    graph = model.graph
    output = graph.output[-1]
    node = _producer(graph, output.name)
    node.output[:] = [n + "_renamed" if n == output.name else n for n in node.output]
    output.name += "_renamed"


def input_as_double(model) -> None:
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    _insert_after_input(model.graph, "Cast", suffix="_float", to=TensorProto.FLOAT)


def action_as_float(model) -> None:
    graph = model.graph
    output = graph.output[-1]
    node = _producer(graph, output.name)
    node.output[:] = [n + "_int" if n == output.name else n for n in node.output]
    graph.node.append(helper.make_node("Cast", [output.name + "_int"], [output.name], to=TensorProto.FLOAT))
    output.type.tensor_type.elem_type = TensorProto.FLOAT


def input_of_rank_3(model) -> None:
    _dims(model.graph.input[0]).insert(1, onnx.TensorShapeProto.Dimension(dim_value=1))
    _insert_after_input(model.graph, "Flatten", suffix="_flat", axis=1)


def input_wider(model) -> None:
    last = _dims(model.graph.input[0])[-1]
    width = last.dim_value
    last.dim_value = width + 3
    constants = {"starts": [0], "ends": [width], "axes": [-1]}
    _insert_after_input(model.graph, "Slice", suffix="_sliced", constants=constants)


def batch_fixed(model) -> None:
    _dims(model.graph.input[0])[0].dim_value = 1


def extra_output_first(model) -> None:
    gemm = next(node for node in model.graph.node if node.op_type == "Gemm")
    model.graph.output.insert(0, helper.make_tensor_value_info(gemm.output[0], TensorProto.FLOAT, None))


GRAPH_CHANGES = {
    f.__name__: f
    for f in (
        rename_input,
        rename_output,
        input_as_double,
        action_as_float,
        input_of_rank_3,
        input_wider,
        batch_fixed,
        extra_output_first,
    )
}
"""Ways a graph can disagree with the signature it came with; any of them, alone or together, is one line."""


def looping(trips: int = 10**15) -> onnx.ModelProto:
    """A valid graph with the real one's inputs and outputs whose one step loops ``trips`` times."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["x_in"], ["x_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, ["batch", 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, ["batch", 4]),
        ],
    )
    nodes = [
        helper.make_node("Constant", [], ["trips"], value=helper.make_tensor("t", TensorProto.INT64, [], [trips])),
        helper.make_node("Constant", [], ["cond"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
        helper.make_node("Loop", ["trips", "cond", "observation"], ["looped"], body=body),
        helper.make_node("ArgMax", ["looped"], ["action"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "loop",
        [helper.make_tensor_value_info("observation", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("action", TensorProto.INT64, ["batch"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def declare_state(signature: dict, size: int = 2) -> dict:
    """``signature`` declaring a state of ``size`` floats, as an export of a stateful controller does."""
    signature = copy.deepcopy(signature)
    entry = {"name": "state", "shape": ["batch", size], "dtype": "float32"}
    signature["inputs"].append(entry)
    signature["outputs"].append({**entry, "name": "next_state"})
    signature["state"] = {"size": size, "initial": 0.0}
    return signature


def with_state(model: onnx.ModelProto, signature: dict, size: int = 2, *, graph_size: int | None = None):
    """The real policy as a stateful artifact: a ``state`` input, ``next_state = state + 1``, the graph listing
    ``next_state`` before ``action``; ``graph_size``: the graph's state width when it differs from the signature's."""
    model, width = copy.deepcopy(model), graph_size or size
    graph = model.graph
    graph.input.append(helper.make_tensor_value_info("state", TensorProto.FLOAT, ["batch", width]))
    graph.initializer.append(numpy_helper.from_array(np.ones(width, np.float32), "one"))
    graph.node.append(helper.make_node("Add", ["state", "one"], ["next_state"]))
    graph.output.insert(0, helper.make_tensor_value_info("next_state", TensorProto.FLOAT, ["batch", width]))
    return model, declare_state(signature, size)


def _fails_on_real_observations(model) -> None:
    """Runs on zeros (the load's probe) and fails on anything else, inside onnxruntime: a ``Gather`` from a
    one-entry table at an index that grows with the observation. An error in the middle of an episode."""
    graph = model.graph
    name = graph.input[0].name
    graph.initializer.extend(
        [numpy_helper.from_array(np.zeros(1, np.float32), "table"), numpy_helper.from_array(np.float32(1000), "k")]
    )
    graph.node.insert(0, helper.make_node("Add", [name, "zero"], [name + "_shifted"]))
    _rewire(graph, name, name + "_shifted", skip=graph.node[0])
    graph.node.insert(0, helper.make_node("Gather", ["table", "index"], ["zero"]))
    graph.node.insert(0, helper.make_node("Cast", ["scaled"], ["index"], to=TensorProto.INT64))
    graph.node.insert(0, helper.make_node("Mul", ["sum"], ["scaled"]))
    graph.node[0].input.append("k")
    graph.node.insert(0, helper.make_node("ReduceSum", ["magnitude"], ["sum"], keepdims=0))
    graph.node.insert(0, helper.make_node("Abs", [name], ["magnitude"]))


def _actions_plus_five(model) -> None:
    graph = model.graph
    node = _producer(graph, "action")
    node.output[:] = ["action_raw"]
    graph.initializer.append(numpy_helper.from_array(np.array(5, np.int64), "five"))
    graph.node.append(helper.make_node("Add", ["action_raw", "five"], ["action"]))


# -- the breaks ----------------------------------------------------------------------------------------------
CHILD = """
import sys, threading, time
from rlpilot.cli import main

def announce():  # once the artifact's first step runs (its worker thread exists), or after 30 s whatever happens
    end = time.monotonic() + 30
    while time.monotonic() < end and not any(t.name == "rlpilot-artifact-step" for t in threading.enumerate()):
        time.sleep(0.05)
    time.sleep(0.5)
    print("stepping", flush=True)

threading.Thread(target=announce, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_graph_that_loops_for_ever(exported, tmp_path, sig):
    """Was: ``eval`` of a valid ``Loop`` graph ran for ever and ignored SIGTERM (the handler waits for
    ``session.run``). Now the step is stopped (``RunOptions.terminate``) and eval exits as interrupted."""
    _, signature = real(exported)
    artifact = write(tmp_path, looping(), signature)
    args = ["eval", artifact, "--episodes", 1, "--step-limit", 600]
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS,
        env=cli_env(),
    )
    try:
        assert process.stdout.readline() == "stepping\n"
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == (143 if sig == signal.SIGTERM else 130), err[-2000:]
    assert lines == [f"rlpilot: interrupted ({signal.Signals(sig).name})"], err[-2000:]


def test_a_step_past_the_time_limit_is_one_line(exported, tmp_path, capsys):
    _, signature = real(exported)
    artifact = write(tmp_path, looping(), signature)
    line = eval_line(capsys, artifact, "--step-limit", 0.5)
    assert str(artifact) in line and "ran longer than 0.5 s" in line
    refused = eval_line(capsys, artifact, "--step-limit", 0)
    assert "argument --step-limit: '0' is not a finite number within (0, 86,400]" in refused
    with pytest.raises(UserError, match="ran longer than 0.2 s"):  # the library's own bound, the same way
        load_artifact(artifact, step_limit_s=0.2)


def test_an_output_before_action_is_never_played(exported, tmp_path, capsys):
    """Was: a graph output listed before ``action`` was played as the action (exit 0). Outputs are taken by
    name; one the signature does not declare is a disagreement."""
    model, signature = real(exported)
    extra_output_first(model)
    line = eval_line(capsys, write(tmp_path, model, signature))
    assert "policy.onnx has an output" in line and "does not declare" in line


def test_outputs_are_fetched_by_name(exported, tmp_path):
    """The stateful artifact's graph lists ``next_state`` first: it plays the real policy's episodes."""
    model, signature = with_state(*real(exported))
    artifact = write(tmp_path, model, signature)
    same = ["--episodes", "3", "--seed", "7"]
    assert main(["eval", str(artifact), *same, "--csv", str(tmp_path / "state.csv")]) == 0
    assert main(["eval", str(exported), *same, "--csv", str(tmp_path / "real.csv")]) == 0
    assert (tmp_path / "state.csv").read_text() == (tmp_path / "real.csv").read_text()
    run, _ = load_artifact(artifact)
    action, next_state = run.raw(np.zeros((3, 4), np.float32), np.full((3, 2), 5.0, np.float32))
    assert action.shape == (3,) and (next_state == 6.0).all()


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _three_gib(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: no disk used
        handle.truncate(3 * 2**30)


@pytest.mark.parametrize(
    "name, damage, needle",
    [
        ("policy.onnx.json", _fifo, "is a named pipe, not a regular file"),
        ("policy.onnx.json", _dev_zero, "is a character device, not a regular file"),
        ("policy.onnx.json", _three_gib, "is 3,072 MiB, more than the 1 MiB it may be"),
        ("policy.onnx", _three_gib, "is 3,072 MiB, more than the 512 MiB it may be"),
    ],
)
def test_a_file_that_is_not_data_is_one_line(exported, tmp_path, name, damage, needle):
    """Was: a FIFO as the signature hung eval; ``/dev/zero`` or a 3 GiB file was read whole (memory). In a
    process with a 2 GiB heap and a timeout, as a user runs it."""
    model, signature = real(exported)
    artifact = write(tmp_path, model, signature)
    damage(tmp_path / name)
    out = subprocess.run(
        cli_command(["eval", artifact, "--episodes", 1]),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
        env=cli_env(),
        preexec_fn=_limited,
    )
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr[-2000:]


def test_a_model_that_is_a_pipe_is_one_line(exported, tmp_path, capsys):
    model, signature = real(exported)
    artifact = write(tmp_path, model, signature)
    _fifo(artifact)
    assert "policy.onnx is a named pipe, not a regular file" in eval_line(capsys, artifact)


@pytest.mark.parametrize("steps", [-1, 0, 1e30, 10**30, 2.5, "500", True, None])
def test_max_episode_steps_follows_the_config_rule(exported, tmp_path, capsys, steps):
    """Was: -1 or 1e30 from a signature (refused in a config) gave episodes that never end. A number the config
    refuses is refused here, by the same rule."""
    model, signature = real(exported)
    signature["env"]["max_episode_steps"] = steps
    artifact = write(tmp_path, model, signature)
    if steps is None:  # the env's own time limit
        assert main(["eval", str(artifact), "--episodes", "1", "--csv", str(tmp_path / "e.csv")]) == 0
        return
    line = eval_line(capsys, artifact)
    assert "policy.onnx.json: env.max_episode_steps" in line
    if isinstance(steps, (int, float)) and not isinstance(steps, bool):
        config = ["train", "ppo-cartpole", "--set", f"env.max_episode_steps={steps}", "--run-dir", tmp_path / "run"]
        assert "env.max_episode_steps" in error_line(capsys, config)
        assert line.partition("env.max_episode_steps")[2].split(";")[0] in error_line(capsys, config)


def _state_size_larger(model, signature):
    return with_state(model, signature, 3, graph_size=2)


def _state_declared_graph_stateless(model, signature):
    return model, declare_state(signature)


def _state_undeclared_graph_stateful(model, signature):
    stateful, _ = with_state(model, signature)
    return stateful, signature


def _state_size_text(model, signature):
    model, signature = with_state(model, signature)
    signature["state"]["size"] = "two"
    return model, signature


def _graph(change):
    def apply(model, signature):
        change(model)
        return model, signature

    return apply


def _signature(change):
    def apply(model, signature):
        change(signature)
        return model, signature

    return apply


DISAGREEMENTS = {
    "state-size-larger": (_state_size_larger, "input 'state' has shape"),
    "state-declared-graph-stateless": (_state_declared_graph_stateless, "has no input 'state'"),
    "state-undeclared-graph-stateful": (_state_undeclared_graph_stateful, "has an input 'state'"),
    "state-size-text": (_state_size_text, "state.size must be a whole number"),
    "input-renamed": (_graph(rename_input), "has no input 'observation'"),
    "output-renamed": (_graph(rename_output), "has no output 'action'"),
    "observation-wider": (_graph(input_wider), "has shape ['batch', 7]"),
    "observation-rank-3": (_graph(input_of_rank_3), "has 3 dimensions"),
    "observation-double": (_graph(input_as_double), "is tensor(double)"),
    "action-float": (_graph(action_as_float), "is tensor(float)"),
    "batch-fixed": (_graph(batch_fixed), "fixes the batch at 1 rows"),
    "nested-too-deep": (_signature(lambda s: s.update(note=_nest([], 60))), f"more than {MAX_NESTING} deep"),
    "json-10000-deep": (lambda m, s: (m, json.dumps(s)[:-1] + ', "x": ' + "[" * 10_000 + "]" * 10_000 + "}"), "deep"),
    "inputs-not-a-list": (_signature(lambda s: s.update(inputs=5)), "inputs must be observation"),
    "more-actions-than-the-env": (_signature(lambda s: s["action"].update(n=3)), "takes 2 actions"),
    "error-in-an-episode": (_graph(_fails_on_real_observations), "failed on a step of 3 observation(s)"),
    "actions-outside-the-space": (_graph(_actions_plus_five), "returned actions outside [0, 2)"),
}
"""Signature/graph disagreements that were tracebacks (or silent): each is one line saying what disagrees."""


@pytest.mark.parametrize("case", sorted(DISAGREEMENTS))
def test_a_disagreement_between_signature_and_graph_is_one_line(exported, tmp_path, capsys, case):
    change, needle = DISAGREEMENTS[case]
    model, signature = change(*real(exported))
    artifact = write(tmp_path, model, signature)
    line = error_line(capsys, ["eval", artifact, "--episodes", 3, "--csv", tmp_path / "e.csv"])
    assert needle in line and "policy.onnx" in line and "export" in line, line


def _nest(value, depth):
    for _ in range(depth):
        value = [value]
    return value


class Deep:
    """Lists nested ``depth`` deep, written into the JSON text as brackets (json.dumps would recurse)."""

    def __init__(self, depth: int):
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"


def dumps(signature: dict) -> str:
    """JSON as ``json.dumps`` writes it (``NaN`` and ``Infinity`` included), :class:`Deep` values as brackets."""
    deep = {}

    def placeholder(value):
        deep[f"deep-{id(value)}"] = value.depth
        return f"deep-{id(value)}"

    text = json.dumps(signature, default=placeholder)
    for key, depth in deep.items():
        text = text.replace(f'"{key}"', "[" * depth + "]" * depth)
    return text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
) | st.builds(Deep, st.integers(40, 20_000))
SIGNATURE_PATHS = [
    ("format",),
    ("inputs",),
    ("inputs", 0),
    ("inputs", 0, "name"),
    ("inputs", 0, "shape"),
    ("inputs", 0, "shape", 0),
    ("inputs", 0, "shape", 1),
    ("inputs", 0, "dtype"),
    ("outputs",),
    ("outputs", 0, "name"),
    ("outputs", 0, "shape"),
    ("outputs", 0, "dtype"),
    ("state",),
    ("action",),
    ("action", "type"),
    ("action", "n"),
    ("action", "encoding"),
    ("env", "kwargs"),
    ("env", "max_episode_steps"),
    ("env", "action_encoding"),
    ("note",),
]


def _has(container, key) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and key < len(container)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(SIGNATURE_PATHS), JSON), min_size=1, max_size=3))
def test_any_signature_plays_or_is_one_line(exported, tmp_path, capsys, changes):
    """Whatever a signature says in the places eval reads, eval plays the real graph or says in one line what
    is wrong (exit 2): never a traceback, a hang or an endless episode."""
    model, signature = real(exported)
    for path, value in changes:  # a path an earlier change replaced is left as it is
        target = signature
        for key in path[:-1]:
            target = target[key] if _has(target, key) else None
        if _has(target, path[-1]) or isinstance(target, dict):
            target[path[-1]] = value
    artifact = write(tmp_path / "artifact", model, dumps(signature))
    args = ["eval", str(artifact), "--episodes", "1", "--csv", str(tmp_path / "e.csv")]
    code = main(args)
    err = capsys.readouterr().err
    if code != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), err[-2000:]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(GRAPH_CHANGES)), min_size=1, max_size=3, unique=True))
def test_any_graph_that_disagrees_with_its_signature_is_one_line(exported, tmp_path, capsys, changes):
    model, signature = real(exported)
    for change in changes:
        GRAPH_CHANGES[change](model)
    artifact = write(tmp_path / "artifact", model, signature)
    line = error_line(capsys, ["eval", artifact, "--episodes", 2, "--csv", tmp_path / "e.csv"])
    assert "policy.onnx" in line, (changes, line)


@pytest.mark.parametrize("fmt", ["pt2", "torchscript"])
def test_torch_artifacts_are_held_to_their_signature(exported, tmp_path, capsys, fmt):
    """The same class on the torch formats: a signature declaring a state the module does not take was a
    traceback in the first episode; its step is now tried before any is played."""
    out = tmp_path / fmt
    assert main(["export", str(exported.parents[1]), "--format", fmt, "--out", str(out)]) == 0
    capsys.readouterr()
    artifact = next(p for p in out.iterdir() if not p.name.endswith(".json"))
    signature = json.loads(artifact.with_name(artifact.name + ".json").read_text())
    artifact.with_name(artifact.name + ".json").write_text(json.dumps(declare_state(signature)))
    line = error_line(capsys, ["eval", artifact, "--episodes", 2, "--trust-code", "--csv", tmp_path / "e.csv"])
    assert f"{artifact} failed on a step of 2 observation(s)" in line
