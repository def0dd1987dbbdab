"""The `bench pairs` table, as rows for the terminal and as a Markdown file, and its JSON."""

from __future__ import annotations

import json
from pathlib import Path

from semsearch.bench.pairs import QUOTED, PairsBenchResult, SizeResult

HEADERS = [
    "n",
    "sentences",
    "method",
    "pairs scored",
    "measured time",
    "time for all n(n-1)/2 pairs",
    "speed-up",
]
RESULT_NAME = "bench_pairs"


def pairs_rows(result: PairsBenchResult) -> list[list[str]]:
    """Two rows per size: the cross-encoder (extrapolated) and the bi-encoder (measured)."""
    rows = []
    for size in result.sizes:
        rows.append(
            [
                f"{size.n:,}",
                size.source,
                "cross-encoder",
                f"{size.cross.pairs_scored:,} random pairs ({size.cross.pairs_per_second:,.0f}/s)",
                format_duration(size.cross.seconds),
                f"{format_duration(size.cross_all_seconds)} (extrapolated)",
                "1×",
            ]
        )
        rows.append(
            [
                f"{size.n:,}",
                size.source,
                "bi-encoder: encode + search",
                _bi_pairs(size, result.options.top_k),
                f"{format_duration(size.bi.seconds)} (encode "
                f"{format_duration(size.bi.encode_seconds)}, search {format_duration(size.bi.search_seconds)})",
                f"{format_duration(size.bi.seconds)} (measured)",
                _times(size.speedup),
            ]
        )
    return rows


def models_line(result: PairsBenchResult) -> str:
    return f"cross-encoder: {result.cross_encoder}; bi-encoder: {result.bi_encoder}"


def quoted_line() -> str:
    return (
        f"Quoted, not measured here: the SBERT paper ({QUOTED['source']}) reports, for "
        f"{QUOTED['n']:,} sentences on {QUOTED['hardware']}, {QUOTED['cross_encoder']} vs "
        f"{QUOTED['bi_encoder']}."
    )


def best_pair_lines(result: PairsBenchResult) -> list[str]:
    lines = []
    for size in result.sizes:
        best = size.bi.best_pair
        if best:
            lines.append(
                f"- n = {size.n:,}: {best['text_a']!r} / {best['text_b']!r} "
                f"(cosine {best['score']:.4f})"
            )
    return lines


def pairs_markdown(result: PairsBenchResult) -> str:
    machine = result.machine
    lines = [
        "# The most similar pair among n sentences: cross-encoder vs bi-encoder",
        "",
        f"Device {machine.get('device')} ({machine.get('cpu')}, {machine.get('cpu_count')} cores, "
        f"{machine.get('torch_threads')} torch threads); load average before "
        f"{machine.get('load_average_before')}, after {machine.get('load_average_after')}.",
        models_line(result) + ".",
        "The cross-encoder's time for all pairs is extrapolated from the random pairs it "
        "scored; the bi-encoder's is measured end to end.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *[
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
            for row in pairs_rows(result)
        ],
        "",
        "Most similar pair found by the bi-encoder:",
        "",
        *best_pair_lines(result),
        "",
        quoted_line(),
    ]
    return "\n".join(lines) + "\n"


def result_paths(out_dir: Path) -> tuple[Path, Path]:
    """Where the figures go: `bench_pairs.json` and `bench_pairs.md` in `out_dir`."""
    return out_dir / f"{RESULT_NAME}.json", out_dir / f"{RESULT_NAME}.md"


def write_pairs_result(result: PairsBenchResult, out_dir: Path) -> tuple[Path, Path]:
    """Write the figures as JSON and Markdown (see `result_paths`), replacing earlier ones."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = result_paths(out_dir)
    text = json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=float)
    json_path.write_text(text + "\n", encoding="utf-8")
    markdown_path.write_text(pairs_markdown(result), encoding="utf-8")
    return json_path, markdown_path


def format_duration(seconds: float) -> str:
    """Seconds as people read them: 0.42 s, 12.3 s, 4.2 min, 65.0 h, 3.1 days, 2.4 years."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 4 * 86400:
        return f"{seconds / 3600:,.1f} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:,.1f} days"
    return f"{seconds / (365 * 86400):,.1f} years"


def _times(factor: float) -> str:
    return f"{factor:.1f}×" if factor < 10 else f"{factor:,.0f}×"


def _bi_pairs(size: SizeResult, top_k: int) -> str:
    if size.exact:
        return f"all {size.all_pairs:,} (exact search)"
    return f"{size.n:,} × {top_k} neighbours ({size.bi.structure}, approximate)"
