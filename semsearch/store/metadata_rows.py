"""Metadata rows by row number, as Python dicts: what every search hit carries.

Why: slicing the table once per hit costs about 15 microseconds (a Table built for each);
finding each row's record batch with one `searchsorted` and reading its cells costs less
than half (0.081 against 0.037 ms per 10 hits on 841k rows of PyPI metadata).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


class MetadataRows:
    """Rows of `table` (the `columns` given, in table order) by row number."""

    def __init__(self, table: pa.Table, columns: Sequence[str] | None = None) -> None:
        wanted = set(table.column_names if columns is None else columns)
        self.names = [name for name in table.column_names if name in wanted]
        batches = table.select(self.names).to_batches()  # zero-copy views, columns aligned
        self._starts = np.cumsum([0, *(batch.num_rows for batch in batches)], dtype=np.int64)
        self._cells = [[batch.column(i) for batch in batches] for i in range(len(self.names))]

    def __len__(self) -> int:
        return int(self._starts[-1])

    def rows(
        self, numbers: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> list[dict]:
        """One dict per row number (each in [0, len)), in the order given; of `columns` only,
        when given."""
        numbers = np.asarray(numbers, dtype=np.int64)
        if len(numbers) and (numbers.min() < 0 or numbers.max() >= len(self)):
            raise IndexError(f"row numbers must lie in [0, {len(self)})")
        batch_of = np.searchsorted(self._starts, numbers, side="right") - 1
        offsets = (numbers - self._starts[batch_of]).tolist()
        batch_of = batch_of.tolist()
        records: list[dict] = [{} for _ in offsets]
        for name, arrays in zip(self.names, self._cells):
            if columns is not None and name not in columns:
                continue
            for record, batch, offset in zip(records, batch_of, offsets):
                record[name] = arrays[batch][offset].as_py()
        return records
