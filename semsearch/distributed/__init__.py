"""Build, add and mine on a Ray cluster (`--engine ray`; `pip install -e '.[ray]'`).

The jobs are the local ones with their heavy steps on Ray Data. Importing this package does
not import Ray; the first job does, through `require_ray`.
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
