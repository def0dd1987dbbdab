"""`--where`: a SQL predicate over an index's metadata, evaluated by DuckDB into a row mask.

DuckDB reads the metadata's Parquet part files on disk (only the columns the predicate
names, part after part: a searcher never holds the whole table), parses real SQL
(`license = 'MIT' AND year >= 2020`, `LIKE`, `IN`, `IS NULL`, functions) and names the
column it cannot find. File access is switched off but for those parts.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from semsearch.errors import SemsearchError
from semsearch.store.documents import DOCUMENT_ROW_COLUMN

MAX_EXPRESSION_LENGTH = 2_000


class WhereEvaluator:
    """Evaluates predicates over Parquet files read as one table (their columns united by
    name); safe to share between threads."""

    def __init__(
        self,
        metadata: Sequence[Path | tuple[Path, Path]],
        rows: int | None = None,
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        """`metadata`: each part's Parquet file, paired with its documents table where a
        chunked part keeps its documents' columns apart (`semsearch.store.documents`).
        `rows`: how many rows the files hold, checked against each result. `hidden`: the
        index's internal columns, never named to the user (`store.segment.internal_columns`)."""
        self.metadata = metadata
        self.rows = rows
        self.hidden = hidden
        self._lock = threading.Lock()
        self._connection = None

    def mask(self, expression: str) -> np.ndarray:
        """True for every row of the metadata that satisfies `expression`."""
        check_expression(expression)
        import duckdb  # imported on first use: most commands never filter

        with self._lock:
            relation = self._relation()
            try:
                result = relation.project(f"coalesce(({expression}), false) AS keep")
                table = result.to_arrow_table()
            except duckdb.ParserException:
                raise SemsearchError(syntax_error(expression, self._connection)) from None
            except duckdb.Error as exc:
                raise SemsearchError(self._explain(expression, exc)) from None
        column = table.column("keep")
        if self.rows is not None and len(column) != self.rows:  # a part changed under us
            raise SemsearchError(
                f"--where read {len(column)} rows of metadata, the index holds {self.rows}: "
                "its files changed; reopen the index"
            )
        if not pa.types.is_boolean(column.type):
            raise SemsearchError(
                f"--where {expression!r} gives {column.type} values, not true/false: write a "
                'condition such as "year >= 2020"'
            )
        return column.to_numpy(zero_copy_only=False).astype(bool, copy=False)

    def _relation(self):
        import duckdb

        if self._connection is None:
            connection = duckdb.connect(":memory:")
            if all(isinstance(part, Path | str) for part in self.metadata):
                files = [str(path) for path in self.metadata]
                connection.read_parquet(files, union_by_name=True).create_view("metadata")
                connection.execute("SET allowed_paths = ?", [files])
            else:
                connection.execute(f"CREATE VIEW metadata AS {joined_parts(self.metadata)}")
                files = [str(path) for part in self.metadata for path in _paths(part)]
                connection.execute("SET allowed_paths = ?", [files])
                connection.execute("SET parquet_metadata_cache = true")
            connection.execute("SET enable_external_access = false")
            connection.execute("SET lock_configuration = true")
            self._connection = connection
        return self._connection.table("metadata")

    def _explain(self, expression: str, exc: Exception) -> str:
        message = str(exc).splitlines()[0]
        names = self._connection.table("metadata").columns
        columns = ", ".join(
            name for name in names if not name.startswith("_semsearch_") and name not in self.hidden
        )
        text_column = self._text_compared_with_number(expression, message)
        if text_column is not None:
            return text_column
        missing = re.search(r'Referenced column "([^"]+)" not found', message)
        if missing:
            return (
                f"--where names the column {missing[1]!r}, which the index's metadata does not "
                f"have; its columns are: {columns}"
            )
        return f"--where {expression!r} cannot be evaluated ({message}): check the expression"

    def _text_compared_with_number(self, expression: str, message: str) -> str | None:
        """The line for a text column compared with a number: a CSV column of years with one
        'n/a' is read as text, and DuckDB then asks for "an explicit cast"."""
        if not re.search(r"explicit (type )?cast|Could not convert string", message):
            return None
        relation = self._connection.table("metadata")
        for name, kind in zip(relation.columns, relation.types):
            if str(kind) != "VARCHAR" or name in self.hidden or name.startswith("_semsearch_"):
                continue
            mention = re.compile(rf'(?<![\w"]){re.escape(name)}(?![\w"])|{re.escape(_name(name))}')
            if not mention.search(expression):
                continue
            quoted = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else _name(name)
            found = self._connection.execute(
                f"SELECT {quoted} FROM metadata WHERE {quoted} IS NOT NULL "
                f"AND TRY_CAST({quoted} AS DOUBLE) IS NULL LIMIT 1"
            ).fetchall()
            if not found:
                continue
            cast = mention.sub(f"TRY_CAST({quoted} AS DOUBLE)", expression)
            return (
                f"--where {expression!r}: column {name!r} holds text, not numbers (one of its "
                f"values is {found[0][0]!r}, so the build stored the column as text), and text "
                f"cannot be compared with a number: write {cast!r} (rows whose {name} is not a "
                "number never match), or fix those values and rebuild"
            )
        return None


