"""`build --engine ray` of long texts: the driver cuts them into chunks as a local build
does, the actor pool encodes them; the index is the local build's."""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed import conftest as support
from ingest.test_chunked_index import write_documents

from semsearch.distributed import build_index_on_ray
from semsearch.distributed.build import RayChunkSource, RaySource, ray_source
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher

pytestmark = [*support.ray_tests, pytest.mark.usefixtures("local_ray")]


def chunked(corpus: Path, model: Path, out: Path) -> BuildOptions:
    return BuildOptions(
        corpus=corpus,
        model=str(model),
        out_dir=out,
        show_progress=False,
        runtime="torch",
        chunking="on",
        chunk_tokens=24,
        chunk_overlap=4,
        target_recall=None,
        part_rows=16,  # several parts, so the pool gets more than one job
    )


def test_a_folder_of_documents_on_ray_is_the_local_chunked_build(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    folder = tmp_path / "docs"
    texts = write_documents(folder)
    local = build_index(chunked(folder, tiny_model_dir, tmp_path / "local"))
    on_ray = build_index_on_ray(chunked(folder, tiny_model_dir, tmp_path / "ray"))
    assert on_ray.manifest().chunks == local.manifest().chunks
    support.assert_same_rows(local, on_ray)
    columns = ["chunk_id", "id", "start", "end", "title", "bytes"]
    assert support.metadata(on_ray, columns).equals(support.metadata(local, columns))
    # The actors kept each document's columns once, as the local build does.
    assert all(record.documents for record in on_ray.manifest().segments)
    hits = Searcher(on_ray).search(["violins"], k=3)[0]
    assert len({hit.id for hit in hits}) == 3
    assert all(texts[hit.id][hit.start : hit.end] == hit.text for hit in hits)


def test_short_texts_on_ray_build_file_by_file_as_before(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from semsearch.distributed.cluster import RayConnection, RayOptions

    corpus = support.write_corpus(tmp_path / "rows.parquet", 40)
    options = support.options(corpus, tmp_path / "out", "rows", model=str(tiny_model_dir))
    with RayConnection(RayOptions(), "cpu") as connection:
        assert type(ray_source(options, connection)) is RaySource
        docs = tmp_path / "docs"
        write_documents(docs)
        assert (
            type(ray_source(chunked(docs, tiny_model_dir, tmp_path), connection)) is RayChunkSource
        )


def test_an_add_on_ray_to_a_chunked_index_is_the_local_add(
    tmp_path: Path, tiny_model_dir: Path, tiny_encoder
) -> None:
    """The actors write the added chunks through the local add's segment writer, so the new
    segment keeps each document's columns once, as the local add's does."""
    import shutil

    from semsearch.distributed import RayOptions, add_rows_on_ray
    from semsearch.ingest.update import add_rows
    from semsearch.store.folders import IndexFolder

    folder = tmp_path / "docs"
    write_documents(folder)
    local = build_index(chunked(folder, tiny_model_dir, tmp_path / "local"))
    copy = IndexFolder(tmp_path / "ray" / local.path.name)
    shutil.copytree(local.path, copy.path)
    (folder / "oceans.md").write_text("# Oceans\n\nOnly one short paragraph now.\n")
    (folder / "bells.md").write_text("# Bells\n\n" + "Bronze bells ring out. " * 40 + "\n")
    added = add_rows(local, folder, tiny_encoder)
    on_ray = add_rows_on_ray(
        copy, folder, tiny_encoder, ray_options=RayOptions(workers=2), device="cpu", runtime="torch"
    )
    assert on_ray == added and (added.added, added.replaced) == (1, 1)  # bells new, oceans changed
    assert added.chunks["added"] > 1  # in chunks: the new document's several
    assert [record.documents for record in copy.manifest().segments] == [True, True]
    support.assert_same_rows(local, copy)
    columns = ["chunk_id", "id", "start", "end", "title", "bytes"]
    assert support.metadata(copy, columns).equals(support.metadata(local, columns))
