"""The errors the library raises for what a user can fix: input it cannot use, a missing tool.

Each is also the built-in error it refines (an :class:`InputError` is a ``ValueError``), so
code that caught those still does; the command line catches :class:`DedupLibError` only, so
a bug shows as one, with its traceback, instead of passing for bad input.
"""

from __future__ import annotations


class DedupLibError(Exception):
    """Base of the library's own errors: the message says what was wrong and what to do."""


class InputError(DedupLibError, ValueError):
    """A value, a column or a file's content the library cannot use."""


class InputTypeError(DedupLibError, TypeError):
    """A column or an argument of the wrong type."""


class MissingFileError(DedupLibError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class ExistingFileError(DedupLibError, FileExistsError):
    """An output the user named exists, and replacing it was not asked for."""


class ToolMissingError(DedupLibError, RuntimeError):
    """Something outside Python the library needs (a Java runtime, a JDK) is missing or too old."""
