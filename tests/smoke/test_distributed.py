"""Collection for one run on Ray actors (issue 39, docs/distributed.md): the slow test env, bad input as one
line, PPO synchronous and SAC asynchronous on a loopback cluster, an actor killed mid-run, SIGTERM, and a
learner killed then resumed."""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported: keeps it on loopback

import pytest
import torch

from cli_runner import start_cli
from conftest import TEST_CLUSTERS, marked_as_the_tests
from rlpilot.cli import main
from rlpilot.cluster import owned_actors, owned_processes
from rlpilot.runs import load_run

pytestmark = pytest.mark.xdist_group("ray")  # one test process runs every Ray test: one loopback cluster (conftest)

SLOW = ["--set", "env.id=rlpilot/SlowCartPole-v0", "--set", "env.kwargs={step_ms: 5}"]
QUIET = ["--set", "train.loggers=[]", "--set", "train.eval_episodes=2", "-q"]
SMALL_PPO = ["--set", "ppo.minibatch_size=64"]


def _rows(path: Path) -> list[dict]:
    with open(path / "metrics.csv") as f:
        return list(csv.DictReader(f))


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines() if line.strip()]


def _wait_for(condition, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:  # a deadline, not a speed bound: only a hang reaches it
            pytest.fail("timed out")
        time.sleep(0.05)


def _actor_pids(owner: int | str = TEST_CLUSTERS) -> list[int]:
    """The collection actors of this test process's clusters (or, with ``owner``, of a learner's local one): not
    those of other work on the machine (another run's, a benchmark's)."""
    return owned_actors(owner)


def test_the_slow_env_costs_time_not_cpu():
    import gymnasium as gym

    from rlpilot import registry

    registry.resolve_env("rlpilot/SlowCartPole-v0")
    env = gym.make("rlpilot/SlowCartPole-v0", step_ms=20)
    env.reset(seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(10):
        env.step(0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.2 and cpu < 0.1, (wall, cpu)
    assert env.spec.max_episode_steps == 500


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "collect.workers=0"], "collect.workers must be > 0"),
        (["--set", "collect.workers=2"], "add --ray local"),
        (["--set", "collect.workers=3", "--ray", "local"], "env.num_envs (8) is split evenly"),
        (["--set", "collect.workers=2", "--ray", "127.0.0.1:1"], "no Ray cluster answers there"),
        (["--set", "collect.workers=2", "--set", "env.backend=native", "--ray", "local"], "cannot run on Ray actors"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, needle):
    code = main(["train", "ppo", "CartPole-v1", "--runs", str(tmp_path), *args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert not any(tmp_path.iterdir())  # refused before a run exists


def test_ray_is_refused_for_a_run_that_does_not_collect_on_an_env(tmp_path, capsys):
    assert main(["train", "grpo-reverse", "--runs", str(tmp_path), "--ray", "local"]) == 2
    assert "collects in-process" in capsys.readouterr().err


def test_ppo_collects_synchronously_on_two_actors(tmp_path, loopback_ray):
    path = tmp_path / "ppo"
    args = ["train", "ppo", "CartPole-v1", "--frames", "512", "--run-dir", str(path), "--ray", "local"]
    assert main([*args, "--set", "collect.workers=2", "--set", "env.num_envs=4", *SMALL_PPO, *QUIET]) == 0
    rows = _rows(path)
    assert [int(float(row["frames"])) for row in rows][-1] == 512
    row = rows[-1]
    assert float(row["collect/policy_lag"]) == 0.0  # every actor stepped with the learner's weights
    assert float(row["collect/fps"]) > 0 and float(row["collect/actor_fps"]) > 0
    assert 0.0 <= float(row["collect/wait_share"]) <= 1.0
    # 4 envs x 32 steps of CartPole (4 float32 observations twice, reward, flags, action, log-prob) at least
    assert float(row["collect/bytes_per_batch"]) > 128 * (4 * 4 * 2 + 4)
    assert load_run(path).status == "finished"


def test_sac_collects_asynchronously_and_keeps_its_update_to_data_ratio(tmp_path, loopback_ray):
    path = tmp_path / "sac"
    settings = ["collect.workers=2", "env.num_envs=2", "sac.updates_per_frame=0.5", "sac.learning_starts=0"]
    settings += ["sac.batch_size=32", "model.hidden_sizes=[16]"]
    args = ["train", "sac", "Pendulum-v1", "--frames", "320", "--run-dir", str(path), "--ray", "local"]
    assert main([*args, *[item for s in settings for item in ("--set", s)], *QUIET]) == 0
    saved = torch.load(path / "checkpoints" / "last.pt", weights_only=True)
    frames = saved["frames"]
    assert frames >= 320 and saved["state"]["algo"]["updates"] == frames // 2  # 0.5 updates a frame, exactly
    lags = [float(row["collect/policy_lag"]) for row in _rows(path)]
    assert max(lags) >= 1.0  # actors collected while the learner learned


def test_actors_killed_while_one_starts_and_mid_run_are_replaced_and_the_run_finishes(tmp_path, loopback_ray):
    """An actor SIGKILLed as soon as its process exists (while it imports and builds its envs), then another
    mid-run: a replacement takes each one's place, with one ``worker_replaced`` event each, and the run finishes."""
    path = tmp_path / "killed"
    victims: list[int] = []
    _wait_for(lambda: not _actor_pids(), timeout=60)  # the actors of earlier tests have exited

    def living() -> list[int]:
        return [pid for pid in _actor_pids() if pid not in victims]

    def kill_two_actors():
        _wait_for(lambda: len(living()) >= 1, timeout=240)  # while it starts
        victims.append(living()[0])
        os.kill(victims[-1], signal.SIGKILL)
        _wait_for(lambda: (path / "metrics.csv").exists() and len(living()) >= 2)  # mid-run
        victims.append(living()[0])
        os.kill(victims[-1], signal.SIGKILL)

    killer = threading.Thread(target=kill_two_actors, daemon=True)
    killer.start()
    args = ["train", "ppo", "CartPole-v1", "--frames", "2560", "--run-dir", str(path), "--ray", "local"]
    settings = ["--set", "collect.workers=2", "--set", "env.num_envs=2", "--set", "train.log_every_frames=64"]
    assert main([*args, *SLOW, *settings, *SMALL_PPO, *QUIET]) == 0
    killer.join(timeout=5)
    assert len(victims) == 2, f"actors killed: {victims}"
    replaced = [event for event in _events(path) if event["event"] == "worker_replaced"]
    assert len(replaced) == 2 and not {event["pid"] for event in replaced} & set(victims)
    assert load_run(path).status == "finished"
    assert float(_rows(path)[-1]["collect/replaced"]) == 2.0


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_sigterm_stops_actors_and_learner_then_a_resume_continues_and_sigkill_leaves_nothing(tmp_path):
    """The learner's own local cluster (``--ray local`` in a fresh process): SIGTERM checkpoints and stops
    the actors; the resumed run (its actors started again) continues the curve, frames strictly increasing;
    SIGKILL of its learner takes its whole cluster with it. A resume after SIGKILL is a resume as any
    (tests/smoke/test_lifecycle.py)."""
    path = tmp_path / "run"
    settings = ["--set", "collect.workers=2", "--set", "env.num_envs=2", "--set", "train.checkpoint_every_frames=128"]
    common = [*SLOW, *settings, *SMALL_PPO, "--set", "train.log_every_frames=64", *QUIET]
    args = ["train", "ppo", "CartPole-v1", "--frames", 100_000, "--run-dir", path, "--ray", "local"]
    process = start_cli(*args, *common)
    _wait_for(lambda: (path / "checkpoints" / "last.pt").exists(), timeout=240)
    actors = _actor_pids(process.pid)
    assert actors
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    meta = json.loads((path / "meta.json").read_text())
    assert meta["status"] == "interrupted" and "SIGTERM" in meta["reason"]
    _wait_for(lambda: not set(actors) & set(_actor_pids(process.pid)), timeout=60)  # the actors are gone
    _wait_for(lambda: not owned_processes(process.pid), timeout=60)  # and every process of its cluster

    process = start_cli("train", "--resume", path, "--ray", "local")
    stopped_at = load_run(path).frames
    _wait_for(lambda: any(float(row["frames"]) > stopped_at + 256 for row in _rows(path)), timeout=240)
    assert _actor_pids(process.pid)  # collecting on actors of its own again
    process.kill()  # SIGKILL of the learner: no checkpoint, no status written
    process.communicate(timeout=60)
    _wait_for(lambda: not owned_processes(process.pid), timeout=120)  # the cluster went with its driver
    frames = [float(row["frames"]) for row in _rows(path)]
    assert frames == sorted(set(frames)) and frames[-1] > stopped_at + 256


def test_a_node_lost_mid_run_has_its_actors_replaced_on_the_others(tmp_path):
    """A loopback cluster of a head (no CPUs: the learner only) and two worker nodes; the learner joins it by
    address, as on a real cluster. Mid-run, a node holding an actor is removed (its raylet and every worker
    process killed, as when a machine goes): the actor is replaced on the node left and the run finishes."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the module's loopback cluster: this run must join the cluster below instead
        ray.shutdown()
    _wait_for(lambda: not _actor_pids(), timeout=60)  # the actors of earlier tests have exited
    with marked_as_the_tests():  # its processes carry the mark _actor_pids looks for
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1"})
    try:
        with marked_as_the_tests():
            nodes = [cluster.add_node(num_cpus=2, node_ip_address="127.0.0.1") for _ in range(2)]
        raylets = {node.all_processes["raylet"][0].process.pid: node for node in nodes}
        path = tmp_path / "node-lost"
        lost: list[int] = []

        def node_of(pid: int):
            while pid > 1:
                if pid in raylets:
                    return raylets[pid]
                pid = _parent(pid)
            return None

        def remove_a_node():
            _wait_for(lambda: (path / "metrics.csv").exists() and len(_actor_pids()) >= 2)
            victim = next(node for node in (node_of(pid) for pid in _actor_pids()) if node is not None)
            lost.extend(pid for pid in _actor_pids() if node_of(pid) is victim)
            cluster.remove_node(victim, allow_graceful=False)

        remover = threading.Thread(target=remove_a_node, daemon=True)
        remover.start()
        args = ["train", "ppo", "CartPole-v1", "--frames", "2560", "--run-dir", str(path), "--ray", cluster.address]
        settings = ["--set", "collect.workers=2", "--set", "env.num_envs=2", "--set", "train.log_every_frames=64"]
        assert main([*args, *SLOW, *settings, *SMALL_PPO, *QUIET]) == 0
        remover.join(timeout=5)
        assert lost, "no node was removed"
        replaced = [event for event in _events(path) if event["event"] == "worker_replaced"]
        assert 1 <= len(replaced) == len(lost) <= 2
        assert not {event["pid"] for event in replaced} & set(lost)
        assert load_run(path).status == "finished"
        # actors started in all: one a lost actor, more where a replacement landed on the node going too
        assert float(_rows(path)[-1]["collect/replaced"]) >= len(lost)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
