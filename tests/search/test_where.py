"""`--where` over the Parquet parts on disk: the rows a whole table gives, on many parts."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from store.test_metadata_parts import build, typed_rows

from semsearch.errors import SemsearchError
from semsearch.ingest.update import add_rows
from semsearch.search import snapshot as snapshot_module
from semsearch.search.snapshot import open_snapshot
from semsearch.search.where import WhereEvaluator

EXPRESSIONS = [
    "year >= 2020",
    "score IS NULL",
    "name LIKE 'name 1%'",
    "list_contains(tags, 't1')",
    "seen < TIMESTAMP '2020-01-02 03:00:00'",
    "key IN ('k3', 'k104', 'k39')",
    "colour = 'red'",  # only the added segment has it: null (false) before
]


def test_filters_over_the_parts_equal_filters_over_the_whole_table(tmp_path) -> None:
    folder = build(tmp_path, rows=40, part_rows=3)
    added = typed_rows(9, first=100).append_column("colour", pa.array(["red", "blue", None] * 3))
    pq.write_table(added, tmp_path / "added.parquet")
    add_rows(folder, tmp_path / "added.parquet")
    snapshot = open_snapshot(folder)
    assert sum(record.parts for record in snapshot.manifest.segments) == 14 + 1
    pq.write_table(snapshot.hit_metadata.table(), tmp_path / "whole.parquet")
    whole = WhereEvaluator([tmp_path / "whole.parquet"])
    for expression in EXPRESSIONS:
        mask = snapshot.where_mask(expression)
        assert mask.tolist() == whole.mask(expression).tolist(), expression
        assert 0 < mask.sum() < len(mask), expression
    keys = snapshot.hit_metadata.table().column("key").to_pylist()
    assert [keys[row] for row in np.flatnonzero(snapshot.where_mask("colour = 'red'"))] == [
        "k100",
        "k103",
        "k106",
    ]


def test_a_predicate_reads_no_other_file(tmp_path) -> None:
    snapshot = open_snapshot(build(tmp_path))
    with pytest.raises(SemsearchError, match="cannot be evaluated"):
        snapshot.where_mask("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0")
    with pytest.raises(SemsearchError, match="column 'colour'.*columns are: key, year, name"):
        snapshot.where_mask("colour = 'red'")


def test_cached_masks_are_bounded_in_bytes(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(snapshot_module, "WHERE_CACHE_BYTES", 100)  # 2 masks of 40 rows
    snapshot = open_snapshot(build(tmp_path))
    for year in range(2000, 2010):
        snapshot.where_mask(f"year > {year}")
    assert len(snapshot._where_cache) == 2
    assert snapshot.where_mask("year > 2009").sum() == 30


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("year >= ", 'syntax error at or near ">=" (character 6)'),
        ("(year = 1", 'syntax error at or near "1" (character 9)'),
        ("year = 1)", 'syntax error at or near ")" (character 9)'),
        ("year > 1 OR", 'syntax error at or near "OR" (character 10)'),
        ("name = 'a", "unterminated string literal (character 8)"),
        ("year = 1\n  AND = 2", 'syntax error at or near "=" (character 16)'),
        ("name = 'ééé' = = 1", 'syntax error at or near "=" (character 16)'),
        ("year = 1; SELECT 2", "holds more than one statement: give one condition"),
    ],
)
def test_a_syntax_error_points_into_the_expression_as_typed(expression, message, tmp_path) -> None:
    """The expression runs wrapped (`coalesce((...), false) AS keep`): DuckDB's own message
    named a ")" or "AS" the user never typed."""
    pq.write_table(pa.table({"year": [2020, 2021], "name": ["a", "b"]}), tmp_path / "m.parquet")
    where = WhereEvaluator([tmp_path / "m.parquet"])
    with pytest.raises(SemsearchError) as refused:
        where.mask(expression)
    line = str(refused.value)
    assert line.startswith(f"--where {expression!r}") and message in line, line


def test_a_number_column_read_as_text_says_which_column_and_how_to_filter_it(
    tiny_model_dir, tmp_path
) -> None:
    """A CSV column of years with one 'n/a' is stored as text: the filter says so in one line,
    with the value and a cast that works, not DuckDB's "an explicit cast is required"."""
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    corpus = tmp_path / "years.csv"
    corpus.write_text(
        "id,text,year\n1,alpha text,2019\n2,beta text,2021\n3,gamma text,n/a\n4,delta,2022\n"
    )
    options = BuildOptions(
        corpus=corpus, model=str(tiny_model_dir), out_dir=tmp_path / "i", show_progress=False
    )
    snapshot = open_snapshot(build_index(options))
    for expression in ("year >= 2020", "year = 2020", "year BETWEEN 2019 AND 2021"):
        with pytest.raises(SemsearchError) as failed:
            snapshot.where_mask(expression)
        message = str(failed.value)
        assert "\n" not in message and "explicit cast" not in message
        assert "column 'year' holds text" in message and "'n/a'" in message, message
        fixed = re.search(r"write '([^']+)'", message)[1]
        assert fixed == expression.replace("year", "TRY_CAST(year AS DOUBLE)", 1)
        snapshot.where_mask(fixed)  # evaluates
    assert snapshot.where_mask("TRY_CAST(year AS DOUBLE) >= 2020").tolist() == [
        False,
        True,
        False,
        True,
    ]
