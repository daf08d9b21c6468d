"""Collection for one run on Ray actors (``collect.workers``, ``--ray``): docs/distributed.md.

Each actor is a Ray worker process running rlpilot's own :class:`~rlpilot.control.collect.BatchCollector`
on its slice of the run's envs (``env.num_envs / workers`` each, seeded as in one process), with an
acting-only copy of the algorithm. The learner broadcasts the acting weights once per version with
``ray.put`` (:meth:`RayCollection.publish`); actors send back ``[envs, steps]`` TensorDicts in TorchRL's
layout. Two schedules:

* synchronous (on-policy, PPO): every actor collects with the same weights, the learner waits for all of
  them and learns from the concatenated batch (the same frames per batch as one process);
* asynchronous (off-policy: DQN, SAC, TD3): an actor whose batch arrives starts its next one at once with the
  latest weights, so it collects while the learner learns; the learner takes what has arrived (at least one
  actor's batch) and runs ``frames x updates_per_frame`` updates on it, so the update-to-data ratio stays
  as configured however fast data arrives (an actor never has more than one batch in flight).

TorchRL's ``RayCollector`` (torchrl.collectors.distributed) has the same two schedules and the same weight
broadcast, but its remote workers are TorchRL collectors stepping TorchRL envs with a TensorDict policy (the
per-step overhead :mod:`rlpilot.control.collect` exists to avoid) and it does not replace a dead actor;
so the actors here are plain Ray actors around ``BatchCollector`` (no sockets or pools of rlpilot's own).

An actor that dies (its process killed, its node gone) is replaced by a fresh one on fresh env seeds, with a
``worker_replaced`` event, and its batch is collected again.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import torch
from tensordict import TensorDict

from rlpilot.common.errors import UserError
from rlpilot.config.schema import Config

MAX_REPLACEMENTS = 20
"""Dead actors replaced in one run before the run stops (something kills them faster than they work)."""
REPLACEMENT_SEED_STRIDE = 1_000_003
"""A replacement actor's env seeds: the dead one's plus this times the replacements so far (fresh episodes)."""


SAME_ENVIRONMENT = "every Ray node needs the same environment (the same .venv) and the env's module importable"
DRIVER_WATCH_S = 0.25
"""How often an actor on the learner's machine checks that the learner process still runs."""


def _start_time(pid: int) -> str | None:
    """A process's start time (``/proc/PID/stat``, field 22): with the pid, it names one process (pids are reused)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _exit_with_the_learner(pid: int) -> None:
    """Ends this actor's process as soon as the learner process ``pid`` (on the same machine) is gone, whatever
    ended it: Ray notices a dead driver's actors only after its own timeouts (~20 s seen after a SIGKILL)."""
    started = _start_time(pid)

    def watch():
        while _start_time(pid) == started:
            time.sleep(DRIVER_WATCH_S)
        os._exit(1)

    if started is not None:
        threading.Thread(target=watch, name="rlpilot-learner-watch", daemon=True).start()


class CollectionActor:
    """One Ray actor: its envs, an acting-only algorithm and a ``BatchCollector`` (runs in a Ray worker)."""

    def __init__(self, config: Config, *, seed: int, obs_norm: dict | None, learner: tuple[str, int]):
        """``learner``: the learner's Ray node id and process id; on the same node the actor exits with it."""
        import ray

        from rlpilot.control.algos import build
        from rlpilot.control.collect import BatchCollector
        from rlpilot.envs.make import make_env

        node, pid = learner
        if ray.get_runtime_context().get_node_id() == node:
            _exit_with_the_learner(pid)
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        device = torch.device("cpu")
        envs = config.env.num_envs // config.collect.workers
        self.env = make_env(config.env, num_envs=envs, seed=seed, device=device, obs_norm_state=obs_norm)
        self.algo = build(config, self.env, device)
        self.version = -1
        self.collector = BatchCollector.for_run(self.env, self.algo.act, config, seed=seed)

    def pid(self) -> int:
        return os.getpid()

    def collect(self, acting_state: dict, version: int, steps: int | None = None) -> dict:
        """One ``[envs, steps]`` batch with the learner's weights of ``version`` (loaded when new); ``steps``
        per env, default the run's."""
        if version != self.version:
            self.algo.load_acting_state(acting_state)
            self.version = version
        start, cpu = time.perf_counter(), time.process_time()
        batch = self.collector.collect(steps)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        returns, lengths = self.collector.episodes.drain()
        events, self.collector.events = self.collector.events, []
        return {
            "batch": batch,
            "version": version,
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "returns": returns,
            "lengths": lengths,
            "events": events,
        }

    def close(self) -> None:
        self.env.close()


