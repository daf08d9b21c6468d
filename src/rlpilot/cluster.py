"""Ray for rlpilot: one way to start or join a cluster, shared by ``sweep``, ``tune`` and ``train``.

``local`` starts a cluster on this machine whose listeners bind 127.0.0.1; an address (``host:port``, what
``ray start --head`` prints) joins a running one. An address that does not answer is one line before Ray
is asked (Ray itself retries a dead address for about a minute before it says so).
"""

from __future__ import annotations

import contextlib
import os

from rlpilot import endpoints
from rlpilot.errors import UserError
from rlpilot.redact import redact_url


def check_reachable(address: str) -> None:
    """One line (a :class:`UserError`) when nothing listens at ``address`` (``host:port``; ``ray://`` too)."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray {redact_url(address)}: give 'local' or a cluster address host:port (ray start --head)")
    endpoints.check_reachable(
        "--ray",
        host,
        int(port),
        shown=redact_url(address),
        absent="no Ray cluster answers there",
        hint="start one with `ray start --head` on that machine and pass the address it prints, or use --ray local",
    )


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
    if started:
        if address == "local":  # loopback only: the env var (set when rlpilot is imported) and the node address
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
            bound = ray.get_runtime_context().gcs_address
            if not bound.startswith("127.0.0.1:"):
                ray.shutdown()
                raise UserError(
                    f"the local Ray cluster bound {bound}, not loopback: Ray was imported before rlpilot; "
                    "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 in the environment and run again"
                )
        else:
            check_reachable(address)
            ray.init(address=address, log_to_driver=False)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
