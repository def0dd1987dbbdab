"""What does `build --engine ray` cost or gain against the local build, on the same corpus?

Both builds' wall time includes all a user waits for (Ray's start, model loads, encoding).

    flock /tmp/cpu.lock python benchmarks/ray_build.py --rows 100000 --workers 2
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from datetime import datetime, timezone

import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import base_parser, environment, read_corpus, record

from semsearch.distributed import RayOptions, build_index_on_ray
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions


def corpus_file(args) -> tuple[str, int]:
    """The first `args.rows` summaries as one Parquet file (its path, its rows)."""
    table = read_corpus(args.data_dir, "pypi", args.rows, ["name", "summary"])
    assert pc.count_distinct(table.column("name")).as_py() == table.num_rows, "names must be unique"
    folder = args.out_dir / "ray_build"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"pypi_{table.num_rows}.parquet"
    pq.write_table(table, path)
    return str(path), table.num_rows


def build(engine: str, corpus: str, args) -> dict:
    out_dir = args.out_dir / "ray_build" / "indexes"
    options = BuildOptions(
        corpus=corpus,
        name=f"pypi-{engine}",
        text_column="summary",
        id_column="name",
        out_dir=out_dir,
        overwrite=True,
        device=args.device,
        show_progress=False,
    )
    started = time.perf_counter()
    if engine == "ray":
        folder = build_index_on_ray(options, RayOptions(workers=args.workers, show_progress=False))
    else:
        folder = build_index(options)
    seconds = time.perf_counter() - started
    manifest = folder.manifest()
    result = {
        "rows": manifest.rows,
        "seconds": round(seconds, 1),
        "texts_per_s": round(manifest.rows / seconds, 1),
        "index": manifest.index.factory,
        "workers": manifest.operation.get("workers", 1),
        "worker_device": manifest.operation.get("worker_device", args.device),
    }
    shutil.rmtree(folder.path)
    return result


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="summaries to build (0: all)")
    parser.add_argument("--workers", type=int, default=2, help="Ray encoder actors")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (both engines)")
    parser.add_argument("--engines", default="local,ray", help="which builds, in order")
    args = parser.parse_args()
    corpus, rows = corpus_file(args)
    env = environment()
    device = env["gpu"] or f"cpu: {env['cpu']} ({env['cpu_count']} cores)"
    command = "python benchmarks/ray_build.py " + shlex.join(sys.argv[1:])
    results = {}
    for engine in args.engines.split(","):
        result = build(engine, corpus, args)
        results[engine] = result
        line = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "device": device,
            "engine": engine,
            "workers": result["workers"] if engine == "ray" else 1,
            "rows": result["rows"],
            "seconds": result["seconds"],
            "command": command,
            "corpus_rows": rows,
            **result,
            "environment": env,
        }
        print(
            json.dumps({key: value for key, value in line.items() if key != "environment"}),
            flush=True,
        )
        record(args, "ray_build", line)


if __name__ == "__main__":
    main()
