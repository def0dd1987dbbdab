"""`Index`: the one Python face of an index folder: built, opened, searched and changed.

The command line and the server call the same stages (`ingest/`, `search/`); this class
gathers them for users of the library. Typical use::

    index = Index.build(BuildOptions(corpus="pypi.parquet", id_column="id"))
    index = Index.open("pypi")
    hits = index.search(["fast json"], k=5)     # one list of hits per query text
    index.add(table_or_corpus_file)        # upsert by id: a new generation
    index.delete(ids=["a", "b"])           # or where="license = 'GPL'"
    index.reindex("hnsw")                  # new FAISS structure from the stored vectors
    hits = index.searcher().search(["fast json"], k=5, where="year >= 2020")
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.ingest import maintain, update
from semsearch.ingest.build import build_index
from semsearch.ingest.update import ChangeResult

if TYPE_CHECKING:
    from semsearch.ingest.build_options import BuildOptions
    from semsearch.search.searcher import Hit, Searcher
from semsearch.store.folders import DEFAULT_INDEX_DIR, IndexFolder, find_index
from semsearch.store.manifest import Manifest


class Index:
    """One index folder; every change writes a new generation (see `semsearch.store.folders`)."""

    def __init__(self, folder: IndexFolder) -> None:
        self.folder = folder
        self._searcher: Searcher | None = None

    @classmethod
    def open(cls, name: str | Path, index_dir: Path = DEFAULT_INDEX_DIR) -> Index:
        return cls(find_index(str(name), Path(index_dir)))

    @classmethod
    def build(cls, options: BuildOptions, encoder=None) -> Index:
        """Embed `options.corpus` into a new index folder (what `semsearch build` does)."""
        return cls(build_index(options, encoder))

    @property
    def manifest(self) -> Manifest:
        return self.folder.manifest()

    def generations(self) -> list[Manifest]:
        return [self.folder.manifest(number) for number in self.folder.generations()]

    def history(self) -> list[dict]:
        """Each generation in a line: when it was made, its rows (documents, with `chunks`
        beside them where chunked), and the operation that made it (without the values
        tuning tried)."""
        return [
            {
                "generation": manifest.generation,
                "created_at": manifest.created_at,
                **manifest.counts(),
                "operation": {k: v for k, v in manifest.operation.items() if k != "tried"},
            }
            for manifest in self.generations()
        ]

    def add(
        self,
        rows: pa.Table | str | Path,
        encoder=None,
        batch_size: int | None = None,
        device: str = "auto",
        text_column: str | None = None,
        convert_types: bool = False,
    ) -> ChangeResult:
        """Upsert `rows` (a table or a corpus file) by the index's id column; FAISS adds on
        `device` (`auto`: a GPU when FAISS can use one). `text_column` names the rows' text
        column when it is not the index's; `convert_types` reads values of other types that
        convert without loss (`semsearch.ingest.conform`)."""
        options = dict(
            batch_size=batch_size,
            device=device,
            text_column=text_column,
            convert_types=convert_types,
        )
        if isinstance(rows, pa.Table):
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "rows.parquet"
                pq.write_table(rows, path)
                return update.add_rows(self.folder, path, encoder, **options)
        return update.add_rows(self.folder, rows, encoder, **options)  # a path or a URI

    def delete(self, ids: list | None = None, where: str | None = None) -> ChangeResult:
        return update.delete_rows(
            self.folder, None if ids is None else [str(i) for i in ids], where
        )

    def reindex(
        self,
        index_type: str,
        target_recall: float | None = 0.95,
        memory_budget: int | None = None,
        device: str = "auto",
    ) -> Manifest:
        return maintain.reindex(
            self.folder, index_type, target_recall, memory_budget, device=device
        )

    def compact(self, keep: int = 1, device: str = "auto") -> Manifest:
        return maintain.compact(self.folder, keep, device=device)

    def rollback(self, generation: int) -> Manifest:
        return maintain.rollback(self.folder, generation)

    def searcher(self, encoder=None, at: int | None = None, device: str = "auto") -> Searcher:
        """A searcher of generation `at` (the current one by default); it loads the encoder."""
        from semsearch.search.searcher import Searcher

        return Searcher(self.folder, encoder=encoder, at=at, device=device)

    def search(self, texts: list[str], k: int = 10, **options) -> list[list[Hit]]:
        """The `k` nearest rows of each text, by the current generation; `options` are
        `Searcher.search`'s (`where`, `mode`, ...). The searcher is kept for later calls."""
        if self._searcher is None:
            self._searcher = self.searcher()
        return self._searcher.search(texts, k=k, **options)
