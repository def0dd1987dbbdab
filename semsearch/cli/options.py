"""The options several commands share, each defined once as an `Annotated` type, and the
parsing of their NAME=VALUE values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from semsearch.errors import SemsearchError

IndexDir = Annotated[
    Path, typer.Option("--out-dir", "--index-dir", help="Folder that holds the index folders.")
]
IndexOrMostRecent = Annotated[
    str | None,
    typer.Argument(help="Index name or folder (or --index NAME; default: the most recent)."),
]
IndexArgument = Annotated[
    str | None, typer.Argument(help="Index name or folder (or --index NAME).", show_default=False)
]
# Every command that acts on an existing index takes --index NAME, whether or not it also
# takes the index as its argument: one spelling a user can rely on.
IndexOption = Annotated[
    str | None,
    typer.Option(
        "--index", help="Index name or folder (the same as the argument).", show_default=False
    ),
]
Device = Annotated[
    str,
    typer.Option(
        help="auto (CUDA when present), cpu, cuda or cuda:N: where the model runs, and "
        "FAISS's heavy steps too (all of FAISS with the gpu extra)."
    ),
]
FaissDeviceOption = Annotated[
    str,
    typer.Option(
        "--device",
        help="Where FAISS trains, adds and tunes: auto (a GPU when there "
        "is one: all of FAISS with the gpu extra, its heavy steps through torch "
        "without), cpu, cuda or cuda:N.",
    ),
]
EncodeBatch = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        help="Texts per forward pass. Default: 64 on CPU; 256 on a GPU, with batches of long "
        "texts capped at 65,536 tokens.",
        show_default=False,
    ),
]
RuntimeOption = Annotated[
    str,
    typer.Option(
        "--runtime",
        help="What runs the encoder: auto (openvino on a CPU, torch on a GPU), torch, or "
        "openvino (an exported copy, bf16 where the CPU has it natively; checked against torch, "
        "which runs wherever it cannot, with one log line; needs the cpu-runtime extra). "
        "Indexes stay compatible either way.",
    ),
]
QueryPrompt = Annotated[
    str | None,
    typer.Option(
        "--query-prompt",
        help="Text put before each query (e5's 'query: '); default: the model folder's "
        "config_sentence_transformers.json prompt named 'query', or the one the index records; "
        "'' for none.",
        show_default=False,
    ),
]
DocumentPrompt = Annotated[
    str | None,
    typer.Option(
        "--document-prompt",
        help="Text put before each document (e5's 'passage: '); default: the model folder's "
        "prompt named 'document'; '' for none.",
        show_default=False,
    ),
]
Quantize = Annotated[
    str | None,
    typer.Option(
        help="int8: run the encoder's OpenVINO export quantised by NNCF on the CPU (faster "
        "than the default, vectors further from fp32; off unless asked; whatever --runtime "
        "says)."
    ),
]
IdColumn = Annotated[
    str | None, typer.Option(help="Column of unique ids (default: the row number).")
]
ModelOutput = Annotated[Path, typer.Option("--output", "-o", help="The model folder to write.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (lines) for scripts.")]
Columns = Annotated[
    list[str] | None,
    typer.Option(
        "--column",
        help="NAME=FILE_COLUMN: read the objective's column NAME from "
        "FILE_COLUMN (repeatable), e.g. --column sentence1=question.",
    ),
]
ObjectiveOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        help="KEY=VALUE passed to the objective (repeatable; VALUE is read "
        "as JSON when it parses), e.g. --option margin=0.5 --option symmetric=true.",
    ),
]


def parse_assignments(values: list[str] | None, flag: str) -> dict[str, str]:
    """["a=b", ...] -> {"a": "b"}; anything without '=' is one clear error."""
    pairs = {}
    for value in values or []:
        name, equals, target = value.partition("=")
        if not equals or not name.strip() or not target.strip():
            raise SemsearchError(f"{flag} expects NAME=VALUE, got {value!r}")
        pairs[name.strip()] = target.strip()
    return pairs


def parse_options(values: list[str] | None) -> dict[str, Any]:
    """--option values, each VALUE read as JSON (numbers, true/false, lists) or kept as text."""
    options: dict[str, Any] = {}
    for name, text in parse_assignments(values, "--option").items():
        try:
            options[name.replace("-", "_")] = json.loads(text)
        except json.JSONDecodeError:
            options[name.replace("-", "_")] = text
    return options


def chosen_index(argument: str | None, option: str | None) -> str | None:
    """The index a command was given, as its argument or as --index (None: neither); both,
    naming different indexes, is one clear error rather than a guess."""
    if argument is not None and option is not None and _spelling(argument) != _spelling(option):
        raise SemsearchError(
            f"two indexes named: {argument!r} (the argument) and --index {option!r}: give one"
        )
    return option if option is not None else argument


def required_index(argument: str | None, option: str | None, command: str) -> str:
    """The index a command that changes one must be told (it never guesses the most recent)."""
    name = chosen_index(argument, option)
    if name is None:
        raise SemsearchError(f"name the index: semsearch {command} NAME, or --index NAME")
    return name


def _spelling(name: str) -> str:
    """A name or folder as compared: `corpus/` and `corpus` are one index."""
    return name.rstrip("/") or name
