"""Does a build's progress tell the truth? Its bar's rate, second by second, as a user sees it.

Runs `semsearch build` in a child and timestamps each progress line: when the bar first
shows and moves, texts/s per one-second window, and how far its ETA was from the time left.

    flock /tmp/cpu.lock python benchmarks/build_progress.py --rows 50000
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import REPO_ROOT, add_options, args_dict, base_parser, corpus_head, record

BAR = re.compile(r"encoding:.*?\|\s*(\d+)/(\d+) \[[^<]*<([^,]*),")
WINDOW_S = 1.0
# The slowest windows: their rate is the 10th percentile of all windows' (the fastest: 90th).
SLOW_SHARE = 10


def timestamped_stderr(
    command: list[str], env: dict, cwd: Path
) -> tuple[list[tuple[float, str]], int]:
    """Run `command` in `cwd`; every piece of its stderr ended by a carriage return or a
    newline (a bar redraws with a carriage return), with the seconds since the start."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, cwd=cwd
    )
    lines, pending = [], b""
    while chunk := os.read(process.stderr.fileno(), 65536):
        now = time.perf_counter() - started
        pieces = re.split(rb"[\r\n]", pending + chunk)
        pending = pieces.pop()
        lines += [(now, piece.decode(errors="replace")) for piece in pieces if piece.strip()]
    if pending.strip():
        lines.append((time.perf_counter() - started, pending.decode(errors="replace")))
    return lines, process.wait()


def progress_figures(lines: list[tuple[float, str]]) -> dict:
    """What the encoding bar said when: its rate per one-second window, the ETA it showed."""
    points = [(t, int(m[1]), int(m[2]), m[3]) for t, text in lines if (m := BAR.search(text))]
    if not points:
        return {"first_line_s": round(lines[0][0], 2) if lines else None}
    total = points[0][2]
    moved = next(t for t, n, _, _ in points if n > 0)
    done = next((t for t, n, _, _ in points if n >= total), points[-1][0])
    times = np.array([t for t, *_ in points])
    counts = np.array([n for _, n, *_ in points])

    def shown_at(moment: float) -> int:  # the count the bar showed at `moment`
        position = np.searchsorted(times, moment, side="right") - 1
        return int(counts[position]) if position >= 0 else 0

    edges = np.arange(moved, done, WINDOW_S)
    rates = np.array([shown_at(end) - shown_at(start) for start, end in zip(edges, edges[1:])])
    # The ETA shown against the time really left, in the middle 80 % of the encoding.
    errors = [
        abs(_seconds(eta) - (done - t)) / (done - t)
        for t, n, _, eta in points
        if 0.1 * total <= n <= 0.9 * total and ":" in eta and done > t
    ]
    median = float(np.median(rates)) if len(rates) else 0.0
    slow = float(np.percentile(rates, SLOW_SHARE)) if len(rates) else 0.0
    fast = float(np.percentile(rates, 100 - SLOW_SHARE)) if len(rates) else 0.0
    return {
        "first_line_s": round(lines[0][0], 2),
        "first_line": lines[0][1].strip()[:120],
        "bar_shown_s": round(points[0][0], 2),
        "bar_moved_s": round(moved, 2),
        "encoding_s": round(done - moved, 2),
        "windows": len(rates),
        "median_texts_per_s": round(median, 1),
        "slow_texts_per_s": round(slow, 1),  # the 10th percentile of the windows' rates
        "slow_over_median": round(slow / median, 3) if median else None,
        "fast_texts_per_s": round(fast, 1),  # the 90th percentile
        "eta_error_median": round(float(np.median(errors)), 3) if errors else None,
        "eta_error_p90": round(float(np.percentile(errors, 90)), 3) if errors else None,
    }


def _seconds(eta: str) -> int:
    parts = [int(part) for part in eta.strip().split(":")]
    return sum(part * 60**power for power, part in enumerate(reversed(parts)))


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000, help="PyPI summaries to build")
    source_help = (
        "the folder holding the semsearch package to run (default: this "
        "repository), e.g. an export of another commit to compare"
    )
    add_options(
        parser,
        source_dir=(REPO_ROOT, source_help),
        build_args=(
            "--index-type flat --target-recall 0 --no-lexical",
            "more options for `semsearch build`",
        ),
        log=(Path, "write the timestamped stderr lines to this file"),
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="build_progress-") as scratch:
        corpus = corpus_head(args.data_dir, "pypi", args.rows, Path(scratch), ["name", "summary"])
        command = [sys.executable, "-m", "semsearch", "build", str(corpus)]
        command += ["--text-column", "summary", "--name", "progress"]
        command += ["--out-dir", str(Path(scratch) / "indexes"), *args.build_args.split()]
        env = {**os.environ, "PYTHONPATH": str(args.source_dir.resolve()), "PYTHONUNBUFFERED": "1"}
        # Run in the scratch folder: `python -m` puts the working folder first on the path,
        # so from a checkout it would run that checkout's package, not --source-dir's.
        lines, code = timestamped_stderr(command, env, Path(scratch))
    if args.log is not None:
        args.log.write_text("".join(f"{t:8.2f} {text}\n" for t, text in lines), encoding="utf-8")
    if code != 0:
        sys.exit("the build failed:\n" + "\n".join(text for _, text in lines[-10:]))
    figures = progress_figures(lines)
    print("\n".join(f"{key}: {value}" for key, value in figures.items()), flush=True)
    record(args, "build_progress", {"rows": args.rows, "options": args_dict(args), **figures})


if __name__ == "__main__":
    main()
