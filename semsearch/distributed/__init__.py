"""Build, add and mine on a Ray cluster (`--engine ray`; `pip install -e '.[ray]'`).

The jobs are the local ones with their heavy steps on Ray Data, as reader -> encoder -> writer:

    cluster.py   joining Ray (a local instance, `auto`, or HOST:PORT) and sizing the actor pool
    encode.py    readers cut files into parts; encoder actors (model loaded once) write them
    build.py     `build_index_on_ray`: scan, encode, train once, fill IVF copies, merge
    update.py    `add_rows_on_ray`: an add whose new rows are encoded by the actor pool
    mine.py      `mine_index_on_ray`: blocks of queries mined by actors that read the index;
                 `mine_corpus_on_ray`: the same, on a temporary index the Ray build makes

Importing this package does not import Ray; the first job does, through `require_ray`.
"""

from __future__ import annotations

from semsearch.lazy_exports import lazy_getattr

# Exported names and their modules, imported when first used: a Ray worker that unpickles a
# reader imports `semsearch.distributed.encode` only, not the model's libraries.
_EXPORTS = {
    "RayOptions": ".cluster",
    "build_index_on_ray": ".build",
    "add_rows_on_ray": ".update",
    "mine_corpus_on_ray": ".mine",
    "mine_index_on_ray": ".mine",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
