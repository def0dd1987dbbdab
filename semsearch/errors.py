"""The one exception type for user mistakes; the CLI prints it as a single line."""

from __future__ import annotations


class SemsearchError(Exception):
    """A problem the user can fix: bad input, a missing file, a mismatched model.

    The message names the problem and what to do about it, in one line.
    """


class ResumableError(SemsearchError):
    """A failure that leaves a build's finished parts worth keeping (a cluster job that
    failed after its retries): the same command resumes from them."""
