"""Rebuild an index folder with another FAISS structure from the vectors it already stores.

Why: comparing index types on 841,708 PyPI vectors should not mean encoding them again
(70 minutes on this CPU). The source must keep exact vectors (Flat storage); the new
folder gets the same metadata and model, the new structure, and a fresh tuning to the
recall target, and is written beside the source under a temporary name, then renamed.

    python benchmarks/reindex.py --source pypi --factory HNSW32,Flat --name pypi-hnsw --threads 2 \
        --search-param efSearch=256
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from datetime import datetime, timezone

import faiss
from common import (
    DEFAULT_OUT_DIR,
    PeakRss,
    add_threads_option,
    args_dict,
    base_parser,
    environment,
    set_threads,
    write_json,
)

from semsearch.index.build import DEFAULT_TARGET_RECALL
from semsearch.index.factory import create_index
from semsearch.index.retune import retune_folder
from semsearch.index.store import IndexFolder
from semsearch.index.tune import stored_vectors


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="index folder name to read vectors from")
    parser.add_argument("--factory", required=True, help="FAISS factory string of the new index")
    parser.add_argument("--name", required=True, help="name of the new index folder")
    parser.add_argument("--index-dir", default=DEFAULT_OUT_DIR / "indexes")
    parser.add_argument("--target-recall", type=float, default=DEFAULT_TARGET_RECALL)
    parser.add_argument("--search-param", default=None, metavar="NAME=VALUE",
                        help="after tuning, store this search parameter instead (e.g. "
                        "efSearch=256), keeping the tuning record beside it")  # fmt: skip
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    source = IndexFolder(args.index_dir / args.source)
    manifest = source.manifest()
    spec = dataclasses.replace(manifest.index, requested=args.factory, factory=args.factory,
                               search_params={})  # fmt: skip
    started = time.perf_counter()
    with PeakRss() as rss:
        old = source.read_index(manifest)
        index = create_index(spec, manifest.model.dimension)
        for chunk in stored_vectors(old):
            index.add(chunk)
        del old
        temporary = IndexFolder(args.index_dir / f".{args.name}.tmp")
        shutil.rmtree(temporary.path, ignore_errors=True)
        temporary.path.mkdir(parents=True)
        shutil.copy2(source.metadata_file, temporary.metadata_file)
        faiss.write_index(index, str(temporary.index_file))
        build_seconds = time.perf_counter() - started
        dataclasses.replace(
            manifest, name=args.name, index=spec, tuning=None,
            index_file_bytes=temporary.index_file.stat().st_size, build_seconds=build_seconds,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        ).write(temporary.path)  # fmt: skip
        final = IndexFolder(args.index_dir / args.name)
        shutil.rmtree(final.path, ignore_errors=True)
        temporary.path.rename(final.path)
        tuning = retune_folder(final, args.target_recall)
        if args.search_param:
            name, value = args.search_param.split("=")
            tuned = final.manifest()
            params = {name: int(value)}
            dataclasses.replace(tuned, index=dataclasses.replace(tuned.index,
                                search_params=params)).write(final.path)  # fmt: skip
    print(f"{args.name}: {args.factory} over {manifest.rows} vectors in {build_seconds:.1f} s, "
          f"peak RSS {rss.peak / 2**20:.0f} MiB; tuned {tuning.parameter} {tuning.value} "
          f"(recall {tuning.recall:.4f}); stored {final.manifest().index.search_params}")  # fmt: skip
    payload = {"benchmark": "reindex", "args": args_dict(args), "environment": environment(),
               "build_seconds": round(build_seconds, 1), "peak_rss_mib": round(rss.peak / 2**20),
               "index_file_bytes": final.index_file.stat().st_size, "tuning": tuning.to_dict(),
               "total_seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print(f"wrote {write_json(args.out_dir, f'reindex_{args.name}.json', payload)}")


if __name__ == "__main__":
    main()
