"""Secrets out of everything rlpilot prints or stores: one function for URLs, command lines and messages.

A storage URL (``tune --storage``), a Ray address or an MLflow URI can carry a password, in the URL's
user info (``postgresql://user:SECRET@host/db``, ``user:SECRET@host:port`` without a scheme, where the password
may itself hold ``@``, ``/`` or ``?``) or in its query (``sqlite:///x.db?password=SECRET``, ``?token=...``).
Whatever rlpilot writes goes through here first: every JSON file (:func:`rlpilot.common.files.dumps`: ``meta.json``
with its command, ``events.jsonl``, ``tune.json``, summaries, signatures), every config file
(:meth:`rlpilot.config.schema.Config.to_yaml`) and every error line the CLI prints; the secret is replaced by
``***`` and the rest stays readable.

The rule errs on the side of hiding. Names are matched as a server reads them, after URL decoding (``%77``,
``%2577`` decoded twice, ``+`` as a space) and in any case (``Pass%57ORD``); the masked span is the raw text.
Everything between the user name and the *last* ``@`` of a URL or ``host:port`` address is the password, and
every value of a parameter whose name says secret (password, passwd, pwd, token, secret, key, api_key, ...)
is hidden, whatever the option it came with. A URL inside free text ends at whitespace; a command-line
argument is one URL to its end (a password with spaces stays hidden there).
"""

from __future__ import annotations

import re
from typing import Any

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
    "private_key",
)
GENERIC_NAMES = ("key", "pass", "auth")
"""Secret names that are also everyday words (``--param expects key=low:high``): bare, they hide a value only
inside a URL query (after ``?``, ``&`` or ``;``), also as a dotted path's last part (``section.key=value``); with
a prefix (``api_key=``, ``X-Auth=``) they always do."""
SECRET_OPTIONS = ("--storage", "--ray", "--mlflow")
"""Command-line options whose value is a URL or address: ``--ray=user:pw@host:port`` is read from after its ``=``."""
DECODE_ROUNDS = 3
"""URL decoding is applied up to this many times (``%2577`` -> ``%77`` -> ``w``): a value decoded twice on its
way to the server still names its secret."""

# a secret name, optionally with a prefix or suffix (db_password, X-Api-Key, auth[token]), matched whole
_NAME = r"(?:[\w.\-\[\]]*[_.\-\[])?(?:" + "|".join(SECRET_NAMES) + r")(?:[_\-\[\]][\w\-\[\]]*)?"
# a mapping's key that ends in a secret name other than the everyday ones (db_password, X-Api-Key, auth[token];
# not run_key, pass_rate or token_budget)
_SECRET_KEY = re.compile(
    r"(?:[\w.\-\[\]]*[_.\-\[])?(?:" + "|".join(n for n in SECRET_NAMES if n not in GENERIC_NAMES) + r")\]?(?:\[\])?",
    re.IGNORECASE,
)
# in decoded text: a secret-named parameter at the start, or after a separator of a query, a list or a mapping;
# ``name=value``, or ``name: value`` as in a YAML or JSON mapping (``--set 'env.kwargs={password: x}'``)
_PARAM = re.compile(
    r"(?:^|(?<=[?&;,#\s{(\"']))(?P<name>" + _NAME + r")[\"']?(?:(?P<equals>\s*=)|:(?=[\s\"']))", re.IGNORECASE
)
_VALUE_END = re.compile(r"[^&;#\s]*")  # raw text: a parameter's value runs to the next separator
_MAPPING_VALUE_END = re.compile(r"[^,}\]&;#\s]*")  # in a mapping, also to the next entry
_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//")  # where a URL's user info may start
_HOST = re.compile(r"[\w\-.\[\]]")  # an address's host after its @ (no scheme: user:pw@host:port)
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}|\+")


class _Decoded:
    """``raw`` URL-decoded (up to :data:`DECODE_ROUNDS` times, ``+`` as a space), with where each decoded
    character came from in ``raw``, so a match in the decoded text masks the raw characters behind it."""

    def __init__(self, raw: str):
        self.raw, self.text = raw, raw
        self.origin: list[int] | None = None  # None: nothing decoded, positions are the same
        for _ in range(DECODE_ROUNDS):
            if "%" not in self.text and "+" not in self.text:
                break
            text, origin = _decode_once(self.text)
            if text == self.text:
                break
            self.origin = origin if self.origin is None else [self.origin[i] for i in origin]
            self.text = text

    def raw_index(self, index: int) -> int:
        if self.origin is None:
            return index
        return self.origin[index] if index < len(self.origin) else len(self.raw)


def _decode_once(text: str) -> tuple[str, list[int]]:
    """``%XX`` as its character and ``+`` as a space, and for each character of the result its position in ``text``."""
    pieces: list[str] = []
    origin: list[int] = []
    position = 0
    for match in _ENCODED.finditer(text):
        pieces.append(text[position : match.start()])
        origin.extend(range(position, match.start()))
        pieces.append(" " if match.group() == "+" else chr(int(match.group()[1:], 16)))
        origin.append(match.start())
        position = match.end()
    pieces.append(text[position:])
    origin.extend(range(position, len(text)))
    return "".join(pieces), origin


def _userinfo_span(decoded: _Decoded) -> tuple[int, int] | None:
    """The raw span of a password in user info: ``scheme://user:PASSWORD@host`` (``//`` alone too), or an address
    without a scheme, ``user:PASSWORD@host...``. The password runs to the last ``@``; a user name alone is kept;
    an ``@`` in a path (``sqlite:///a@b.db``) is none. Read as written first (an encoded ``%40`` in a query is no
    user info's end), then decoded (a whole URL encoded into another's query)."""
    span = _password_between(decoded.raw)
    if span is not None or decoded.origin is None:
        return span
    span = _password_between(decoded.text)
    return None if span is None else (decoded.raw_index(span[0]), decoded.raw_index(span[1]))


