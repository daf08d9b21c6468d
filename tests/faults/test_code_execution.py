"""Faults: code execution from what someone sends you. A crafted ``.pt2`` (a pickled weight, guards code,
pickled sample inputs, a shape expression that sympy would evaluate), a plain pickle under a ``.pt2`` name,
a run or artifact whose env names a Python module, a TorchScript artifact: each is one line and exit 2, and
a sentinel file proves no code ran; with ``--trust-code`` the module env and TorchScript load as asked."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpilot.cli import main
from rlpilot.common.errors import UserError
from rlpilot.play.safe_artifact import checked_pt2, load_pt2

FAST = ["--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q"]


def error_line(capsys, args) -> str:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), err
    return lines[0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A 256-frame PPO CartPole run exported as pt2 and TorchScript."""
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("exec") / "run"
    assert main(["train", "ppo-cartpole", "--frames", "256", "--run-dir", str(path), *FAST]) == 0
    assert main(["export", str(path), "--format", "pt2"]) == 0
    assert main(["export", str(path), "--format", "torchscript"]) == 0
    return path


@pytest.fixture
def run(exported, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(exported, copy)
    return copy


class _Sentinel:
    """Unpickling this creates ``path``: the proof that a pickle ran."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _rewrite(pt2: Path, change) -> None:
    """Applies ``change(contents: dict[name, bytes], prefix)`` to the archive's members, in place."""
    with zipfile.ZipFile(pt2) as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    prefix = next(iter(contents)).partition("/")[0] + "/"
    change(contents, prefix)
    with zipfile.ZipFile(pt2, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)


def _pickled_weight(sentinel):
    def change(contents, prefix):
        key = prefix + "data/weights/model_weights_config.json"
        config = json.loads(contents[key])
        name = next(iter(config["config"]))
        config["config"][name]["use_pickle"] = True
        contents[key] = json.dumps(config).encode()
        buffer = io.BytesIO()
        torch.save(_Sentinel(sentinel), buffer)
        contents[prefix + "data/weights/" + config["config"][name]["path_name"]] = buffer.getvalue()

    return change


def _guards_code(sentinel):
    def change(contents, prefix):
        program = json.loads(contents[prefix + "models/model.json"])
        program["guards_code"] = [f"open({str(sentinel)!r}, 'w')"]
        contents[prefix + "models/model.json"] = json.dumps(program).encode()

    return change


def _sample_inputs(sentinel):
    def change(contents, prefix):
        buffer = io.BytesIO()
        torch.save(_Sentinel(sentinel), buffer)
        contents[prefix + "data/sample_inputs/model.pt"] = buffer.getvalue()

    return change


def _sympy_expression(sentinel):
    def change(contents, prefix):
        program = json.loads(contents[prefix + "models/model.json"])

        def inject(value):
            if isinstance(value, dict):
                return {
                    k: f"open({str(sentinel)!r}, 'w') and {v}" if k == "expr_str" else inject(v)
                    for k, v in value.items()
                }
            return [inject(v) for v in value] if isinstance(value, list) else value

        injected = inject(program)
        assert injected != program  # the export has a dynamic batch: a shape expression to inject into
        contents[prefix + "models/model.json"] = json.dumps(injected).encode()

    return change


def _extra_member(sentinel):
    def change(contents, prefix):
        contents[prefix + "data/aotinductor/model/model.so"] = b"\x7fELF"

    return change


CRAFTED = {
    "pickled-weight": _pickled_weight,
    "guards-code": _guards_code,
    "pickled-sample-inputs": _sample_inputs,
    "sympy-expression": _sympy_expression,
    "shared-library": _extra_member,
}


def test_crafted_pt2_is_refused_and_runs_nothing(capsys, run, tmp_path):
    pt2 = run / "export" / "policy.pt2"
    original = pt2.read_bytes()
    for name, craft in CRAFTED.items():
        sentinel = tmp_path / f"ran-{name}"
        pt2.write_bytes(original)
        _rewrite(pt2, craft(sentinel))
        line = error_line(capsys, ["eval", pt2, "--episodes", 2])
        assert "is not a policy rlpilot export wrote" in line, (name, line)
        assert not sentinel.exists(), name
    # the genuine archive still loads, and acts
    pt2.write_bytes(original)
    assert load_pt2(pt2)(torch.zeros(3, 4)).shape == (3,)


def test_plain_pickle_under_a_pt2_name_is_one_line(capsys, run, tmp_path):
    sentinel = tmp_path / "ran"
    pt2 = run / "export" / "policy.pt2"
    pt2.write_bytes(pickle.dumps(_Sentinel(sentinel)))
    assert "not a zip archive" in error_line(capsys, ["eval", pt2, "--episodes", 2])
    assert not sentinel.exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_damaged_pt2_loads_or_is_refused(exported, tmp_path_factory, data):
    """Random edits of a genuine archive (members dropped, bytes flipped, JSON values replaced): the check
    either accepts it or raises a UserError; nothing is unpickled either way."""
    with zipfile.ZipFile(exported / "export" / "policy.pt2") as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    names = sorted(contents)
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(names))
        action = data.draw(st.sampled_from(["drop", "flip", "json", "rename"]))
        if action == "drop":
            contents.pop(name, None)
        elif action == "flip" and contents.get(name):
            blob = bytearray(contents[name])
            blob[data.draw(st.integers(0, len(blob) - 1))] ^= data.draw(st.integers(1, 255))
            contents[name] = bytes(blob)
        elif action == "json" and name.endswith(".json") and name in contents:
            value = data.draw(st.one_of(st.text(max_size=30), st.booleans(), st.integers(), st.none()))
            try:  # an earlier flip may have left it no JSON: then this edit is a no-op
                document = json.loads(contents[name])
            except ValueError:
                continue
            if isinstance(document, dict) and document:
                document[data.draw(st.sampled_from(sorted(document)))] = value
            contents[name] = json.dumps(document).encode()
        elif action == "rename":
            contents[name.rsplit("/", 1)[0] + "/" + data.draw(st.text("abcxyz_./", min_size=1, max_size=12))] = (
                contents.pop(name, b"")
            )
    path = tmp_path_factory.mktemp("fuzz") / "policy.pt2"
    with zipfile.ZipFile(path, "w") as archive:
        for name, blob in contents.items():
            archive.writestr(name, blob)
    unsafe = []
    real_load = torch.load

    def only_safe_loads(*args, **kwargs):  # the check may read tensors with the safe unpickler, nothing else
        if kwargs.get("weights_only") is not True:
            unsafe.append(args)
        return real_load(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "load", only_safe_loads)
        patch.setattr(pickle, "loads", lambda *a, **k: unsafe.append(a))
        try:
            checked_pt2(path)
        except UserError:
            pass
    assert not unsafe


