"""Long texts cut into overlapping chunks that each fit the model's window, in its own tokens.

The encoder reads a text's first `window` tokens ([CLS] and [SEP] included) and drops the
rest; a chunk of at most `window - 2` tokens is read whole. Chunks end at the largest
semantic boundary that fits (paragraph, then sentence, then word) and give their character
offsets, so a hit can show the passage that matched.

The splitter is semantic-text-splitter (Rust, counting with the model's own tokenizer),
chosen over semchunk by measurement on 212 Debian manual pages (the table is in the commit
that added this module): semchunk splits twice as fast, but its overlap cuts mid-sentence
(83 % against 43 % of chunks end at a sentence) and its chunks hold a fifth fewer tokens,
so 43 % more chunks go through the encoder, which costs far more than the splitting. It
also has a Markdown mode (headings stay with their section). A huge file reaches it in
pieces of about a MiB (`semsearch.io.documents`), each cut on its own.

The cheap pre-check: a WordPiece token covers at least one character of the normalised
text, and BERT's normaliser (lower case, accents stripped by NFD) maps each character below
U+0900 to at most one character, but a Hangul syllable to three jamo (three tokens; measured
over every code point with the default tokenizer: at most 3 tokens per character). So a
text of at most `tokens` characters, all below U+0900, or of at most `tokens / 4` characters
of any kind, is never tokenised.
"""

from __future__ import annotations

import math
from importlib.metadata import version
from pathlib import Path

from tokenizers import Tokenizer

from semsearch.errors import SemsearchError, one_line
from semsearch.options import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_TOKENS

# Characters below this code point are never more than one token each (checked per tokenizer).
NARROW_LIMIT = "\u0900"
# Tokens a character of any kind may become: 3 for BERT's Hangul jamo, 4 for byte-level BPE.
WIDE_TOKENS_PER_CHAR = 4
# needs_chunking tokenises at most this many characters per token of budget first.
PROBE_CHARS_PER_TOKEN = 16


class Chunker:
    """Cuts texts into spans of at most `tokens` tokens of `tokenizer_file`'s tokenizer,
    consecutive ones sharing up to `overlap` tokens, for a model of `window` tokens."""

    def __init__(
        self,
        tokenizer_file: Path | str,
        window: int,
        tokens: int | None = None,
        overlap: int = DEFAULT_CHUNK_OVERLAP,
        markdown: bool = False,
    ) -> None:
        self._tokenizer = _load_tokenizer(tokenizer_file)
        most = window - self._tokenizer.num_special_tokens_to_add(False)
        self.most = most  # the tokens of a text the model reads, its special tokens apart
        self.tokens = min(DEFAULT_CHUNK_TOKENS, most) if tokens is None else tokens
        if not 1 <= self.tokens <= most:
            raise SemsearchError(
                f"--chunk-tokens {self.tokens} does not fit the model: use 1 to {most} "
                f"(its window of {window} tokens less its special tokens)"
            )
        if not 0 <= overlap < self.tokens:
            raise SemsearchError(
                f"--chunk-overlap {overlap} is out of range: use 0 to {self.tokens - 1} "
                f"(less than --chunk-tokens {self.tokens})"
            )
        self.window, self.overlap, self.markdown = window, overlap, markdown
        self._splitter = None  # made on the first long text (a corpus of short ones needs none)
        self._narrow_tokens_per_char = _narrow_tokens_per_char(self._tokenizer)
        # No text of fewer characters than this is longer than the window, whatever its script.
        self.shortest_long_text = most // WIDE_TOKENS_PER_CHAR + 1

    def count_tokens(self, text: str) -> int:
        """The tokens of `text` without the special tokens the model adds."""
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def needs_chunking(self, text: str) -> bool:
        """Whether `text` has more tokens than a chunk holds; short texts are not tokenised."""
        return self._longer_than(text, self.tokens)

    def exceeds_window(self, text: str) -> bool:
        """Whether the model would cut `text` (`--chunking auto` chunks only then)."""
        return self._longer_than(text, self.most)

    def _longer_than(self, text: str, limit: int) -> bool:
        size = len(text)
        if size * WIDE_TOKENS_PER_CHAR <= limit:
            return False
        if size * self._narrow_tokens_per_char <= limit and max(text) < NARROW_LIMIT:
            return False
        probe = PROBE_CHARS_PER_TOKEN * limit
        if size > probe:
            # A prefix cut at whitespace has no more tokens than the whole text.
            cut = max(text.rfind(" ", 0, probe), text.rfind("\n", 0, probe))
            if cut > 0 and self.count_tokens(text[:cut]) > limit:
                return True
        return self.count_tokens(text) > limit

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character [start, end) of each chunk, in order; a text that fits is one span, whole.

        Whitespace between chunks belongs to none of them.
        """
        if not self.needs_chunking(text):
            return [(0, len(text))]
        return self._split(text)

    @property
    def splitter(self) -> str:
        """The library that cuts the chunks, with its version (what the manifest records)."""
        return f"semantic-text-splitter {version('semantic-text-splitter')}"

    def _split(self, text: str) -> list[tuple[int, int]]:
        if self._splitter is None:
            # Imported here: a build whose texts all fit the window (a GPU machine's image
            # lacks the library) never needs it.
            from semantic_text_splitter import MarkdownSplitter, TextSplitter

            kind = MarkdownSplitter if self.markdown else TextSplitter
            self._splitter = kind.from_huggingface_tokenizer(
                self._tokenizer, self.tokens, overlap=self.overlap
            )
        chunks = self._splitter.chunk_indices(text)
        spans = [(start, start + len(chunk)) for start, chunk in chunks]
        return self._headings_joined(text, spans) if self.markdown else spans

    def _headings_joined(self, text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """A Markdown heading that came out as a chunk of its own joins the chunk after it (its
        section's first), while the two fit the window: a lone heading says little, and the
        section's text is what a reader needs to see beside it."""
        joined: list[tuple[int, int]] = []
        index = 0
        while index < len(spans):
            start, end = spans[index]
            lone_heading = text[start] == "#" and "\n" not in text[start:end].strip()
            if lone_heading and index + 1 < len(spans):
                following_end = spans[index + 1][1]
                if self.count_tokens(text[start:following_end]) <= self.most:
                    joined.append((start, following_end))
                    index += 2
                    continue
            joined.append((start, end))
            index += 1
        return joined


def _load_tokenizer(tokenizer_file: Path | str) -> Tokenizer:
    """The tokenizer without the padding and truncation its file may set (MiniLM's pads and
    cuts every text at 128 tokens), so counts are the text's own."""
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # tokenizers raises plain Exceptions
        raise SemsearchError(
            f"cannot read the tokenizer {tokenizer_file}: {one_line(exc)}; give a model "
            "folder's tokenizer.json"
        ) from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _narrow_tokens_per_char(tokenizer: Tokenizer) -> int:
    """The most tokens any character below NARROW_LIMIT becomes, repeated inside a word (1
    for BERT's WordPiece): measured on the tokenizer, not assumed, in a few milliseconds."""
    chars = [chr(code) for code in range(ord(NARROW_LIMIT))]
    encodings = tokenizer.encode_batch([char * 3 for char in chars], add_special_tokens=False)
    return max(1, *(math.ceil(len(encoding) / 3) for encoding in encodings))
