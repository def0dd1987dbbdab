"""Ray test fixtures: a local Ray instance (2 CPUs), corpora of a few hundred texts, helpers.

Every test here is marked `ray` and `slow` (`make test-ray`) and skipped without Ray; the
modules use `ray_tests`, and importing this file does not import Ray.
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

from semsearch.index.build import BuildOptions
from semsearch.index.segment import Segment
from semsearch.index.store import IndexFolder

HAVE_RAY = importlib.util.find_spec("ray") is not None
ray_tests = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed: pip install -e '.[ray]' (make test-ray does)"),
]

WORDS = [
    "guitar", "stage", "cat", "sofa", "kitten", "couch", "market", "shares", "fell", "dropped",
    "week", "folder", "archive", "linux", "recipe", "eggs", "flour", "cake", "oven", "json",
    "parser", "python", "fast", "library", "image", "resize", "photo", "editor", "chess",
    "engine", "backup", "encrypt", "network", "server", "client", "database", "query", "index",
]  # fmt: skip


def texts(count: int, seed: int = 0) -> list[str]:
    """`count` short texts of random words; every 50th is blank (skipped by a build)."""
    rng = random.Random(seed)
    return ["" if i % 50 == 7 else " ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for i in range(count)]


def write_corpus(path: Path, count: int, seed: int = 0, first_id: int = 0) -> Path:
    table = pa.table({"doc_id": [f"d{first_id + i}" for i in range(count)], "text": texts(count, seed),
                      "n": pa.array(range(first_id, first_id + count), pa.int64())})  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=100)
    return path


def options(corpus, out_dir: Path, name: str, **changes) -> BuildOptions:
    return BuildOptions(corpus=corpus, name=name, id_column="doc_id", out_dir=out_dir,
                        show_progress=False, **changes)  # fmt: skip


def only_segment(folder: IndexFolder) -> Segment:
    (record,) = folder.manifest().segments
    return Segment(folder.segment_dir(record.name), record)


def stored(folder: IndexFolder) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 vectors) of a built index, in id order."""
    segment = only_segment(folder)
    vectors = np.concatenate([np.asarray(v, np.float32) for _, v in segment.iter_parts()])
    return np.asarray(segment.ids), vectors


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

