"""Bring one GPU-suite call's output home: raw output kept, JSON lines appended.

python benchmarks/gpu_collect.py /work/.device/<call>/files --label build
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import tarfile
from pathlib import Path

from common import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"
RUNS = REPO_ROOT / "benchmarks" / "gpu_runs"


def collect(source: Path, label: str, date: str) -> list[str]:
    """Copy the call's files under gpu_runs/DATE/LABEL, unpack its results there and append
    every JSON line to results/<script>.jsonl; returns one line per file appended to."""
    target = RUNS / date / label
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file():
            shutil.copy2(path, target / path.name)
    archive = source / "results.tgz"
    if not archive.exists():
        raise SystemExit(f"{archive} is missing: the call wrote no results (see suite.log)")
    with tarfile.open(archive) as tar:
        tar.extractall(target / "results", filter="data")
    done = []
    for lines in sorted((target / "results").rglob("results/*.jsonl")):
        text = lines.read_text()
        with (RESULTS / lines.name).open("a") as out:
            out.write(text if text.endswith("\n") else text + "\n")
        done.append(
            f"{lines.relative_to(target)}: {text.count(chr(10))} lines -> results/{lines.name}"
        )
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the device call's files folder")
    parser.add_argument(
        "--label",
        default="suite",
        help="the run's folder under gpu_runs/<date>/ (default: suite; a step's name "
        "for a one-step rerun)",
    )
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    for line in collect(args.source, args.label, args.date) or ["no JSON lines found"]:
        print(line)


if __name__ == "__main__":
    main()
