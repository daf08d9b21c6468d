"""Errors the CLI turns into one line and exit code 2 (bad input) instead of a traceback, and the
exception a trainable raises to end a run cleanly; an ``OSError`` as a line the user can act on."""

import errno


class UserError(Exception):
    """Something the user can fix: the message says what is wrong and how to fix it."""


class StopRun(Exception):
    """A trainable asks the loop to end the run now (status ``failed``, the message as its reason),
    e.g. a NaN observation with ``guard.on_nonfinite_obs=stop``. ``fields`` go into the ``stopped`` event
    (``cause``: what doctor names)."""

    def __init__(self, message: str, **fields):
        super().__init__(message)
        self.fields = fields


class RunWriteError(UserError, OSError):
    """A file could not be written (disk full, a file-size limit, a read-only file system): one line naming
    the file, and, since every write is atomic or a whole appended line, the previous contents stay."""


_OS_ADVICE = {
    errno.ENOSPC: "free disk space",
    errno.EDQUOT: "free space in your quota",
    errno.EFBIG: "lift the file-size limit (ulimit -f)",
    errno.EROFS: "choose a writable folder (or copy the run to one)",
    errno.EACCES: "make it writable, or choose another folder",
    errno.EPERM: "make it writable, or choose another folder",
    errno.EISDIR: "a folder is where a file belongs: move it away",
    errno.ENOTDIR: "a file is where a folder belongs: move it away",
    errno.EEXIST: "a file is where a folder belongs: move it away",
}


def os_error_line(exc: OSError) -> str:
    """An OSError as what the user can act on: the file, what the system said, what to do."""
    where = f" {exc.filename}" if exc.filename else ""
    what = exc.strerror or str(exc) or type(exc).__name__
    advice = _OS_ADVICE.get(exc.errno, "check the path and its permissions")
    return f"cannot read or write{where}: {what}; {advice}, then run the command again"
