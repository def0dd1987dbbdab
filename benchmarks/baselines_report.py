"""The table and bar chart of `baselines.py`, drawn from its JSON lines."""

from __future__ import annotations

from pathlib import Path

from common import markdown_table

HEADERS = [
    "row",
    "group",
    "similarity",
    "STS-B test ρ",
    "SICK trial ρ",
    "pair acc",
    "pair F1",
    "pair from",
    "train s",
    "encode texts/s",
    "size MB",
]


def table_rows(grid: dict, done: dict) -> list[list[object]]:
    """Measured rows in the grid's order; figures x100 as the SBERT paper prints them."""
    out = []
    for name in grid:
        if name not in done:
            continue
        line = done[name]
        out.append(
            [
                name,
                line["group"],
                line["similarity"],
                _percent(line["stsb_test_spearman"]),
                _percent(line["sick_trial_spearman"]),
                _percent(line["pair_accuracy"]),
                _percent(line["pair_f1"]),
                line["pair_from"],
                line["train_seconds"],
                line["encode_texts_per_s"],
                line["size_mb"],
            ]
        )
    return out


def write_report(grid: dict, done: dict, png: Path) -> None:
    """Print the Markdown table (with the rows not yet measured) and draw the PNG."""
    rows = table_rows(grid, done)
    escaped = [[str(cell).replace("|", "\\|") for cell in row] for row in rows]
    print(markdown_table(HEADERS, escaped))
    missing = [name for name in grid if name not in done]
    if missing:
        print(f"\nnot measured yet: {', '.join(missing)}")
    if rows:
        draw(rows, png)
        print(f"\nchart: {png}")


def draw(rows: list[list[object]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [row[0] for row in rows][::-1]
    stsb = [float(row[3]) for row in rows][::-1]
    sick = [float(row[4]) for row in rows][::-1]
    positions = range(len(names))
    figure, axis = plt.subplots(figsize=(9, 0.32 * len(names) + 1.5))
    axis.barh([p + 0.2 for p in positions], stsb, height=0.4, label="STS-B test Spearman x100")
    axis.barh([p - 0.2 for p in positions], sick, height=0.4, label="SICK trial Spearman x100")
    axis.set_yticks(list(positions), names, fontsize=8)
    axis.set_xlim(0, 100)
    axis.legend(loc="lower right", fontsize=8)
    axis.set_title("The recipes semsearch replaces (benchmarks/baselines.py)")
    figure.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png, dpi=110)
    plt.close(figure)


def _percent(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{100 * value:.2f}"
