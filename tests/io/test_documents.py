"""Folders of documents read as a corpus: what is found, in which order, what each row holds,
what is skipped and said, and a huge text streamed as pieces in bounded memory."""

from __future__ import annotations

import hashlib
import io
import logging
import os
import sys
import tracemalloc
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from semsearch.errors import SemsearchError
from semsearch.io import document_text, documents
from semsearch.io.documents import SCHEMA, is_document_folder, open_documents

PAGE = """<html><head><title>The Page Title</title><script>var tracking = 1;</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/x">Elsewhere</a></nav>
<main><h1>Vectors</h1>
<p>A bi-encoder turns each text into one vector, so that similar texts lie close together
and a query finds its neighbours among millions of them in milliseconds.</p>
<p>The index keeps the vectors beside their metadata, and a search returns both, ranked by
the similarity of each document to the query that was asked.</p></main>
<footer>Copyright footer text</footer></body></html>"""


def _write(path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def _rows(folder) -> list[dict]:
    return [row for batch in folder.batches() for row in batch.to_pylist()]


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    _write(root / "b.md", "Intro line\n\n# Getting started\n\nInstall it *first*.\n")
    _write(root / "a.txt", "Plain text, kept as it is.\r\n")
    _write(root / "guide" / "page.html", PAGE)
    _write(root / "guide" / "deeper" / "notes.markdown", "No heading here.\n")
    _write(root / ".hidden" / "secret.md", "# Hidden\n")
    _write(root / ".draft.md", "# Draft\n")
    _write(root / "logo.png", b"\x89PNG\r\n\x1a\n")
    return root


def test_documents_are_found_recursively_in_sorted_order_with_their_columns(docs) -> None:
    folder = open_documents(docs)
    rows = _rows(folder)
    assert [row["id"] for row in rows] == [
        "a.txt",
        "b.md",
        "guide/deeper/notes.markdown",
        "guide/page.html",
    ]
    assert next(folder.batches()).schema == SCHEMA
    by_id = {row["id"]: row for row in rows}
    assert by_id["b.md"]["text"] == (docs / "b.md").read_text()  # Markdown kept as its source
    assert by_id["a.txt"]["text"] == "Plain text, kept as it is.\r\n"
    assert [by_id[i]["title"] for i in sorted(by_id)] == [
        "a",
        "Getting started",
        "notes",
        "The Page Title",
    ]
    page = by_id["guide/page.html"]["text"]
    assert "neighbours among millions" in page and "similarity of each document" in page
    assert "tracking" not in page and "Elsewhere" not in page and "Copyright footer" not in page
    for row in rows:
        path = docs / row["id"]
        assert row["path"] == str(path) and os.path.isabs(row["path"])
        assert row["bytes"] == path.stat().st_size
        mtime = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        assert abs((row["modified"] - mtime).total_seconds()) < 1e-3
        assert row["piece_start"] == 0
    assert folder.skipped == {} and folder.format == "documents" and folder.num_rows is None


def test_two_reads_are_identical_and_the_fingerprint_follows_the_content(docs) -> None:
    first, second = open_documents(docs), open_documents(docs)
    assert pa.Table.from_batches(list(first.batches())).equals(
        pa.Table.from_batches(list(second.batches()))
    )
    before = first.fingerprint()
    assert second.fingerprint() == before
    os.utime(docs / "a.txt", (1, 1))  # a new mtime, the same content
    assert open_documents(docs).fingerprint() == before
    (docs / "a.txt").write_text("Changed.\n")
    assert open_documents(docs).fingerprint() != before
    (docs / "a.txt").rename(docs / "z.txt")
    assert open_documents(docs).fingerprint() != before


def test_columns_selects_what_each_batch_holds(docs) -> None:
    batch = next(open_documents(docs).batches(rows=2, columns=["id", "text"]))
    assert batch.schema.names == ["id", "text"] and batch.num_rows == 2
    with pytest.raises(SemsearchError, match="no column 'body'"):
        next(open_documents(docs).batches(columns=["body"]))


def test_html_titles_fall_back_to_the_first_h1_then_the_name(tmp_path) -> None:
    _write(
        tmp_path / "h1.html", "<html><body><h1>Only a heading</h1><p>and a line.</p></body></html>"
    )
    _write(tmp_path / "bare.htm", "<p>just a few words</p>")
    rows = {row["id"]: row for row in _rows(open_documents(tmp_path))}
    assert rows["h1.html"]["title"] == "Only a heading"
    assert rows["bare.htm"]["title"] == "bare"
    assert "just a few words" in rows["bare.htm"]["text"]  # no main part: all of its text


def test_markdown_title_skips_code_and_reads_front_matter(tmp_path) -> None:
    _write(tmp_path / "code.md", "```\n# not a heading\n```\n\nTitle here\n==========\n")
    _write(
        tmp_path / "front.md", "---\ntitle: From the front matter\ndate: 2024-01-01\n---\n# H1\n"
    )
    rows = {row["id"]: row for row in _rows(open_documents(tmp_path))}
    assert rows["code.md"]["title"] == "Title here"
    assert rows["front.md"]["title"] == "From the front matter"
    assert rows["front.md"]["text"].startswith("---\ntitle:")  # the text is the whole source


def _bad_files(root) -> None:
    _write(root / "good.txt", "Readable text.\n")
    _write(root / "binary.txt", b"PK\x03\x04\x00\x00binary")
    _write(root / "latin1.md", "café au lait\n".encode("latin-1"))
    _write(root / "empty.md", "")
    _write(root / "blank.txt", "  \n\n\t\n")


def test_bad_files_are_skipped_one_info_line_each_and_one_warning(tmp_path, caplog) -> None:
    _bad_files(tmp_path)
    folder = open_documents(tmp_path)
    with caplog.at_level(logging.INFO, logger="semsearch.io.documents"):
        rows = _rows(folder)
    assert [row["id"] for row in rows] == ["good.txt"]
    assert folder.skipped == {"empty": 2, "binary": 1, "not UTF-8": 1}
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum(m.startswith("skipped ") for m in info) == 4
    assert any("latin1.md: it is not UTF-8 text" in m and "iconv" in m for m in info)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["skipped 4 files: 2 empty, 1 binary, 1 not UTF-8"]


@pytest.mark.parametrize(
    "name,content,why",
    [
        ("binary.txt", b"PK\x03\x04\x00\x00", "it is binary"),
        ("latin1.md", "café\n".encode("latin-1"), "it is not UTF-8 text"),
        ("empty.md", b"", "it holds no text"),
    ],
)
def test_strict_stops_at_the_first_bad_file_naming_it(tmp_path, name, content, why) -> None:
    _write(tmp_path / "a.txt", "Readable text.\n")
    _write(tmp_path / name, content)
    with pytest.raises(SemsearchError, match=f"{name}: {why}.*strict"):
        _rows(open_documents(tmp_path, strict=True))


def test_a_folder_without_any_readable_document_is_one_error(tmp_path) -> None:
    _write(tmp_path / "empty.md", "")
    with pytest.raises(SemsearchError, match="no document under .* has readable text"):
        _rows(open_documents(tmp_path))


def test_symlink_loops_are_one_warning_each_and_counted(tmp_path, caplog) -> None:
    _write(tmp_path / "docs" / "a.md", "# A\n")
    _write(tmp_path / "elsewhere" / "b.md", "# B\n")
    (tmp_path / "docs" / "loop").symlink_to(tmp_path / "docs")  # a folder inside itself
    (tmp_path / "docs" / "x.md").symlink_to(tmp_path / "docs" / "y.md")
    (tmp_path / "docs" / "y.md").symlink_to(tmp_path / "docs" / "x.md")
    (tmp_path / "docs" / "linked").symlink_to(tmp_path / "elsewhere")  # followed
    (tmp_path / "docs" / "alias").symlink_to(tmp_path / "elsewhere")  # the same folder again
    (tmp_path / "docs" / "gone.md").symlink_to(tmp_path / "nowhere.md")
    with caplog.at_level(logging.WARNING, logger="semsearch.io.documents"):
        folder = open_documents(tmp_path / "docs")
        rows = _rows(folder)
    assert [row["id"] for row in rows] == ["a.md", "alias/b.md"]  # `linked` is read once, as alias
    assert folder.skipped == {"in a symlink loop": 3, "behind a broken symlink": 1}
    messages = [r.getMessage() for r in caplog.records]
    assert sum(": a symlink loop" in m for m in messages) == 3
    assert messages[-1] == "skipped 4 files: 3 in a symlink loop, 1 behind a broken symlink"
    assert not any(r.exc_info for r in caplog.records)


def test_a_file_that_vanishes_before_it_is_read_is_a_warning(docs, monkeypatch, caplog) -> None:
    read = documents._rows_of

    def deleting_the_next(relative, path):
        if relative == "a.txt":
            (docs / "b.md").unlink()
        return read(relative, path)

    monkeypatch.setattr(documents, "_rows_of", deleting_the_next)
    folder = open_documents(docs)
    with caplog.at_level(logging.WARNING, logger="semsearch.io.documents"):
        rows = _rows(folder)
    assert "b.md" not in [row["id"] for row in rows] and len(rows) == 3
    assert folder.skipped == {"vanished": 1}
    assert any("b.md: it vanished" in r.getMessage() for r in caplog.records)


def test_a_glob_selects_files_with_ids_from_where_it_starts(docs) -> None:
    every_md = open_documents(f"{docs}/**/*.md")
    assert [i for i, _ in every_md.files] == ["b.md"]  # hidden ones stay out
    assert [i for i, _ in open_documents(f"{docs}/**/*.m*").files] == [
        "b.md",
        "guide/deeper/notes.markdown",
    ]
    assert [i for i, _ in open_documents(f"{docs}/guide/*.html").files] == ["page.html"]
    assert [i for i, _ in open_documents(f"{docs}/*").files] == ["a.txt", "b.md"]
    assert every_md.path == docs


def test_what_cannot_be_a_folder_of_documents_is_one_line(tmp_path, docs) -> None:
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "images" / "a.png", b"\x89PNG")
    cases = [
        (tmp_path / "empty", "holds no documents"),
        (tmp_path / "images", "holds no documents"),
        (tmp_path / "missing", "does not exist"),
        (f"{docs}/**/*.rst", "no document matches"),
        (docs / "a.txt", "is a file, not a folder"),
        ("s3://bucket/docs/", "local folder"),
    ]
    for corpus, message in cases:
        with pytest.raises(SemsearchError, match=message) as raised:
            open_documents(corpus)
        assert "\n" not in str(raised.value)


