"""Chunking with the real default tokenizer (on disk, offline) on small generated texts: spans
cover the text, overlap, fit the window with special tokens, give exact offsets; Markdown
keeps headings with their section; bad options are one line; streaming equals the whole."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer

from semsearch.errors import SemsearchError
from semsearch.ingest.chunking import (
    NARROW_LIMIT,
    WIDE_TOKENS_PER_CHAR,
    Chunker,
)
from semsearch.models.model_folder import resolve_model
from semsearch.options import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_TOKENS

WINDOW = 256
WORDS = [
    "the",
    "signal",
    "process",
    "handler",
    "is",
    "delivered",
    "when",
    "a",
    "thread",
    "blocks",
    "its",
    "mask",
    "and",
    "the",
    "kernel",
    "queues",
    "every",
    "pending",
    "real-time",
    "signal",
    "for",
    "one",
    "of",
    "them",
]


@pytest.fixture(scope="module")
def tokenizer_file():
    return resolve_model("default").path / "tokenizer.json"


@pytest.fixture(scope="module")
def chunker(tokenizer_file) -> Chunker:
    """Chunks as long as the window, as much overlap as the tests below measure."""
    return Chunker(tokenizer_file, WINDOW, tokens=WINDOW - 2, overlap=32)


@pytest.fixture(scope="module")
def model_tokenizer(tokenizer_file) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "."


def document(paragraphs: int, seed: int = 0) -> str:
    """Paragraphs of one to six short sentences, separated by blank lines."""
    rng = random.Random(seed)
    return "\n\n".join(
        " ".join(sentence(rng) for _ in range(rng.randint(1, 6))) for _ in range(paragraphs)
    )


def test_a_short_text_is_one_whole_span(chunker) -> None:
    for text in ("", "  A short text.  ", "word " * 200):
        assert chunker.spans(text) == [(0, len(text))]
        assert not chunker.needs_chunking(text)


def test_a_long_text_is_cut_into_spans_that_fit_and_cover_it(chunker, model_tokenizer) -> None:
    text = document(120)
    spans = chunker.spans(text)
    assert chunker.needs_chunking(text) and len(spans) > 5
    for start, end in spans:
        # every chunk fits the window as the model reads it, [CLS] and [SEP] included
        assert len(model_tokenizer.encode(text[start:end])) <= WINDOW
    assert [start for start, _ in spans] == sorted(start for start, _ in spans)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    covered = bytearray(len(text))
    for start, end in spans:
        covered[start:end] = b"\1" * (end - start)
    assert all(covered[i] or text[i].isspace() for i in range(len(text))), "text left out"


def test_chunks_end_at_sentences_and_overlap_by_about_the_tokens_asked(chunker) -> None:
    text = document(120, seed=1)
    spans = chunker.spans(text)
    assert all(text[start:end].endswith(".") for start, end in spans)
    overlaps = [
        chunker.count_tokens(text[start:previous_end]) if previous_end > start else 0
        for (_, previous_end), (start, _) in zip(spans, spans[1:])
    ]
    # whole sentences of up to 32 tokens are shared, none across a paragraph break; a
    # sentence here has up to 15 tokens, so the slack is one sentence
    assert max(overlaps) <= 32
    shared = [tokens for tokens in overlaps if tokens]
    assert len(shared) >= len(overlaps) // 2
    assert sum(shared) / len(shared) >= 32 - 15


def test_no_overlap_when_none_is_asked(tokenizer_file) -> None:
    chunker = Chunker(tokenizer_file, WINDOW, tokens=64, overlap=0)
    spans = chunker.spans(document(30, seed=2))
    assert len(spans) > 5
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_offsets_are_exact_for_non_ascii_text(chunker) -> None:
    rng = random.Random(3)
    words = ["naïve", "Größe", "señal", "中文", "signal", "한국어", "—", "émigré", "🙂"]
    text = " ".join(rng.choice(words) + ("." if rng.random() < 0.1 else "") for _ in range(4000))
    chunks = [text[start:end] for start, end in chunker.spans(text)]
    assert len(chunks) > 5 and all(chunk.strip() for chunk in chunks)
    assert all(chunker.count_tokens(chunk) <= chunker.tokens for chunk in chunks)


def test_markdown_keeps_headings_with_their_section(tokenizer_file) -> None:
    chunker = Chunker(tokenizer_file, WINDOW, tokens=128, overlap=0, markdown=True)
    rng = random.Random(4)
    sections = [
        f"## Section {number}\n\n"
        + "\n\n".join(sentence(rng) + " " + sentence(rng) for _ in range(4))
        for number in range(20)
    ]
    text = "# Manual\n\n" + "\n\n".join(sections)
    spans = chunker.spans(text)
    assert len(spans) >= 10
    for start, end in spans:
        chunk = text[start:end]
        lines = chunk.splitlines()
        assert not lines[-1].startswith("#"), f"a heading cut from its section: {chunk[-60:]!r}"
        # a chunk that holds a heading starts with it: no section's tail before a heading
        headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
        assert headings in ([], [0]) or lines[0].startswith("#")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"tokens": 255}, "--chunk-tokens 255 does not fit the model: use 1 to 254"),
        ({"tokens": 0}, "--chunk-tokens 0"),
        ({"tokens": 64, "overlap": 64}, "--chunk-overlap 64 is out of range: use 0 to 63"),
        ({"overlap": -1}, "--chunk-overlap -1"),
    ],
)
def test_bad_options_are_one_line_errors(tokenizer_file, options, named) -> None:
    with pytest.raises(SemsearchError) as raised:
        Chunker(tokenizer_file, WINDOW, **options)
    assert named in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_tokenizer_is_one_line_error(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="cannot read the tokenizer"):
        Chunker(tmp_path / "tokenizer.json", WINDOW)


def test_the_pre_check_bound_holds_for_the_tokenizer(chunker, model_tokenizer) -> None:
    """Below U+0900 a character is at most one token; elsewhere (Hangul syllables: three
    jamo) at most WIDE_TOKENS_PER_CHAR, measured on the blocks that expand."""
    assert chunker._narrow_tokens_per_char == 1
    wide = [chr(code) for code in (*range(0x0900, 0x1000), *range(0xAC00, 0xD7A4))]
    most = max(
        len(encoding) / 3
        for encoding in model_tokenizer.encode_batch(
            [c * 3 for c in wide], add_special_tokens=False
        )
    )
    assert 1 < most <= WIDE_TOKENS_PER_CHAR
    # a text just at the bound is not tokenised, and is right not to be
    narrow = "".join(
        chr(code) for code in range(0x21, ord(NARROW_LIMIT)) if chr(code).isprintable()
    )
    text = narrow[: chunker.tokens]
    assert chunker.count_tokens(text) <= chunker.tokens and not chunker.needs_chunking(text)
    hangul = "한" * (chunker.tokens // WIDE_TOKENS_PER_CHAR)
    assert chunker.count_tokens(hangul) <= chunker.tokens and not chunker.needs_chunking(hangul)
    # (as separate words: WordPiece makes a word of over 100 characters one [UNK])
    assert chunker.needs_chunking("한 " * (chunker.tokens // 2))


def test_short_texts_are_not_tokenised(chunker, monkeypatch) -> None:
    def refuse(text: str) -> int:
        raise AssertionError("tokenised a text that cannot exceed the window")

    monkeypatch.setattr(chunker, "count_tokens", refuse)
    assert not chunker.needs_chunking("An English sentence of ordinary words. " * 6)
    assert chunker.spans("Größe " * 40) == [(0, 240)]


def test_a_huge_text_is_judged_from_its_head(chunker, monkeypatch) -> None:
    counted: list[int] = []
    count = chunker.count_tokens
    monkeypatch.setattr(
        chunker, "count_tokens", lambda text: counted.append(len(text)) or count(text)
    )
    assert chunker.needs_chunking("word " * 2_000_000)
    assert max(counted) < 10_000


def test_a_text_without_boundaries_is_still_cut_to_fit(chunker) -> None:
    text = "ab-" * 2000  # no sentence, no space; (one word of over 100 characters is one [UNK])
    spans = chunker.spans(text)
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(start <= end for (_, end), (start, _) in zip(spans, spans[1:]))
    assert all(chunker.count_tokens(text[s:e]) <= chunker.tokens for s, e in spans)


def test_by_default_chunks_are_short_but_only_texts_beyond_the_window_must_be_cut(
    tokenizer_file, model_tokenizer
) -> None:
    chunker = Chunker(tokenizer_file, WINDOW)
    assert (chunker.tokens, chunker.overlap) == (DEFAULT_CHUNK_TOKENS, DEFAULT_CHUNK_OVERLAP)
    text = " ".join(f"Sentence number {n} says a little more." for n in range(20))
    tokens = len(model_tokenizer.encode(text, add_special_tokens=False).ids)
    assert DEFAULT_CHUNK_TOKENS < tokens < WINDOW - 2
    assert chunker.needs_chunking(text) and not chunker.exceeds_window(text)
    assert len(chunker.spans(text)) > 1
    assert chunker.exceeds_window(text * 3)


def test_a_markdown_heading_is_never_a_chunk_of_its_own(tokenizer_file) -> None:
    chunker = Chunker(tokenizer_file, WINDOW, markdown=True)
    body = " ".join(f"Sentence {n} of this section says a little more." for n in range(12))
    text = "\n\n".join(f"## Section {n}\n\n{body}" for n in range(4))
    spans = chunker.spans(text)
    chunks = [text[start:end] for start, end in spans]
    assert not [chunk for chunk in chunks if chunk.startswith("#") and "\n" not in chunk]
    headed = [chunk for chunk in chunks if chunk.startswith("## Section")]
    assert len(headed) == 4 and all("Sentence 0" in chunk for chunk in headed)
    assert all(chunker.count_tokens(chunk) <= WINDOW - 2 for chunk in chunks)
