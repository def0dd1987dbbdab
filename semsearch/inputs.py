"""Small readers for what users pass on the command line besides corpora."""

from __future__ import annotations

from pathlib import Path

from semsearch.errors import SemsearchError


def read_lines(path: Path) -> list[str]:
    """Non-blank lines of a UTF-8 text file (queries, sentences), stripped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SemsearchError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): convert it first, "
            "e.g. iconv -f latin1 -t utf-8 IN > OUT"
        ) from exc
    except OSError as exc:
        raise SemsearchError(f"cannot read {path}: {exc.strerror or exc}") from exc
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise SemsearchError(f"{path} holds no text: write one per line")
    return texts
