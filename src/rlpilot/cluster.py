"""Ray for rlpilot: one way to start or join a cluster, shared by ``sweep``, ``tune`` and ``train``.

``local`` starts a cluster on this machine whose listeners bind 127.0.0.1; an address (``host:port``, what
``ray start --head`` prints) joins a running one. An address that does not answer as a Ray cluster is one line
before Ray is asked (Ray itself retries a dead address for about a minute, and waits without end on a port that
accepts connections but is not Ray, ignoring SIGTERM meanwhile).

Whatever ends the block (its end, an exception, SIGINT or SIGTERM, during Ray's start-up too), the Ray processes
a ``local`` cluster started are gone when it is left: Ray's own SIGTERM handler, which ``ray.init`` installs in
place of rlpilot's, is replaced again, and a signal that lands while Ray starts ends the start-up as any signal
during a run's start-up does (:class:`rlpilot.common.stopping.Interrupted`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rlpilot.common import endpoints, stopping
from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact_url

RAY_HINT = "start one with `ray start --head` on that machine and pass the address it prints, or use --ray local"
LEFTOVER_GRACE_S = 5.0
"""Seconds the processes of a local cluster get to exit after ``ray.shutdown`` before they are killed."""


def check_reachable(address: str) -> None:
    """One line (a :class:`UserError`) when nothing listens at ``address`` (``host:port``; ``ray://`` too)."""
    target = address.split("://", 1)[-1].rpartition("@")[2]  # user info never goes into a name lookup
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray {redact_url(address)}: give 'local' or a cluster address host:port (ray start --head)")
    endpoints.check_reachable(
        "--ray",
        host,
        int(port),
        shown=redact_url(address),
        absent="no Ray cluster answers there",
        hint=RAY_HINT,
    )
    if not _answers_as_ray(f"{host}:{port}"):
        raise UserError(
            f"--ray {redact_url(address)}: something listens there but does not answer as a Ray cluster within "
            f"{endpoints.REACH_TIMEOUT_S:g} s (is it Ray's GCS port, 6379 by default?); {RAY_HINT}"
        )


def _answers_as_ray(target: str) -> bool:
    """Whether ``target`` answers Ray's GCS ``GetClusterId`` request (gRPC) within :data:`endpoints.REACH_TIMEOUT_S`."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # without Ray's generated stubs the TCP check is all there is (Ray is refused later)
        return True
    with grpc.insecure_channel(target) as channel:
        try:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=endpoints.REACH_TIMEOUT_S)
        except grpc.RpcError as exc:
            # a gRPC server answered (a Ray cluster with token authentication says UNAUTHENTICATED, as Ray's own
            # client is told before it sends its token); no answer, or no gRPC at all, is UNAVAILABLE or a time-out
            return exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return True


@contextlib.contextmanager
def ray_session(address: str, workers: int):
    """Ray, started for the block and shut down after it (unless it was already running). ``local`` starts a
    cluster on this machine whose listeners bind 127.0.0.1 with ``workers`` CPUs; with an address, the output
    folder must be on a filesystem every node sees (NFS, a shared volume) and every node needs the same
    environment (the same ``.venv``)."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'rlpilot[dist]'") from None
    started = not ray.is_initialized()
    with contextlib.ExitStack() as stack:
        if started and address == "local":
            stack.enter_context(_reaper())
        stack.enter_context(_session(ray, address, workers, started=started))
        yield ray


@contextlib.contextmanager
def _session(ray, address: str, workers: int, *, started: bool):
    try:
        if started and address == "local":  # loopback only: the env var (set by rlpilot) and the node address
            _init(
                ray,
                owned=True,
                address="local",  # a new cluster, never one `ray start` (or another run) left on this machine
                num_cpus=workers,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,  # its INFO and token-auth lines say nothing about a loopback cluster
                _node_ip_address="127.0.0.1",
            )
            bound = ray.get_runtime_context().gcs_address
            if not bound.startswith("127.0.0.1:"):
                raise UserError(
                    f"the local Ray cluster bound {bound}, not loopback: Ray was imported before rlpilot; "
                    "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 in the environment and run again"
                )
        elif started:
            check_reachable(address)
            _init(ray, owned=False, address=address, log_to_driver=False)
        yield
    finally:
        if started:
            _shutdown(ray, owned=address == "local")


