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
    for task in tts.TASKS.values():
        same = tts.same_settings(task)
        for overrides in (same, [*same, *tts.SBX_COMPUTATION[task.algo]]):
            load_config(task.preset, overrides=list(overrides)).validate()
    assert load_config("td3-pendulum", overrides=tts.SBX_COMPUTATION["td3"]).td3.actor_q == "min"


def test_a_locomotion_task_times_its_preset_to_the_threshold_against_the_zoos_settings():
    """A locomotion task runs the preset a user trains (its own threshold, stopped there: the presets go on to 1M),
    on one thread, evaluated as it evaluates; its peers get the Zoo's mujoco-defaults, which locomotion_peers.py
    (the 300k-frame curves beside the same presets) uses too; its rows are named by the task, not the algorithm
    (SAC on Pendulum and SAC on HalfCheetah are different workers)."""
    from types import SimpleNamespace

    from rlpilot.config import load_config

    tts = load_benchmark(BENCHMARKS / "time_to_solve.py")
    peers = load_benchmark(BENCHMARKS / "locomotion_peers.py")
    assert tts.MUJOCO_ZOO == peers.ZOO  # one dict: the curves' peers and the timed peers run alike
    for key in ("sac-halfcheetah", "td3-halfcheetah", "sac-hopper", "td3-hopper"):
        task = tts.TASKS[key]
        preset = load_config(task.preset)
        assert (task.env_id, task.threshold) == (preset.env.id, preset.train.solved_at)
        assert (task.eval_every, task.episodes) == (preset.train.eval_every_frames, preset.train.eval_episodes)
        assert task.sb3 is tts.MUJOCO_ZOO[task.algo]
        assert tts.peer_names(key) == [f"sb3-{key}-zoo", f"sbx-{key}-zoo"]  # no CleanRL-style SAC/TD3 peer
        assert {f"sb3-{key}-zoo", f"sbx-{key}-zoo"} <= set(tts.WORKERS)
        args = SimpleNamespace(eval_every=task.eval_every, budget=task.budget, episodes=task.episodes, set=[])
        command, _ = tts.rlpilot_cli(task, "same", 100, args)
        settings = [command[i + 1] for i, word in enumerate(command) if word == "--set"]
        run = load_config(task.preset, overrides=settings)
        assert run.train.stop_when_solved and run.train.num_threads == 1 and run.train.seed == 100
        assert getattr(run, task.algo).steps_per_env == 1 and getattr(run, task.algo).updates_per_frame == 1
    assert tts.WORKERS["sb3-sac-zoo"].keywords["env_id"] == "Pendulum-v1"
    assert tts.WORKERS["sb3-sac-halfcheetah-zoo"].keywords["env_id"] == "HalfCheetah-v5"


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


def test_cores_gives_every_side_the_same_cpus_and_threads():
    """``--cores 2`` (the whole 2-core machine): rlpilot's learner on 2 threads, the peers' workers told 2 (torch's
    threads, XLA's client), each child pinned to both CPUs; one core keeps XLA's single-thread recipe."""
    import os
    import subprocess
    import sys
    from types import SimpleNamespace

    tts = load_benchmark(BENCHMARKS / "time_to_solve.py")
    task = tts.TASKS["sac-halfcheetah"]
    args = SimpleNamespace(eval_every=task.eval_every, budget=task.budget, episodes=task.episodes, set=[], cores=2)
    command, _ = tts.rlpilot_cli(task, "preset", 100, args)
    assert "train.num_threads=2" in command
    assert tts.jax_cpu_settings(2) == {"JAX_PLATFORMS": "cpu", "NPROC": "2"}
    assert tts.jax_cpu_settings(1)["NPROC"] == "1" and "eigen=false" in tts.jax_cpu_settings(1)["XLA_FLAGS"]
    assert tts.pin_cores(1) is tts.one_core
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        code = "import os; print(sorted(os.sched_getaffinity(0)))"
        pinned = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=tts.pin_cores(2)
        )
        assert pinned.stdout.strip() == "[0, 1]"
