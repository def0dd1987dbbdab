"""The exceptions for what a user can fix, and one way to quote another library's error in one line."""

from __future__ import annotations

import signal


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


class Interrupted(KeyboardInterrupt):
    """Work stopped by Ctrl-C (SIGINT) or SIGTERM (`docker stop`, Kubernetes), raised where
    the work was, as Ctrl-C's KeyboardInterrupt is, so every handler of one handles both.

    The message, when there is one, says what was kept (a build's encoded parts); the command
    line prints it as its one line and exits with the shell's code for the signal.
    """

    def __init__(self, message: str = "", signal_number: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.message, self.signal_number = message, signal_number

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process the signal ended: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signal_number

    @property
    def stopped(self) -> str:
        """How the work stopped, in a word or three: `interrupted`, `stopped by SIGTERM`."""
        if self.signal_number == signal.SIGINT:
            return "interrupted"
        return f"stopped by {signal.Signals(self.signal_number).name}"

    def __str__(self) -> str:
        return self.message or self.stopped

    def __reduce__(self):  # pickled as built (Ray, multiprocessing), not from its message
        return type(self), (self.message, self.signal_number)


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """A KeyboardInterrupt as `Interrupted` (Ctrl-C's own is one without a message)."""
    return exc if isinstance(exc, Interrupted) else Interrupted()


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of an exception's message (at most `limit` characters), or
    its type's name when it has none: other libraries' errors quoted inside ours."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return type(exc).__name__
