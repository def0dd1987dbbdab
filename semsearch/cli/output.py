"""Formatting results for people (tables) and for scripts (JSON lines)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from semsearch.search.searcher import Hit

TABLE_TEXT_CHARS = 160
NO_RESULTS = "no results"


def print_json_lines(records: Iterable[dict]) -> None:
    for record in records:
        sys.stdout.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


def print_hits(
    query: str, hits: list[Hit], score_name: str, console: Console, extra: list[str]
) -> None:
    """One table per query, under the query: rank, score, id, text, then the `extra` columns
    asked for. Each cell is one line (a text's line breaks become spaces), so that a row is
    one line wherever the output is not cut to a terminal's width."""
    # Texts are data, not rich markup: a "[/]" in a query or a row must print as it is. The
    # query is a line of its own, not the table's title, which wraps at the table's width.
    console.print(Text(_short(query, limit=None), style="bold"))
    if not hits:
        console.print(NO_RESULTS, highlight=False)
        return
    table = Table(expand=False)
    texts = [hit.text for hit in hits if hit.text is not None]  # none in an index of vectors
    passages = hits[0].start is not None  # a chunked index: the passage that matched
    titled = passages and any(hit.metadata.get("title") for hit in hits)
    text_columns = (["title"] if titled else []) + (
        ["passage" if passages else "text"] if texts else []
    )
    for column in ("rank", score_name, "id", *text_columns, *extra):
        table.add_column(column, overflow="fold", justify="right" if column == "rank" else "left")
    for hit in hits:
        cells = [str(hit.rank), f"{hit.score:.4f}", str(hit.id)]
        if titled:
            cells.append(_short(hit.metadata.get("title")))
        if texts:
            cells.append(_short(hit.text, TABLE_TEXT_CHARS))
        cells += [_short(hit.metadata.get(key)) for key in extra]
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)


def say_no_results(query: str) -> None:
    """On stderr, for a query that found nothing when its hits go out as JSON lines (there
    are none on stdout: an empty list of records)."""
    typer.echo(f"{NO_RESULTS} for {json.dumps(_short(query), ensure_ascii=False)}", err=True)


def print_mapping(title: str, values: dict, console: Console) -> None:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in _flatten(values):
        table.add_row(key, str(value))
    console.print(table)


def document_count(counts: dict) -> str:
    """An index's live rows as the user counts them (`Manifest.counts`): '12 documents', or
    on a chunked index '3,198 documents in 6,775 chunks' ('6,775 chunks, documents not
    recorded' where an index written before they were recorded does not say)."""
    rows, chunks = counts.get("rows"), counts.get("chunks")
    if rows is None:
        return f"{chunks:,} chunks, documents not recorded"
    text = f"{rows:,} document" + ("" if rows == 1 else "s")
    return text if chunks is None else f"{text} in {chunks:,} chunks"


def _flatten(values: dict, prefix: str = "") -> Iterable[tuple[str, object]]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _short(value: object, limit: int | None = 60) -> str:
    """`value` as one line (its runs of white space, line breaks too, as one space), cut to
    `limit` characters."""
    text = "" if value is None else " ".join(str(value).split())
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