def test_is_document_folder_tells_documents_from_tables(tmp_path, docs) -> None:
    _write(tmp_path / "tables" / "a.parquet", b"PAR1")
    _write(tmp_path / "mixed" / "a.md", "# A\n")
    _write(tmp_path / "mixed" / "sub" / "b.csv.gz", b"")
    assert is_document_folder(docs) and is_document_folder(str(docs))
    assert is_document_folder(f"{docs}/**/*.md")
    assert not is_document_folder(tmp_path / "tables")
    assert not is_document_folder(tmp_path / "mixed")
    assert is_document_folder(f"{tmp_path}/mixed/*.md")  # the glob leaves the table out
    assert not is_document_folder(docs / "a.txt")
    assert not is_document_folder(tmp_path / "missing")
    assert not is_document_folder("s3://bucket/docs/")


def _matplotlib_pdf(text: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure()
    figure.text(0.1, 0.5, text)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="pdf")
    plt.close(figure)
    return buffer.getvalue()


def test_pdfs_are_read_with_pypdf(tmp_path) -> None:
    pytest.importorskip("pypdf")
    _write(tmp_path / "paper.pdf", _matplotlib_pdf("Hello from a PDF about vectors"))
    _write(tmp_path / "broken.pdf", b"%PDF-1.4 not really")
    folder = open_documents(tmp_path)
    rows = _rows(folder)
    assert [row["id"] for row in rows] == ["paper.pdf"]
    assert rows[0]["text"].strip() == "Hello from a PDF about vectors"
    assert rows[0]["title"] == "paper"
    assert folder.skipped == {"unreadable": 1}


