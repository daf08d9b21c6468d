"""Writing files safely: whole or not at all, never through a symbolic link inside a run, never over a
device or a pipe, and JSON that is strict (no ``NaN``); reading a file someone sent within bounds.

- :func:`atomic_write`: temp file, fsync, rename, so readers see the old file or the new one. A target that
  is a FIFO, a character or block device (``/dev/stdout``, ``/dev/null``, a named pipe) is written as a
  stream instead: renaming over it would replace the device with a regular file.
- :func:`append_line`: one ``write`` on an ``O_APPEND | O_NOFOLLOW`` descriptor: whole lines, and a link
  in the link's place is refused rather than followed.
- :func:`refuse_links`: a run's files are written only inside the run; a symbolic link at a path rlpilot
  writes (``events.jsonl`` pointing elsewhere, ``checkpoints/`` on another disk) is refused in one line.
- :func:`dumps`: ``json.dumps`` with ``allow_nan=False``; non-finite floats become ``null``, secrets ``***``
  (:func:`rlpilot.common.redact.redact_data`: every JSON file rlpilot writes goes through here).
- :func:`read_regular`: the bytes of a regular file of at most so many bytes; a pipe, a device or a file
  too large is one line before anything is read (a FIFO would block the read, ``/dev/zero`` never end it).
- :func:`read_data` / :func:`read_json`: a file rlpilot wrote, read back as data (a run's ``meta.json`` and
  ``events.jsonl``, an artifact's signature): its size and its nesting are bounded, and a damaged one is one line
  naming it, never a traceback.

Every ``OSError`` while writing becomes a :class:`~rlpilot.common.errors.RunWriteError`: one line naming the file.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlpilot.common.bounds import MAX_NESTING  # one bound for every file rlpilot reads (what it writes nests 4 deep)
from rlpilot.common.errors import RunWriteError, UserError
from rlpilot.common.redact import redact, redact_data


def file_name(name: str) -> str:
    """``name`` (an env id, ``package.module:Class``) as one path component: ``/`` and ``:`` become ``-``."""
    return name.replace(":", "-").replace("/", "-")


@contextmanager
def write_errors(path: Path):
    """An OSError while writing ``path`` becomes a :class:`RunWriteError` (one line naming the file)."""
    try:
        yield
    except RunWriteError:
        raise
    except OSError as exc:
        raise RunWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc


def is_stream(path: Path) -> bool:
    """A FIFO, character or block device or socket (after links: ``/dev/stdout``): written as a stream."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Temp file, fsync, rename: readers see the old file or the new one, never half of one. A device or
    a pipe (:func:`is_stream`) is written in place, as a stream."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    with write_errors(path):
        if is_stream(path):
            with open(path, "wb", buffering=0) as handle:
                view = memoryview(payload)
                while view:
                    view = view[handle.write(view) :]
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; a run's files are meant to be read by others too
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def append_line(path: Path, line: str) -> None:
    """One ``write`` on an O_APPEND descriptor: a killed process leaves whole lines or nothing. A symbolic
    link at ``path`` is refused (O_NOFOLLOW), never followed out of the run."""
    with write_errors(path):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if os.path.islink(path):
                raise _link_error(Path(path)) from None
            raise exc
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _link_error(path: Path) -> UserError:
    return UserError(
        f"{path} is a symbolic link (to {os.readlink(path)}): rlpilot writes a run's files only inside the run; "
        "replace the link with the file itself (or remove it)"
    )


def refuse_links(root: Path, names: tuple[str, ...]) -> None:
    """A :class:`UserError` if ``root`` holds a symbolic link at any of ``names`` (relative paths; a
    folder's entries are checked too), so nothing a run writes lands outside it."""
    root = Path(root)
    for name in names:
        path = root / name
        if path.is_symlink():
            raise _link_error(path)
        if path.is_dir():
            for child in path.rglob("*"):
                if child.is_symlink():
                    raise _link_error(child)


def own_file(path: Path) -> Path:
    """``path``, a file rlpilot names itself (``RUN/eval.csv``, ``RUN/curve.png``): refused when it is a
    symbolic link, so a default output never writes through a link (into a device, or out of the run)."""
    refuse_links(Path(path).parent, (Path(path).name,))
    return Path(path)


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, through dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON (``allow_nan=False``): NaN and inf are written as ``null``, objects JSON does not know
    (paths, numpy scalars) as their string unless ``default`` says otherwise; a URL's password or a
    secret-named value as ``***`` (:mod:`rlpilot.common.redact`)."""
    kwargs.setdefault("default", _plain)
    return json.dumps(redact_data(finite_or_none(_numbers(value))), allow_nan=False, **kwargs)


def _numbers(value: Any) -> Any:
    """numpy / torch scalars as Python numbers (so a NaN among them is seen by :func:`finite_or_none`)."""
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers(item) for item in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            return item()
        except (TypeError, ValueError):
            return value
    return value


def _plain(value: Any) -> Any:
    return redact(str(value))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "a special file"


def _amount(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size:,} bytes"


def read_regular(path: Path, limit: int, *, advice: str) -> bytes:
    """The bytes of ``path`` (links followed), a regular file of at most ``limit`` bytes; otherwise a
    :class:`UserError` naming it and ending in ``advice``. The file is opened without blocking (opening a FIFO
    for reading waits for a writer) and checked on the open descriptor, so what is read is what was checked;
    at most ``limit + 1`` bytes are ever read (a file that grows meanwhile is refused, not read to its end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    info = os.fstat(fd)
    mode, size = info.st_mode, info.st_size
    if not stat.S_ISREG(mode):  # before a file object is made of it: a folder's would raise with the fd's number
        os.close(fd)
        raise UserError(f"{path} is {_kind(mode)}, not a regular file: {advice}")
    with os.fdopen(fd, "rb") as handle:
        if size > limit:
            raise UserError(f"{path} is {_amount(size)}, more than the {_amount(limit)} it may be: {advice}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{path} grew past {_amount(limit)} while it was read: {advice}")
    return data


MAX_DATA_BYTES = 512 * 2**20
"""The largest file rlpilot reads back as data (``metrics.csv`` of a 10^9-frame run is ~250 MB)."""


def read_data(path: Path, advice: str) -> str:
    """The text of ``path``, refused in one line (a :class:`UserError` ending with ``advice``) when it is larger
    than :data:`MAX_DATA_BYTES` or not text. A missing file raises ``FileNotFoundError`` for the caller to word."""
    data = read_regular(Path(path), MAX_DATA_BYTES, advice=advice)  # a pipe or a device: one line, nothing read
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not text ({exc.reason} at byte {exc.start}); {advice}") from None


def read_json(path: Path, advice: str, *, lines: bool = False) -> Any:
    """``path`` parsed as JSON (``lines``: one value a line, as a list), within :func:`read_data`'s size and
    :data:`MAX_NESTING`; anything else is one line naming the file and ending with ``advice``."""
    text = read_data(path, advice)
    try:
        values = [json.loads(line) for line in text.splitlines() if line.strip()] if lines else [json.loads(text)]
    except RecursionError:  # the decoder's own bound (~1,000 levels), before ours
        values = None
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON (truncated or overwritten: {str(exc)[:80]}); {advice}") from None
    if values is None or any(nesting(value) > MAX_NESTING for value in values):
        raise UserError(f"{path} nests lists or objects deeper than {MAX_NESTING} levels; {advice}")
    return values if lines else values[0]


def nesting(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (a scalar: 0), found without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_NESTING:  # deeper than the bound is refused anyway: no need to walk further
                pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
