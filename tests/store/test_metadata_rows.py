import datetime

import numpy as np
import pyarrow as pa
import pytest

from semsearch.store.metadata_rows import MetadataRows


def chunked_table() -> pa.Table:
    """Three tables of different lengths and types, concatenated: rows lie in several chunks."""
    parts = []
    for start, count in ((0, 5), (5, 1), (6, 7)):
        numbers = list(range(start, start + count))
        parts.append(
            pa.table(
                {
                    "name": [f"row {n}" for n in numbers],
                    "count": [n * 10 if n % 3 else None for n in numbers],
                    "when": [datetime.date(2020, 1, 1 + n) for n in numbers],
                    "tags": [[f"t{n}"] * (n % 3) for n in numbers],
                }
            )
        )
    return pa.concat_tables(parts)


def test_rows_match_arrow_own_conversion_across_chunks():
    table = chunked_table()
    assert table.column("name").num_chunks == 3
    rows = MetadataRows(table)
    wanted = np.array([12, 0, 5, 6, 4, 5])
    assert rows.rows(wanted) == [table.slice(int(n), 1).to_pylist()[0] for n in wanted]


def test_only_the_columns_asked_in_table_order():
    rows = MetadataRows(chunked_table(), ("tags", "name"))
    assert list(rows.rows([7])[0]) == ["name", "tags"]


def test_no_rows_and_out_of_range():
    rows = MetadataRows(chunked_table())
    assert rows.rows(np.array([], dtype=np.int64)) == []
    with pytest.raises(IndexError):
        rows.rows([13])
    with pytest.raises(IndexError):
        rows.rows([-1])
