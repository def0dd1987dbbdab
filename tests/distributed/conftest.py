"""Ray test fixtures: a local Ray instance (2 CPUs), corpora of a few hundred texts, and the
checks the modules share (same rows as a local build, every row once, top-10, recall@10).

Every test here that starts Ray is marked `ray` and `slow` (`make test-ray`) and skipped
without Ray: those modules use `ray_tests` (test_workers.py needs no Ray and runs with the
quick suite); importing this file does not import Ray.
"""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.ann.exact import exact_knn
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher
from semsearch.store.folders import IndexFolder
from semsearch.store.segment import Segment

HAVE_RAY = importlib.util.find_spec("ray") is not None
ray_tests = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(
        not HAVE_RAY, reason="Ray is not installed: pip install -e '.[ray]' (make test-ray does)"
    ),
]

WORDS = [
    "guitar",
    "stage",
    "cat",
    "sofa",
    "kitten",
    "couch",
    "market",
    "shares",
    "fell",
    "dropped",
    "week",
    "folder",
    "archive",
    "linux",
    "recipe",
    "eggs",
    "flour",
    "cake",
    "oven",
    "json",
    "parser",
    "python",
    "fast",
    "library",
    "image",
    "resize",
    "photo",
    "editor",
    "chess",
    "engine",
    "backup",
    "encrypt",
    "network",
    "server",
    "client",
    "database",
    "query",
    "index",
]


def texts(count: int, seed: int = 0) -> list[str]:
    """`count` short texts of random words; every 50th is blank (skipped by a build)."""
    rng = random.Random(seed)
    return [
        "" if i % 50 == 7 else " ".join(rng.choices(WORDS, k=rng.randint(3, 9)))
        for i in range(count)
    ]


def write_corpus(path: Path, count: int, seed: int = 0, first_id: int = 0) -> Path:
    table = pa.table(
        {
            "doc_id": [f"d{first_id + i}" for i in range(count)],
            "text": texts(count, seed),
            "n": pa.array(range(first_id, first_id + count), pa.int64()),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=100)
    return path


def options(corpus, out_dir: Path, name: str, **changes) -> BuildOptions:
    return BuildOptions(
        corpus=corpus,
        name=name,
        id_column="doc_id",
        out_dir=out_dir,
        show_progress=False,
        **changes,
    )


def only_segment(folder: IndexFolder) -> Segment:
    (record,) = folder.manifest().segments
    return Segment(folder.segment_dir(record.name), record)


def segments(folder: IndexFolder) -> list[Segment]:
    """Every segment of the index, in order (a Ray build makes one per worker)."""
    return [Segment(folder.segment_dir(r.name), r) for r in folder.manifest().segments]


def stored(folder: IndexFolder) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 vectors) of a built index, in id order, over all its segments."""
    parts = [(ids, v) for segment in segments(folder) for ids, v in segment.iter_parts()]
    ids = np.concatenate([np.asarray(ids) for ids, _ in parts])
    return ids, np.concatenate([np.asarray(v, np.float32) for _, v in parts])


def metadata(folder: IndexFolder, columns: list[str] | None = None) -> pa.Table:
    return pa.concat_tables([segment.metadata(columns) for segment in segments(folder)])


def assert_same_rows(local: IndexFolder, on_ray: IndexFolder) -> None:
    """Both builds stored the same ids, in order, and the same vectors (to float error)."""
    local_ids, local_vectors = stored(local)
    ray_ids, ray_vectors = stored(on_ray)
    np.testing.assert_array_equal(ray_ids, local_ids)
    np.testing.assert_allclose(ray_vectors, local_vectors, atol=1e-6)


def assert_every_row_once(folder: IndexFolder, rows: int) -> None:
    """The index of `write_corpus(…, rows)` holds each row with a text once, in order."""
    expected = [i for i in range(rows) if i % 50 != 7]
    assert stored(folder)[0].tolist() == expected
    assert metadata(folder, ["doc_id"]).column("doc_id").to_pylist() == [f"d{i}" for i in expected]
    assert folder.manifest().rows == len(expected)


QUERIES = ["cat on the sofa", "fast json parser", "encrypt a backup", "resize a photo"]


def top10(folder: IndexFolder, encoder, queries: list[str] = QUERIES) -> list[list[object]]:
    hits = Searcher(folder, encoder=encoder).search(queries, k=10)
    return [[hit.id for hit in query_hits] for query_hits in hits]


def search_segments(folder: IndexFolder, queries: np.ndarray, k: int = 10) -> np.ndarray:
    """Ids of the top `k` over every segment's index (its tuned parameters), merged by score."""
    params = folder.manifest().index.search_params
    found = [
        segment.read_index("cosine").search(queries, k, params) for segment in segments(folder)
    ]
    scores = np.concatenate([s for s, _ in found], axis=1)
    ids = np.concatenate([i for _, i in found], axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(ids, order, axis=1)


def recall_at_10(folder: IndexFolder, queries: np.ndarray) -> float:
    """Recall@10 of the index's own search (its tuned parameters) against exact search."""
    found = search_segments(folder, queries)
    parts = [part for segment in segments(folder) for part in segment.iter_parts()]
    _, exact = exact_knn(queries, parts, 10, "cosine")
    assert Searcher(folder, model_check=False, lexical_only=True).snapshot.live_rows == len(
        stored(folder)[0]
    )
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)]))


def encoder_actors() -> list[int]:
    """Process ids of the encoder actors that have loaded their model (all nodes are local)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    title = handle.read().split(b"\0")[0]
            except OSError:
                continue
            if b"MapBatches(PartEncoder)" in title and not title.endswith(b"__init__"):
                pids.append(int(name))
    return pids


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A Ray instance of 2 CPUs for the module; the library joins it instead of starting one."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
