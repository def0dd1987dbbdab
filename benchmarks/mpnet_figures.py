"""all-mpnet-base-v2 (the `semsearch[mpnet]` extra) measured next to the default model.

Why: the issue asks what the base-size model buys over the embedded all-MiniLM-L6-v2 on
the project's own evaluations: STS-B test Spearman of the cosine (published 0.834 for mpnet,
0.820 measured for the default) and nDCG@10 on the DBPedia subset (exact search; 0.5114 for
the default). Each figure comes from the `semsearch eval` command itself, run as a user runs
it, and is appended as one JSON line (date, model, task, metric, value, seconds, command) to
`benchmarks/results/mpnet.jsonl`.

    python benchmarks/mpnet_figures.py [--models default all-mpnet-base-v2] [--tasks sts ir]
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

from common import REPO_ROOT, base_parser, record, semsearch_cli

MODELS = ("default", "all-mpnet-base-v2")
# (task, figures kept: the metric's name in the command's JSON, the mode for `ir`)
KEPT = {
    "sts": [("spearman_cosine", None)],
    "ir": [("ndcg@10", "dense"), ("recall@100", "dense"), ("ndcg@10", "hybrid")],
}


def task_arguments(task: str, data_dir: Path) -> list[str]:
    """The `semsearch eval` arguments for one task (paths as given, so the command reads well)."""
    if task == "sts":
        return ["sts", f"stsb:{data_dir / 'stsb' / 'stsb_test.tsv.gz'}"]
    return ["ir", str(data_dir / "beir_dbpedia-entity-mini")]


def run_eval(task: str, model: str, data_dir: Path, out_dir: Path) -> tuple[dict, float, str]:
    """Run one evaluation command; its JSON result (also kept in `out_dir`), wall-clock
    seconds and command line."""
    out = out_dir / "mpnet" / f"{model}-{task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    arguments = ["eval", *task_arguments(task, data_dir), "--model", model, "--device", "cpu"]
    started = time.monotonic()
    subprocess.run(
        semsearch_cli(*arguments, "--out", str(out)),
        check=True,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - started
    return json.loads(out.read_text()), seconds, " ".join(["semsearch", *arguments])


def figures(task: str, model: str, result: dict, seconds: float, command: str) -> list[dict]:
    """The JSON lines for one evaluation: one per kept metric."""
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = []
    for metric, mode in KEPT[task]:
        # a mode's name may carry its settings ("hybrid rrf k=60")
        found = [key for key in result.get("modes", {}) if key.split()[0] == mode]
        name = metric if mode is None else f"{metric} {found[0]}"
        source = result["metrics"] if mode is None else result["modes"][found[0]]
        lines.append(
            {
                "date": date,
                "model": model,
                "task": task,
                "metric": name,
                "value": round(float(source[metric]), 4),
                "seconds": round(seconds, 1),
                "command": command,
            }
        )
    return lines


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--tasks", nargs="+", choices=list(KEPT), default=list(KEPT))
    args = parser.parse_args()
    for model in args.models:
        for task in args.tasks:
            result, seconds, command = run_eval(task, model, args.data_dir, args.out_dir)
            lines = figures(task, model, result, seconds, command)
            print("\n".join(json.dumps(line) for line in lines), flush=True)
            record(args, "mpnet", lines)


if __name__ == "__main__":
    main()
