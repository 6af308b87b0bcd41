"""The errors the library raises for what a user can fix: input it cannot use, a missing tool;
and the warning it gives when it went on another way (:class:`DedupLibWarning`).

Each is also the built-in error it refines (an :class:`InputError` is a ``ValueError``), so
code that caught those still does; the command line catches :class:`DedupLibError` only, so
a bug shows as one, with its traceback, instead of passing for bad input.
"""

from __future__ import annotations

import re


class DedupLibError(Exception):
    """Base of the library's own errors: the message says what was wrong and what to do.

    Its kinds are also the built-in errors they are (:class:`InputError` a ``ValueError``,
    :class:`MissingFileError` a ``FileNotFoundError``, :class:`ToolMissingError` a
    ``RuntimeError``), so ``except ValueError`` still catches bad input.

    Examples
    --------
    >>> from dedup_lib import DedupLibError, DedupPolicy
    >>> try:
    ...     DedupPolicy("ten minutes")
    ... except DedupLibError as error:
    ...     caught = error
    >>> caught
    InputError("window: cannot read 'ten minutes'; expected an ISO 8601 duration (PT10M,
    P7D), shorthand (90s, 10m, 2h, 7d), a TimeSpan (0:10:00) or seconds")
    >>> isinstance(caught, ValueError)
    True
    """


class InputError(DedupLibError, ValueError):
    """A value, a column or a file's content the library cannot use."""


class InputTypeError(DedupLibError, TypeError):
    """A column or an argument of the wrong type."""


class MissingFileError(DedupLibError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class ClusterPathError(MissingFileError, InputError):
    """A path a remote Spark cluster resolved on its own file system and did not find."""


class ExistingFileError(DedupLibError, FileExistsError):
    """An output the user named exists, and replacing it was not asked for."""


class ToolMissingError(DedupLibError, RuntimeError):
    """Something outside Python the library needs (a Java runtime, a JDK) is missing or too old."""


class DedupLibWarning(RuntimeWarning):
    """What the library did that its user should know, though it went on: a step tried again,
    a slower path taken for want of a tool. The command line prints each as a line on stderr
    (``dedup-lib watch: warning: ...``, or a JSON line with ``--log-format json``), where a
    service manager's journal keeps it; other libraries' warnings go to Spark's log.

    Examples
    --------
    A job that must not go on along a slower path turns them into errors:

    >>> import warnings
    >>> from dedup_lib import DedupLibWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", DedupLibWarning)
    ...     try:
    ...         warnings.warn("using the Python replay kernel", DedupLibWarning)
    ...     except DedupLibWarning as raised:
    ...         print(raised)
    using the Python replay kernel
    >>> issubclass(DedupLibWarning, RuntimeWarning)  # code that filters those still does
    True
    """


_UNSAFE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)


def printable(text: str) -> str:
    """``text`` with control, format, bidirectional and lone surrogate characters escaped
    (``\\x1b``, ``\\u202e``): data printed to a terminal or quoted in an error can then
    neither move the cursor, retitle or clear the terminal, nor reorder what is shown, nor
    fail to encode."""
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text
    )


def excerpt(value: object, limit: int = 60) -> str:
    """A value as an error message quotes it: quoted, escaped by :func:`printable`, and cut
    to about ``limit`` characters with how much was left out, so a bad value of megabytes
    (or of binary) gives a readable one-line message."""
    if isinstance(value, bytes):
        text = value[: limit * 4].decode("utf-8", "backslashreplace")
        size = len(value)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        # str() of an int over 4,300 digits raises ValueError.
        digits = f"{len(str(abs(value))):,}" if abs(value) < 10**4000 else "over 4,000"
        return f"an integer of {digits} digits"
    else:
        text = value if isinstance(value, str) else repr(value)
        size = len(text)
    shown = printable(text[:limit])[:limit]
    if size > limit or len(shown) < len(printable(text)):
        return f"'{shown}'... ({size:,} characters)"
    return f"'{shown}'"
