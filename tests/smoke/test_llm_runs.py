"""The grpo presets end to end with a tiny budget: run directory, metrics, checkpoints, resume, and every verb.

The CLI is called in-process (``rlpilot.cli.main``) so the code under test is this checkout's.
"""

import json

import pytest
import torch

pytest.importorskip("transformers")

from rlpilot.cli import main  # noqa: E402
from rlpilot.config import load_config, preset_names  # noqa: E402
from rlpilot.loop.trainer import train  # noqa: E402
from rlpilot.runs import load_run  # noqa: E402

# 4 prompts x 4 responses = 16 frames a step; a 1-layer, 32-wide model; 3 warm-up steps
TINY = [
    "grpo.prompts_per_step=4",
    "grpo.group_size=4",
    "llm.sft_steps=3",
    "llm.tiny_hidden_size=32",
    "llm.tiny_layers=1",
    "train.eval_every_frames=16",
    "train.checkpoint_every_frames=16",
]


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    config = load_config("grpo-reverse", overrides=[*TINY, "train.total_frames=32"])
    return train(config, run_root=str(tmp_path_factory.mktemp("runs")), show_progress=False)


def test_grpo_presets_load():
    names = [name for name in preset_names() if name.startswith("grpo-")]
    assert {"grpo-reverse", "grpo-arithmetic"} <= set(names)
    for name in names:
        config = load_config(name)
        assert config.algo == "grpo" and config.frames_per_batch == 128


