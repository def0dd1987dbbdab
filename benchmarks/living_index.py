"""The living index measured: add = build, delete, filters, reindex, on PyPI summaries.

An index of N PyPI summaries plus `add` of M more is compared, for Q held-out summaries as
queries, with a fresh build of all N + M: the same top-10 ids with a flat index, and
recall@10 (against exact search over the N + M) within 0.01 of the fresh build with IVF and
HNSW. Then: the time of the add against the time of the build; deleting D ids; filters
keeping about 50 %, 5 % and 0.5 % of the rows (recall against brute force over the rows
they keep, hits returned, p50 latency); and a reindex to IVF-PQ without the model.

    python benchmarks/living_index.py --base-rows 20000 --add-rows 10000 --queries 200
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import common
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from living_scale import filter_figures

from semsearch.ann.tune import recall_at_k
from semsearch.ann.vector_index import prepare_vectors
from semsearch.index import Index
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models.bi_encoder import BiEncoder
from semsearch.search.searcher import Searcher

TYPES = {"flat": "flat", "ivf": "ivf", "hnsw": "hnsw"}
K = 10


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--base-rows", type=int, default=20_000)
    parser.add_argument("--add-rows", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--delete-rows", type=int, default=1_000)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/semsearch-living"))
    common.add_threads_option(parser)
    args = parser.parse_args()
    common.set_threads(args.threads)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    table = common.read_corpus(args.data_dir, "pypi", columns=["name", "month", "summary"])
    table = table.filter(pc.invert(pc.is_null(table.column("summary"))))
    chosen = np.random.default_rng(0).choice(
        table.num_rows, args.base_rows + args.add_rows + args.queries, replace=False
    )
    sample = table.take(pa.array(chosen)).rename_columns(["name", "month", "text"])
    base = sample.slice(0, args.base_rows)
    added = sample.slice(args.base_rows, args.add_rows)
    queries = sample.slice(args.base_rows + args.add_rows).column("text").to_pylist()
    paths = {}
    for label, part in (("base", base), ("added", added), ("all", pa.concat_tables([base, added]))):
        paths[label] = args.work_dir / f"{label}.parquet"
        pq.write_table(part, paths[label])
    encoder = BiEncoder.load("default", device="cpu")
    report = {"environment": common.environment(), "args": common.args_dict(args), "types": {}}
    indexes = args.work_dir / "indexes"
    timings = {}
    for label in ("base", "all"):
        started = time.perf_counter()
        build_index(
            BuildOptions(
                corpus=paths[label],
                name=f"{label}-src",
                id_column="name",
                index="flat",
                out_dir=indexes,
                show_progress=False,
            ),
            encoder,
        )
        timings[f"build_{label}_s"] = round(time.perf_counter() - started, 2)
    exact = Searcher(Index.open("all-src", indexes).folder, encoder)
    truth = _ids(exact, queries)
    for kind, requested in TYPES.items():
        grown, fresh = (
            _copy(indexes, "base-src", f"base-{kind}"),
            _copy(indexes, "all-src", f"all-{kind}"),
        )
        if kind != "flat":
            grown.reindex(requested)
            fresh.reindex(requested)
        started = time.perf_counter()
        result = grown.add(paths["added"], encoder=encoder)
        add_seconds = time.perf_counter() - started
        ours, theirs = Searcher(grown.folder, encoder), Searcher(fresh.folder, encoder)
        ours_ids, theirs_ids = _ids(ours, queries), _ids(theirs, queries)
        ours_scores, theirs_scores = _scores(ours, queries), _scores(theirs, queries)
        row = {
            "added": result.added,
            "add_seconds": round(add_seconds, 2),
            "same_top10_as_fresh": float(np.mean([a == b for a, b in zip(ours_ids, theirs_ids)])),
            # Identical texts tie; where they straddle rank 10 either id is right.
            "same_top10_scores_as_fresh": float(
                np.mean(np.all(np.abs(ours_scores - theirs_scores) < 1e-5, axis=1))
            ),
            "recall_added": _recall_of(ours_ids, truth),
            "recall_fresh": _recall_of(theirs_ids, truth),
            "search_params": grown.manifest.index.search_params,
            "segments": len(grown.manifest.segments),
        }
        row["recall_gap"] = round(row["recall_fresh"] - row["recall_added"], 4)
        report["types"][kind] = row
        print(kind, json.dumps(row))
    report["timings"] = timings
    report["delete"] = _delete(indexes, encoder, queries, args.delete_rows)
    # filters keeping about 50 %, 5 % and 0.5 % of the rows (a hash of the name), on HNSW
    searcher = Index.open("base-hnsw", indexes).searcher(encoder=encoder)
    vectors = prepare_vectors(encoder.encode(queries), searcher.manifest.index.metric)
    report["filters"] = [filter_figures(searcher, queries, vectors, s) for s in (0.5, 0.05, 0.005)]
    print(json.dumps({key: report[key] for key in ("timings", "delete", "filters")}, indent=1))
    common.record(args, "living_index", report)


def _recall_of(found: list[list], truth: list[list]) -> float:
    return round(recall_at_k(found, truth, K), 4)


def _copy(indexes: Path, source: str, name: str) -> Index:
    shutil.rmtree(indexes / name, ignore_errors=True)
    shutil.copytree(indexes / source, indexes / name)
    return Index.open(name, indexes)


def _ids(searcher: Searcher, queries: list[str], **options) -> list[list]:
    return [[hit.id for hit in hits] for hits in searcher.search(queries, k=K, **options)]


def _scores(searcher: Searcher, queries: list[str]) -> np.ndarray:
    return np.array([[hit.score for hit in hits] for hits in searcher.search(queries, k=K)])


def _delete(indexes: Path, encoder, queries: list[str], count: int) -> dict:
    index = _copy(indexes, "all-src", "delete-flat")
    names = pq.read_table(indexes / "../all.parquet", columns=["name"]).column("name").to_pylist()
    gone = set(np.random.default_rng(1).choice(names, count, replace=False).tolist())
    started = time.perf_counter()
    index.delete(ids=sorted(gone))
    seconds = time.perf_counter() - started
    found = _ids(Searcher(index.folder, encoder), queries)
    returned_deleted = sum(len(set(line) & gone) for line in found)
    deep = Searcher(index.folder, encoder).search(queries[:20], k=1000)
    deep_deleted = sum(1 for hits in deep for hit in hits if hit.id in gone)
    return {
        "deleted": count,
        "seconds": round(seconds, 2),
        "deleted_in_top10": returned_deleted,
        "deleted_in_top1000_of_20_queries": deep_deleted,
    }


if __name__ == "__main__":
    main()
