"""The living family: an index that is added to, deleted from and filtered.

`at_scale` (`living_scale`) filters, adds and reindexes a built index, then rolls it back;
`add_equals_build` (`living_index`) checks that adding M rows to N matches a build of N + M,
queried with summaries none of which is indexed; `churn` (`recall_churn`) follows held-out
recall through rounds of adds, deletes and upserts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import PeakRss, read_corpus, sample_rows

from semsearch.ann.metrics import higher_is_better
from semsearch.ann.tune import recall_at_k, tie_aware_recall
from semsearch.ann.vector_index import prepare_vectors
from semsearch.index import Index
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.search.searcher import Searcher

K = 10


def at_scale(context) -> dict:
    """`living_scale`: filters, add and reindex on a built index, rolled back to its start."""
    p = context.params
    index = Index.open(p["index"], context.cache.index(p["index"]).parent)
    start = index.manifest
    debian = read_corpus(context.data_dir, "debian", columns=["package", "short_description"])
    debian = debian.take(pa.array(sample_rows(debian.num_rows, p["queries"] + p["add_rows"])))
    queries = debian.slice(0, p["queries"]).column("short_description").to_pylist()
    report = {
        "rows": start.rows,
        "factory": start.index.factory,
        "search_params": start.index.search_params,
        "build_seconds": start.build_seconds,
    }
    searcher = index.searcher(device="cpu")
    vectors = prepare_vectors(searcher.encoder.encode(queries), start.index.metric)
    shares = (0.5, 0.05, 0.005)
    if p["in_domain"]:
        report["filters"] = [_in_domain(searcher, p["queries"], share) for share in shares]
    else:
        report["filters"] = [filter_figures(searcher, queries, vectors, s) for s in (1.0, *shares)]
    if p["add_rows"]:
        report["add"] = _add(index, searcher, debian.slice(p["queries"]), p["add_rows"])
    if p["reindex"]:
        report["reindex"] = _reindex(index, p["reindex"], queries)
    index.rollback(start.generation)
    return report


def filter_figures(searcher: Searcher, queries: list[str], vectors: np.ndarray, share: float):
    """A filter keeping about `share` of the rows (a hash of the name, unrelated to the texts;
    1: none): tie-aware recall@10 against exact search over the kept rows, the fewest hits,
    p50 ms of the search alone and of a whole `Searcher.search` call."""
    where = f"hash(name) % 1000 < {round(share * 1000)}" if share < 1 else None
    snapshot = searcher.snapshot
    allowed = snapshot.where_mask(where) if where else snapshot.live  # cached before timing
    exact_scores, _ = snapshot.exact_search(vectors, K, allowed)
    search_ms, call_ms, found_scores, found_rows = [], [], [], []
    for position, query in enumerate(queries):
        started = time.perf_counter()
        scores, rows = snapshot.search(vectors[position : position + 1], K, None, where)
        search_ms.append(1000 * (time.perf_counter() - started))
        found_scores.append(scores[0])
        found_rows.append(rows[0])
        started = time.perf_counter()
        searcher.search([query], k=K, where=where)
        call_ms.append(1000 * (time.perf_counter() - started))
    found_rows, found_scores = np.array(found_rows), np.array(found_scores)
    better = higher_is_better(snapshot.manifest.index.metric)
    recall = tie_aware_recall(found_scores, found_rows, exact_scores[:, K - 1], K, better)
    row = {
        "where": where,
        "share": round(float(allowed.mean()), 4),
        "matches": int(allowed.sum()),
        "recall": round(recall, 4),
        "min_hits": int((found_rows >= 0).sum(axis=1).min()),
        "p50_search_ms": round(float(np.median(search_ms)), 2),
        "p50_query_ms": round(float(np.median(call_ms)), 2),
    }
    print(json.dumps(row), flush=True)
    return row


def _in_domain(searcher: Searcher, count: int, share: float) -> dict:
    """The filter measured with indexed rows it leaves out as queries: in the corpus' domain,
    as the tuning's own-vector queries are, but never a query's own row among the results."""
    where = f"hash(name) % 1000 < {round(share * 1000)}"
    outside = np.flatnonzero(searcher.snapshot.live & ~searcher.snapshot.where_mask(where))
    rows = np.sort(np.random.default_rng(2).choice(outside, count, replace=False))
    texts = searcher.metadata.column(searcher.manifest.text_column).take(pa.array(rows))
    texts = texts.to_pylist()
    vectors = prepare_vectors(searcher.encoder.encode(texts), searcher.manifest.index.metric)
    figures = filter_figures(searcher, texts, vectors, share)
    return {**figures, "queries": "indexed rows outside the filter"}


def _add(index: Index, searcher: Searcher, debian: pa.Table, rows: int) -> dict:
    names = [f"debian:{name}" for name in debian.column("package").to_pylist()]
    month = ["2026-11"] * debian.num_rows
    table = pa.table({"name": names, "month": month, "summary": debian["short_description"]})
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "new.parquet"
        pq.write_table(table.slice(0, rows), path)
        started = time.perf_counter()
        result = index.add(path, encoder=searcher.encoder)
        seconds = time.perf_counter() - started
    started = time.perf_counter()
    refreshed = searcher.refresh()
    refresh_seconds = time.perf_counter() - started
    hits = searcher.search([table.column("summary")[0].as_py()], k=1)[0]
    row = {
        "added": result.added,
        "seconds": round(seconds, 2),
        "refresh_seconds": round(refresh_seconds, 2),
        "refreshed": refreshed,
        "finds_a_new_row": bool(hits and str(hits[0].id).startswith("debian:")),
        "segments": len(index.manifest.segments),
    }
    print(json.dumps(row), flush=True)
    return row


def _reindex(index: Index, requested: str, queries: list[str]) -> dict:
    with PeakRss() as memory:
        started = time.perf_counter()
        manifest = index.reindex(requested)
        seconds = time.perf_counter() - started
    searcher = index.searcher(device="cpu")
    vectors = prepare_vectors(searcher.encoder.encode(queries), manifest.index.metric)
    _, exact = searcher.snapshot.exact_search(vectors, K)
    _, found = searcher.snapshot.search(vectors, K)
    row = {
        "factory": manifest.index.factory,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(memory.peak / 2**30, 2),
        "search_params": manifest.index.search_params,
        "tuned_recall_own_vectors": (manifest.tuning or {}).get("recall"),
        "recall_at_10_debian_queries": round(recall_at_k(found, exact, K), 4),
        "index_file_bytes": manifest.segments[0].index_file_bytes,
    }
    print(json.dumps(row), flush=True)
    return row


def add_equals_build(context) -> dict:
    """`living_index`: add = build for flat, IVF and HNSW; delete; filters on HNSW."""
    p = context.params
    work = context.out_dir / "living"
    shutil.rmtree(work, ignore_errors=True)
    indexes = work / "indexes"
    indexes.mkdir(parents=True)
    table = read_corpus(context.data_dir, "pypi", columns=["name", "month", "summary"])
    table = table.filter(pc.invert(pc.is_null(table.column("summary"))))
    base_rows, add_rows = p["base_rows"], p["add_rows"]
    order = np.random.default_rng(0).permutation(table.num_rows)
    chosen = order[: base_rows + add_rows]
    sample = table.take(pa.array(chosen)).rename_columns(["name", "month", "text"])
    base, added = sample.slice(0, base_rows), sample.slice(base_rows, add_rows)
    queries = held_out_texts(table.column("summary"), order[len(chosen) :], sample, p["queries"])
    paths = {}
    for label, part in (("base", base), ("added", added), ("all", pa.concat_tables([base, added]))):
        paths[label] = work / f"{label}.parquet"
        pq.write_table(part, paths[label])
    encoder = BiEncoder.load("default", device="cpu")
    report = {"types": {}}
    timings = {}
    for label in ("base", "all"):
        started = time.perf_counter()
        options = BuildOptions(
            corpus=paths[label],
            name=f"{label}-src",
            id_column="name",
            index="flat",
            out_dir=indexes,
            show_progress=False,
        )
        build_index(options, encoder)
        timings[f"build_{label}_s"] = round(time.perf_counter() - started, 2)
    truth = _ids(Searcher(Index.open("all-src", indexes).folder, encoder), queries)
    for kind in ("flat", "ivf", "hnsw"):
        grown = _copy(indexes, "base-src", f"base-{kind}")
        fresh = _copy(indexes, "all-src", f"all-{kind}")
        if kind != "flat":
            grown.reindex(kind)
            fresh.reindex(kind)
        started = time.perf_counter()
        result = grown.add(paths["added"], encoder=encoder)
        add_seconds = time.perf_counter() - started
        ours, theirs = Searcher(grown.folder, encoder), Searcher(fresh.folder, encoder)
        ours_ids, theirs_ids = _ids(ours, queries), _ids(theirs, queries)
        same_scores = np.abs(_scores(ours, queries) - _scores(theirs, queries)) < 1e-5
        row = {
            "added": result.added,
            "add_seconds": round(add_seconds, 2),
            "same_top10_as_fresh": float(np.mean([a == b for a, b in zip(ours_ids, theirs_ids)])),
            # Identical texts tie; where they straddle rank 10 either id is right.
            "same_top10_scores_as_fresh": float(np.mean(np.all(same_scores, axis=1))),
            "recall_added": round(recall_at_k(ours_ids, truth, K), 4),
            "recall_fresh": round(recall_at_k(theirs_ids, truth, K), 4),
            "search_params": grown.manifest.index.search_params,
            "segments": len(grown.manifest.segments),
        }
        row["recall_gap"] = round(row["recall_fresh"] - row["recall_added"], 4)
        report["types"][kind] = row
        print(kind, json.dumps(row))
    report["timings"] = timings
    report["delete"] = _delete(indexes, paths["all"], encoder, queries, p["delete_rows"])
    # filters keeping about 50 %, 5 % and 0.5 % of the rows (a hash of the name), on HNSW
    searcher = Index.open("base-hnsw", indexes).searcher(encoder=encoder)
    vectors = prepare_vectors(encoder.encode(queries), searcher.manifest.index.metric)
    report["filters"] = [filter_figures(searcher, queries, vectors, s) for s in (0.5, 0.05, 0.005)]
    return report


def held_out_texts(texts: pa.ChunkedArray, rows: np.ndarray, indexed: pa.Table, count: int):
    """`count` distinct texts of `rows`, none the same as an indexed text: queries the index
    never saw, as ann-benchmarks keeps its queries apart (an indexed row as a query flatters
    a graph, whose search walks straight to it)."""
    seen, queries = set(indexed.column("text").to_pylist()), []
    for text in texts.take(pa.array(rows)).to_pylist():
        if text not in seen:
            seen.add(text)
            queries.append(text)
            if len(queries) == count:
                break
    return queries


def _copy(indexes: Path, source: str, name: str) -> Index:
    shutil.rmtree(indexes / name, ignore_errors=True)
    shutil.copytree(indexes / source, indexes / name)
    return Index.open(name, indexes)


def _ids(searcher: Searcher, queries: list[str], **options) -> list[list]:
    return [[hit.id for hit in hits] for hits in searcher.search(queries, k=K, **options)]


def _scores(searcher: Searcher, queries: list[str]) -> np.ndarray:
    return np.array([[hit.score for hit in hits] for hits in searcher.search(queries, k=K)])


def _delete(indexes: Path, corpus: Path, encoder, queries: list[str], count: int) -> dict:
    index = _copy(indexes, "all-src", "delete-flat")
    names = pq.read_table(corpus, columns=["name"]).column("name").to_pylist()
    gone = set(np.random.default_rng(1).choice(names, count, replace=False).tolist())
    started = time.perf_counter()
    index.delete(ids=sorted(gone))
    seconds = time.perf_counter() - started
    found = _ids(Searcher(index.folder, encoder), queries)
    deep = Searcher(index.folder, encoder).search(queries[:20], k=1000)
    return {
        "deleted": count,
        "seconds": round(seconds, 2),
        "deleted_in_top10": sum(len(set(line) & gone) for line in found),
        "deleted_in_top1000_of_20_queries": sum(hit.id in gone for hits in deep for hit in hits),
    }


def churn(context):
    """`recall_churn`: per index type, rounds of `share` churn on a tuned index of PyPI
    summaries (a third each: new rows added, live rows deleted, live rows upserted with
    another summary's vector), held-out recall@10 after each, no rebuild between them."""
    from recall_family import build_flat, measured_recall, pypi_sample

    from semsearch.ingest.update import add_rows, delete_rows
    from semsearch.search.snapshot import open_snapshot

    p = context.params
    third = max(1, round(p["share"] * p["rows"] / 3))
    base, queries, pool = pypi_sample(context, p, pool=2 * third * p["rounds"])
    work = context.out_dir / "recall"
    for index_type in p["types"].split(","):
        folder = build_flat(context, base, f"churn-{index_type}")
        manifest = Index.open(folder.name, folder.path.parent).reindex(index_type, p["target"])
        prepared = prepare_vectors(queries, manifest.index.metric)
        rng = np.random.default_rng(p["seed"])
        live = base.column("name").to_pylist()
        curve = [{"round": 0, **measured_recall(open_snapshot(folder), prepared)}]
        for round_number in range(1, p["rounds"] + 1):
            fresh = pool.slice((round_number - 1) * 2 * third, 2 * third)
            picked = rng.choice(len(live), 2 * third, replace=False)
            upserted, deleted = picked[:third], picked[third:]
            names = fresh.column("name").to_pylist()
            names[third:] = [live[i] for i in upserted]  # same id, another summary's vector
            changes = pa.table({"name": names, "emb": fresh.column("emb")})
            pq.write_table(changes, work / "changes.parquet")
            started = time.perf_counter()
            add_rows(folder, work / "changes.parquet")
            delete_rows(folder, ids=[live[i] for i in deleted])
            seconds = time.perf_counter() - started
            gone = set(deleted.tolist())
            live = [name for i, name in enumerate(live) if i not in gone] + names[:third]
            snapshot = open_snapshot(folder)
            point = {
                "round": round_number,
                "rows": snapshot.live_rows,
                "segments": len(snapshot.segments),
                "change_seconds": round(seconds, 2),
                **measured_recall(snapshot, prepared),
            }
            print(index_type, json.dumps(point), flush=True)
            curve.append(point)
        yield {
            "type": index_type,
            "factory": manifest.index.factory,
            "search_params": folder.manifest().index.search_params,
            "claimed_recall": (manifest.tuning or {}).get("recall"),
            "lowest_recall": min(point["held_out_recall"] for point in curve),
            "curve": curve,
        }
        shutil.rmtree(folder.path, ignore_errors=True)
