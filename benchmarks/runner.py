"""One runner for the encode and index families: descriptors as data, what they build cached.

    python benchmarks/runner.py list                  # every descriptor and its parameters
    python benchmarks/runner.py run build_pypi --set limit=20000
    python benchmarks/runner.py run encode_throughput --smoke   # at its smoke sizes

As FAISS's `bench_fw`: a descriptor (`suite.py`) names a measure and its parameters; the
runner caches its inputs under `--cache-dir` and appends each result with `common.record`.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import suite
from common import DEFAULT_OUT_DIR, add_data_options, corpus_head, environment, record, set_threads
from suite import Benchmark


class Cache:
    """What runs share, made once under one folder: corpus extracts (`corpora/`), index
    folders by name (`indexes/`, where the index scripts read them) and vectors (`vectors/`)."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root, self.data_dir = root, data_dir
        self.indexes = root / "indexes"

    def corpus_file(self, corpus: str, rows: int | None, columns: list[str] | None = None) -> Path:
        """The first `rows` rows of a shared corpus as a Parquet file (all: the file itself)."""
        return corpus_head(self.data_dir, corpus, rows, self.root / "corpora", columns)

    def index(self, name: str) -> Path:
        """The index folder `name`; one not there yet is built when its name says how (a PyPI
        index as build_pypi names it: `pypi[-firstN][-type]`)."""
        folder = self.indexes / name
        if not (folder / "manifest.json").is_file():
            from index_family import build_named

            print(f"cache: building {folder}", flush=True)
            build_named(self, name)
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


def find(name: str) -> Benchmark:
    """The registry's descriptor `name` (a benchmark with a measure)."""
    if not (descriptor := suite.find(name)).measure:
        names = ", ".join(b.name for b in suite.BENCHMARKS if b.measure)
        raise SystemExit(f"{name} is a script of its own: `{descriptor.command}`; here: {names}")
    return descriptor


def function(measure: str) -> Callable[..., Iterable[dict] | dict]:
    """`family.name`: the function `name` of `<family>_family.py`."""
    family, name = measure.split(".")
    return getattr(__import__(f"{family}_family"), name)


def run(descriptor: Benchmark, args: argparse.Namespace) -> None:
    """Measure one descriptor and append each result it returns as a JSON line."""
    settings, defaults = suite.parse_settings(args.set), descriptor.defaults
    if unknown := set(settings) - set(defaults):
        raise SystemExit(f"{descriptor.name} has no parameter {sorted(unknown)[0]!r}")
    smoke = suite.parse_settings(shlex.split(descriptor.smoke_params)) if args.smoke else {}
    params = {**defaults, **smoke, **settings}
    threads = params["threads"]
    set_threads(threads if isinstance(threads, int) else None)  # a list: one process each
    context = Context(params, Cache(args.cache_dir, args.data_dir), args.data_dir, args.out_dir)
    results = function(descriptor.measure)(context)
    results = [results] if isinstance(results, dict) else results
    # a list at once; a generator's lines each as it comes (a run cut short keeps them)
    for batch in [results] if isinstance(results, list) else ([line] for line in results):
        used = {key: str(v) if isinstance(v, Path) else v for key, v in params.items()}
        lines = [{"args": used, **line, "environment": environment()} for line in batch]
        record(args, descriptor.name, lines, params.get("device", "cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every descriptor, its measure and parameters")
    runs = commands.add_parser("run", help="measure descriptors and append their JSON lines")
    runs.add_argument("names", nargs="+")
    runs.add_argument("--smoke", action="store_true", help="at the descriptor's smoke sizes")
    runs.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE")
    add_data_options(runs)
    runs.add_argument("--cache-dir", type=Path, default=DEFAULT_OUT_DIR, help="indexes, vectors")
    worker = commands.add_parser("worker", help=argparse.SUPPRESS)
    worker.add_argument("measure")
    worker.add_argument("options")
    args = parser.parse_args()
    if args.command == "list":
        for d in (b for b in suite.BENCHMARKS if b.measure):
            print(f"{d.name}: {d.measure} {d.params}\n    smoke: {d.smoke_params}")
    elif args.command == "worker":  # a measure's own child process (runtimes.per_process)
        function(args.measure)(args.options)
    else:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for name in args.names:
            run(find(name), args)


if __name__ == "__main__":
    sys.exit(main())
