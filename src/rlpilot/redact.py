"""Secrets out of everything rlpilot prints or stores: one function for URLs, command lines and messages.

A storage URL (``tune --storage``), a Ray address or an MLflow URI can carry a password, in the URL's
user info (``postgresql://user:SECRET@host/db``, where the password may itself hold ``@``, ``/`` or ``?``)
or in its query (``sqlite:///x.db?password=SECRET``, ``?token=...``). Whatever rlpilot writes (``meta.json``'s
command, ``tune.json``, summaries, MLflow tags, progress and error lines) goes through :func:`redact` or
:func:`redact_argv` first, so the secret is replaced by ``***`` and the rest stays readable.

The rule errs on the side of hiding: everything between the user name and the *last* ``@`` of a URL is
the password, and every value of a query parameter whose name says secret (password, passwd, pwd, token,
secret, key, api_key, ...) is hidden, whatever the option it came with. A URL inside free text ends at
whitespace; a command-line argument is one URL to its end (a password with spaces stays hidden there).
"""

from __future__ import annotations

import re

MASK = "***"
SECRET_NAMES = (
    "password",
    "passwd",
    "pwd",
    "pass",
    "token",
    "secret",
    "key",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "access_token",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "sslpassword",
)
GENERIC_NAMES = ("key", "pass", "auth")
"""Secret names that are also everyday words (``--param expects key=low:high``): bare, they hide a value only
inside a URL query (after ``?``, ``&`` or ``;``); with a prefix (``api_key=``, ``X-Auth=``) they always do."""
SECRET_OPTIONS = ("--storage", "--ray", "--mlflow")
"""Command-line options whose value is a URL or address: redacted even when it does not look like one."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# a secret-named parameter (optionally with a prefix such as db_password or X-Api-Key), in a query string
# or a key=value list: its value runs to the next separator
_PARAM = re.compile(
    r"(?P<name>(?:^|(?<=[?&;,\s]))(?:[\w.\-]*[_.\-])?(?:" + "|".join(SECRET_NAMES) + r")(?:[_\-][\w\-]*)?=)"
    r"(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def _redact_userinfo(url: str) -> str:
    """``scheme://user:PASSWORD@host...`` -> ``scheme://user:***@host...``: the password runs to the last
    ``@`` (a password may contain ``@``, ``/``, ``?``, ``#``); a user name alone is kept."""
    match = _SCHEME.search(url)
    if match is None:
        return url
    head, rest = url[: match.end()], url[match.end() :]
    at = rest.rfind("@")
    if at < 0:
        return url
    user, colon, _ = rest[:at].partition(":")
    if not colon or "/" in user:  # no password (user@host), or an @ in a path (sqlite:///a@b.db)
        return url
    return f"{head}{user}:{MASK}{rest[at:]}"


def _hide_value(match: re.Match) -> str:
    name = match.group("name")
    start = match.start()
    if name[:-1].lower() in GENERIC_NAMES and (start == 0 or match.string[start - 1] not in "?&;"):
        return match.group(0)  # an everyday word outside a query: key=low:high is not a secret
    return name + (MASK if match.group("value") else "")


def redact_url(url: str) -> str:
    """One URL (or any one argument): user-info password and secret-named query values replaced by ``***``."""
    return _PARAM.sub(_hide_value, _redact_userinfo(url))


def redact(text: str) -> str:
    """Free text (a message, a log line): each whitespace-separated word redacted as by :func:`redact_url`."""
    if "=" not in text and "@" not in text:  # the common case: nothing that could hold a secret
        return text
    return re.sub(r"\S+", lambda m: redact_url(m.group(0)), text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with every URL's password hidden; the values of ``--storage``, ``--ray`` and
    ``--mlflow`` (as ``--storage X`` or ``--storage=X``) are redacted as URLs whatever their shape."""
    out = []
    for i, arg in enumerate(argv):
        option, eq, value = arg.partition("=")
        if eq and option in SECRET_OPTIONS:
            out.append(f"{option}={_redact_address(value)}")
        elif i and argv[i - 1] in SECRET_OPTIONS:
            out.append(_redact_address(arg))
        else:
            out.append(redact_url(arg))
    return out


def _redact_address(value: str) -> str:
    """An option's URL or address, with or without a scheme (``user:pw@host:port`` too)."""
    if _SCHEME.search(value):
        return redact_url(value)
    return redact_url("x://" + value)[len("x://") :]


def redact_command(argv: list[str]) -> str:
    """The command line as ``meta.json`` records it: arguments joined by spaces, secrets hidden."""
    return " ".join(redact_argv(argv))
