"""Every doctor rule on synthetic runs written by hand: it fires on its evidence, and stays quiet on a
healthy counterpart. No training, no torch: the whole file runs in a few seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from doctor_cases import (
    CASES,
    NAN,
    columns,
    config,
    evals,
    write_run,
)

import rlpilot
from rlpilot.common.findings import Finding, render_finding
from rlpilot.doctor import RULES_BY_ALGO, control, diagnose, llm, offpolicy, rules_for
from rlpilot.doctor.common import rule_nonfinite_normalization
from rlpilot.doctor.view import RunView
from rlpilot.runs import Run, load_run


def findings_of(tmp_path: Path, spec: dict) -> dict[str, Finding]:
    return {finding.rule: finding for finding in diagnose(write_run(tmp_path / "run", **spec)).findings}


@pytest.mark.parametrize("case", list(CASES))
def test_rule_fires_on_its_evidence(case, tmp_path):
    rule, severity, (name, value), broken, _ = CASES[case]
    found = findings_of(tmp_path, broken)
    assert rule in found, sorted(found)
    assert found[rule].severity == severity
    assert found[rule].evidence[name] == (pytest.approx(value) if isinstance(value, float) else value)
    assert found[rule].fix and found[rule].title


@pytest.mark.parametrize("case", [name for name, case in CASES.items() if case.healthy])
def test_rule_stays_quiet_on_a_healthy_counterpart(case, tmp_path):
    assert CASES[case].rule not in findings_of(tmp_path, CASES[case].healthy)


def test_every_rule_fires_in_some_case(tmp_path):
    """A rule added to a registry without a case above fails here (the checkpoint rule has its own test)."""
    views = {name: RunView(load_run(write_run(tmp_path / name, **case.broken))) for name, case in CASES.items()}
    every_rule = {rule for rules in RULES_BY_ALGO.values() for rule in rules} - {rule_nonfinite_normalization}
    silent = [
        rule.__name__
        for rule in every_rule
        if not any(rule(view) for view in views.values() if rule in rules_for(view.config.algo))
    ]
    assert not silent


# -- fixes that name the right change -----------------------------------------------------------------
@pytest.mark.parametrize(
    "case, text",
    [
        ("rewards_zero", "--set env.reward_scale=1.0"),
        ("buffer_smaller_than_batch", "--set dqn.buffer_size=100000"),
        ("actions_identical_one_hot", "--set ppo.distribution=auto"),
        ("horizon_too_short", "--set ppo.gamma=0.99"),
        ("loss_exploding", "--set ppo.lr=3e-05"),
        ("kl_blowup", "grpo.kl_coef=0.05"),
        ("reward_flat", "llm.sft_steps=120"),
        ("no_progress_llm", "llm.sft_steps=120"),
        ("nonfinite_metrics_llm", "--set grpo.lr=0.0001"),
        ("temperature_collapsed", "--set sac.target_entropy=auto --set sac.alpha_init=0.1"),
        ("temperature_exploding", "--set sac.target_entropy=auto"),
        ("q_diverging", "--set td3.lr=0.0001"),
        ("q_diverging_undiscounted", "--set td3.gamma=0.99 --set td3.tau=0.005"),
        ("critic_loss_blowup", "--set sac.lr=3e-05"),
    ],
)
def test_fix_names_the_change(case, text, tmp_path):
    found = findings_of(tmp_path, CASES[case].broken)
    assert text in found[CASES[case].rule].fix


# -- fixes that retrain the run as it was started (meta.json's origin) ---------------------------------------
TRAINED_WITH = ["ppo.lr=0.001", "env.reward_scale=0", "train.seed=3"]
"""The run's own overrides: ``env.reward_scale=0`` is the one rewards_zero's fix changes."""
ORIGINS = {
    "config file": (
        {"config_file": "my tank.yaml", "overrides": TRAINED_WITH},
        "rlpilot train --config 'my tank.yaml' --set ppo.lr=0.001 --set train.seed=3 --set env.reward_scale=1.0",
    ),
    "preset": (
        {"preset": "ppo-cartpole", "overrides": TRAINED_WITH},
        "rlpilot train ppo-cartpole --set ppo.lr=0.001 --set train.seed=3 --set env.reward_scale=1.0",
    ),
    "algorithm and env": (
        {"algo": "ppo", "env": "CartPole-v1", "overrides": []},
        "rlpilot train ppo CartPole-v1 --set env.reward_scale=1.0",
    ),
    "none recorded (an older run)": (None, "rlpilot train ppo CartPole-v1 --set env.reward_scale=1.0"),
}


@pytest.mark.parametrize("origin", list(ORIGINS))
def test_fix_retrains_the_run_as_it_was_started(origin, tmp_path):
    """The fix keeps how the run was started (a ``--config FILE`` run retrained as plain PPO was issue 56's
    complaint) and its own ``--set`` overrides, less the one the fix changes, the fix's last."""
    recorded, command = ORIGINS[origin]
    spec = {**CASES["rewards_zero"].broken, "meta": {"origin": recorded} if recorded else {}}
    assert findings_of(tmp_path, spec)["rewards_zero"].fix == command


