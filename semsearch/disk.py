"""Files written safely, and a full or read-only disk told as the user's problem.

Every writer of the package writes a file (or a folder) under a temporary name and moves it
into place with `commit`; `temporary_for` removes the temporary when the write fails, so a
failed step leaves nothing behind. `disk_problems` turns the errors a full disk or a
read-only folder raise (from Python, numpy, pyarrow or FAISS, each in its own words) into one
line that names the folder, what the step needed and what was free (`NoSpaceError`,
`NotWritableError`); `check_free_space` refuses early where the size is known in advance.

The fault-injection seam: with `SEMSEARCH_FAULT_DISK_FULL_AFTER=N` in the environment, a
process's commits fail with ENOSPC once its committed files hold more than N bytes, and
`free_bytes` reports no more than what is left of the N. Why at the commit and not in
`os.write`: numpy, pyarrow and FAISS write through their own C code, which no Python patch
sees; every one of their files is committed here, so the seam catches them all, and it
leaves the temporary in place as a real full disk does (for the cleanup to be tested).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from semsearch.errors import NoSpaceError, NotWritableError, SemsearchError

FULL_AFTER_ENV = "SEMSEARCH_FAULT_DISK_FULL_AFTER"
_committed = {"bytes": 0}  # what this process committed while the seam is on

_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_WRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
# The words each library uses for a full disk: numpy's tofile ("Not enough free space to
# write ...", "N requested and M written", no errno), FAISS ("write error ... (No space
# left on device)", a RuntimeError) and pyarrow ("[errno 28] ...", errno not always set).
_NO_SPACE_WORDS = ("no space left", "not enough free space", "requested and", "disk quota")
_NOT_WRITABLE_WORDS = ("read-only file system", "permission denied")


def human_bytes(count: float) -> str:
    """A size in the largest binary unit below it: 512 B, 3.2 MiB, 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def reset_fault_seam() -> None:
    """Start the seam's count again (a test that sets its limit in this process)."""
    _committed["bytes"] = 0


def _limit() -> int | None:
    value = os.environ.get(FULL_AFTER_ENV, "").strip()
    return int(value) if value else None


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())
    return path.stat().st_size


def commit(temporary: Path, final: Path) -> None:
    """Move a finished file or folder into place (one rename: readers see all or nothing)."""
    limit = _limit()
    if limit is not None:
        _committed["bytes"] += _size(temporary)
        if _committed["bytes"] > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary))
    os.replace(temporary, final)


def remove(path: Path) -> None:
    """Delete a file or a folder if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def temporary_for(final: Path, temporary: Path | None = None) -> Iterator[Path]:
    """A temporary path to write `final` through (default `.NAME.tmp` beside it), committed
    when the block ends and removed when it fails."""
    temporary = temporary or final.with_name(f".{final.name}.tmp")
    try:
        yield temporary
        commit(temporary, final)
    except BaseException:
        remove(temporary)
        raise


def free_bytes(path: Path) -> int:
    """Bytes free on the disk of `path` (its nearest existing folder); under the seam, no
    more than what is left of its limit."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    free = shutil.disk_usage(path).free
    limit = _limit()
    return free if limit is None else max(0, min(free, limit - _committed["bytes"]))


def check_free_space(folder: Path, needed: int, step: str) -> None:
    """Refuse a step that will need `needed` bytes in `folder` where fewer are free, before
    it writes anything."""
    free = free_bytes(folder)
    if needed > free:
        raise NoSpaceError(
            f"no space for {step} in {folder}: it needs about {human_bytes(needed)}, "
            f"{human_bytes(free)} is free; nothing was written: free some space (or write "
            "elsewhere) and run it again"
        )


def is_no_space(exc: BaseException) -> bool:
    """True for a full disk (or quota), whichever library reported it."""
    return _reported(exc, NoSpaceError, _NO_SPACE_ERRNOS, _NO_SPACE_WORDS)


def is_not_writable(exc: BaseException) -> bool:
    """True for a read-only file system or a folder this user may not write to."""
    return _reported(exc, NotWritableError, _NOT_WRITABLE_ERRNOS, _NOT_WRITABLE_WORDS)


def _reported(exc: BaseException, ours: type, errnos: set[int], words: tuple[str, ...]) -> bool:
    """Whether `exc` is our own error of that kind, an OSError with one of `errnos`, or a
    library's error whose text says it (numpy, FAISS and pyarrow report no errno)."""
    if isinstance(exc, ours):
        return True
    if isinstance(exc, OSError) and exc.errno in errnos:
        return True
    text = str(exc).lower()
    return isinstance(exc, (OSError, RuntimeError)) and any(word in text for word in words)


def not_writable_reason(exc: BaseException) -> str:
    """Why a folder could not be written, in a few words."""
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return "it is on a read-only file system"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return "this user may not write there"
    text = str(exc).lower()
    return "it is on a read-only file system" if "read-only" in text else "it cannot be written"


@contextlib.contextmanager
def disk_problems(
    folder: Path, step: str, needed: int | None = None, kept: str = "", advice: str = ""
) -> Iterator[None]:
    """Inside the block, a full disk raises `NoSpaceError` and a read-only folder
    `NotWritableError`, each one line naming `folder`, what `step` needed (`needed` bytes
    where known, else more than was free when it began) and what was free. `kept`: what
    the failed step leaves the user (the index unchanged, finished parts), said before
    `advice` (what to do; a default for each)."""
    free_before = free_bytes(folder)
    try:
        yield
    except (NoSpaceError, NotWritableError):
        raise
    except Exception as exc:
        if is_no_space(exc):
            raise no_space(folder, step, free_before, needed, kept, advice) from exc
        if is_not_writable(exc):
            raise not_writable(folder, step, exc, kept, advice) from exc
        raise


def no_space(
    folder: Path,
    step: str,
    free_before: int,
    needed: int | None = None,
    kept: str = "",
    advice: str = "",
) -> NoSpaceError:
    """The one-line error for a step that filled the disk of `folder`: what it needed
    (`needed` where known, else more than the `free_before` it began with), what is free now."""
    need = (
        f"about {human_bytes(needed)}"
        if needed and needed > free_before
        else f"more than the {human_bytes(free_before)} free when it began"
    )
    return NoSpaceError(
        f"no space left in {folder}: {step} needed {need}, {human_bytes(free_bytes(folder))} "
        f"is free{'; ' + kept if kept else ''}; {advice or 'free some space and run it again'}"
    )


def not_writable(
    folder: Path, step: str, exc: BaseException, kept: str = "", advice: str = ""
) -> NotWritableError:
    """The one-line error for a folder `step` may not write into."""
    return NotWritableError(
        f"{step} cannot write to {folder}: {not_writable_reason(exc)}"
        f"{'; ' + kept if kept else ''}; {advice or 'use a folder you can write to'}"
    )


def disk_problem(exc: BaseException, step: str) -> SemsearchError | None:
    """A full disk or a read-only folder met by a writer that named none of its own (a
    checkpoint, an output file), as the one-line error; None for any other failure."""
    if isinstance(exc, (NoSpaceError, NotWritableError)):
        return exc
    path = Path(exc.filename) if isinstance(exc, OSError) and exc.filename else None
    folder = path.parent if path is not None else None
    if is_no_space(exc):
        where = f"in {folder}" if folder else "on a disk it writes to"
        free = f", {human_bytes(free_bytes(folder))} is free" if folder else ""
        return NoSpaceError(
            f"no space left {where}: {step} stopped{free}; free some space and run it again"
        )
    if is_not_writable(exc):
        return not_writable(folder or Path("its output folder"), step, exc)
    return None
