"""Formatting results for people (tables) and for scripts (JSON lines)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from semsearch.search import Hit

TABLE_TEXT_CHARS = 160


def print_json_lines(records: Iterable[dict]) -> None:
    for record in records:
        sys.stdout.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


def print_hits(
    query: str, hits: list[Hit], score_name: str, console: Console, extra: list[str]
) -> None:
    """One table per query: rank, score, id, text (where the index has texts), then the
    `extra` columns asked for."""
    # Texts are data, not rich markup: a "[/]" in a query or a row must print as it is.
    table = Table(title=f"[bold]{escape(query)}[/bold]", title_justify="left", expand=False)
    texts = [hit.text for hit in hits if hit.text is not None]
    for column in ("rank", score_name, "id", *(["text"] if texts else []), *extra):
        table.add_column(column, overflow="fold", justify="right" if column == "rank" else "left")
    for hit in hits:
        cells = [str(hit.rank), f"{hit.score:.4f}", str(hit.id)]
        if texts:
            cells.append(_short(hit.text, TABLE_TEXT_CHARS))
        cells += [_short(hit.metadata.get(key)) for key in extra]
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)


def print_mapping(title: str, values: dict, console: Console) -> None:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in _flatten(values):
        table.add_row(key, str(value))
    console.print(table)


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def _flatten(values: dict, prefix: str = "") -> Iterable[tuple[str, object]]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _short(value: object, limit: int = 60) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