def test_without_pypdf_pdfs_are_skipped_with_a_hint(tmp_path, monkeypatch, caplog) -> None:
    _write(tmp_path / "paper.pdf", b"%PDF-1.4")
    _write(tmp_path / "note.txt", "A note.\n")
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as if it were not installed
    folder = open_documents(tmp_path)
    with caplog.at_level(logging.WARNING, logger="semsearch.io.documents"):
        rows = _rows(folder)
    assert [row["id"] for row in rows] == ["note.txt"]
    assert folder.skipped == {document_text.NO_PYPDF: 1}
    assert caplog.records[-1].getMessage() == (
        f"skipped 1 file: 1 {document_text.NO_PYPDF} ({document_text.PDF_HINT})"
    )


@pytest.fixture
def small_pieces(monkeypatch):
    """Huge means over 800 bytes, a piece is about 100 characters: the same code, small files."""
    monkeypatch.setattr(document_text, "HUGE_BYTES", 800)
    monkeypatch.setattr(document_text, "PIECE_CHARS", 100)


def test_a_huge_text_is_pieces_cut_at_paragraphs(tmp_path, small_pieces) -> None:
    paragraphs = [f"Paragraph {n} " + "word " * (n % 5 + 1) for n in range(40)]
    text = "# Long document\n\n" + "\n\n".join(paragraphs) + "\n"
    _write(tmp_path / "long.md", text)
    _write(tmp_path / "short.txt", "short\n")
    rows = _rows(open_documents(tmp_path))
    pieces = [row for row in rows if row["id"] == "long.md"]
    assert len(pieces) > 5 and "".join(row["text"] for row in pieces) == text
    assert [row["piece_start"] for row in pieces] == [
        sum(len(row["text"]) for row in pieces[:n]) for n in range(len(pieces))
    ]
    assert all(row["text"].endswith("\n\n") and len(row["text"]) <= 100 for row in pieces[:-1])
    assert {row["title"] for row in pieces} == {"Long document"}
    assert {row["bytes"] for row in pieces} == {len(text)}
    assert [row["piece_start"] for row in rows if row["id"] == "short.txt"] == [0]


