"""The CleanRL-style peers carry their own copy of RL Zoo's settings (single-file style, for a standalone
run): it must be the benchmark's, or their standalone numbers would measure something else."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"_bench_{path.stem}"] = module  # dataclasses look their module up there
    sys.path.insert(0, str(BENCHMARKS))  # time_to_solve imports its sibling `stamp`
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_cleanrl_peers_copy_the_benchmarks_zoo_settings():
    tts = _load(BENCHMARKS / "time_to_solve.py")
    assert _load(BENCHMARKS / "peers" / "cleanrl_ppo.py").ZOO == tts.SB3_PPO_ZOO
    assert _load(BENCHMARKS / "peers" / "cleanrl_dqn.py").ZOO == tts.SB3_DQN_ZOO


def test_every_arm_of_time_to_solve_is_a_valid_rlpilot_config():
    """The same-settings and SBX-computation arms are settings a user could type: each loads and validates."""
    from rlpilot.config import load_config

    tts = _load(BENCHMARKS / "time_to_solve.py")
    for algo, task in tts.TASKS.items():
        for overrides in (tts.SAME_SETTINGS[algo], [*tts.SAME_SETTINGS[algo], *tts.SBX_COMPUTATION[algo]]):
            load_config(task.preset, overrides=list(overrides)).validate()
    assert load_config("td3-pendulum", overrides=tts.SBX_COMPUTATION["td3"]).td3.actor_q == "min"