def _password_between(text: str) -> tuple[int, int] | None:
    """A ``//`` inside the user info (``u:pw//@host``, ``u:a ray://b@host``) is part of the password, not an
    authority: one whose word has a ``:`` or ``@`` before it is passed over, and one that finds no user info
    falls back to the address without a scheme when a ``:`` precedes it (``sqlite:///a@b.db`` has none)."""
    for match in _AUTHORITY.finditer(text):
        word = text[: match.start()].rsplit(None, 1)[-1] if text[: match.start()].strip() else ""
        if text[: match.start()][-1:].isspace() or not (":" in word or "@" in word):
            span = _user_info(text, match.end(), schemeless=False)
            if span is not None or ":" not in text[: match.start()]:
                return span
            break
    return _user_info(text, 0, schemeless=True)


def _user_info(text: str, start: int, schemeless: bool) -> tuple[int, int] | None:
    at = text.rfind("@", start)
    if at < 0 or (schemeless and not _HOST.match(text, at + 1)):
        return None
    user, colon, _ = text[start:at].partition(":")
    if not colon or "/" in user:
        return None
    return start + len(user) + 1, at


def _param_spans(decoded: _Decoded) -> list[tuple[int, int]]:
    """The raw spans of the values of secret-named parameters (empty values are left as they are)."""
    spans = []
    for match in _PARAM.finditer(decoded.text):
        name = match.group("name")
        before = decoded.text[match.start() - 1] if match.start() else ""
        mapping = match.group("equals") is None
        if mapping and not _is_secret_key(name, ""):
            continue  # ``name: value`` as a mapping's key is: password: x is a secret, run_key: x is not
        if name.rsplit(".", 1)[-1].lower() in GENERIC_NAMES and before not in "?&;":
            continue  # an everyday word outside a query: key=low:high (or section.key=value) is not a secret
        span = _value_span(decoded.raw, decoded.raw_index(match.end()), mapping)
        if span[1] > span[0]:
            spans.append(span)
    return spans


def _value_span(raw: str, start: int, mapping: bool) -> tuple[int, int]:
    """A value from ``start`` in the raw text: a quoted one to its closing quote, else to the next separator."""
    while start < len(raw) and raw[start] in " \t":
        start += 1
    if start < len(raw) and raw[start] in "\"'":
        close = raw.find(raw[start], start + 1)
        return start, len(raw) if close < 0 else close + 1
    return start, (_MAPPING_VALUE_END if mapping else _VALUE_END).match(raw, start).end()


def _masked(raw: str, spans: list[tuple[int, int]]) -> str:
    out, position = [], 0
    for start, end in sorted(spans):
        if end <= position:
            continue
        out += [raw[position : max(start, position)], MASK]
        position = end
    return "".join(out) + raw[position:]


_SECRET_WORD = re.compile("|".join(SECRET_NAMES), re.IGNORECASE)


def _may_hold_secret(text: str) -> bool:
    """False for the common text with nothing that could hold a secret (checked in C, before any parsing)."""
    return "=" in text or "@" in text or "%" in text or (":" in text and _SECRET_WORD.search(text) is not None)


def redact_url(url: str) -> str:
    """One URL, address or command-line argument, to its end: the user-info password (``user:***@host``, with
    or without a scheme) and the values of secret-named parameters replaced by ``***``."""
    if not _may_hold_secret(url):
        return url
    decoded = _Decoded(url)
    userinfo = _userinfo_span(decoded)
    return _masked(url, _param_spans(decoded) + ([userinfo] if userinfo else []))


def redact(text: str) -> str:
    """Free text (a message, a log line): secret-named parameters anywhere, and each whitespace-separated word's
    user-info password as by :func:`redact_url`."""
    if not _may_hold_secret(text):
        return text
    decoded = _Decoded(text)
    spans = _param_spans(decoded)
    for word in re.finditer(r"\S+", text):
        if "@" in word.group() or "%" in word.group():
            userinfo = _userinfo_span(_Decoded(word.group()))
            if userinfo:
                spans.append((word.start() + userinfo[0], word.start() + userinfo[1]))
    return _masked(text, spans)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with every argument redacted as one URL (:func:`redact_url`), ``--storage=X`` too."""
    out = []
    for arg in argv:
        option, eq, value = arg.partition("=")
        out.append(f"{option}={redact_url(value)}" if eq and option in SECRET_OPTIONS else redact_url(arg))
    return out


def redact_command(argv: list[str]) -> str:
    """The command line as ``meta.json`` records it: arguments joined by spaces, secrets hidden."""
    return " ".join(redact_argv(argv))


def redact_data(value: Any) -> Any:
    """A JSON- or YAML-shaped value with every string redacted (:func:`redact`) and every scalar under a key
    that ends in a secret name (``password``, ``db_password``, ``X-Api-Key``; not ``key``, ``run_key``, ``pass_rate``
    or ``token_budget``) replaced by ``***``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: MASK if _is_secret_key(key, item) else redact_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_data(item) for item in value)
    return value


def _is_secret_key(key: Any, item: Any) -> bool:
    """``key`` names a secret and ``item`` is a value to hide (a scalar: not ``None``, a bool or a container)."""
    if not isinstance(key, str) or item is None or isinstance(item, (bool, dict, list, tuple)):
        return False
    return _SECRET_KEY.fullmatch(_Decoded(key).text.strip().replace("-", "_")) is not None