OWNER_VARIABLE = "RLPILOT_RAY_OWNER"
"""Set to this process's id in the environment of every process of a local cluster it starts (Ray's processes
inherit it, the workers from the raylet), so that all of them can be found and ended with it."""


def _init(ray, *, owned: bool, **kwargs) -> None:
    """``ray.init(**kwargs)`` with rlpilot's signal handling kept throughout. ``ray.init`` would install its own
    SIGTERM handlers (``sys.exit`` from wherever the signal lands: inside an at-fork hook, where exceptions are
    ignored, it was seen lost, the run training on to the end): they are not installed, so rlpilot's handler records
    a signal during the start-up (and raises :class:`~rlpilot.common.stopping.Interrupted` where it can), and a signal
    recorded by the time ``ray.init`` returns ends the start-up there. ``owned``: a cluster this process starts,
    its processes marked (:data:`OWNER_VARIABLE`)."""
    main = threading.current_thread() is threading.main_thread()
    ours = signal.getsignal(signal.SIGTERM) if main else None
    utils = ray._private.utils  # Ray's worker and node both install their handler through this function
    installing = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    if owned:
        os.environ[OWNER_VARIABLE] = str(os.getpid())
    try:
        ray.init(**kwargs)
    except SystemExit:  # a handler of Ray's after all (another version's path): a SIGTERM
        stopping.request("SIGTERM")
    finally:
        utils.set_sigterm_handler = installing
        os.environ.pop(OWNER_VARIABLE, None)
        if main and ours is not None:
            signal.signal(signal.SIGTERM, ours)
    if name := stopping.requested():
        raise stopping.Interrupted(name)


def _shutdown(ray, *, owned: bool) -> None:
    """``ray.shutdown()``; for a cluster this process started, every process of it still running after
    :data:`LEFTOVER_GRACE_S` is killed (Ray's agents can outlive ``ray.shutdown``, after a start-up cut short
    above all)."""
    with contextlib.suppress(Exception):
        ray.shutdown()
    if not owned:
        return
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (leftovers := owned_processes(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.1)
    _kill(leftovers)


@contextlib.contextmanager
def _reaper():
    """A small process that outlives this one to end its local cluster: it waits on a pipe only this process
    holds, and when the pipe closes (this process ended, however: SIGKILL and crashes included) it kills every
    process still marked as this one's (:func:`owned_processes`). Ray's GCS and raylet go with their driver by
    themselves, but its dashboard and runtime-env agents and the actors were seen running a minute later."""
    package_parent = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
    code = f"import rlpilot.cluster as c; c.reap_when_closed({os.getpid()})"
    reaper = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C to the group does not stop it before its work
        env={**os.environ, "PYTHONPATH": path},
    )
    try:
        yield
    finally:
        reaper.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            reaper.wait(timeout=LEFTOVER_GRACE_S)


def reap_when_closed(owner: int) -> None:
    """The reaper's body (:func:`_reaper`): blocks until standard input closes, then kills ``owner``'s cluster."""
    sys.stdin.buffer.read()
    _kill(owned_processes(owner))


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def owned_processes(owner: int | str) -> list[int]:
    """Processes of this machine started for a local cluster by process ``owner`` (:data:`OWNER_VARIABLE`)."""
    needle = f"{OWNER_VARIABLE}={owner}\0".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def owned_actors(owner: int | str) -> list[int]:
    """The processes of :func:`owned_processes` running a collection actor (Ray titles them
    ``ray::CollectionActor...``): what a fault test or the soak kills, not the cluster's own processes."""
    actors = []
    for pid in owned_processes(owner):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::CollectionActor"):
                actors.append(pid)
        except OSError:
            continue
    return actors
