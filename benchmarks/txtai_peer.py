"""txtai as the peer of `semsearch serve`: an index over the same vectors, served by txtai's API.

The txtai index is built from the vectors a semsearch index stores (txtai's `external`
vectors), with the same FAISS structure and nprobe, so both servers search the same data
the same way; txtai encodes its queries with `encode` below, which is sentence-transformers
on the same model folder (what txtai's own `sentence-transformers` method runs).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

MODEL_ENV = "SEMSEARCH_PEER_MODEL"


@lru_cache(maxsize=1)
def _model():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(os.environ[MODEL_ENV], device="cpu")


def encode(texts: list) -> np.ndarray:
    """txtai's transform: texts (or (id, text, tags) rows) -> unit vectors."""
    texts = [row[1] if isinstance(row, tuple) else row for row in texts]
    return _model().encode(texts, batch_size=64, normalize_embeddings=True)


def build_txtai_index(semsearch_folder: Path, out: Path) -> Path:
    """A saved txtai index over the vectors of a semsearch index folder (reused if present)."""
    if (out / "config.json").is_file():
        return out
    from txtai import Embeddings

    # txtai resolves the transform by name only when told to (it imports this module).
    os.environ.setdefault("ALLOW_RESOLVE_TRANSFORM", "True")

    from semsearch.store.folders import IndexFolder

    folder = IndexFolder(semsearch_folder)
    manifest = folder.manifest()
    factory = manifest.index.factory
    if factory.startswith(("Flat", "HNSW")):  # txtai adds with ids, which these need a map for
        factory = f"IDMap,{factory}"
    params = manifest.index.search_params
    config = {
        "method": "external",
        "transform": "txtai_peer.encode",
        "backend": "faiss",
        "content": False,
        "faiss": {
            "components": factory,
            **({"nprobe": params["nprobe"]} if "nprobe" in params else {}),
        },
    }

    def rows():
        for segment in manifest.segments:
            root = semsearch_folder / "segments" / segment.name
            for part in sorted(root.glob("part-*.npy")):
                if part.name.endswith(".ids.npy"):
                    continue
                vectors = np.load(part, mmap_mode="r")
                ids = np.load(part.with_name(part.name.replace(".npy", ".ids.npy")))
                for row_id, vector in zip(ids, vectors):
                    yield int(row_id), np.asarray(vector, dtype=np.float32), None

    embeddings = Embeddings(config)
    embeddings.index(rows())
    embeddings.save(str(out))
    return out
