"""What the training benchmarks add to `common`: one torch thread by default, the data files.

Imported by name by `train_stsb.py` and `objectives_table.py`, which works when they are
run as `python benchmarks/<script>.py` (Python puts the script's folder on the path).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import common
from common import environment, markdown_table, stsb_file

__all__ = [
    "base_parser",
    "data_files",
    "environment",
    "markdown_table",
    "use_threads",
]


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = common.base_parser(description)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: on a shared, oversubscribed machine "
        "two threads spin-wait for each other and a step takes 5-20x longer)",
    )
    return parser


def use_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def data_files(data_dir: Path) -> dict[str, Path]:
    """The shared STS-B and SICK files, checked to exist."""
    files = {
        "stsb_train": stsb_file(data_dir, "train"),
        "stsb_dev": stsb_file(data_dir, "dev"),
        "stsb_test": stsb_file(data_dir, "test"),
        "sick_train": data_dir / "sick" / "sick_train.tsv.gz",
        "sick_trial": data_dir / "sick" / "sick_trial.tsv.gz",
    }
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise SystemExit(f"missing data files (see --data-dir): {', '.join(missing)}")
    return files
