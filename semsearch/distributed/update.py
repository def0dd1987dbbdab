"""`semsearch add --engine ray`: an add whose new rows are encoded by a Ray actor pool.

Everything else is the local add (`semsearch.ingest.update.add_rows`): the writer lock, the
upsert by id, the new segment's FAISS index and the new generation; only its `PartsWriter`
runs on the cluster, writing the new segment's parts into the index folder every node sees.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa

from semsearch.distributed.cluster import RayConnection, RayOptions
from semsearch.distributed.encode import EncoderSetup, actor_runtime, encode_held_parts
from semsearch.ingest.parts import sliced_parts
from semsearch.ingest.update import ChangeResult, add_rows
from semsearch.store.folders import IndexFolder
from semsearch.store.manifest import Manifest
from semsearch.store.segment import SegmentWriter


def add_rows_on_ray(
    folder: IndexFolder,
    corpus_path: str | Path,
    encoder=None,
    text_column: str | None = None,
    id_column: str | None = None,
    batch_size: int | None = None,
    ray_options: RayOptions | None = None,
    device: str = "auto",
    convert_types: bool = False,
    runtime: str = "auto",
) -> ChangeResult:
    """`add_rows`, with the new rows encoded on Ray (by GPU actors where `device` allows) on
    `runtime`; `corpus_path` is a local path or a URI (read here, on the driver)."""
    manifest = folder.manifest()
    with RayConnection(ray_options or RayOptions(), device) as connection:
        write_parts = functools.partial(_encode_on_ray, connection, manifest, batch_size, runtime)
        return add_rows(
            folder,
            corpus_path,
            encoder,
            text_column,
            id_column,
            batch_size,
            write_parts,
            convert_types=convert_types,
        )


def _encode_on_ray(
    connection: RayConnection,
    manifest: Manifest,
    batch_size: int | None,
    runtime: str,
    writer: SegmentWriter,
    rows: pa.Table,
    ids: np.ndarray,
) -> None:
    """A `PartsWriter`: cuts the rows into parts here and has the actor pool encode and write
    them (the rows reach it with the corpus's text column renamed to the index's)."""
    from semsearch.models.bi_encoder import BiEncoder

    workers = connection.workers()
    load = functools.partial(
        BiEncoder.for_index,
        manifest.model,
        device=workers.device,
        runtime=actor_runtime(runtime, workers.device),
    )
    fingerprint = manifest.model.fingerprint or ""
    setup = EncoderSetup(load, fingerprint, workers.device, batch_size, workers.threads)
    encode_held_parts(sliced_parts(rows, ids), workers, setup, writer, manifest.text_column)