def test_grpo_run_writes_the_run_directory(llm_run):
    run = load_run(llm_run.path)
    assert run.path.name.startswith("grpo-reverse-s0-")
    for name in ("config.yaml", "meta.json", "metrics.csv", "events.jsonl", "curve.png", "checkpoints/last.pt"):
        assert (run.path / name).is_file(), name
    meta = json.loads((run.path / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["frames"] == 32 and meta["llm_facts"]["parameters"] > 0
    rows = run.metrics()
    assert [row["frames"] for row in rows] == [0, 16, 32]
    assert "eval/return_mean" in rows[0] and "train/reward_mean" not in rows[0]  # the warmed-up model, before RL
    for key in (
        "train/reward_mean",
        "train/reward_p90",
        "train/kl_to_ref",
        "train/response_length",
        "train/clip_fraction",
        "time/tokens_per_s",
        "eval/return_mean",
        "time/elapsed_s",
    ):
        assert key in rows[-1], key
    assert 0.0 <= rows[-1]["eval/return_mean"] <= 1.0
    kinds = [event["event"] for event in run.events()]
    assert "sft" in kinds and kinds.count("eval") == 3 and kinds[-1] == "end"
    checkpoint = torch.load(run.path / "checkpoints/last.pt", weights_only=True)
    assert checkpoint["frames"] == 32 and checkpoint["state"]["updates"] == 2 * 2  # 2 steps x 2 epochs
    policy, reference = checkpoint["state"]["policy"], checkpoint["state"]["reference"]
    moved = any(not torch.equal(policy[k], reference[k]) for k in policy)
    # a group whose responses all score the same has advantage 0 and (policy == reference) no KL gradient
    assert moved == any(row["train/groups_without_signal"] < 1 for row in rows[1:])


LLM_RULE_IDS = {
    "kl_blowup",
    "reward_flat",
    "response_length_collapse",
    "responses_unfinished",
    "no_progress",
    "throughput_collapse",
    "loss_exploding",
    "nonfinite_metrics",
    "nonfinite_observations",
    "nonfinite_normalization",
}


def test_verbs_work_on_an_llm_run(llm_run, capsys):
    from rlpilot.doctor import diagnose

    diagnosis = diagnose(llm_run.path)
    assert main(["doctor", str(llm_run.path)]) == (1 if diagnosis.errors else 0)
    assert capsys.readouterr().out.strip() == diagnosis.render().strip()
    assert all(f.rule in LLM_RULE_IDS for f in diagnosis.findings)  # no env or critic rule on a language model
    out = llm_run.path / "again.png"
    assert main(["plot", str(llm_run.path), "--out", str(out)]) == 0 and out.is_file()
    capsys.readouterr()
    assert main(["eval", str(llm_run.path)]) == 0
    printed = capsys.readouterr().out
    assert "40 held-out prompts, greedy: mean reward" in printed
    assert len((llm_run.path / "eval.csv").read_text().splitlines()) == 41
    assert main(["export", str(llm_run.path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "is an LLM (grpo) run" in err[0]


def test_grpo_run_resumes_and_extends(llm_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(llm_run.path, copy)
    assert main(["train", "--resume", str(copy), "--frames", "48", "-q"]) == 0
    run = load_run(copy)
    assert run.frames == 48 and run.meta()["resumes"] == 1
    assert [row["frames"] for row in run.metrics()] == [0, 16, 32, 48]


def test_a_local_model_directory_trains_end_to_end(tmp_path, capsys):
    from rlpilot.llm.model import build_char_tokenizer, build_tiny_model, save_model

    tokenizer = build_char_tokenizer()
    save_model(build_tiny_model(tokenizer, hidden_size=32, layers=1, seed=1), tokenizer, tmp_path / "model")
    args = ["train", "grpo-reverse", "--run-dir", str(tmp_path / "run"), "--frames", "16", "-q"]
    sets = [f"llm.model={tmp_path / 'model'}", *TINY[:2], "llm.sft_steps=0"]
    assert main([*args, *[item for s in sets for item in ("--set", s)]]) == 0
    assert "status: finished" in capsys.readouterr().out
    # no warm-up: the reference is the saved model, reloaded from its directory rather than checkpointed
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)["state"]
    assert "reference" not in state
    assert main(["train", "--resume", str(tmp_path / "run"), "--frames", "32", "-q"]) == 0
    assert load_run(tmp_path / "run").frames == 32


def test_a_path_that_is_not_a_model_is_one_line_and_exit_2(tmp_path, capsys):
    args = ["train", "grpo-reverse", "--runs", str(tmp_path / "runs"), "-q", "--set", f"llm.model={tmp_path}"]
    assert main(args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "not a Hugging Face model directory" in err[0], err
    assert not list((tmp_path / "runs").glob("*"))  # nothing half-built left behind


def test_doctor_llm_rules_fire_on_their_evidence(llm_run, tmp_path):
    """The run's own metrics.csv, rewritten with a KL blow-up, groups without signal and shrinking answers."""
    import shutil

    from rlpilot.doctor import diagnose
    from rlpilot.runs import MetricsWriter

    copy = tmp_path / "broken"
    shutil.copytree(llm_run.path, copy)
    (copy / "metrics.csv").unlink()
    writer = MetricsWriter(copy / "metrics.csv")
    for i in range(12):
        writer.write(
            {
                "frames": 16 * (i + 1),
                "train/kl_to_ref": 0.05 if i < 6 else 12.0,
                "train/groups_without_signal": 1.0,
                "train/reward_mean": 0.0,
                "train/response_length": 4.0 if i < 3 else 1.0,
                "train/finished_frac": 0.2,
                "eval/return_mean": 0.1,
            }
        )
    rules = {finding.rule: finding for finding in diagnose(copy).findings}
    assert rules["kl_blowup"].severity == "error" and "grpo.kl_coef=" in rules["kl_blowup"].fix
    assert rules["reward_flat"].severity == "warning" and "llm.sft_steps=" in rules["reward_flat"].fix
    assert {"response_length_collapse", "responses_unfinished", "no_progress"} <= set(rules)
    assert "rlpilot check" not in rules["no_progress"].fix
    healthy = {finding.rule for finding in diagnose(llm_run.path).findings}
    assert not healthy & {"kl_blowup", "response_length_collapse"}


@pytest.mark.slow  # LLM (make test-all; kept out of make test's 10 minutes)
def test_gpu_benchmark_script_runs_tiny_on_cpu(tmp_path):
    """benchmarks/llm_gpu.py is run by hand on a GPU machine; --tiny keeps its code path from rotting."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    args = ["--tiny", "--steps", "1", "--prompts", "2", "--group", "2", "--max-new-tokens", "4"]
    out = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "llm_gpu.py"), "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "llm_gpu.json").read_text())
    assert result["steps_measured"] == 1 and result["responses_per_step"] == 4 and result["step_s_mean"] > 0


def test_time_budget_stops_an_llm_run_with_a_final_eval(tmp_path):
    config = load_config("grpo-reverse", overrides=[*TINY, "train.total_frames=1600", "train.max_seconds=0.01"])
    run = train(config, run_root=str(tmp_path), show_progress=False)
    assert run.status == "finished" and run.frames == 16  # stopped after the first step
    assert any(e["event"] == "time_limit" for e in run.events())
    assert "eval/return_mean" in run.metrics()[-1]
