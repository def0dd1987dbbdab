"""A folder of documents (.txt, .md, .html, .pdf) read as a corpus: one row per document.

The files of a folder (or a glob such as `docs/**/*.md`) are found recursively in a stable
sorted order (hidden names left out, symlinks followed, a loop reported once), each one row
of `id` (its path in the folder), `text`, `title`, `path`, `modified`, `bytes` and
`piece_start`. A text over 8 MiB is streamed as rows of about 1 MiB each, cut at a
paragraph or line break, `piece_start` their character offset. A file that is binary, not
UTF-8, unreadable or empty, or a PDF without the `pdf` extra, is skipped with one INFO line
and counted in one closing WARNING; with `strict=True` it stops the read instead.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pyarrow as pa

from semsearch.checksums import HASH_NAME, content_digest, file_digest
from semsearch.errors import SemsearchError, one_line
from semsearch.io.corpus_readers import FORMATS
from semsearch.io.document_text import (
    MARKDOWN_SUFFIXES,
    NO_PYPDF,
    PDF_HINT,
    SkippedFile,
    markdown_title,
    text_pieces,
)
from semsearch.io.filesystems import glob_match, is_glob, is_uri

log = logging.getLogger(__name__)

DOCUMENT_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")
DOCUMENTS_FORMAT = "documents"  # a source's format in the manifest
DOCUMENT_ID, DOCUMENT_TEXT = "id", "text"  # each document's id (its relative path) and text
BATCH_CHARS = 4 << 20  # a batch closes at this much text, so pieces do not pile up in one
SCHEMA = pa.schema(
    [
        pa.field(DOCUMENT_ID, pa.string()),
        pa.field(DOCUMENT_TEXT, pa.string()),
        pa.field("title", pa.string()),
        pa.field("path", pa.string()),
        pa.field("modified", pa.timestamp("us", tz="UTC")),
        pa.field("bytes", pa.int64()),
        pa.field("piece_start", pa.int64()),
    ]
)
# Reasons found while listing the files or by a race with the file system: a WARNING each,
# and never a reason for `strict` to stop (they say nothing about the documents' content).
LISTING_REASONS = (
    "in a symlink loop",
    "behind a broken symlink",
    "vanished",
    "in an unreadable folder",
)


@dataclass
class DocumentFolder:
    """A folder (or glob) of documents, read as a build reads a `Corpus`: `files` as (id, path)
    in reading order, `skipped` the files left out, by reason."""

    path: Path
    files: list[tuple[str, Path]]
    schema: pa.Schema = SCHEMA
    num_rows: int | None = None  # unknown before reading: huge files give several rows
    format: str = DOCUMENTS_FORMAT
    strict: bool = False
    skipped: dict[str, int] = field(default_factory=dict)
    _listing_skips: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def batches(
        self, rows: int = 8192, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The documents as record batches of at most `rows` rows (and about 4 MiB of text),
        of `columns` only when given, in the files' sorted order."""
        names = columns or self.columns
        unknown = [name for name in names if name not in self.columns]
        if unknown:
            raise SemsearchError(
                f"documents have no column {unknown[0]!r}; theirs are: {', '.join(self.columns)}"
            )
        self.skipped = Counter(self._listing_skips)
        pending: list[dict] = []
        chars = kept = 0
        for relative, path in self.files:
            try:
                for row in _rows_of(relative, path):
                    pending.append(row)
                    chars += len(row["text"])
                    if len(pending) >= rows or chars >= BATCH_CHARS:
                        kept += len(pending)
                        yield _batch(pending, names)
                        pending, chars = [], 0
            except SkippedFile as skip:
                self._skip(path, skip)
        if pending:
            kept += len(pending)
            yield _batch(pending, names)
        self.skipped = dict(self.skipped)
        self._summarise(kept)

    def fingerprint(self) -> str:
        """A hash of every file's id, size and content hash (XXH3): it changes with any file
        added, removed, renamed or edited, and with nothing else."""
        described = {}
        for relative, path in self.files:
            try:
                described[relative] = {"bytes": path.stat().st_size, HASH_NAME: file_digest(path)}
            except OSError as exc:
                described[relative] = {"error": type(exc).__name__}
        return content_digest(described)

    def _skip(self, path: Path, skip: SkippedFile) -> None:
        if self.strict and skip.reason not in LISTING_REASONS:
            raise SemsearchError(
                f"{path}: {skip.detail} (strict): remove or fix the file, or build without "
                "--strict to skip such files"
            )
        self.skipped[skip.reason] += 1
        level = logging.WARNING if skip.reason in LISTING_REASONS else logging.INFO
        log.log(level, "skipped %s: %s", path, skip.detail)

    def _summarise(self, kept: int) -> None:
        total = sum(self.skipped.values())
        if total:
            counts = Counter(self.skipped).most_common()
            reasons = ", ".join(f"{count} {reason}" for reason, count in counts)
            hint = f" ({PDF_HINT})" if NO_PYPDF in self.skipped else ""
            log.warning("skipped %d file%s: %s%s", total, "s"[: total != 1], reasons, hint)
        if not kept:
            raise SemsearchError(
                f"no document under {self.path} has readable text ({total} skipped): "
                "see the lines above, or run with -v for each file"
            )


