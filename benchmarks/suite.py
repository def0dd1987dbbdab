"""The benchmarks as one registry: what each measures, its goals and figures as data, its smoke run.

python benchmarks/suite.py list                 # every benchmark, what it measures, its goals
python benchmarks/suite.py table [--write]      # goals and latest figures from results/*.jsonl
python benchmarks/suite.py smoke [NAME ...]     # each one at tiny sizes, pass or fail
"""

from __future__ import annotations

import argparse
import ast
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results_table import (
    FIGURES_BEGIN,
    FIGURES_END,
    Figure,
    Goal,
    answers,
    figures_section,
    markdown,
    rewrite_region,
)

HERE = Path(__file__).resolve().parent
# Scripts that measure nothing: this registry, the GPU suite's packing and collecting
# (gpu_suite.sh runs them) and the long-document data's preparation.
TOOLS = ("suite", "gpu_carry", "gpu_collect", "prepare_long_documents")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. `name` is its results file's (`results/<name>.jsonl`). A descriptor has
    a `measure` (`family.function` of `<family>_family.py`), its `params` and the ones its
    smoke run changes (`smoke_params`); a script has `smoke`, its smoke run's options (split as
    a shell splits them; `{scratch}` is the smoke folder, shared so a build feeds later runs;
    `--out-dir {scratch}/<name>` follows), or `no_smoke`, why it has none. `script` is the
    file when it differs from the name. RESULTS.md shows the latest value of each goal's
    figure and of `figures`; `gpu_only` marks figures that need a GPU, `note` adds a line."""

    name: str
    measures: str
    goals: tuple[Goal, ...] = ()
    figures: tuple[Figure, ...] = ()
    measure: str = ""
    params: str = ""
    smoke_params: str = ""
    smoke: str | None = None
    no_smoke: str = ""
    smoke_limit_s: int = 120
    script: str = ""
    gpu_only: bool = False
    note: str = ""

    @property
    def path(self) -> str:
        return f"benchmarks/{'runner' if self.measure else self.script or self.name}.py"

    @property
    def smoke_options(self) -> str | None:
        return f"run {self.name} --smoke --cache-dir {{scratch}}" if self.measure else self.smoke

    @property
    def defaults(self) -> dict[str, Any]:
        return parse_settings(shlex.split(self.params))

    @property
    def command(self) -> str:
        return f"python {self.path}" + (f" run {self.name}" if self.measure else "")


def parse_settings(settings: list[str]) -> dict[str, Any]:
    """`key=value` pairs, each value a Python literal where it reads as one, else text."""
    parsed = {}
    for setting in settings:
        key, separator, text = setting.partition("=")
        if not separator:
            raise SystemExit(f"{setting!r}: write key=value")
        try:
            parsed[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            parsed[key] = text
    return parsed


def _where(where: dict[str, object]) -> dict[tuple[str, ...], object]:
    return {tuple(name.split("__")): value for name, value in where.items()}


def _goal(what: str, test: str, **where: object) -> Goal:
    """A goal from "dotted.key >= threshold" (`where` keys use `__` for dots)."""
    key, comparison, threshold = test.rsplit(" ", 2)
    return Goal(what, tuple(key.split(".")), comparison, float(threshold), _where(where))


def _gpu_goal(what: str, test: str, **where: object) -> Goal:
    return _goal(what, test, device="NVIDIA H*", **where)


def _figure(what: str, key: str | tuple[str, ...], **where: object) -> Figure:
    """A figure to show as the latest (`key` dotted, or a tuple where a key holds a dot)."""
    return Figure(what, tuple(key.split(".")) if isinstance(key, str) else key, _where(where))


PYPI, DEBIAN, MAN, FULL = (
    {"corpus": "pypi_summaries"},
    {"corpus": "debian_long"},
    {"data": "manpages"},
    {"args__limit": None},
)
BY_GPU_SMOKE = "needs a GPU for its figures; its CPU smoke is `make bench-gpu-smoke`"
BY_TRAIN_SMOKE = "trains for tens of minutes to hours; `train.py` is smoked by `train_stsb`"
RECALL_TYPES = ("ivf", "ivfsq", "hnsw", "ivfpq", "disk")
SMOKE_INDEX = "pypi-first1500-ivf"  # what build_pypi's smoke run builds, for later smoke runs
READS_SMOKE_INDEX = f"--index {SMOKE_INDEX} --index-dir {{scratch}}/indexes"
# A descriptor's parameters, written as `runner.py run --set` reads them (later ones win).
ENCODE = "pypi_rows=20000 debian_rows=5000 batch_size=32 model=None threads=None"
INDEX = "seed=0 threads=None"

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "encode_throughput",
        "texts/s of BiEncoder.encode vs SentenceTransformer.encode "
        "(PyPI summaries, Debian long descriptions), cosine of their vectors, peak memory",
        (
            _gpu_goal("PyPI texts/s (one H100)", "texts_per_s >= 100_000", **PYPI),
            _gpu_goal("Debian texts/s (one H100)", "texts_per_s >= 40_000", **DEBIAN),
            _gpu_goal("PyPI x sentence-transformers defaults", "ratio_st_default >= 4", **PYPI),
            _gpu_goal("PyPI x sentence-transformers fastest", "ratio_st_fastest >= 1.5", **PYPI),
            _gpu_goal("PyPI mean cosine to st fp32", "mean_cos >= 0.999", **PYPI),
            _gpu_goal("PyPI min cosine to st fp32", "min_cos >= 0.995", **PYPI),
        ),
        measure="encode.in_process",
        params=f"{ENCODE} device=cpu precision=auto anchor_bf16=False variant=[] repeats=2 "
        "variant_repeats=1 full_warmup=False corpora=['pypi_summaries','debian_long'] "
        "peak_tflops=989.4 name=None st_references=None st_defaults=True "
        "st_fastest_batch=512 random_base_model=False",
        smoke_params="pypi_rows=100 debian_rows=20 repeats=1 threads=1",
    ),
    Benchmark(
        "gpu_build",
        "`semsearch build --device cuda` of all PyPI summaries beside a "
        "sentence-transformers + FAISS script; recall@10 of the built index",
        (
            _gpu_goal("build seconds (841,708 rows)", "seconds <= 30", rows=841_708),
            _gpu_goal("x the peer's time", "ratio >= 3", rows=841_708),
            _gpu_goal("recall@10 of the built index", "recall_at_10 >= 0.95", rows=841_708),
        ),
        no_smoke=BY_GPU_SMOKE,
        gpu_only=True,
    ),
    Benchmark(
        "mine_pypi",
        "paraphrase mining over all PyPI summaries: time, peak memory, recall of the mined pairs",
        (_gpu_goal("mine seconds (841,708 rows)", "seconds <= 60", rows=841_708),),
        (_figure("encode texts/s (841,708 rows)", "encode_texts_per_s", rows=841_708),),
        no_smoke=BY_GPU_SMOKE,
        gpu_only=True,
    ),
    Benchmark(
        "gpu_pairs",
        "`semsearch bench pairs` with BERT-base-sized models: cross-encoder "
        "pairs/s against bi-encoder encode and mining",
        figures=tuple(
            _figure(what, key, shape="base")
            for what, key in (
                ("cross-encoder pairs/s, BERT-base shape", "cross_encoder_pairs_per_s"),
                ("cross-encoder hours for all pairs (extrapolated)", "cross_encoder_hours"),
                ("bi-encoder s (encode, then mine)", "bi_encoder_seconds"),
                ("bi-encoder x faster", "speedup"),
            )
        ),
        no_smoke=BY_GPU_SMOKE,
        gpu_only=True,
    ),
    Benchmark(
        "gpu_checks",
        "the CUDA path's correctness: CUDA vs CPU vectors, bf16 agreement",
        no_smoke=BY_GPU_SMOKE,
        gpu_only=True,
    ),
    Benchmark(
        "build_pypi",
        "build_index over PyPI summaries: build time, peak RSS, size; warm "
        "search latency p50/p90/p99; IVF recall@10 against exact",
        (
            _goal("warm query p50 ms, all rows (issue 5)", "latency.p50_ms <= 10", **FULL),
            _goal("warm query p50 ms, all rows (issue 29)", "latency.p50_ms <= 5", **FULL),
        ),
        (
            _figure("warm query p99 ms, all rows", "latency.p99_ms", **FULL),
            _figure("build s, all rows", "build.seconds", **FULL),
            _figure("encode texts/s in the build", "build.encode_texts_per_s", **FULL),
            _figure("build peak RSS MiB (sampled)", "build.peak_rss_sampled_mib", **FULL),
        ),
        measure="index.build",
        params=f"{INDEX} limit=None index=auto quantize=None runtime=None skip_build=False "
        "compile=False query_runtime=auto query_source=debian queries=1000 recall_queries=200",
        smoke_params="limit=1500 index=ivf queries=30 recall_queries=20",
    ),
    Benchmark(
        "own_vector_build",
        "`build_index` of the PyPI summaries from their own vectors (a vector column: nothing "
        "encoded): each phase's seconds (`semsearch.phases`), CPU time, peak RSS",
        (
            _goal(
                "slowest device-free phase s, 841,708 rows, 2 cores",
                "slowest_device_free_s <= 2",
                rows=841_708,
            ),
        ),
        (
            _figure("rows", "rows"),
            _figure("build s", "seconds"),
            _figure("slowest device-free phase s", "slowest_device_free_s"),
            _figure("slowest device-free phase, CPU s", "slowest_device_free_cpu_s"),
        ),
        measure="phases.own_vectors",
        params="threads=None rows=None vectors_dir=None index=auto lexical=False cpu_phases=True",
        smoke_params="rows=300",
        note="`--set vectors_dir=/work/cache/pypi_vectors` reads the vectors a background "
        "encode left (50,000-row parts); without it they are encoded once and cached.",
    ),
    Benchmark(
        "cpu_build",
        "`semsearch build` of the first 20,000 PyPI summaries beside a sentence-transformers "
        "(OpenVINO backend) + FAISS script on the same model folder, whole processes: the "
        "ratio, semsearch's phases, the peer's split, cosines to sentence-transformers' fp32",
        (_goal("build speed vs the peer, 20,000 rows, 2 cores", "ratio >= 2", rows=20_000),),
        (
            _figure("semsearch build s", "semsearch_s"),
            _figure("peer s", "peer_s"),
            _figure("semsearch not encoding s", "semsearch_not_encoding_s"),
            _figure("peer not encoding s", "peer_not_encoding_s"),
            _figure("cosine mean to st fp32", ("cosine_to_st_fp32", "semsearch", "0")),
        ),
        measure="cpu_build.side_by_side",
        params="threads=None rows=20000 rounds=1 peer_batch_size=16 model=None lexical=False "
        "sample=1000 peer_python=/work/cache/stov-venv/bin/python",
        smoke_params="rows=200 rounds=1 sample=20",
        smoke_limit_s=180,
        note="The peer runs on its own interpreter (`peer_python`, optimum-intel pins another "
        "transformers): how to make it is in `cpu_build_family.py`; without it semsearch is "
        "timed alone.",
    ),
    Benchmark(
        "index_tradeoff",
        "flat, IVF, HNSW and IVF-PQ on an index's vectors: build time, "
        "size, tie-aware recall@10, QPS",
        figures=(
            _figure("vectors", "database_rows"),
            _figure("exact search, queries/s", "exact_qps"),
        ),
        measure="index.tradeoff",
        params=f"{INDEX} index=pypi types=flat,ivf1024,ivf4096,hnsw16,hnsw32,ivfpq48,ivfpq96 "
        "queries=1000 min_seconds=2.0 target=0.95 nprobes=None ef_construction=None",
        smoke_params=f"index={SMOKE_INDEX} types=flat,hnsw16 queries=50 min_seconds=0.2",
        note="Each structure's fastest setting at the target is its `best` in the line's "
        "`results` (lines from before 2026-11-27 hold only the points).",
    ),
    Benchmark(
        "held_out_recall",
        "each index type's tuning: the recall@10 it claims beside recall@10 on 1,000 PyPI "
        "summaries it never indexed (150,000 indexed), against exact search; -k 1 vs -k 10",
        tuple(
            _goal(
                f"{kind} held-out recall@10 (target 0.95)",
                "held_out_recall >= 0.94",
                type=kind,
                args__rows=150000,
            )
            for kind in RECALL_TYPES
        ),
        tuple(
            _figure(f"{kind} {what}", key, type=kind)
            for kind in RECALL_TYPES
            for what, key in (
                ("claimed recall@10", "claimed_recall"),
                ("held-out recall@10", "held_out_recall"),
            )
        ),
        measure="recall.held_out",
        params=f"{INDEX} rows=150000 first=600000 stride=4 queries=1000 target=0.95 "
        f"types={','.join(RECALL_TYPES)} vectors_dir=/work/cache/pypi_vectors",
        smoke_params="rows=3000 first=12000 queries=100",
        note="Vectors from `vectors_dir` (the default model's, `part-NNN.npy` of 50,000 rows) "
        "where they cover the rows, else encoded; `--set vectors_dir=''` always encodes.",
    ),
    Benchmark(
        "recall_churn",
        "recall@10 on held-out PyPI summaries through 20 rounds of 5 % churn (adds, deletes, "
        "upserts) without a rebuild, ivfsq and hnsw; each change's seconds",
        tuple(
            _goal(
                f"{kind} lowest held-out recall@10 over the rounds (target 0.95)",
                "lowest_recall >= 0.94",
                type=kind,
                args__rows=150000,
            )
            for kind in ("ivfsq", "hnsw")
        ),
        figures=tuple(
            _figure(f"{kind} lowest held-out recall@10", "lowest_recall", type=kind)
            for kind in ("ivfsq", "hnsw")
        ),
        measure="living.churn",
        params=f"{INDEX} rows=150000 first=600000 stride=4 queries=1000 target=0.95 "
        "types=ivfsq,hnsw rounds=20 share=0.05 vectors_dir=/work/cache/pypi_vectors",
        smoke_params="rows=3000 first=12000 queries=100 rounds=4",
    ),
    Benchmark(
        "living_index",
        "the living index on PyPI summaries: add = build, delete, "
        "filters (recall vs brute force, p50)",
        (
            _goal("IVF recall gap, added vs fresh", "types.ivf.recall_gap <= 0.01"),
            _goal("HNSW recall gap, added vs fresh", "types.hnsw.recall_gap <= 0.01"),
        ),
        measure="living.add_equals_build",
        params=f"{INDEX} base_rows=20000 add_rows=10000 queries=1000 delete_rows=1000",
        smoke_params="base_rows=400 add_rows=100 queries=10 delete_rows=20",
    ),
    Benchmark(
        "startup",
        "each command's cold start and where a cold query's time goes, "
        "beside a sentence-transformers + FAISS script",
        (
            _goal("`semsearch --help` s", "commands.semsearch --help.wall_s <= 0.5"),
            _goal("`semsearch list` s", "commands.semsearch list.wall_s <= 0.5"),
            _goal("an error s", "commands.an error (no such index).wall_s <= 0.5"),
            _goal(
                "cold `semsearch query` s (demo index)",
                "commands.query, checked export (default).wall_s <= 0.5",
            ),
            _goal("`serve` ready s (demo index)", "serve_s.health_200 <= 10"),
        ),
        smoke="--runs 1 --demo-rows 300 --index-dir {scratch}/startup-index",
        smoke_limit_s=180,
    ),
    Benchmark(
        "serve_load",
        "`semsearch serve` under load beside txtai's API, and a soak",
        (
            _goal("p99 ms at concurrency 32", "levels.32.semsearch.p99_ms <= 150"),
            _goal("errors at concurrency 32", "levels.32.semsearch.errors == 0"),
            _goal("errors in the soak", "soak.errors == 0"),
        ),
        (
            _figure("queries/s at concurrency 32", "levels.32.semsearch.qps"),
            _figure("soak p99 ms", "soak.p99_ms"),
            _figure("soak RSS growth", "soak.rss_growth"),
        ),
        smoke=f"{READS_SMOKE_INDEX} --concurrency 2 --requests 40 --max-seconds 10 --no-peer",
    ),
    Benchmark(
        "living_scale",
        "the living index at scale on a built index: filters, add, reindex",
        figures=tuple(
            _figure(
                f"{factory} {what} at a 0.5 % filter",
                f"filters.2.{key}",
                factory=factory,
                filters__2__share=0.0049,
            )
            for factory in ("IVF4096,Flat", "HNSW32,Flat")
            for what, key in (("recall", "recall"), ("query p50 ms", "p50_query_ms"))
        ),
        measure="living.at_scale",
        params=f"{INDEX} index=pypi queries=100 add_rows=1000 reindex=ivfpq in_domain=False",
        smoke_params=f"index={SMOKE_INDEX} queries=10 add_rows=100 reindex=''",
    ),
    Benchmark(
        "hybrid_quality",
        "dense, BM25 and hybrid nDCG@10 / recall@100; each mode's latency",
        (_goal("hybrid RRF p50 x dense p50", "latency.modes.hybrid rrf.vs_dense_p50 <= 1.5"),),
        tuple(
            _figure(
                f"{task} nDCG@10, {mode}",
                ("quality", str(n), "modes", mode, "ndcg@10"),
                **{f"quality__{n}__task": name},
            )
            for n, task, name in ((0, "DBPedia", "dbpedia-mini"), (1, "Debian", "debian-5000"))
            for mode in ("dense", "lexical", "hybrid adaptive 0.5", "hybrid rrf k=60")
        ),
        smoke="--tasks debian --debian-rows 120 "
        f"--latency-index {{scratch}}/indexes/{SMOKE_INDEX} --latency-queries 20",
    ),
    Benchmark(
        "long_documents",
        "long documents (449 Linux man pages of 1,000+ tokens): one vector from the first "
        "256 tokens against chunks ranked by their best chunk and the mean of chunk vectors; "
        "recall@10 and nDCG@10 of first-window and past-window queries, build s, index size, "
        "encoder tokens/s chunked against unchunked",
        (
            _goal(
                "past-window recall@10, best chunk",
                "variants.best_chunk.past_window.recall_at_10 >= 0.90",
                **MAN,
            ),
            _goal(
                "first-window recall@10, best chunk - truncation",
                "first_window_gap.recall_at_10 >= 0",
                **MAN,
            ),
            _goal(
                "first-window nDCG@10, best chunk - truncation",
                "first_window_gap.ndcg_at_10 >= 0",
                **MAN,
            ),
            _goal("encoder tokens/s, chunked / unchunked", "tokens_per_s_ratio >= 0.9", **MAN),
        ),
        tuple(
            _figure(f"{name} {kind} recall@10", f"variants.{variant}.{kind}.recall_at_10", **MAN)
            for variant, name in (("truncation", "truncation"), ("mean_chunks", "mean of chunks"))
            for kind in ("first_window", "past_window")
        )
        + tuple(
            _figure(f"{variant} build s", f"variants.{variant}.build_s", **MAN)
            for variant in ("truncation", "best_chunk")
        ),
        smoke="--synthetic 30 --threads 1",
        note="The data: `benchmarks/prepare_long_documents.py`.",
    ),
    Benchmark(
        "mpnet",
        "all-mpnet-base-v2 and its fine-tuned models: STS-B and DBPedia (`train.py` runs "
        "`default`, `all-mpnet-base-v2`, `stsb-cosent-mpnet`)",
        (
            _goal(
                "fine-tuned mpnet STS-B test",
                "value >= 0.865",
                model="*stsb-cosent-mpnet",
                metric="spearman_cosine",
            ),
            _goal(
                "fine-tuned mpnet DBPedia nDCG@10",
                "value >= 0.51",
                metric="ndcg@10 dense",
                model="*stsb-cosent-mpnet",
            ),
        ),
        tuple(
            _figure(f"{name} {what}", "value", model=model, metric=metric)
            for model, name in (("default", "default model"), ("all-mpnet-base-v2", "mpnet"))
            for metric, what in (
                ("spearman_cosine", "STS-B test"),
                ("ndcg@10 dense", "DBPedia nDCG@10"),
            )
        ),
        no_smoke=BY_TRAIN_SMOKE,
        script="train",
    ),
    Benchmark(
        "train_stsb",
        "fine-tuning the default model on STS-B: STS-B test (`train.py stsb-cosent`, "
        "`stsb-cosine`), and one row per training objective from the same model and steps: "
        "STS-B test, SICK trial (`train.py 'objective-*'`)",
        (
            _goal(
                "default model fine-tuned, STS-B test",
                "value >= 0.86",
                run="stsb-cosent",
                metric="spearman_cosine",
            ),
        ),
        tuple(
            _figure(
                f"{row} STS-B test",
                "value",
                run=f"objective-{row}",
                task="sts",
                metric="spearman_cosine",
            )
            for row in ("cosine", "cosent", "mnr")
        ),
        smoke="stsb-cosent --max-steps 2 --evals sts",
        script="train",
    ),
    Benchmark(
        "build_progress",
        "a `semsearch build`'s bar second by second: when the first line and the first move "
        "come, texts/s per one-second window (median, 10th percentile), the ETA's error",
        (
            _goal(
                "slowest 10 % of 1-s windows / median texts/s (50,000 PyPI summaries)",
                "slow_over_median >= 0.5",
                rows=50_000,
            ),
        ),
        smoke="--rows 300",
    ),
    Benchmark(
        "filtered_search",
        "p50/p95 ms and recall@10 of a filtered search against the share of rows the filter "
        "keeps (0.01 % to 50 %), on ivfsq and hnsw over the default model's PyPI vectors",
        tuple(
            goal
            for kind in ("ivfsq", "hnsw")
            for goal in (
                _goal(
                    f"{kind} least recall@10, 841k rows", "min_recall >= 1", type=kind, rows=840_708
                ),
                _goal(
                    f"{kind} p50 x unfiltered, worst share, 841k rows",
                    "max_p50_vs_unfiltered <= 2",
                    type=kind,
                    rows=840_708,
                ),
            )
        ),
        tuple(
            figure
            for kind in ("ivfsq", "hnsw")
            for figure in (
                _figure(f"{kind} rows", "rows", type=kind),
                _figure(f"{kind} least recall@10", "min_recall", type=kind),
                _figure(
                    f"{kind} p50 x unfiltered, worst share", "max_p50_vs_unfiltered", type=kind
                ),
                _figure(f"{kind} unfiltered p50 ms", "unfiltered.p50_ms", type=kind),
                _figure(
                    f"{kind} least recall@10 less the unfiltered query's",
                    "min_recall_vs_unfiltered",
                    type=kind,
                ),
            )
        ),
        measure="filtered.selectivity",
        params=f"{INDEX} rows=840708 queries=1000 types=ivfsq,hnsw "
        "shares=[0.0001,0.001,0.01,0.05,0.1,0.2,0.5] vectors_dir=/work/cache/pypi_vectors seed=0",
        smoke_params="rows=3000 queries=30",
        smoke_limit_s=180,
    ),
    Benchmark(
        "bounded_memory",
        "peak RSS of build (own vectors), add, compact and reindex at growing row counts: "
        "what each holds beyond its FAISS index",
        figures=tuple(
            _figure(f"{step} peak RSS MiB, 1M rows", f"{step}.peak_rss_mib", rows=1_000_000)
            for step in ("build", "add", "compact", "reindex")
        ),
        measure="memory.bounded_memory",
        params="rows=[200000,1000000] dimension=384 index_type=ivfsq threads=None "
        "target_recall=0.0",  # 0 skips tuning (its exact search is timed elsewhere)
        smoke_params="rows=[3000]",
        smoke_limit_s=180,
    ),
    Benchmark(
        "crash_add",
        "kill -9 during `semsearch add`: the index always opens",
        figures=(
            _figure("kills mid-add", "killed_mid_run"),
            _figure("the index opened after every kill", "all_opened"),
            _figure("its rows were right after every kill", "all_rows_ok"),
        ),
        smoke="--kills 1 --base-rows 200 --add-rows 200 --work-dir {scratch}/crash",
        smoke_limit_s=180,
    ),
    Benchmark(
        "cpu_runtimes",
        "texts/s of semsearch's CPU runtimes (torch, OpenVINO fp32/bf16) against "
        "sentence-transformers' torch and OpenVINO backends; cosine and recall@10 to fp32; "
        "STS-B of the int8 model (`train.py default-int8`)",
        tuple(
            _goal(
                f"faithful (OpenVINO bf16) x fastest peer, {name}, {threads} thread(s)",
                "ratio_to_peer >= 1.5",
                corpus=corpus,
                threads=threads,
                candidate="semsearch-openvino-bf16",
            )
            for corpus, name in (("pypi_summaries", "PyPI"), ("debian_long", "Debian"))
            for threads in (1, 2)
        ),
        (
            *(
                _figure(
                    f"int8 (OpenVINO) recall@10 to fp32, {name}, 1 thread",
                    "recall_at_10",
                    corpus=corpus,
                    threads=1,
                    candidate="semsearch-openvino-int8",
                )
                for corpus, name in (("pypi_summaries", "PyPI"), ("debian_long", "Debian"))
            ),
            _figure("STS-B test, int8", "value", run="default-int8", metric="spearman_cosine"),
        ),
        measure="runtimes.per_process",
        params=f"{ENCODE} pypi_rows=3000 debian_rows=600 threads=[1,2] rounds=2 candidates=None "
        "peer_path=/tmp/stov onnx_peer_path=/tmp/stonnx",
        smoke_params="pypi_rows=24 debian_rows=8 threads=[1] rounds=1",
    ),
    Benchmark(
        "mine_stsb_ap",
        "paraphrase mining on STS-B's sentences: average precision against the gold pairs",
        figures=(
            _figure("average precision", "quality.average_precision"),
            _figure("best F1", "quality.best_f1"),
            _figure("mining s", "seconds"),
        ),
        smoke="--pairs 300 --top-k 10",
    ),
    Benchmark(
        "baselines",
        "the baselines grid (poolings, objectives, data): STS-B, SICK, pair classification",
        figures=(
            *(
                _figure(f"{row} STS-B test", "stsb_test_spearman", row=row)
                for row in ("bilstm-malstm", "frozen-minilm-mean", "minilm-cosine-stsb")
            ),
            _figure("frozen-minilm-mean texts/s", "encode_texts_per_s", row="frozen-minilm-mean"),
        ),
        no_smoke="trains a model per row (hours)",
    ),
    Benchmark(
        "multi_dataset_train",
        "mpnet trained on STS-B plus Debian pairs: STS-B test and DBPedia nDCG@10 "
        "(`train.py multi-mpnet`)",
        figures=(
            _figure("STS-B test", "value", metric="spearman_cosine"),
            _figure("DBPedia nDCG@10, dense", "value", metric="ndcg@10 dense"),
            _figure("STS-B test (the 2026-11-23 line's shape)", "stsb_test_spearman"),
        ),
        no_smoke=BY_TRAIN_SMOKE,
        script="train",
    ),
    Benchmark(
        "retrieval_cross_encoder",
        "a cross-encoder trained for retrieval: DBPedia and Debian nDCG@10 after re-ranking "
        "(`train.py cross-retrieval`)",
        figures=tuple(
            _figure(f"{name} nDCG@10, {mode}", "value", task=task, metric=f"ndcg@10 {mode}")
            for task, name in (("dbpedia", "DBPedia"), ("debian", "Debian"))
            for mode in ("dense", "dense + rerank")
        )
        + (
            _figure(
                "DBPedia nDCG@10, dense + rerank (older lines)",
                ("modes", "dense + rerank", "ndcg@10"),
                task="dbpedia",
            ),
        ),
        no_smoke=BY_TRAIN_SMOKE,
        script="train",
    ),
    Benchmark(
        "ray_build",
        "`build --engine ray` against the local build: wall time and texts/s",
        figures=(
            _figure("local texts/s, 100,000 rows", "texts_per_s", engine="local", rows=100_000),
            *(
                _figure(
                    f"Ray texts/s, {n} actor(s), 100,000 rows",
                    "texts_per_s",
                    engine="ray",
                    workers=n,
                    rows=100_000,
                )
                for n in (1, 2)
            ),
        ),
        no_smoke="needs Ray (the `ray` extra, `make test-ray`), not in the default environment",
    ),
    Benchmark(
        "beyond_ram",
        "a `disk` index of N synthetic rows (real PyPI vectors plus noise): the searcher's "
        "RssAnon and RssFile a row, recall@10, p50/p99, filters at 50/5/0.5 %, build time and peak",
        tuple(
            _goal(what, test, rows=20_000_000)
            for what, test in (
                ("RssAnon bytes a row, 20M rows", "rss_anon_bytes_per_row <= 100"),
                ("recall@10, 20M rows", "search.recall_at_10 >= 0.95"),
                ("p50 ms, 20M rows", "search.p50_ms <= 20"),
                ("p99 ms, 20M rows", "search.p99_ms <= 100"),
                (
                    "recall@10 at a 1-in-200 filter, 20M rows",
                    "search.filter_1_in_200.recall_at_10 >= 0.95",
                ),
            )
        ),
        measure="memory.beyond_ram",
        # target_recall 0.96: tuning measures on corpus rows; the held-out queries came out
        # ~0.005 lower at 200k. work_dir None: OUT_DIR/beyond_ram.
        params="rows=20000000 queries=1000 k=10 noise=0.35 base_npy=None base_rows=30000 "
        "index_type=disk target_recall=0.96 memory_max=None work_dir=None keep=False "
        "reuse_corpus=False reuse_index=False threads=None",
        smoke_params="rows=20000 base_rows=300 queries=50",
        smoke_limit_s=180,
    ),
)


def find(name: str) -> Benchmark:
    for benchmark in BENCHMARKS:
        if benchmark.name == name:
            return benchmark
    raise SystemExit(f"no benchmark {name!r}: see `python benchmarks/suite.py list`")


def list_benchmarks() -> str:
    lines = []
    for benchmark in BENCHMARKS:
        lines.append(f"{benchmark.name}: {benchmark.measures}")
        lines += [f"    goal: {goal.what} {goal.text}" for goal in benchmark.goals]
        if benchmark.measure:
            lines.append(f"    runs: {benchmark.measure} {benchmark.params}")
        smoke = benchmark.smoke_options or benchmark.no_smoke
        lines.append(f"    smoke: {smoke or '(no options)'}")
    return "\n".join(lines)


def goals_table(results_dir: Path) -> str:
    goals = [(benchmark.name, goal) for benchmark in BENCHMARKS for goal in benchmark.goals]
    return markdown(answers(goals, results_dir))


def latest_figures(results_dir: Path) -> str:
    """Each benchmark's latest figures (its goals' figures, then `figures`), with the lines
    they come from, or why there is none."""
    sections = []
    for benchmark in BENCHMARKS:
        shown: dict[tuple, Goal | Figure] = {}
        for wanted in (*benchmark.goals, *benchmark.figures):
            shown.setdefault((wanted.key, tuple(wanted.where.items())), wanted)
        rows = answers([(benchmark.name, wanted) for wanted in shown.values()], results_dir)
        about = f"Measures {benchmark.measures}." + (f" {benchmark.note}" if benchmark.note else "")
        about += f" **GPU only**: {benchmark.no_smoke}." if benchmark.gpu_only else ""
        if benchmark.measure:
            about += f" Run by `{benchmark.command}` (older lines name the script it replaced)."
        missing = f"No JSON line yet: `{benchmark.command}` records one."
        sections.append(figures_section(benchmark.name, about, rows, missing))
    return "\n\n".join(sections)


def smoke_command(benchmark: Benchmark, scratch: Path) -> list[str]:
    options = shlex.split(benchmark.smoke_options or "")
    options = [part.replace("{scratch}", str(scratch)) for part in options]
    return [sys.executable, benchmark.path, *options, "--out-dir", str(scratch / benchmark.name)]


def run_smoke(names: list[str], scratch: Path) -> int:
    """Each smoke run in a fresh process under its time limit; one line per benchmark.
    Returns the number that failed."""
    chosen = [find(name) for name in names] or [b for b in BENCHMARKS if b.smoke_options]
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    failed, began = 0, time.perf_counter()
    for benchmark in chosen:
        log, started = scratch / f"{benchmark.name}.log", time.perf_counter()
        with open(log, "w", encoding="utf-8") as handle:
            try:
                code = subprocess.run(
                    smoke_command(benchmark, scratch),
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    timeout=benchmark.smoke_limit_s,
                    cwd=HERE.parent,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                ).returncode
            except subprocess.TimeoutExpired:
                code = None
        seconds = time.perf_counter() - started
        verdict = "pass" if code == 0 else ("timeout" if code is None else f"fail (exit {code})")
        failed += code != 0
        print(f"{verdict:16} {benchmark.name:22} {seconds:6.1f} s  {log}", flush=True)
    total = time.perf_counter() - began
    print(f"{len(chosen) - failed} of {len(chosen)} passed in {total:.0f} s", flush=True)
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every benchmark, what it measures, its goals")
    table = commands.add_parser("table", help="goals table and latest figures from the lines")
    table.add_argument("--results-dir", type=Path, default=HERE / "results")
    table.add_argument(
        "--write",
        type=Path,
        nargs="?",
        const=HERE / "RESULTS.md",
        default=None,
        help="rewrite the generated regions of this file (RESULTS.md)",
    )
    smoke = commands.add_parser("smoke", help="each registered benchmark at tiny sizes")
    smoke.add_argument("names", nargs="*", help="only these (default: all with a smoke run)")
    smoke.add_argument("--scratch", type=Path, default=Path("/tmp/bench_smoke"))
    args = parser.parse_args()
    if args.command == "list":
        print(list_benchmarks())
    elif args.command == "table":
        table, figures = goals_table(args.results_dir), latest_figures(args.results_dir)
        if args.write is None:
            print(f"{table}\n\n{figures}")
        else:
            changed = rewrite_region(args.write, table)
            changed |= rewrite_region(args.write, figures, (FIGURES_BEGIN, FIGURES_END))
            print(f"{args.write}: {'regions rewritten' if changed else 'unchanged'}")
    else:
        sys.exit(1 if run_smoke(args.names, args.scratch) else 0)


if __name__ == "__main__":
    main()
