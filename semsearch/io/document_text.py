"""Text out of one document file: UTF-8 text and Markdown as they are, HTML's main text,
a PDF's text, and a huge text streamed as pieces; a file that gives none is SkippedFile.

HTML is reduced to its main text by trafilatura, as Markdown: on real pages it left out
navigation, sidebars and footers and kept inline code in its sentence, where selectolax
kept all of those and split sentences, though at under 1 ms a page against 5-40 ms (a
cost of the order of encoding that text on a CPU, paid once per build). PDFs are read by
pypdf (the `pdf` extra), page by page, at about 10 ms a page.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from pathlib import Path

from semsearch.errors import one_line
from semsearch.io.corpus_readers import ICONV_HINT

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
MARKDOWN_SUFFIXES = (".md", ".markdown")
HUGE_BYTES = 8 << 20  # a document with more text than this is given as pieces
PIECE_CHARS = 1 << 20  # about this much text in each piece of a huge document
SNIFF_BYTES = 1024  # a NUL byte in the first KiB marks a binary file
TITLE_SCAN_CHARS = 64 << 10  # the first Markdown heading is looked for in this much text
NO_PYPDF = "PDFs (no pypdf)"
PDF_HINT = "pip install -e '.[pdf]' in semsearch's folder to read PDFs"


class SkippedFile(Exception):
    """A file that gives no rows: `reason` is what a summary counts, `detail` its log line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def text_pieces(path: Path, size: int) -> tuple[str | None, Iterator[tuple[int, str]]]:
    """The title a document's format declares (an HTML page's; None for others) and its text
    as (character offset, text) pieces, about 1 MiB each for a text over 8 MiB; SkippedFile,
    before any piece is read, for a file that gives no text. Only huge text files stream."""
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES and size > HUGE_BYTES:
        return None, _file_pieces(path)
    title = None
    if suffix == ".pdf":
        text = _pdf_text(path)
    else:
        text = _decoded(path.read_bytes())
        if suffix in (".html", ".htm"):
            text, title = _html_text(text)
    return title, (_pieces_of(text) if len(text) > HUGE_BYTES else iter([(0, text)]))


def _decoded(data: bytes) -> str:
    if b"\0" in data[:SNIFF_BYTES]:
        raise SkippedFile("binary", "it is binary (a NUL byte in its first KiB), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkippedFile(
            "not UTF-8", f"it is not UTF-8 text ({exc.reason} at byte {exc.start}): {ICONV_HINT}"
        ) from exc


def _file_pieces(path: Path) -> Iterator[tuple[int, str]]:
    """A huge text file's pieces, streamed: checked as UTF-8 text first (a block at a time,
    so a file that is not is skipped before any of its rows is given), then read."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as handle:
        if b"\0" in handle.read(SNIFF_BYTES):
            raise SkippedFile("binary", "it is binary (a NUL byte in its first KiB), not text")
        handle.seek(0)
        position = 0
        try:
            while block := handle.read(PIECE_CHARS):
                decoder.decode(block)
                position += len(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise SkippedFile(
                "not UTF-8",
                f"it is not UTF-8 text ({exc.reason} near byte {position + exc.start}): {ICONV_HINT}",
            ) from exc
    return _pieces(_blocks(path))


def _blocks(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        while block := handle.read(PIECE_CHARS):
            yield block


def _pieces_of(text: str) -> Iterator[tuple[int, str]]:
    return _pieces(text[start : start + PIECE_CHARS] for start in range(0, len(text), PIECE_CHARS))


def _pieces(blocks: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(offset, piece) of about PIECE_CHARS characters each, out of consecutive blocks of
    text, cut after a blank line where there is one in a piece's second half, else after a
    line break; at most two pieces' worth of text is held at once."""
    held, offset = "", 0
    for block in blocks:
        held += block
        while len(held) > PIECE_CHARS:
            cut = _cut_at(held)
            yield offset, held[:cut]
            offset, held = offset + cut, held[cut:]
    if held:
        yield offset, held


def _cut_at(text: str) -> int:
    for mark in ("\n\n", "\n"):
        found = text.rfind(mark, PIECE_CHARS // 2, PIECE_CHARS)
        if found >= 0:
            return found + len(mark)
    return PIECE_CHARS


def _html_text(html: str) -> tuple[str, str | None]:
    """The main text of a page as Markdown (trafilatura), or all its text where trafilatura
    finds no main part (a page of a few words); and its <title>, or else its first <h1>."""
    import lxml.html
    import trafilatura  # 0.16 s of imports, kept off the start-up of builds without HTML

    if not html.strip():
        return "", None
    # Parsed here, not by trafilatura, which refuses a fragment (`<p>a few words</p>`) as not
    # HTML; it copies a tree it is given, so the tree serves all three readings.
    parser = lxml.html.HTMLParser(encoding="utf-8")
    tree = lxml.html.document_fromstring(html.encode("utf-8"), parser=parser)
    titles = (" ".join(str(tree.xpath(f"string((//{tag})[1])")).split()) for tag in ("title", "h1"))
    text = trafilatura.extract(
        tree,
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        favor_recall=True,
    )
    return text or trafilatura.html2txt(tree), next((t for t in titles if t), None)


def _pdf_text(path: Path) -> str:
    try:
        import pypdf  # the `pdf` extra
    except ImportError as exc:
        raise SkippedFile(NO_PYPDF, f"PDFs need pypdf: {PDF_HINT}") from exc
    try:
        reader = pypdf.PdfReader(path)
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except OSError:
        raise
    except Exception as exc:  # any malformed or encrypted PDF: pypdf raises many kinds
        raise SkippedFile("unreadable", f"pypdf cannot read it ({one_line(exc)})") from exc


def markdown_title(text: str) -> str | None:
    """The first heading of a Markdown text (in its first 64 KiB), or its YAML front matter's
    `title`: markdown-it-py parses it, so a `#` line inside a code block is not one."""
    from markdown_it import MarkdownIt  # off the start-up of builds without Markdown

    text = text[:TITLE_SCAN_CHARS]
    if text.startswith("---\n"):  # YAML front matter, as static site generators write it
        end = text.find("\n---", 4)
        front, text = (text[4:end], text[end + 4 :]) if end >= 0 else ("", text)
        title = _front_matter_title(front)
        if title:
            return title
    tokens = MarkdownIt("commonmark").parse(text)
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type == "heading_open" and inline.content.strip():
            return inline.content.strip()
    return None


def _front_matter_title(front: str) -> str | None:
    import yaml

    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError:
        return None
    title = data.get("title") if isinstance(data, dict) else None
    return title.strip() if isinstance(title, str) and title.strip() else None
