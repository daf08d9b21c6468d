"""Errors the CLI turns into one line and exit code 2 (bad input) instead of a traceback."""


class UserError(Exception):
    """Something the user can fix: the message says what is wrong and how to fix it."""