def joined_parts(parts: Sequence[Path | tuple[Path, Path]]) -> str:
    """A query of every part's rows in order, a chunked part's joined with its documents table
    by each chunk's document row, the parts' columns united by name."""
    import pyarrow.parquet as pq

    selects = []
    for number, part in enumerate(parts):
        if not isinstance(part, tuple):
            selects.append(
                f"SELECT {number} AS __part, file_row_number AS __row, * EXCLUDE (file_row_number) "
                f"FROM read_parquet({_literal(part)}, file_row_number = true)"
            )
            continue
        chunks, documents = part
        chunk_names = [n for n in pq.read_schema(chunks).names if n != DOCUMENT_ROW_COLUMN]
        document_names = [n for n in pq.read_schema(documents).names if n not in chunk_names]
        cells = [f"c.{_name(n)}" for n in chunk_names] + [f"d.{_name(n)}" for n in document_names]
        selects.append(
            f"SELECT {number} AS __part, c.file_row_number AS __row, {', '.join(cells)} "
            f"FROM read_parquet({_literal(chunks)}, file_row_number = true) c "
            f"JOIN read_parquet({_literal(documents)}, file_row_number = true) d "
            f"ON c.{_name(DOCUMENT_ROW_COLUMN)} = d.file_row_number"
        )
    union = " UNION ALL BY NAME ".join(selects)
    return f"SELECT * EXCLUDE (__part, __row) FROM ({union}) ORDER BY __part, __row"


def _paths(part: Path | tuple[Path, Path]) -> tuple[Path, ...]:
    return part if isinstance(part, tuple) else (part,)


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _name(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def syntax_error(expression: str, connection) -> str:
    """The line for an `expression` DuckDB cannot parse, pointing into it as typed: DuckDB's
    message about the wrapped text (`coalesce((...), false)`) names characters the user never
    typed, so the expression is parsed again alone and the position mapped back."""
    try:
        statements = connection.extract_statements(f"SELECT\n{expression}\n")
    except Exception as exc:  # noqa: BLE001 (duckdb.ParserException, or anything it raises)
        return (
            f"--where {expression!r}: {_parser_error(str(exc), expression)}: check the expression"
        )
    if len(statements) > 1:
        return f"--where {expression!r} holds more than one statement: give one condition"
    return f"--where {expression!r} is not a condition DuckDB can read: check the expression"


def _parser_error(message: str, expression: str) -> str:
    """DuckDB's reason ('syntax error at or near "="') and where it is in `expression`
    (counted from 1), from the 'LINE n: text' and caret lines under it, as parsed from
    'SELECT' and the expression from line 2 on."""
    lines = message.splitlines()
    reason = lines[0].removeprefix("Parser Error: ") if lines else "syntax error"
    for number, line in enumerate(lines[:-1]):
        shown = re.match(r"LINE (\d+): (.*)$", line)
        if not shown or "^" not in lines[number + 1]:
            continue
        row = int(shown[1]) - 2
        expression_lines = expression.split("\n")
        if not 0 <= row < len(expression_lines):
            break
        text, caret = shown[2], lines[number + 1].index("^") - len(line) + len(shown[2])
        # A long line is shown cut, '...' at either end: find the part shown in the line.
        lead = 3 if text.startswith("...") else 0
        start = expression_lines[row].find(text[lead:].removesuffix("..."))
        if start < 0:
            break
        position = (
            sum(len(earlier) + 1 for earlier in expression_lines[:row]) + start + caret - lead
        )
        return f"{reason} (character {position + 1})"
    return reason


def check_expression(expression: str) -> None:
    """Refuse what cannot be one predicate before DuckDB sees it."""
    if not expression or not expression.strip():
        raise SemsearchError('--where is empty: give a condition such as "year >= 2020"')
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SemsearchError(
            f"--where is {len(expression)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
