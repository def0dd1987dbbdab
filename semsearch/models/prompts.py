"""Model prompts: the text put before each query or document, chosen as sentence-transformers
chooses it, and prepended in one place.

Why: asymmetric models (e5, bge, gte, nomic) are trained with a prompt before every text
("query: ", "passage: ") and silently lose quality without it. `Prompts.from_config` picks
them from `config_sentence_transformers.json` exactly as sentence-transformers'
`encode_query` and `encode_document` do (version 6). A prompt is prepended before
tokenisation (`with_prompt`), so its tokens count towards `max_length` and are pooled with
the text's; a pooling config with `"include_prompt": false` is refused rather than pooled
differently (`check_include_prompt`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.errors import SemsearchError

ST_CONFIG = "config_sentence_transformers.json"
# sentence-transformers' `SentenceTransformer._default_prompts`: both names always exist.
DEFAULT_PROMPT_NAMES = ("query", "document")
# `encode_document` takes the first of these that the prompts hold.
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")


@dataclass(frozen=True)
class Prompts:
    """The prompt before each query and before each document ("" for none)."""

    query: str = ""
    document: str = ""

    @classmethod
    def from_config(cls, config: dict) -> Prompts:
        """The prompts a `config_sentence_transformers.json` gives `encode_query` and
        `encode_document`, following sentence-transformers' own steps."""
        given = config.get("prompts") or {}
        if not isinstance(given, dict):
            raise SemsearchError(
                f"the prompts in {ST_CONFIG} must be an object of names and texts, not "
                f"{given!r}: fix the file, or pass --query-prompt and --document-prompt"
            )
        named: dict[str, Any] = dict.fromkeys(DEFAULT_PROMPT_NAMES)
        for name, text in given.items():
            if named.get(name) is None:
                named[name] = text
        named = {name: "" if text is None else text for name, text in named.items()}
        query = named["query"]
        document = next(named[name] for name in DOCUMENT_PROMPT_NAMES if name in named)
        if not isinstance(query, str) or not isinstance(document, str):
            raise SemsearchError(
                f"the prompts in {ST_CONFIG} must be strings, not {query!r} and {document!r}: "
                "fix the file, or pass --query-prompt and --document-prompt"
            )
        return cls(query=query, document=document)

    def override(self, query: str | None = None, document: str | None = None) -> Prompts:
        """These prompts with the ones given (not None) in their place; "" means none."""
        return Prompts(
            query=self.query if query is None else query,
            document=self.document if document is None else document,
        )


def read_prompts(folder: Path) -> Prompts:
    """The prompts a model folder declares; none where it has no `config_sentence_transformers.json`."""
    path = folder / ST_CONFIG
    if not path.is_file():
        return Prompts()
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SemsearchError(f"cannot read {path}: {exc}") from exc
    return Prompts.from_config(config if isinstance(config, dict) else {})


def with_prompt(texts: Sequence[str], prompt: str) -> list[str]:
    """`texts` with `prompt` before each one, as sentence-transformers prepends it; the texts
    themselves (as a list) where the prompt is empty. The one place a prompt is applied."""
    if isinstance(texts, str):
        raise TypeError("with_prompt() takes a list of texts; wrap a single text in a list")
    if not prompt:
        return texts if isinstance(texts, list) else list(texts)
    return [prompt + text for text in texts]


def document_prompt(encoder: Any) -> str:
    """The document prompt an encoder was opened with (its `spec`); "" for one without."""
    return getattr(getattr(encoder, "spec", None), "document_prompt", "") or ""


def query_prompt(encoder: Any) -> str:
    """The query prompt an encoder was opened with (its `spec`); "" for one without."""
    return getattr(getattr(encoder, "spec", None), "query_prompt", "") or ""


def encode_queries(encoder: Any, texts: Sequence[str], **options: Any) -> Any:
    """`encoder.encode` of `texts` as queries: after the encoder's query prompt. Symmetric
    tasks (STS, pairs, mining) encode both sides this way, as e5 and bge advise."""
    return encoder.encode(with_prompt(texts, query_prompt(encoder)), **options)


def encode_documents(encoder: Any, texts: Sequence[str], **options: Any) -> Any:
    """`encoder.encode` of `texts` as documents: after the encoder's document prompt."""
    return encoder.encode(with_prompt(texts, document_prompt(encoder)), **options)


class PromptedEncoding:
    """sentence-transformers' `encode_query` and `encode_document`, once for every encoder
    class with `encode` and a `spec`."""

    def encode_query(self, texts: Sequence[str], **options: Any) -> Any:
        """`encode` with the query prompt before each text; `options` are `encode`'s."""
        return encode_queries(self, texts, **options)

    def encode_document(self, texts: Sequence[str], **options: Any) -> Any:
        """`encode` with the document prompt before each text; `options` are `encode`'s."""
        return encode_documents(self, texts, **options)


def check_document_prompt(recorded: str, encoder: Any, index: str) -> None:
    """Refuse an encoder given to add rows to an index whose documents got another prompt:
    the new rows' vectors would not be comparable with the others'."""
    given = document_prompt(encoder)
    if given != recorded:
        raise SemsearchError(
            f"index {index!r} puts {recorded!r} before each document, the encoder given puts "
            f"{given!r}: open it with BiEncoder.for_index(manifest.model), or pass none"
        )


def check_include_prompt(include_prompt: bool, prompts: Prompts, model: str) -> None:
    """Refuse a prompt for a model whose pooling leaves the prompt's tokens out: semsearch
    pools every token, so its vectors would differ from sentence-transformers'."""
    if not include_prompt and (prompts.query or prompts.document):
        raise SemsearchError(
            f"model {model!r} pools without its prompt's tokens (include_prompt false), which "
            "semsearch does not do: pass --query-prompt '' --document-prompt '' to use no prompts"
        )
