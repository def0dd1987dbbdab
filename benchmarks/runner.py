"""One runner for the encode and index families: descriptors as data, what they build cached.

    python benchmarks/runner.py list                          # every descriptor and its parameters
    python benchmarks/runner.py run build_pypi --set limit=20000
    python benchmarks/runner.py run index_tradeoff --set index=pypi-first20000 types=flat,hnsw16
    python benchmarks/runner.py run encode_throughput --smoke # the descriptor's smoke sizes

As FAISS's `bench_fw` does: a descriptor says what to measure (its family's measure and its
parameters); the runner gives the measure a cache that builds each input once (corpus
extracts, an index folder by name, vectors as .npy) under `--cache-dir`, and appends each
result the measure returns as one JSON line to `results/<name>.jsonl`, stamped with the
command, machine and commit (`common.record`). `--set key=value` changes a parameter (values
read as Python literals, else as text).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from common import DEFAULT_DATA_DIR, DEFAULT_OUT_DIR, corpus_head, record, set_threads


@dataclass(frozen=True)
class Descriptor:
    """One benchmark: its family's measure (`family.function`), its parameters, and the ones
    its smoke run changes. `name` is its results file's and each line's `benchmark`."""

    name: str
    measure: str
    params: dict[str, Any]
    smoke: dict[str, Any] = field(default_factory=dict)


# The index build_pypi's smoke run builds, which other smoke runs read.
SMOKE_INDEX = "pypi-first1500-ivf"
ENCODE = dict(pypi_rows=20_000, debian_rows=5_000, batch_size=32, model=None, threads=None)
INDEX = dict(seed=0, threads=None)
DESCRIPTORS = (
    Descriptor(
        "encode_throughput",
        "encode.in_process",
        dict(
            ENCODE,
            device="cpu",
            precision="auto",  # semsearch's in the compared rows (auto: bf16 on CUDA)
            anchor_bf16=False,  # also sentence-transformers with bf16 weights
            variant=[],  # semsearch-only rows, e.g. "b=default,pack" (encode_family.Variant)
            repeats=2,
            variant_repeats=1,
            full_warmup=False,  # warm up on the whole corpus, not its first 2,000 texts
            corpora=["pypi_summaries", "debian_long"],
            peak_tflops=989.4,  # the GPU's dense bf16 peak (H100/H200 SXM data sheets)
            name=None,  # a label kept in the lines
            st_references=None,  # st at its defaults and fastest (None: on with CUDA)
            st_defaults=True,  # with st_references, its defaults too (the slowest row)
            st_fastest_batch=512,
            random_base_model=False,  # a random BERT-base-shaped model instead of `model`
        ),
        dict(pypi_rows=100, debian_rows=20, repeats=1, threads=1),
    ),
    Descriptor(
        "cpu_runtimes",
        "encode.per_process",
        dict(
            ENCODE,
            pypi_rows=3000,
            debian_rows=600,
            threads=[1, 2],  # one process per candidate and thread count
            rounds=2,
            candidates=None,  # only these (comma-separated; the reference always runs)
            peer_path="/tmp/stov",  # optimum-intel and its transformers
            onnx_peer_path="/tmp/stonnx",  # optimum-onnx, onnxruntime and their transformers
        ),
        dict(pypi_rows=24, debian_rows=8, threads=[1], rounds=1),
    ),
    Descriptor(
        "build_pypi",
        "index.build",
        dict(
            INDEX,
            limit=None,  # the first N rows only
            index="auto",
            quantize=None,  # int8: build and query with int8
            runtime=None,  # what encodes the build (default: the library's)
            skip_build=False,  # re-measure the cached index
            compile=False,  # query through Searcher(compile=True)
            query_runtime="auto",  # as `semsearch query --runtime`
            query_source="debian",  # or "pypi" (indexed texts)
            queries=1000,
            recall_queries=200,
        ),
        dict(limit=1500, index="ivf", queries=30, recall_queries=20),
    ),
    Descriptor(
        "index_tradeoff",
        "index.tradeoff",
        dict(
            INDEX,
            index="pypi",  # a cached index's name
            types="flat,ivf1024,ivf4096,hnsw16,hnsw32,ivfpq48,ivfpq96",  # index_family
            queries=1000,  # held out of the database
            min_seconds=2.0,  # each search setting timed at least this long
            target=0.95,
            nprobes=None,  # e.g. "1,4,16" for the IVF types (default: 1-512, powers of 2)
            ef_construction=None,  # HNSW's (default: FAISS's 40; semsearch's builds use 80)
        ),
        dict(index=SMOKE_INDEX, types="flat,hnsw16", queries=50, min_seconds=0.2),
    ),
    Descriptor(
        "living_scale",
        "index.living_scale",
        dict(
            INDEX,
            index="pypi",
            queries=100,
            add_rows=1000,
            reindex="ivfpq",  # "" skips it
            in_domain=False,  # queries: indexed rows the filter leaves out, not Debian's
        ),
        dict(index=SMOKE_INDEX, queries=10, add_rows=100, reindex=""),
    ),
    Descriptor(
        "living_index",
        "index.living",
        dict(INDEX, base_rows=20_000, add_rows=10_000, queries=200, delete_rows=1_000),
        dict(base_rows=400, add_rows=100, queries=10, delete_rows=20),
    ),
)


class Cache:
    """What runs share, made once under one folder: corpus extracts (`corpora/`), index
    folders by name (`indexes/`, where the index scripts read them) and vectors (`vectors/`)."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root, self.data_dir = root, data_dir
        self.indexes = root / "indexes"

    def corpus_file(self, corpus: str, rows: int | None, columns: list[str] | None = None) -> Path:
        """The first `rows` rows of a shared corpus as a Parquet file (all: the file itself)."""
        return corpus_head(self.data_dir, corpus, rows, self.root / "corpora", columns)

    def index(self, name: str, build: Callable[[], object] | None = None) -> Path:
        """The index folder `name`, built by `build` when it is not there yet (None: the
        build_pypi measure's build, for names it gives: `pypi[-firstN][-type]`)."""
        folder = self.indexes / name
        if not (folder / "manifest.json").is_file():
            if build is None:
                from index_family import build_named

                build = lambda: build_named(self, name)  # noqa: E731
            print(f"cache: building {folder}", flush=True)
            build()
        return folder

    def vectors(self, key: str, make: Callable[[], np.ndarray]) -> np.ndarray:
        """The vectors stored as `key`, made by `make` and kept as float32 .npy the first time."""
        path = self.root / "vectors" / f"{key}.npy"
        if path.is_file():
            return np.load(path)
        vectors = np.ascontiguousarray(make(), dtype=np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        return vectors


@dataclass
class Context:
    """What a measure gets: its parameters, the cache, the shared data and its work folder."""

    params: dict[str, Any]
    cache: Cache
    data_dir: Path
    out_dir: Path


def find(name: str) -> Descriptor:
    for descriptor in DESCRIPTORS:
        if descriptor.name == name:
            return descriptor
    names = ", ".join(d.name for d in DESCRIPTORS)
    raise SystemExit(f"no descriptor {name!r}: choose from {names}")


def measure_function(descriptor: Descriptor) -> Callable[[Context], Iterable[dict] | dict]:
    family, function = descriptor.measure.split(".")
    module = __import__(f"{family}_family")
    return getattr(module, function)


def parse_settings(settings: list[str]) -> dict[str, Any]:
    """`key=value` pairs, each value a Python literal where it reads as one, else text."""
    parsed = {}
    for setting in settings:
        key, separator, text = setting.partition("=")
        if not separator:
            raise SystemExit(f"--set {setting!r}: write key=value")
        try:
            parsed[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            parsed[key] = text
    return parsed


def run(descriptor: Descriptor, args: argparse.Namespace) -> None:
    """Measure one descriptor and append each result it returns as a JSON line."""
    settings = parse_settings(args.set)
    if unknown := set(settings) - set(descriptor.params):
        raise SystemExit(f"{descriptor.name} has no parameter {sorted(unknown)[0]!r}")
    params = {**descriptor.params, **(descriptor.smoke if args.smoke else {}), **settings}
    threads = params["threads"]
    set_threads(threads if isinstance(threads, int) else None)  # a list: one process each
    context = Context(params, Cache(args.cache_dir, args.data_dir), args.data_dir, args.out_dir)
    results = measure_function(descriptor)(context)
    results = [results] if isinstance(results, dict) else results
    # a list at once; a generator's lines each as it comes (a run cut short keeps them)
    for batch in [results] if isinstance(results, list) else ([line] for line in results):
        used = {key: str(v) if isinstance(v, Path) else v for key, v in params.items()}
        lines = [{"args": used, **line} for line in batch]
        record(args, descriptor.name, lines, params.get("device", "cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every descriptor, its measure and parameters")
    runs = commands.add_parser("run", help="measure descriptors and append their JSON lines")
    runs.add_argument("names", nargs="+")
    runs.add_argument("--smoke", action="store_true", help="at the descriptor's smoke sizes")
    runs.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE")
    runs.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    runs.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="work folder")
    runs.add_argument("--cache-dir", type=Path, default=DEFAULT_OUT_DIR, help="indexes, vectors")
    runs.add_argument("--results-dir", type=Path, default=None, help="default: see common.py")
    worker = commands.add_parser("worker", help=argparse.SUPPRESS)
    worker.add_argument("measure")
    worker.add_argument("options")
    args = parser.parse_args()
    if args.command == "list":
        for d in DESCRIPTORS:
            print(f"{d.name}: {d.measure} {d.params}\n    smoke: {d.smoke}")
    elif args.command == "worker":  # a measure's own child process (encode.per_process)
        family, function = args.measure.split(".")
        getattr(__import__(f"{family}_family"), function)(args.options)
    else:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for name in args.names:
            run(find(name), args)


if __name__ == "__main__":
    sys.exit(main())
