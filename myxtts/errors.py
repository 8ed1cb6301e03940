"""The one exception type the command line turns into a clear message instead of a traceback."""


class UserError(Exception):
    """Something the user can fix (a path, a setting, an input file); the message says what."""
