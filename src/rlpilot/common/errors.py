"""Errors the CLI turns into one line and exit code 2 (bad input) instead of a traceback, and the
exception a trainable raises to end a run cleanly."""


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
