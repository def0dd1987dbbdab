"""What the training benchmarks share: paths to the shared data, the machine, JSON, tables.

Imported by name by `train_stsb.py` and `objectives_table.py`, which works when they are
run as `python benchmarks/<script>.py` (Python puts the script's folder on the path).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
DEFAULT_OUT_DIR = REPO_ROOT / "benchmarks" / "out"


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"the shared data folder (default {DEFAULT_DATA_DIR})")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR,
                        help=f"where JSON results and trained models go (default {DEFAULT_OUT_DIR})")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: on a shared, oversubscribed machine "
                        "two threads spin-wait for each other and a step takes 5-20x longer)")  # fmt: skip
    return parser


def use_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def data_files(data_dir: Path) -> dict[str, Path]:
    """The shared STS-B and SICK files, checked to exist."""
    files = {
        "stsb_train": data_dir / "stsb" / "stsb_train.tsv.gz",
        "stsb_dev": data_dir / "stsb" / "stsb_dev.tsv.gz",
        "stsb_test": data_dir / "stsb" / "stsb_test.tsv.gz",
        "sick_train": data_dir / "sick" / "sick_train.tsv.gz",
        "sick_trial": data_dir / "sick" / "sick_trial.tsv.gz",
    }
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise SystemExit(f"missing data files (see --data-dir): {', '.join(missing)}")
    return files


def environment() -> dict:
    """The machine and library versions a figure was measured with."""
    import torch
    import transformers

    return {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def write_json(path: Path, payload: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
