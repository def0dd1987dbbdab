"""`build --engine ray` on a local Ray instance: the local build's index, resumable, fault-tolerant."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from distributed.conftest import (
    encoder_actors,
    only_segment,
    options,
    ray_tests,
    stored,
    write_corpus,
)

from semsearch.distributed import RayOptions, build_index_on_ray
from semsearch.index import build as build_module
from semsearch.index.build import build_index
from semsearch.index.store import IndexFolder, partial_folder
from semsearch.index.vector_index import exact_knn, prepare_vectors
from semsearch.search import Searcher

pytestmark = [*ray_tests, pytest.mark.usefixtures("local_ray")]


def _top10(folder: IndexFolder, encoder, queries: list[str]) -> list[list[object]]:
    hits = Searcher(folder, encoder=encoder).search(queries, k=10)
    return [[hit.id for hit in query_hits] for query_hits in hits]


def test_flat_build_on_ray_is_the_local_build(tmp_path, tiny_model_dir, tiny_encoder) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 300)
    model = {"model": str(tiny_model_dir), "part_rows": 64, "index": "flat"}
    local = build_index(options(corpus, tmp_path, "local", **model), encoder=tiny_encoder)
    on_ray = build_index_on_ray(options(corpus, tmp_path, "ray", **model), RayOptions(workers=2))
    ours, theirs = local.manifest(), on_ray.manifest()
    assert (theirs.rows, theirs.next_id, theirs.source.sha256) == (ours.rows, ours.next_id, ours.source.sha256)
    assert theirs.segments[0].parts == ours.segments[0].parts == 5
    assert theirs.operation["engine"] == "ray" and theirs.operation["workers"] == 2
    local_ids, local_vectors = stored(local)
    ray_ids, ray_vectors = stored(on_ray)
    np.testing.assert_array_equal(ray_ids, local_ids)
    np.testing.assert_allclose(ray_vectors, local_vectors, atol=1e-6)
    assert only_segment(on_ray).metadata().equals(only_segment(local).metadata())
    queries = ["cat on the sofa", "fast json parser", "encrypt a backup", "resize a photo"]
    assert _top10(on_ray, tiny_encoder, queries) == _top10(local, tiny_encoder, queries)


def _recall_at_10(folder: IndexFolder, queries: np.ndarray) -> float:
    searcher = Searcher(folder, model_check=False, lexical_only=True)
    segment = only_segment(folder)
    index = segment.read_index("cosine")
    _, found = index.search(queries, 10, folder.manifest().index.search_params)
    _, exact = exact_knn(queries, segment.iter_parts(), 10, "cosine")
    assert searcher.snapshot.live_rows == len(segment.ids)
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)]))


def test_ivf_build_on_ray_fills_copies_and_keeps_the_recall(tmp_path, tiny_model_dir, tiny_encoder) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 1500)
    model = {"model": str(tiny_model_dir), "part_rows": 128, "index": "IVF16,Flat"}
    local = build_index(options(corpus, tmp_path, "local", **model), encoder=tiny_encoder)
    on_ray = build_index_on_ray(options(corpus, tmp_path, "ray", **model), RayOptions(workers=2))
    assert on_ray.manifest().index.factory == "IVF16,Flat"
    assert on_ray.manifest().index.search_params == local.manifest().index.search_params
    assert not (on_ray.path / ".fill").exists()
    queries = prepare_vectors(tiny_encoder.encode([f"{w} and more" for w in ("cat", "json", "chess", "eggs")] * 5), "cosine")
    assert abs(_recall_at_10(on_ray, queries) - _recall_at_10(local, queries)) <= 0.005


def test_a_folder_of_files_resumes_from_the_parts_written(tmp_path, tiny_model_dir, tiny_encoder,
                                                          monkeypatch) -> None:  # fmt: skip
    folder = tmp_path / "data"
    files = ((0, 130), (130, 120), (250, 110))  # (first row, rows)
    for number, (first, rows) in enumerate(files):
        write_corpus(folder / f"part-{number}.parquet", rows, seed=number, first_id=first)
    (folder / "_SUCCESS").touch()
    settings = {"model": str(tiny_model_dir), "part_rows": 50, "index": "flat"}
    local = build_index(options(folder, tmp_path / "local", None, **settings), encoder=tiny_encoder)
    assert local.name == "data" and local.manifest().operation["files"] == 3

    def stop(*args, **kwargs):
        raise KeyboardInterrupt  # the driver killed after encoding, before the index is filled

    monkeypatch.setattr(build_module, "trained_index", stop)
    with pytest.raises(KeyboardInterrupt):
        build_index_on_ray(options(folder, tmp_path / "ray", None, **settings), RayOptions(workers=2))
    monkeypatch.undo()
    parts = partial_folder(tmp_path / "ray", "data") / "segments" / "s000000"
    vectors = sorted(parts.glob("part-*[0-9].npy"))
    assert len(vectors) == 9  # 3 + 3 + 3 parts of 50 rows: a part never spans two files
    for path in vectors[2:5]:  # as if killed while these were being encoded
        path.unlink()
    kept = {path.name: path.stat().st_mtime_ns for path in vectors[:2] + vectors[5:]}
    on_ray = build_index_on_ray(options(folder, tmp_path / "ray", None, **settings), RayOptions(workers=2))
    segment_dir = only_segment(on_ray).folder
    assert {name: (segment_dir / name).stat().st_mtime_ns for name in kept} == kept
    local_ids, local_vectors = stored(local)
    ray_ids, ray_vectors = stored(on_ray)
    np.testing.assert_array_equal(ray_ids, local_ids)
    np.testing.assert_allclose(ray_vectors, local_vectors, atol=1e-6)
    blank = {first + row for first, rows in files for row in range(rows) if row % 50 == 7}
    assert ray_ids.tolist() == [i for i in range(360) if i not in blank]
    assert on_ray.manifest().next_id == 360


def test_a_worker_killed_mid_job_loses_and_duplicates_no_row(tmp_path, tiny_model_dir) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 3000)
    settings = {"model": str(tiny_model_dir), "part_rows": 20, "index": "flat"}
    parts = partial_folder(tmp_path, "big") / "segments" / "s000000"
    killed: list[int] = []

    def kill_an_encoder() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            if parts.is_dir() and len(list(parts.glob("part-*[0-9].npy"))) >= 2 and encoder_actors():
                pid = encoder_actors()[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.01)

    killer = threading.Thread(target=kill_an_encoder, daemon=True)
    killer.start()
    folder = build_index_on_ray(options(corpus, tmp_path, "big", **settings), RayOptions(workers=2))
    killer.join(timeout=1)
    assert killed, "the job ended before a worker could be killed"
    ids = only_segment(folder).ids
    expected = [i for i in range(3000) if i % 50 != 7]
    assert ids.tolist() == expected  # every row once, in order
    metadata = only_segment(folder).metadata(["doc_id"])
    assert metadata.column("doc_id").to_pylist() == [f"d{i}" for i in expected]
    assert folder.manifest().rows == len(expected) == pq.read_metadata(corpus).num_rows - 60