# -- code named by a run or an artifact ----------------------------------------------------------------
MODULE = """
from pathlib import Path
Path({sentinel!r}).write_text("imported")
from gymnasium.envs.classic_control.cartpole import CartPoleEnv as Env
"""


def test_a_module_env_from_a_run_or_artifact_needs_trust_code(capsys, run, tmp_path, monkeypatch):
    sentinel = tmp_path / "imported"
    (tmp_path / "fault_exec_env.py").write_text(MODULE.format(sentinel=str(sentinel)))
    monkeypatch.chdir(tmp_path)  # where a user's own module sits: imported when the command line names it
    own = tmp_path / "own"
    try:
        assert main(["train", "ppo", "fault_exec_env:Env", "--frames", "256", "--run-dir", str(own), *FAST]) == 0
    finally:
        sys.modules.pop("fault_exec_env", None)
    sentinel.unlink()
    signature_path = run / "export" / "policy.pt2.json"
    signature = json.loads(signature_path.read_text())
    signature["env"]["id"] = "fault_exec_env:Env"
    signature_path.write_text(json.dumps(signature))
    refusals = [
        ["eval", own, "--episodes", 2],
        ["eval", own, "--controller", "random", "--episodes", 2],
        ["export", own],
        ["train", "--resume", own, "--frames", 512, "-q"],
        ["eval", run / "export" / "policy.pt2", "--episodes", 2],
        ["eval", run / "export" / "policy.ts.pt", "--episodes", 2],  # TorchScript: a program
    ]
    for args in refusals:
        line = error_line(capsys, args)
        assert "--trust-code" in line, (args, line)
    assert not sentinel.exists() and "fault_exec_env" not in sys.modules
    try:
        assert main(["eval", str(own), "--episodes", "2", "--trust-code"]) == 0
        assert sentinel.exists()  # imported because the command line said so
        ts = run / "export" / "policy.ts.pt"
        assert main(["eval", str(ts), "--episodes", "2", "--trust-code"]) == 0
    finally:
        sys.modules.pop("fault_exec_env", None)
