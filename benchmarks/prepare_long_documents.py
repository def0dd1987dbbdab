"""Prepare the long-document benchmark's data: Linux manual pages as plain text, and queries.

    python benchmarks/prepare_long_documents.py            # from DATA_DIR/long_documents/debs/

Provenance: the Debian 12 (bookworm, main) packages `manpages` 6.03-2 and `manpages-dev`
6.03-2 (the Linux man-pages project: sections 2, 3, 4, 5 and 7), fetched with
`apt-get download manpages manpages-dev` and kept in `long_documents/debs/` (sha256 in the
data's README). Licence: GPL-2+ for the pages (a few files BSD-2-clause or other free
licences), per the packages' `/usr/share/doc/manpages/copyright`, which is copied beside the
data as `COPYRIGHT.manpages`.

What is made, deterministically (sorted inputs, a seeded generator, fixed render settings):
- each page unpacked with `dpkg -x`, rendered by `man -l --nh --nj -P cat` (no hyphenation,
  no justification, `MANWIDTH=80`, `LC_ALL=C.UTF-8`) through `col -bx`; `.so` redirections
  skipped; pages of at least `--min-tokens` tokens by the default model's tokenizer kept,
  intact (header and footer lines included);
- `documents.parquet` (`id, title, text`; id like `man2/open.2`, title like `open(2)`) and
  `documents/<id with / as __>.txt`, one file per page, for `semsearch build FOLDER`;
- `queries.jsonl` (`query, gold_id, where`, plus `section`, `sentence`, `char_start`).

How queries are made: from the pages' own text, as there is no LLM here. Candidate sentences
are the prose sentences of a page's DESCRIPTION, NOTES, BUGS, CAVEATS and other free-text
sections (never NAME, SYNOPSIS, LIBRARY, RETURN VALUE, ERRORS, VERSIONS, STANDARDS, HISTORY,
SEE ALSO), joined across line breaks, of at least 8 words. A sentence qualifies when it
occurs (whitespace normalised) in no other page and, for `past_window`, not in its own
page's first window. The query is the sentence as KEYWORDS: the page's own names (its NAME
line's list, `open()`, `open(2)`) removed, then scikit-learn's English stop words and
punctuation dropped, in the sentence's order, the first 12 distinct words; at least 5 must
remain. The sentence is recorded beside the query. So a query is not verbatim, but its words
are the gold passage's: these are known-item keyword queries, which test whether a passage
can be reached at all, not paraphrase understanding. `where` is `first_window` when the
sentence ends within the first window the model reads (its first `max_seq_length - 2`
tokens, by the tokenizer's offsets), `past_window` when it starts after it. Each page gives
at most one query of each kind; pages are drawn in a seeded order until `--queries` of each
kind are found.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from common import DEFAULT_DATA_DIR

log = logging.getLogger("prepare_long_documents")

PACKAGES = ("manpages", "manpages-dev")
SKIPPED_SECTIONS = {
    "NAME",
    "SYNOPSIS",
    "LIBRARY",
    "RETURN VALUE",
    "ERRORS",
    "VERSIONS",
    "STANDARDS",
    "CONFORMING TO",
    "HISTORY",
    "SEE ALSO",
    "COLOPHON",
    "AUTHORS",
    "COPYRIGHT",
}
QUERY_WORDS, MIN_QUERY_WORDS, MIN_SENTENCE_WORDS = 12, 5, 8
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-'][A-Za-z0-9_]+)*")
SECTION_HEADING = re.compile(r"^([A-Z][A-Z0-9 ,/-]*[A-Z0-9])\s*$")


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Sentence:
    """A prose sentence of a page: its section and where it lies in the page's text."""

    text: str
    section: str
    start: int
    end: int


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--deb-dir", type=Path, help="the .deb files (default OUT/debs)")
    parser.add_argument("--min-tokens", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200, help="queries of each kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = args.data_dir / "long_documents"
    deb_dir = args.deb_dir or out / "debs"
    debs = sorted(deb_dir.glob("*.deb"))
    if not debs:
        raise SystemExit(f"no .deb in {deb_dir}: `apt-get download {' '.join(PACKAGES)}` there")
    tokenizer, window = default_tokenizer()
    with tempfile.TemporaryDirectory() as unpacked:
        root = Path(unpacked)
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
        documents = render_pages(root)
        copyright_text = (root / "usr/share/doc/manpages/copyright").read_text()
    lengths = [len(e.ids) for e in tokenizer.encode_batch([d.text for d in documents])]
    documents = [d for d, n in zip(documents, lengths) if n >= args.min_tokens]
    log.info("%d pages of at least %d tokens", len(documents), args.min_tokens)
    window_ends = [window_end(tokenizer, d.text, window) for d in documents]
    queries = make_queries(documents, window_ends, args.queries, args.seed)
    write_data(out, documents, queries, copyright_text)
    write_readme(out, debs, documents, queries, args)


def default_tokenizer():  # -> tuple[tokenizers.Tokenizer, int]
    """The default model's tokenizer (no truncation, no special tokens) and how many of a
    text's tokens its first window holds (`max_seq_length` less [CLS] and [SEP])."""
    from long_documents import load_tokenizer

    from semsearch.models.model_folder import resolve_model

    config = resolve_model("default").path / "sentence_bert_config.json"
    return load_tokenizer("default"), int(json.loads(config.read_text())["max_seq_length"]) - 2


def window_end(tokenizer, text: str, window: int) -> int:
    """The character offset where the first `window` tokens of `text` end."""
    offsets = tokenizer.encode(text, add_special_tokens=False).offsets
    return offsets[min(window, len(offsets)) - 1][1] if offsets else 0


def render_pages(root: Path) -> list[Document]:
    """Every man page under `root` rendered to plain text, in sorted order."""
    pages = sorted(
        path
        for path in (root / "usr/share/man").glob("man*/*.gz")
        if not path.is_symlink() and not _is_redirect(path)
    )
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        texts = list(pool.map(render_page, pages))
    documents = []
    for path, text in zip(pages, texts):
        name = path.name.removesuffix(".gz")
        stem, _, section = name.rpartition(".")
        documents.append(Document(f"{path.parent.name}/{name}", f"{stem}({section})", text))
    return documents


def render_page(path: Path) -> str:
    environment = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    shown = subprocess.run(
        ["man", "-l", "--nh", "--nj", "-P", "cat", str(path)],
        capture_output=True,
        env=environment,
        check=True,
    ).stdout
    plain = subprocess.run(["col", "-bx"], input=shown, capture_output=True, check=True).stdout
    lines = [line.rstrip() for line in plain.decode("utf-8").splitlines()]
    return "\n".join(lines).strip("\n") + "\n"


def _is_redirect(path: Path) -> bool:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        return handle.read(300).lstrip().startswith(".so ")


def page_names(document: Document) -> list[str]:
    """The names a page documents: its NAME line's list (`open, openat, creat - ...`) and
    its file's stem, longest first (so `openat` goes before `open`)."""
    names = {document.title.rpartition("(")[0]}
    match = re.search(r"^NAME\n\s+(.+?)\s+[-\u2010\u2212]\s", document.text, re.M | re.S)
    if match:
        names |= {name.strip() for name in match.group(1).split(",") if name.strip()}
    return sorted(names, key=lambda name: (-len(name), name))


def prose_sentences(text: str) -> list[Sentence]:
    """The sentences of `text`'s prose paragraphs outside the skipped sections, with their
    character spans (a paragraph's lines joined; code and tables left out)."""
    sentences, section = [], ""
    for start, end, lines in _paragraphs(text):
        while lines and len(lines[0]) - len(lines[0].lstrip()) <= 3:
            heading = SECTION_HEADING.match(lines[0])  # a section's, or a subsection's
            if heading and not lines[0].startswith(" "):
                section = heading.group(1)
            start += len(lines.pop(0)) + 1
        if not lines or section in SKIPPED_SECTIONS or not section or not _is_prose(lines):
            continue
        joined = " ".join(line.strip() for line in lines)
        sentences += _split_sentences(text, start, end, joined, section)
    return sentences


def _paragraphs(text: str):
    """(start, end, lines) of each run of non-blank lines."""
    for match in re.finditer(r"(?:^[^\n]*\S[^\n]*(?:\n|$))+", text, re.MULTILINE):
        yield match.start(), match.end(), match.group(0).rstrip("\n").split("\n")


def _is_prose(lines: list[str]) -> bool:
    joined = " ".join(line.strip() for line in lines)
    words = joined.split()
    alphabetic = sum(bool(re.fullmatch(r"[A-Za-z][a-z'-]*[,.;:]?", word)) for word in words)
    return len(words) >= 8 and alphabetic / len(words) >= 0.6 and joined.endswith((".", ":"))


def _split_sentences(text: str, start: int, end: int, joined: str, section: str) -> list[Sentence]:
    """`joined`'s sentences, each located back in `text` (between `start` and `end`) by its
    first and last words, which line breaks do not change."""
    found = []
    cursor = start
    for sentence in SENTENCE_END.split(joined):
        words = sentence.split()
        if not words:
            continue
        first = text.find(words[0], cursor, end)
        last = text.find(words[-1], first, end) if first >= 0 else -1
        if first < 0 or last < 0:
            continue
        cursor = last + len(words[-1])
        if len(words) >= MIN_SENTENCE_WORDS:
            found.append(Sentence(sentence, section, first, cursor))
    return found


def keyword_query(sentence: str, names: list[str]) -> str | None:
    """The sentence as keywords: the page's own names removed, stop words and punctuation
    dropped, the first `QUERY_WORDS` distinct words; None when fewer than
    `MIN_QUERY_WORDS` remain."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    for name in names:
        sentence = re.sub(rf"(?<![\w.]){re.escape(name)}(?:\(\d?\w*\))?(?!\w)", " ", sentence)
    words, seen = [], set()
    for word in WORD.findall(sentence):
        key = word.lower()
        if key in ENGLISH_STOP_WORDS or key in seen or len(key) < 2:
            continue
        seen.add(key)
        words.append(word)
    return " ".join(words[:QUERY_WORDS]) if len(words) >= MIN_QUERY_WORDS else None


def make_queries(
    documents: list[Document], window_ends: list[int], per_kind: int, seed: int
) -> list[dict]:
    """Up to `per_kind` queries of each kind (`first_window`, `past_window`), at most one of
    each kind per page, from the pages in a seeded order (see the module's docstring)."""
    normalised = [_normalise(d.text) for d in documents]
    everything = "\x00".join(normalised)  # one string: a sentence's count in all pages at once
    rng = random.Random(seed)
    order = list(range(len(documents)))
    rng.shuffle(order)
    queries: dict[str, list[dict]] = {"first_window": [], "past_window": []}
    for n in order:
        document, limit = documents[n], window_ends[n]
        names = page_names(document)
        first_window_text = _normalise(document.text[:limit])
        sentences = prose_sentences(document.text)
        rng.shuffle(sentences)
        for where in queries:
            if len(queries[where]) >= per_kind:
                continue
            for sentence in sentences:
                if not (
                    sentence.end <= limit if where == "first_window" else sentence.start >= limit
                ):
                    continue
                key = _normalise(sentence.text)
                unique = everything.count(key) == normalised[n].count(key)
                if not unique or (where == "past_window" and key in first_window_text):
                    continue
                query = keyword_query(sentence.text, names)
                if query:
                    queries[where].append(
                        {
                            "query": query,
                            "gold_id": document.id,
                            "where": where,
                            "section": sentence.section,
                            "sentence": sentence.text,
                            "char_start": sentence.start,
                        }
                    )
                    break
    for where, chosen in queries.items():
        log.info("%d %s queries", len(chosen), where)
    return queries["first_window"] + queries["past_window"]


def _normalise(text: str) -> str:
    return " ".join(text.split())


def text_file_name(document_id: str) -> str:
    """`man2/open.2` -> `man2__open.2.txt`: one flat folder, names that stay unique."""
    return document_id.replace("/", "__") + ".txt"


def write_data(
    out: Path, documents: list[Document], queries: list[dict], copyright_text: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    columns = {key: [getattr(d, key) for d in documents] for key in ("id", "title", "text")}
    pq.write_table(pa.table(columns), out / "documents.parquet")
    folder = out / "documents"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for document in documents:
        (folder / text_file_name(document.id)).write_text(document.text, encoding="utf-8")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as handle:
        for query in queries:
            handle.write(json.dumps(query, ensure_ascii=False) + "\n")
    (out / "COPYRIGHT.manpages").write_text(copyright_text, encoding="utf-8")


def write_readme(
    out: Path,
    debs: list[Path],
    documents: list[Document],
    queries: list[dict],
    args: argparse.Namespace,
) -> None:
    """The data's README: provenance, licence, counts, checksums and how queries were made."""
    sums = "\n".join(f"  - `debs/{deb.name}` sha256 {_sha256(deb)}" for deb in debs)
    counts = {
        where: sum(q["where"] == where for q in queries)
        for where in ("first_window", "past_window")
    }
    files = "\n".join(
        f"  - `{name}` sha256 {_sha256(out / name)}"
        for name in ("documents.parquet", "queries.jsonl")
    )
    body = _README.format(
        documents=len(documents),
        min_tokens=args.min_tokens,
        seed=args.seed,
        first=counts["first_window"],
        past=counts["past_window"],
        sums=sums,
        files=files,
        how=__doc__.split("How queries are made: from", 1)[1].strip(),
    )
    (out / "README.md").write_text(body, encoding="utf-8")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_README = """# Long documents: Linux manual pages as plain text, with queries

Made by `benchmarks/prepare_long_documents.py` (semsearch) from the .deb files in `debs/`
with `--min-tokens {min_tokens} --seed {seed}`; rerun it to recreate everything here.

- **Source**: Debian 12 (bookworm, main) packages `manpages` 6.03-2 and `manpages-dev`
  6.03-2 (the Linux man-pages project, sections 2, 3, 4, 5, 7), fetched with
  `apt-get download manpages manpages-dev`:
{sums}
- **Licence**: GPL-2+ (some pages BSD-2-clause or other free licences), per the packages'
  copyright file, copied here as `COPYRIGHT.manpages`. The texts are the pages as `man`
  renders them (`man -l --nh --nj -P cat`, `MANWIDTH=80`, through `col -bx`), unchanged.
- **documents.parquet**: {documents} pages of at least {min_tokens} tokens by the default
  model's tokenizer; columns `id` (`man2/open.2`), `title` (`open(2)`), `text`.
- **documents/**: the same pages, one `.txt` file each (`man2__open.2.txt`).
- **queries.jsonl**: {first} `first_window` and {past} `past_window` queries; fields
  `query`, `gold_id` (a document id), `where`, and for checking `section`, `sentence` (the
  sentence the query was made from) and `char_start` (where it starts in the text).
{files}

## How queries are made

From {how}
"""


if __name__ == "__main__":
    main()