def tensor_bytes(state) -> int:
    """Bytes of the tensors in a nested dict (what a weight broadcast carries)."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for value in state.values())
    return 0


class FinishedEpisodes:
    """Returns and lengths of the episodes the actors finished, drained once per learner step."""

    def __init__(self):
        self.returns: list[float] = []
        self.lengths: list[int] = []

    def add(self, returns: list, lengths: list[int]) -> None:
        self.returns += returns
        self.lengths += lengths

    def drain(self) -> tuple[list, list[int]]:
        drained = self.returns, self.lengths
        self.returns, self.lengths = [], []
        return drained


class RayCollection:
    """``BatchCollector``'s interface (``collect``, ``episodes.drain``, ``events``) over Ray actors."""

    def __init__(self, config: Config, *, seed: int, obs_norm: dict | None, device: torch.device, synchronous: bool):
        import ray

        if not ray.is_initialized():
            raise UserError("collect on Ray actors needs a Ray session: add --ray local or --ray ADDRESS")
        self.ray = ray
        self.config = config
        self.device = device
        self.synchronous = synchronous
        self.workers = config.collect.workers
        self.envs_per_actor = config.env.num_envs // self.workers
        self.seed = seed
        self.obs_norm = obs_norm
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < self.workers:
            raise UserError(
                f"collect.workers={self.workers} needs {self.workers} CPUs on the Ray cluster, which has {cpus:g}: "
                "add nodes (ray start --address ...) or lower collect.workers"
            )
        self.remote_class = ray.remote(num_cpus=1, max_restarts=0)(CollectionActor)
        self.learner = (ray.get_runtime_context().get_node_id(), os.getpid())
        self.replacements = 0
        self.events: list[dict] = []
        self.actors = [self._start(index) for index in range(self.workers)]
        self.pids = [0] * self.workers
        self._ready()
        self.version = -1
        self.weights = None
        self.weight_bytes = 0
        self.pending: dict = {}  # ref -> actor index (asynchronous: every actor has one batch in flight)
        self.episodes = FinishedEpisodes()
        self.last_metrics: dict[str, float] = {}
        self.sent_bytes = 0
        self.last_return = time.perf_counter()

    # -- actors --------------------------------------------------------------------------------
    def _start(self, index: int):
        seed = self.seed + index * self.envs_per_actor + REPLACEMENT_SEED_STRIDE * self.replacements
        return self.remote_class.remote(self.config, seed=seed, obs_norm=self.obs_norm, learner=self.learner)

    def _ready(self) -> None:
        """Waits for every actor to be built (they build side by side); one that dies meanwhile (killed, its node
        gone) is replaced as during the run."""
        for index in range(self.workers):
            try:
                self.pids[index] = self._started(index)
            except self.ray.exceptions.RayActorError as exc:
                self._replace(index, exc)

    def _started(self, index: int) -> int:
        """Actor ``index``'s process id once it is built. One that could not build (its env or the env's module
        raised) is one line; one that died is Ray's ``RayActorError`` (the caller replaces it)."""
        try:
            return self.ray.get(self.actors[index].pid.remote())
        except self.ray.exceptions.RayTaskError as exc:
            raise UserError(f"a collection actor could not start: {_cause(exc)}") from None
        except self.ray.exceptions.RayActorError as exc:
            if getattr(exc, "actor_init_failed", False):
                raise UserError(f"a collection actor could not start ({_cause(exc)}): {SAME_ENVIRONMENT}") from None
            raise

    def _replace(self, index: int, error: Exception) -> None:
        while True:  # a replacement placed on a node that is going too (not yet marked dead) dies as well
            self.replacements += 1
            if self.replacements > MAX_REPLACEMENTS:
                raise UserError(
                    f"collection actors died {self.replacements} times (last: {_cause(error)}); stopping "
                    f"({SAME_ENVIRONMENT})"
                )
            self.ray.kill(self.actors[index], no_restart=True)
            self.actors[index] = self._start(index)
            try:
                self.pids[index] = self._started(index)
                break
            except self.ray.exceptions.RayActorError as exc:
                error = exc
        self.events.append(
            {
                "event": "worker_replaced",
                "worker": index,
                "pid": self.pids[index],
                "replacements": self.replacements,
                "reason": _cause(error)[:300],
            }
        )

    def _submit(self, index: int, steps: int | None = None):
        self.sent_bytes += self.weight_bytes
        ref = self.actors[index].collect.remote(self.weights, self.version, steps)
        self.pending[ref] = index
        return ref

    # -- the learner's side ----------------------------------------------------------------------
    def publish(self, acting_state: dict) -> None:
        """New weights for the actors (one ``ray.put``; each actor loads them at its next batch)."""
        cpu_state = _to_cpu(acting_state)
        self.weights = self.ray.put(cpu_state)
        self.weight_bytes = tensor_bytes(cpu_state)
        self.version += 1

    def collect(self, steps: int | None = None) -> TensorDict:
        """``BatchCollector.collect``'s contract: a batch of ``steps`` env steps per env (default: the run's). The
        synchronous schedule asks every actor for ``steps``; the asynchronous one keeps a batch of the run's size
        in flight on every actor, so its batches are always the run's size (an off-policy warm-up is collected in
        run-sized batches there)."""
        start = time.perf_counter()
        results = self._collect_synchronously(steps) if self.synchronous else self._collect_asynchronously()
        now = time.perf_counter()
        batches = [result["batch"] for result in results]
        batch = torch.cat(batches, 0) if len(batches) > 1 else batches[0]
        frames = batch.numel()
        received = sum(tensor_bytes(b.to_dict()) for b in batches)
        step_seconds = max(now - self.last_return, 1e-9)
        self.last_results = results  # what the actors reported (benchmarks read their seconds and CPU seconds)
        self.last_metrics = {
            "collect/policy_lag": sum(self.version - result["version"] for result in results) / len(results),
            "collect/actor_fps": sum(r["batch"].numel() / max(r["seconds"], 1e-9) for r in results) / len(results),
            "collect/fps": frames / step_seconds,
            "collect/bytes_per_batch": float(received + self.sent_bytes),
            "collect/wait_share": min(1.0, (now - start) / step_seconds),
            "collect/replaced": float(self.replacements),
        }
        self.sent_bytes = 0
        self.last_return = now
        for result in results:
            self.episodes.add(result["returns"], result["lengths"])
            self.events += result["events"]
        return batch.to(self.device) if self.device.type != "cpu" else batch

    def metrics(self) -> dict[str, float]:
        """``collect/...`` metrics of the last batch (docs/metrics.md)."""
        return self.last_metrics

    def _collect_synchronously(self, steps: int | None) -> list[dict]:
        """Every actor, the same weights; back in actor order (the env order of one process)."""
        for index in range(self.workers):
            self._submit(index, steps)
        results: dict[int, dict] = {}
        while self.pending:
            done, _ = self.ray.wait(list(self.pending), num_returns=1)
            for ref in done:
                index = self.pending.pop(ref)
                result = self._result(ref, index)
                if result is None:
                    self._submit(index, steps)  # its replacement collects the batch again
                else:
                    results[index] = result
        return [results[index] for index in range(self.workers)]

    def _collect_asynchronously(self) -> list[dict]:
        """What has arrived (at least one batch); each actor whose batch arrived starts its next at once."""
        for index in set(range(self.workers)) - set(self.pending.values()):
            self._submit(index)
        results = []
        while not results:
            self.ray.wait(list(self.pending), num_returns=1)
            done, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
            for ref in done:
                index = self.pending.pop(ref)
                result = self._result(ref, index)
                if result is not None:
                    results.append(result)
                self._submit(index)
        return results

    def _result(self, ref, index: int) -> dict | None:
        """An actor's batch, or None when the actor died (it is replaced)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self._replace(index, exc)
            return None
        except self.ray.exceptions.RayTaskError as exc:  # the env raised inside the actor
            cause = exc.cause if isinstance(getattr(exc, "cause", None), UserError) else None
            raise UserError(str(cause) if cause else f"a collection actor failed: {_cause(exc)}") from None

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors, self.pending = [], {}


def _to_cpu(state):
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        return {key: _to_cpu(value) for key, value in state.items()}
    return state


def _cause(error: Exception) -> str:
    """The first line that says what happened, without Ray's traceback."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
