"""The CleanRL-style peers carry their own copy of RL Zoo's settings (single-file style, for a standalone
run): it must be the benchmark's, or their standalone numbers would measure something else."""

from benchmark_loader import BENCHMARKS, load_benchmark


def test_cleanrl_peers_copy_the_benchmarks_zoo_settings():
    tts = load_benchmark(BENCHMARKS / "time_to_solve.py")
    assert load_benchmark(BENCHMARKS / "peers" / "cleanrl_ppo.py").ZOO == tts.SB3_PPO_ZOO
    assert load_benchmark(BENCHMARKS / "peers" / "cleanrl_dqn.py").ZOO == tts.SB3_DQN_ZOO


def test_every_arm_of_time_to_solve_is_a_valid_rlpilot_config():
    """The same-settings and SBX-computation arms are settings a user could type: each loads and validates."""
    from rlpilot.config import load_config

    tts = load_benchmark(BENCHMARKS / "time_to_solve.py")
    for algo, task in tts.TASKS.items():
        for overrides in (tts.SAME_SETTINGS[algo], [*tts.SAME_SETTINGS[algo], *tts.SBX_COMPUTATION[algo]]):
            load_config(task.preset, overrides=list(overrides)).validate()
    assert load_config("td3-pendulum", overrides=tts.SBX_COMPUTATION["td3"]).td3.actor_q == "min"


def test_a_carry_keeps_every_row_under_the_stamp_it_was_measured_under():
    """Re-measuring one task of a file that itself carried rows: the earlier file's own rows come under its stamp,
    the rows it had carried under theirs, the re-measured task under none (the new file's own)."""
    tts = load_benchmark(BENCHMARKS / "time_to_solve.py")
    earlier = {
        "tasks": {algo: {"name": algo} for algo in ("ppo", "dqn", "sac", "td3")},
        "stamp": ["# date: 2026-12-04 20:27"],
        "carried": {"from": "old.json", "algos": ["ppo", "dqn", "td3"], "stamp": ["# date: 2026-12-04 17:45"]},
    }
    tasks = {"dqn": {"name": "new dqn"}}
    entries = tts.carried_rows(earlier, "earlier.json", tasks)
    assert entries == [
        {"from": "old.json", "algos": ["ppo", "td3"], "stamp": ["# date: 2026-12-04 17:45"]},
        {"from": "earlier.json", "algos": ["sac"], "stamp": ["# date: 2026-12-04 20:27"]},
    ]
    assert tasks == {"dqn": {"name": "new dqn"}, "ppo": {"name": "ppo"}, "td3": {"name": "td3"}, "sac": {"name": "sac"}}
    entries = tts.carried_rows({**earlier, "carried": entries}, "newer.json", {"ppo": {}})
    assert [(e["from"], e["algos"]) for e in entries] == [
        ("old.json", ["td3"]),
        ("earlier.json", ["sac"]),
        ("newer.json", ["dqn"]),
    ]