def test_a_huge_line_without_breaks_is_cut_at_the_piece_size(tmp_path, small_pieces) -> None:
    _write(tmp_path / "one-line.txt", "x" * 1000)
    rows = _rows(open_documents(tmp_path))
    assert [len(row["text"]) for row in rows] == [100] * 10


def test_a_huge_file_that_is_not_utf8_gives_no_rows(tmp_path, small_pieces) -> None:
    _write(tmp_path / "late.txt", b"fine line\n" * 200 + b"caf\xe9\n")
    _write(tmp_path / "ok.txt", "ok\n")
    folder = open_documents(tmp_path)
    assert [row["id"] for row in _rows(folder)] == ["ok.txt"]
    assert folder.skipped == {"not UTF-8": 1}


def test_a_30_mb_text_streams_in_bounded_memory(tmp_path) -> None:
    path, digest = tmp_path / "big.txt", hashlib.sha256()
    line = "A line of a very long document, written to be read in pieces. " * 2 + "\n"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        for n in range(30_000_000 // (len(line) * 10)):
            block = f"Section {n}\n\n" + line * 10 + "\n"
            handle.write(block)
            digest.update(block.encode())
    size = path.stat().st_size
    assert size > 30_000_000
    folder, read, starts, lengths = open_documents(tmp_path), hashlib.sha256(), [], []
    pa.array([0])  # pyarrow's first array from Python objects imports pandas: not our memory
    tracemalloc.start()
    try:
        for batch in folder.batches():
            for text in batch.column("text").to_pylist():
                read.update(text.encode())
                lengths.append(len(text))
            starts.extend(batch.column("piece_start").to_pylist())
            del batch, text
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read.hexdigest() == digest.hexdigest()  # every character, once, in order
    assert len(starts) >= 29 and starts[0] == 0
    assert all(a + n == b for a, n, b in zip(starts, lengths, starts[1:]))
    assert max(lengths) <= document_text.PIECE_CHARS
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"


def test_a_huge_page_is_cut_after_its_text_is_extracted(tmp_path, small_pieces) -> None:
    paragraphs = "".join(f"<p>Paragraph {n} says something about vectors.</p>\n" for n in range(40))
    _write(
        tmp_path / "long.html",
        f"<html><head><title>Long</title></head><body>{paragraphs}</body></html>",
    )
    rows = _rows(open_documents(tmp_path))
    assert len(rows) > 5 and {row["title"] for row in rows} == {"Long"}
    text = "".join(row["text"] for row in rows)
    assert "Paragraph 0 says" in text and "Paragraph 39 says" in text and "<p>" not in text
    assert rows[1]["piece_start"] == len(rows[0]["text"])
