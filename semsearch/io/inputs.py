"""Small readers for what users pass on the command line besides corpora."""

from __future__ import annotations

from pathlib import Path

from semsearch.errors import SemsearchError

# Ids, queries and sentences files are read whole: beyond this they are a mistake (a corpus
# passed as a queries file, /dev/zero), not something to read until memory runs out.
MAX_LINES_BYTES = 256 * 2**20


def read_lines(path: Path, limit: int = MAX_LINES_BYTES) -> list[str]:
    """Non-blank lines of a UTF-8 text file (ids, queries, sentences), stripped; a leading
    byte-order mark (as Windows editors write) is not part of the first line."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise SemsearchError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise SemsearchError(
            f"{path} is larger than {limit // 2**20} MiB: give a smaller file, one entry per "
            "line (split a larger one and run once per part)"
        )
    try:
        lines = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise SemsearchError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): convert it first, "
            "e.g. iconv -f latin1 -t utf-8 IN > OUT"
        ) from exc
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise SemsearchError(f"{path} holds no text: write one per line")
    return texts


def read_npy(path: Path, what: str = "query vectors", option: str = "--vectors"):
    """A .npy file of vectors: a 2-D float array, one vector a row (never a pickle); `what`
    and `option` name it in the one-line errors."""
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise SemsearchError(f"{path} does not exist: give a .npy file of {what}") from None
    except EOFError:  # numpy's answer to a file of no bytes at all
        raise SemsearchError(
            f"{path} is empty: give a .npy file of {what} (np.save(path, vectors))"
        ) from None
    except (OSError, ValueError) as exc:
        raise SemsearchError(f"{path} is not a readable .npy file ({exc})") from None
    if (
        not isinstance(array, np.ndarray)
        or array.ndim != 2
        or not np.issubdtype(array.dtype, np.floating)
    ):
        shape = getattr(array, "shape", "?")
        raise SemsearchError(
            f"{path} holds a {getattr(array, 'dtype', '?')} array of shape {shape}: "
            f"{option} needs a 2-D float array, one vector a row (np.save(path, vectors))"
        )
    return array