def test_preset_run_without_origin_keeps_its_preset(tmp_path):
    cfg = config(env={"reward_scale": 0.0})
    cfg.preset = "ppo-cartpole"
    spec = {**CASES["rewards_zero"].broken, "cfg": cfg}
    assert findings_of(tmp_path, spec)["rewards_zero"].fix == "rlpilot train ppo-cartpole --set env.reward_scale=1.0"


@pytest.mark.parametrize(
    "origin, fix",
    [
        ({"preset": "ippo-spread", "overrides": ["ppo.lr=0.001"]}, "rlpilot train mappo-spread --set ppo.lr=0.001"),
        (
            {"config_file": "spread.yaml", "overrides": []},
            "set algo: mappo in spread.yaml, then rlpilot train --config",
        ),
    ],
)
def test_critic_blind_fix_switches_to_mappo_the_way_the_run_was_started(origin, fix, tmp_path):
    spec = {**CASES["critic_blind"].broken, "meta": {"origin": origin}}
    assert findings_of(tmp_path, spec)["critic_blind"].fix.startswith(fix)


LLM_CASES = [name for name, case in CASES.items() if "cfg" in case.broken and case.broken["cfg"].algo == "grpo"]


@pytest.mark.parametrize("case", LLM_CASES)
def test_llm_fixes_never_point_at_an_env(case, tmp_path):
    assert not [f.fix for f in findings_of(tmp_path, CASES[case].broken).values() if "rlpilot check" in f.fix]


# -- the checkpoint's normalisation statistics (the one rule that opens the checkpoint) ----------------
@pytest.mark.parametrize("layout", ["state", "top level"])
@pytest.mark.parametrize("loc, fires", [([0.0, NAN], True), ([0.0, 1.0], False)])
def test_nonfinite_normalization_reads_both_checkpoint_layouts(layout, loc, fires, tmp_path, monkeypatch):
    """``checkpoint["state"]["obs_norm"]`` (current) and ``checkpoint["obs_norm"]`` (older runs). The
    checkpoint is stood in for by a dict: writing a real one needs torch, which these tests keep out."""
    norm = {"loc": loc, "scale": [1.0, 1.0]}
    checkpoint = {"state": {"obs_norm": norm}} if layout == "state" else {"obs_norm": norm}
    monkeypatch.setattr(Run, "load_checkpoint", lambda self, name="last": checkpoint)
    path = write_run(tmp_path / "run", cfg=config(env={"normalize_obs": True}))
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "last.pt").write_bytes(b"")
    found = {finding.rule: finding for finding in diagnose(path).findings}
    assert ("nonfinite_normalization" in found) == fires
    if fires:
        assert found["nonfinite_normalization"].severity == "error"
        assert found["nonfinite_normalization"].evidence["scale"] == [1.0, 1.0]


