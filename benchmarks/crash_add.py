"""`kill -9` at random moments of `semsearch add`: the index must always open at the previous
or the new generation, with nothing lost, and running the same add again must finish.

    python benchmarks/crash_add.py --kills 10
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import common
import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.index import Index
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_options(
        parser,
        kills=10,
        base_rows=2_000,
        add_rows=2_000,
        model="default",
        work_dir=Path("/tmp/semsearch-crash"),
    )
    args = parser.parse_args()
    import shutil

    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    table = common.read_corpus(
        args.data_dir, "pypi", args.base_rows + args.add_rows, ["name", "summary"]
    ).rename_columns(["name", "text"])
    base, extra = args.work_dir / "base.parquet", args.work_dir / "extra.parquet"
    pq.write_table(table.slice(0, args.base_rows), base)
    # Half the added rows are new, half change the text of rows already there.
    changed = table.slice(args.base_rows // 2, args.add_rows // 2)
    changed = changed.set_column(
        1, "text", pa.array([f"changed: {t}" for t in changed.column("text").to_pylist()])
    )
    pq.write_table(
        pa.concat_tables([changed, table.slice(args.base_rows, args.add_rows // 2)]), extra
    )
    indexes = args.work_dir / "indexes"
    build_index(
        BuildOptions(
            corpus=base,
            name="crash",
            id_column="name",
            index="ivf",
            out_dir=indexes,
            model=args.model,
            show_progress=False,
        )
    )
    command = [sys.executable, "-m", "semsearch", "add", str(extra), "--index", "crash"]
    command += ["--index-dir", str(indexes), "--json"]
    started = time.perf_counter()
    subprocess.run([*command[:3], "--help"], capture_output=True, check=True)
    full = _timed_full_add(command, indexes, args.work_dir)
    rng = random.Random(0)
    rows = []
    for kill in range(args.kills):
        index = Index.open("crash", indexes)
        before = index.manifest
        if before.generation != 1:
            index.rollback(1)
            before = index.manifest
        delay = rng.uniform(0.2, full)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        killed = process.poll() is None
        if killed:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        after = Index.open("crash", indexes).manifest  # must open
        state = "previous" if after.generation == before.generation else "new"
        ok = after.rows == (
            before.rows if state == "previous" else before.rows + args.add_rows // 2
        )
        hits = Index.open("crash", indexes).searcher().search(["a python library"], k=5)[0]
        rerun = subprocess.run(command, capture_output=True, text=True)
        final = Index.open("crash", indexes).manifest
        row = {
            "kill": kill,
            "delay_s": round(delay, 2),
            "killed": killed,
            "opened_at": state,
            "rows_ok": ok,
            "search_hits": len(hits),
            "rerun_rc": rerun.returncode,
            "final_rows": final.rows,
            "final_ok": final.rows == before.rows + args.add_rows // 2,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "kills": args.kills,
        "killed_mid_run": sum(r["killed"] for r in rows),
        "all_opened": True,
        "all_rows_ok": all(r["rows_ok"] for r in rows),
        "all_reruns_finished": all(r["rerun_rc"] == 0 and r["final_ok"] for r in rows),
        "full_add_s": round(full, 2),
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(summary))
    common.record(args, "crash_add", {"args": common.args_dict(args), **summary, "runs": rows})


def _timed_full_add(command: list[str], indexes: Path, work_dir: Path) -> float:
    """How long an uninterrupted add takes (then rolled back), to spread the kills over it."""
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True)
    seconds = time.perf_counter() - started
    Index.open("crash", indexes).rollback(1)
    return seconds


if __name__ == "__main__":
    main()
