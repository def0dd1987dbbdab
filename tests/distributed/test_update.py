"""`add --engine ray`: the new rows are encoded by the actor pool into the local add's segment."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from distributed.conftest import options, ray_tests, write_corpus

from semsearch.distributed import RayOptions, add_rows_on_ray
from semsearch.ingest.build import build_index
from semsearch.ingest.update import add_rows
from semsearch.store.folders import IndexFolder
from semsearch.store.segment import Segment

pytestmark = [*ray_tests, pytest.mark.usefixtures("local_ray")]


def _segments(folder: IndexFolder) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ids, vectors) of each segment of the current generation."""
    found = []
    for record in folder.manifest().segments:
        segment = Segment(folder.segment_dir(record.name), record)
        found.append(
            (np.concatenate(segment.part_ids), np.concatenate([v for _, v in segment.iter_parts()]))
        )
    return found


@pytest.mark.default_runtime  # `auto` would pick OpenVINO: the actors must run the runtime asked
def test_add_on_ray_writes_the_local_add(tmp_path, tiny_model_dir, tiny_encoder) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 200)
    built = build_index(
        options(corpus, tmp_path / "a", "docs", model=str(tiny_model_dir), index="flat"),
        encoder=tiny_encoder,
    )
    copy = IndexFolder(tmp_path / "b" / "docs")
    shutil.copytree(built.path, copy.path)
    # 50 rows again, with new texts (replaced), and 200 new ones
    more = write_corpus(tmp_path / "more.parquet", 250, seed=5, first_id=150)
    local = add_rows(built, more, tiny_encoder)
    on_ray = add_rows_on_ray(
        copy, more, tiny_encoder, ray_options=RayOptions(workers=2), device="cpu", runtime="torch"
    )
    assert on_ray == local and local.added > 100 and local.replaced > 40
    ours, theirs = _segments(built), _segments(copy)
    assert len(theirs) == len(ours) == 2
    for (local_ids, local_vectors), (ray_ids, ray_vectors) in zip(ours, theirs):
        np.testing.assert_array_equal(ray_ids, local_ids)
        np.testing.assert_allclose(ray_vectors, local_vectors, atol=1e-6)
    assert copy.manifest().rows == built.manifest().rows