def test_checkpoint_is_not_opened_without_normalisation(tmp_path, monkeypatch):
    def refuse(self, name="last"):
        raise AssertionError("doctor opened the checkpoint of a run without observation normalisation")

    monkeypatch.setattr(Run, "load_checkpoint", refuse)
    path = write_run(tmp_path / "run")
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "last.pt").write_bytes(b"")
    assert diagnose(path).errors == 0


# -- registry, did_well, report ---------------------------------------------------------------------------
def test_registry_maps_algorithms_to_rule_lists():
    assert rules_for("grpo") is llm.RULES and rules_for("ppo") is rules_for("dqn") is control.RULES
    # an algorithm without its own list gets the control rules (SAC and TD3 have their own since issue 17)
    assert rules_for("a2c") is control.RULES
    assert rules_for("sac") is rules_for("td3") is offpolicy.RULES
    assert set(control.RULES) < set(offpolicy.RULES)  # SAC and TD3 keep every control rule


def test_llm_runs_do_not_get_control_rules(tmp_path):
    found = findings_of(tmp_path, {"cfg": config("grpo"), "rows": columns(ppo__kl=0.2, ppo__clip_fraction=0.5)})
    assert "ppo_steps_too_large" not in found


@pytest.mark.parametrize(
    "meta, rows, did_well",
    [
        ({"status": "solved"}, evals(10.0, 20.0, 30.0), True),
        ({}, evals(10.0, 480.0), True),
        ({}, evals(10.0, 470.0), False),
        ({"solved_at": None}, evals(10.0, 400.0), False),  # no threshold, no yardstick: rules stay on
    ],
)
def test_did_well(meta, rows, did_well, tmp_path):
    assert RunView(load_run(write_run(tmp_path / "run", meta=meta, rows=rows))).did_well is did_well


def test_all_nan_losses_and_returns_are_not_no_findings(tmp_path):
    path = write_run(tmp_path / "run", rows=columns(loss__critic=NAN, loss__objective=NAN, eval__return_mean=NAN))
    diagnosis = diagnose(path)
    assert diagnosis.errors >= 1 and "no findings" not in diagnosis.render()


def test_render_and_json_share_the_finding(tmp_path):
    diagnosis = diagnose(write_run(tmp_path / "run", **CASES["buffer_smaller_than_batch"].broken))
    text, short = diagnosis.render(), diagnosis.render(short=True)
    assert "\n".join(render_finding(diagnosis.findings[0])) in text
    assert "[error] the replay buffer is smaller than a batch" in short and "evidence:" not in short
    assert "evidence: dqn.buffer_size=32; dqn.batch_size=64" in text
    report = diagnosis.to_json()
    assert report["summary"] == {"errors": 1, "warnings": 0, "infos": 0}
    assert list(report["findings"][0]) == ["rule", "severity", "title", "evidence", "cause", "fix"]
    assert json.loads(json.dumps(report)) == report


def test_reading_a_run_imports_neither_torch_nor_its_env_module(tmp_path):
    """In a fresh interpreter (this one has torch loaded by conftest): doctor on a run without a checkpoint."""
    module = "rlpilot_test_user_module_never_imported"
    (tmp_path / f"{module}.py").write_text("raise SystemExit('doctor imported a module named in the config')\n")
    path = write_run(tmp_path / "run", cfg=config(env={"id": f"{module}:Env"}), rows=evals(1.0, 1.0, 1.0))
    code = (
        "import sys; from rlpilot.doctor import diagnose; d = diagnose(sys.argv[1]); "
        f"assert 'torch' not in sys.modules and {module!r} not in sys.modules; print(d.render(short=True))"
    )
    src = str(Path(rlpilot.__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no_progress" in out.stdout or "barely improved" in out.stdout
