"""Network endpoints a command is given (``--ray ADDRESS``, ``--mlflow URI``): one short TCP connection before
they are used, so an address where nothing answers is one line at once instead of a client's minutes of retries
(Ray retries a dead address for about a minute, MLflow's HTTP client for several with its default retries).

Torch-free; only the socket module.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact_url

REACH_TIMEOUT_S = 5.0
"""Seconds an endpoint gets to accept a TCP connection before the command is refused."""
DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306}


def host_port(option: str, url: str) -> tuple[str, int] | None:
    """(host, port) of a network URL (``scheme://[user:pass@]host[:port]/...``; a known scheme's default port), or
    None for a local one (``sqlite:///...``, ``file:...``, a path). A malformed one is a :class:`UserError`."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.split("+")[0]  # postgresql+psycopg
        host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # an unclosed [IPv6 address, a port out of range
        host = port = scheme = None
    if scheme is not None and scheme not in DEFAULT_PORTS:
        return None
    if not host or port is None:
        raise UserError(f"{option} {redact_url(url)}: not a URL with a host (and a port from 1 to 65535)")
    return host, port


def check_reachable(
    option: str, host: str, port: int, *, shown: str, hint: str, absent: str = "nothing answers there"
) -> None:
    """A :class:`UserError` (``option shown: absent (why); hint``) unless ``host:port`` accepts a TCP connection
    within :data:`REACH_TIMEOUT_S`."""
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise UserError(f"{option} {shown}: {absent} ({reason}); {hint}") from None