def open_documents(corpus: str | Path, strict: bool = False) -> DocumentFolder:
    """Find the documents of a local folder, or of a glob such as `docs/**/*.md`, in a
    stable sorted order; with `strict`, reading stops at the first file it would skip."""
    if is_uri(corpus):
        raise SemsearchError(
            f"{corpus}: documents are read from a local folder; copy them to one first"
        )
    path = Path(corpus).expanduser()
    if path.is_file():
        raise SemsearchError(
            f"{path} is a file, not a folder of documents: pass its folder, or a glob"
        )
    if not path.is_dir() and not is_glob(corpus):
        raise SemsearchError(f"corpus {path} does not exist: check the path")
    root, found, skips = _list(path, report=True)
    files = [(relative, file) for relative, file in found if _is_document(relative)]
    if not files:
        if path.is_dir():
            raise SemsearchError(
                f"folder {path} holds no documents: semsearch reads "
                f"{', '.join(DOCUMENT_SUFFIXES)} files in it and its subfolders"
            )
        raise SemsearchError(
            f"no document matches {corpus}: check the pattern (quote it, so the shell leaves it alone)"
        )
    others = len(found) - len(files)
    log.info(
        "found %d documents under %s%s",
        len(files),
        root,
        f" (left out {others} files of other types)" if others else "",
    )
    return DocumentFolder(path=root, files=files, strict=strict, _listing_skips=dict(skips))


def is_document_folder(corpus: str | Path) -> bool:
    """True for a local folder or glob whose files include documents and no table files
    (.parquet, .csv, .tsv, .jsonl: the many-files reader's), so each goes to its reader."""
    if is_uri(corpus):
        return False
    path = Path(corpus).expanduser()
    if not path.is_dir() and (path.exists() or not is_glob(corpus)):
        return False
    _, found, _ = _list(path, report=False)
    names = [relative.lower().removesuffix(".gz") for relative, _ in found]
    return any(name.endswith(DOCUMENT_SUFFIXES) for name in names) and not any(
        name.endswith(tuple(FORMATS)) for name in names
    )


def _is_document(relative: str) -> bool:
    return relative.lower().endswith(DOCUMENT_SUFFIXES)


def _list(path: Path, report: bool) -> tuple[Path, list[tuple[str, Path]], Counter]:
    """The folder the files' ids are relative to, every (id, path) under it that the folder
    or glob names, sorted, and the count of what could not be listed, by reason."""
    pattern: tuple[str, ...] = ()
    if not path.is_dir():  # a glob: walk the folder it starts in, keep the paths it matches
        parts = path.parts
        plain = next(i for i, part in enumerate(parts) if is_glob(part))
        path, pattern = Path(*parts[:plain]) if plain else Path("."), parts[plain:]
    depth = None if "**" in pattern or not pattern else len(pattern) - 1
    skips: Counter = Counter()

    def problem(relative: PurePosixPath, reason: str, detail: str, folder: bool = False) -> None:
        wanted = _is_document(relative.name) and (
            not pattern or glob_match(relative.parts, pattern)
        )
        if not (folder or wanted):
            return  # not a document, or not one the glob names
        skips[reason] += 1
        if report:
            log.warning("skipped %s: %s", path / relative, detail)

    try:
        info = path.stat()
        top = {(info.st_dev, info.st_ino)}
    except OSError:
        top = set()  # a glob's folder that does not exist: nothing is found
    found = [
        (relative.as_posix(), file)
        for relative, file in _walk(path, PurePosixPath(), depth, problem, top, frozenset(top))
        if not pattern or glob_match(relative.parts, pattern)
    ]
    return path, found, skips


def _walk(
    folder, relative, depth, problem, seen, ancestors
) -> Iterator[tuple[PurePosixPath, Path]]:
    """Files under `folder` in name order, symlinks followed; a folder reached again through
    a symlink is read once, and one that contains itself is a loop, reported and left out."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        problem(relative, "in an unreadable folder", f"it cannot be listed ({one_line(exc)})", True)
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        inside = relative / entry.name
        try:
            info = os.stat(entry.path)  # follows symlinks
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                problem(inside, "in a symlink loop", "a symlink loop")
            elif entry.is_symlink():
                problem(inside, "behind a broken symlink", "a symlink to nothing")
            else:
                problem(inside, "vanished", f"it vanished while listed ({one_line(exc)})")
            continue
        if stat.S_ISREG(info.st_mode):
            yield inside, Path(entry.path)
        elif stat.S_ISDIR(info.st_mode) and (depth is None or len(inside.parts) <= depth):
            key = (info.st_dev, info.st_ino)
            if key in ancestors:
                problem(
                    inside, "in a symlink loop", "a symlink loop (a folder inside itself)", True
                )
            elif key in seen:
                log.debug("%s: already read through another path", entry.path)
            else:
                seen.add(key)
                yield from _walk(entry.path, inside, depth, problem, seen, ancestors | {key})


def _rows_of(relative: str, path: Path) -> Iterator[dict]:
    """The rows of one document: one, or a huge text's pieces. Every reason to skip the file
    is raised before its first row."""
    try:
        info = path.stat()
        title, pieces = text_pieces(path, info.st_size)
        first = next((piece for piece in pieces if piece[1].strip()), None)
    except FileNotFoundError as exc:
        raise SkippedFile("vanished", f"it vanished before it was read ({one_line(exc)})") from exc
    except OSError as exc:
        raise SkippedFile("unreadable", f"it cannot be read ({one_line(exc)})") from exc
    if first is None:
        raise SkippedFile("empty", "it holds no text")
    if path.suffix.lower() in MARKDOWN_SUFFIXES:
        title = markdown_title(first[1])
    common = {
        "id": relative,
        "title": title or path.stem,
        "path": os.path.abspath(path),
        "modified": info.st_mtime_ns // 1000,
        "bytes": info.st_size,
    }
    for start, text in itertools.chain([first], pieces):
        if text.strip():  # a blank stretch of a huge text
            yield {**common, "text": text, "piece_start": start}


def _batch(rows: list[dict], names: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([row[name] for row in rows], SCHEMA.field(name).type) for name in names],
        schema=pa.schema([SCHEMA.field(name) for name in names]),
    )
