"""`build --engine ray`'s index stage: one segment per worker from one trained structure, the
parts split and put back without loss, and a driver that never gathers ids, vectors or index."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import conftest as support

from semsearch.ann.exact import exact_knn
from semsearch.distributed.segments import SPLIT_FILE, part_ranges, rejoin_parts, split_parts
from semsearch.ingest import build as build_module
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher
from semsearch.store.segment import Segment, SegmentWriter
from semsearch.store.verify import verify_index


def write_parts(folder, parts: int, rows: int = 3) -> list[np.ndarray]:
    writer = SegmentWriter(folder / "segments" / "s000000")
    ids = [np.arange(part * rows, (part + 1) * rows) for part in range(parts)]
    for part, part_ids in enumerate(ids):
        writer.write(
            part, part_ids, np.full((rows, 2), part, np.float32), pa.table({"n": part_ids})
        )
    return ids


def test_split_moves_each_range_into_its_segment_and_rejoin_puts_every_part_back(tmp_path) -> None:
    ids = write_parts(tmp_path, 5)
    ranges = part_ranges(5, 2)
    assert ranges == [(0, 2), (2, 5)]
    assert split_parts(tmp_path, ranges) == ["s000000", "s000001"]
    second = tmp_path / "segments" / "s000001"
    assert SegmentWriter(second).part_count() == 3
    assert np.load(second / "part-00000.ids.npy").tolist() == ids[2].tolist()
    arrow = pa.ipc.open_file(pa.memory_map(str(second / "part-00000.arrow"))).read_all()
    assert arrow.column("n").to_pylist() == ids[2].tolist()  # hits' metadata moves too
    assert SegmentWriter(tmp_path / "segments" / "s000000").part_count() == 2
    (tmp_path / "segments" / "s000000" / "index-g000001.faiss").write_bytes(b"x")  # stage output
    rejoin_parts(tmp_path)  # as a resumed build does
    first = tmp_path / "segments" / "s000000"
    assert SegmentWriter(first).part_count() == 5 and not second.exists()
    assert sorted(path.name for path in first.iterdir() if not path.name.startswith("part-")) == []
    assert not (tmp_path / SPLIT_FILE).exists()
    for part, part_ids in enumerate(ids):
        assert np.load(first / f"part-{part:05d}.ids.npy").tolist() == part_ids.tolist()
        assert (first / f"part-{part:05d}.arrow").is_file()


def own_vectors(path, rows: int = 700, dimension: int = 16) -> np.ndarray:
    vectors = np.random.default_rng(3).standard_normal((rows, dimension)).astype(np.float32)
    emb = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension)
    pq.write_table(
        pa.table({"doc_id": [f"d{i}" for i in range(rows)], "emb": emb, "n": np.arange(rows)}),
        path,
        row_group_size=100,
    )
    return vectors


def own_options(corpus, out_dir, name: str, **changes) -> BuildOptions:
    return BuildOptions(
        corpus=corpus,
        name=name,
        id_column="doc_id",
        model=None,
        vector_column="emb",
        out_dir=out_dir,
        show_progress=False,
        part_rows=64,
        **changes,
    )


def ray_test(function):
    for mark in support.ray_tests:
        function = mark(function)
    return function


@pytest.mark.parametrize("index", ["flat", "IVF8,Flat", "disk"])
@pytest.mark.usefixtures("local_ray")
@ray_test
def test_own_vectors_on_ray_give_the_local_rows_and_exact_top_k_without_the_driver_gathering(
    index, tmp_path, monkeypatch
) -> None:
    from semsearch.distributed import RayOptions, build_index_on_ray

    corpus = tmp_path / "vectors.parquet"
    vectors = own_vectors(corpus)
    local = build_index(own_options(corpus, tmp_path, "local", index=index))

    def gathering(*args, **kwargs):
        raise AssertionError("the driver read every vector or filled an index")

    # The driver never samples, trains, fills or reads the parts (the workers do, in their
    # own processes, where this patch does not reach).
    monkeypatch.setattr(build_module, "trained_index", gathering)
    monkeypatch.setattr(build_module, "add_parts", gathering)
    monkeypatch.setattr(Segment, "iter_parts", gathering)
    monkeypatch.setattr(Segment, "part_vectors", gathering)
    on_ray = build_index_on_ray(
        own_options(corpus, tmp_path, "ray", index=index), RayOptions(workers=2)
    )
    monkeypatch.undo()
    manifest = on_ray.manifest()
    assert len(manifest.segments) == 2 and manifest.rows == 700
    assert manifest.source.vector_column == "emb" and manifest.operation["engine"] == "ray"
    support.assert_same_rows(local, on_ray)
    assert support.metadata(on_ray).equals(support.only_segment(local).metadata())
    assert verify_index(on_ray).status == "ok"  # every file hashed on its worker checks out
    queries = vectors[::35] + 0.01
    # Every list (and, for disk, every candidate re-scored): exact, for the comparison.
    every_list = {} if index == "flat" else {"nprobe": 4096}
    if index == "disk":
        assert set(manifest.index.search_params) == {"nprobe", "oversample"}  # tuned on Ray
        every_list["oversample"] = 256
    hits = Searcher(on_ray).search_vectors(queries, k=10, **every_list)
    prepared = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    _, exact = exact_knn(prepared, [support.stored(local)], 10, "cosine")
    assert [[hit.id for hit in row] for row in hits] == [[f"d{i}" for i in row] for row in exact]
    ours = Searcher(local).search_vectors(queries, k=10, **every_list)
    assert [[hit.id for hit in row] for row in hits] == [[hit.id for hit in row] for row in ours]
