"""The exceptions for what a user can fix, and one way to quote another library's error in one line."""

from __future__ import annotations


class SemsearchError(Exception):
    """A problem the user can fix: bad input, a missing file, a mismatched model.

    The message names the problem and what to do about it, in one line.
    """


class ResumableError(SemsearchError):
    """A failure that leaves a build's finished parts worth keeping (a cluster job that
    failed after its retries): the same command resumes from them. `failure` is what went
    wrong without that advice, for a caller that keeps no parts (mining a corpus)."""

    def __init__(self, failure: str, advice: str) -> None:
        super().__init__(f"{failure}; {advice}")
        self.failure, self.advice = failure, advice

    def __reduce__(self):  # pickled as built (Ray, multiprocessing), not from its message
        return type(self), (self.failure, self.advice)


class DamagedIndexError(SemsearchError):
    """An index whose files are not what semsearch wrote (changed, truncated, inconsistent
    with its manifest): the index's owner must roll back or rebuild it. For a server this is
    its own problem, not the client's: it answers 503 and reports the index in /ready."""


class NoSpaceError(SemsearchError):
    """The disk a step writes to is full: the message names the folder, what the step
    needed and what was free. Nothing the step wrote is left behind (a build keeps its
    finished parts); over HTTP it is a 507."""


class NotWritableError(SemsearchError):
    """A folder a step must write to is read-only, or this user may not write there;
    readers of the same folder keep working. Over HTTP it is a 403."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of an exception's message (at most `limit` characters), or
    its type's name when it has none: other libraries' errors quoted inside ours."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return type(exc).__name__
