"""The training benchmarks as data: each run a `semsearch train` command and its evaluations.

Each run's model goes to `OUT/models/<run>` and resumes from its checkpoint (`--minutes`
stops a chunk); each eval appends a line (`run`, `model`, `task`, `metric`, `value`).

    python benchmarks/train.py --list
    python benchmarks/train.py stsb-cosent                  # the 0.86 goal: 17 min on 2 cores (0.8629)
    python benchmarks/train.py 'objective-*' --threads 1    # the objectives table, ~2-3 h
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import REPO_ROOT, base_parser, record, run_for_minutes
from common import semsearch_cli as cli

STSB = "stsb:{data}/stsb/stsb_{split}.tsv.gz"
DBPEDIA = "ir {data}/beir_dbpedia-entity-mini"
EVALS = {  # `semsearch eval` arguments per task ({model}: the run's model)
    "sts": "sts " + STSB.replace("{split}", "test") + " --model {model}",
    "sts-int8": "sts " + STSB.replace("{split}", "test") + " --model {model} --quantize int8",
    "sick": "sts sick:{data}/sick/sick_trial.tsv.gz --model {model}",
    "ir": DBPEDIA + " --model {model}",
    "ir-tuned": DBPEDIA + " --model {model} --tune-alpha",
    # a cross-encoder re-ranking the default model's top hits
    "dbpedia": DBPEDIA + " --rerank {model} --rerank-top 100",
    "debian": "ir {out}/rerank/debian_first5000 --rerank {model} --rerank-top 20",
}
ON_STSB = "{stsb} --dev " + STSB.replace("{split}", "dev") + " --epochs 4"
# The objectives table: one epoch of STS-B (360 steps of 16), no dev, the last step measured.
ONE_EPOCH = "--max-steps 360 --batch-size 16"
OBJECTIVES = {
    "softmax": "sick:{data}/sick/sick_train.tsv.gz --objective softmax",
    "softmax-unnormalized": "sick:{data}/sick/sick_train.tsv.gz --objective softmax --no-normalize",
    "bce": "{stsb} --objective bce --form binary --positive-at 0.8 --option pos_weight=3.09",
    "contrastive": "{stsb} --objective contrastive --form binary --positive-at 0.8",
    "online-contrastive": "{stsb} --objective online-contrastive --form binary --positive-at 0.8",
    "cosine": "{stsb} --objective cosine",
    "cosent": "{stsb} --objective cosent",
    "triplet": "{stsb} --objective triplet --form triplets --positive-at 0.8",
    "mnr": "{stsb} --objective mnr --form positives --positive-at 0.8",
    "floor": "{stsb} --objective cosine --model {random_init}",
}


@dataclass(frozen=True)
class Run:
    """One model to measure: `train` is the `semsearch train` data and options (None: `model`
    as it is), `benchmark` the results file, `prepare` writes data the options name."""

    name: str
    benchmark: str
    evals: tuple[str, ...]
    train: str | None = None
    model: str = "default"
    prepare: Callable[[Path, Path], dict[str, str]] | None = None


def random_init(data_dir: Path, out_dir: Path) -> dict[str, str]:
    """The default model's architecture with random weights (the objectives table's floor)."""
    folder = out_dir / "models" / "random-init"
    if not (folder / "model.safetensors").is_file():
        import torch
        from transformers import AutoTokenizer, BertConfig, BertModel

        from semsearch.models.model_folder import resolve_model

        source = resolve_model("default").path
        torch.manual_seed(0)
        BertModel(BertConfig.from_pretrained(source)).save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return {"random_init": str(folder)}


COLUMNS = ("package", "short_description", "long_description")


def debian_plan(data_dir: Path, out_dir: Path, pairs: int = 3000, max_chars: int = 400) -> dict:
    """CoSENT on STS-B mixed with MNR on Debian synopsis -> description pairs (packages after
    the first 10,000, so the Debian evaluations' first 5,000 stay unseen); dev: STS-B dev and a
    Debian IR split of 500 packages from 5,000-9,999; the plan's path."""
    import yaml

    table = pq.read_table(data_dir / "debian" / "debian_packages.parquet").to_pydict()
    usable = [row for row, text in enumerate(table["long_description"]) if (text or "").strip()]
    rng, folder = np.random.default_rng(0), out_dir / "multi"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows, count in (
        ("train", [r for r in usable if r >= 10_000], pairs),
        ("dev", [r for r in usable if 5_000 <= r < 10_000], 500),
    ):
        chosen = sorted(rng.choice(rows, count, replace=False))
        paths[name] = folder / f"debian_{name}_{count}_{max_chars}.parquet"
        part = {key: [table[key][row] for row in chosen] for key in COLUMNS}
        part["long_description"] = [text[:max_chars] for text in part["long_description"]]
        pq.write_table(pa.table(part), paths[name])
    pairs_of = {"anchor": "short_description", "positive": "long_description"}
    stsb = {split: STSB.format(data=data_dir, split=split) for split in ("train", "dev")}
    plan = {
        "mixing": "proportional",
        "datasets": [
            {"name": "stsb", "source": stsb["train"], "objective": "cosent"},
            {
                "name": "debian",
                "source": str(paths["train"]),
                "objective": "mnr",
                "columns": pairs_of,
            },
        ],
        "dev": [
            {"name": "stsb-dev", "source": stsb["dev"], "task": "sts"},
            {"name": "debian-dev", "source": str(paths["dev"]), "task": "ir", "columns": pairs_of},
        ],
    }
    path = folder / f"plan_proportional_{pairs}.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False), encoding="utf-8")
    return {"plan": str(path)}


def rerank_data(data_dir: Path, out_dir: Path) -> dict[str, str]:
    """A retrieval cross-encoder's pairs: 4,000 Debian synopses (packages after the first
    10,000) and 2,000 PyPI names, each with its own text (label 1) and 3 hard negatives drawn
    from ranks 1-30 of the default bi-encoder; dev: 300 Debian packages from 5,000-9,999. Also
    the first 5,000 Debian packages as a BEIR folder (1,000 synopsis queries) to evaluate on."""
    from semsearch.evaluation.ir import exact_search
    from semsearch.evaluation.similarity import normalize_rows
    from semsearch.models import BiEncoder

    folder = out_dir / "rerank"
    paths = {"train_pairs": folder / "train_pairs.parquet", "dev_pairs": folder / "dev.parquet"}
    if paths["train_pairs"].is_file():
        return {key: str(path) for key, path in paths.items()}
    encoder = BiEncoder.load("default", device="cpu")
    debian = pq.read_table(data_dir / "debian" / "debian_packages.parquet").to_pydict()
    pypi = pq.read_table(data_dir / "pypi" / "pypi_summaries.parquet", columns=["name", "summary"])
    summaries, seen = pypi.column("summary").to_pylist(), {}
    for row, text in enumerate(summary.strip() for summary in summaries):
        if len(text) >= 25 and text.lower() not in PLACEHOLDERS:
            seen[text] = -1 if text in seen else row  # a repeated summary is nobody's own

    def pairs(queries: list[str], documents: list[str], seed: int) -> dict[str, list]:
        vectors = normalize_rows(encoder.encode(documents, batch_size=64))
        ranked = exact_search(normalize_rows(encoder.encode(queries, batch_size=64)), vectors, 31)
        rng, rows = np.random.default_rng(seed), {"sentence1": [], "sentence2": [], "label": []}
        for number, (query, found) in enumerate(zip(queries, ranked)):
            pool = [int(row) for row in found[1:] if row != number][:30]
            for row in (number, *rng.choice(pool, size=3, replace=False)):
                rows["sentence1"].append(query)
                rows["sentence2"].append(documents[row])
                rows["label"].append(int(row == number))
        return rows

    def debian_pairs(start: int, stop: int, count: int, seed: int, pair_seed: int) -> dict:
        texts = debian["long_description"]
        usable = [row for row in range(start, min(stop, len(texts))) if (texts[row] or "").strip()]
        chosen = sorted(np.random.default_rng(seed).choice(usable, count, replace=False))
        documents = [texts[row][:600] for row in chosen]
        return pairs([debian["short_description"][row] for row in chosen], documents, pair_seed)

    own = sorted(row for row in seen.values() if row >= 0)
    chosen = sorted(np.random.default_rng(0).choice(own, 2000, replace=False))
    names = pypi.column("name").to_pylist()
    queries = [names[row].replace("-", " ").replace("_", " ") for row in chosen]
    parts = [
        debian_pairs(10_000, 10**9, 4000, 0, 0),
        pairs(queries, [summaries[row].strip() for row in chosen], 1),
    ]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({key: parts[0][key] + parts[1][key] for key in parts[0]}), paths["train_pairs"]
    )
    pq.write_table(pa.table(debian_pairs(5_000, 10_000, 300, 1, 2)), paths["dev_pairs"])
    beir = folder / "debian_first5000"
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    with (beir / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for row, text in enumerate(debian["long_description"][:5000]):
            handle.write(json.dumps({"_id": str(row), "title": "", "text": text or ""}) + "\n")
    with (beir / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row, text in enumerate(debian["short_description"][:1000]):
            handle.write(json.dumps({"_id": str(row), "text": text}) + "\n")
    qrels = "".join(f"{row}\t{row}\t1\n" for row in range(1000))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return {key: str(path) for key, path in paths.items()}


MPNET = "all-mpnet-base-v2"
PLACEHOLDERS = ("add your description here", "my short description for my project.")
RUNS = (
    Run("default", "mpnet", ("sts", "sick", "ir")),
    Run(MPNET, "mpnet", ("sts", "ir"), model=MPNET),
    Run("default-int8", "cpu_runtimes", ("sts-int8",)),
    Run(
        "stsb-cosent-mpnet",
        "mpnet",
        ("sts", "ir-tuned"),
        f"{ON_STSB} --objective cosent --eval-every 180 --precision bf16",
        model=MPNET,
    ),
    Run("stsb-cosine", "train_stsb", ("sts",), f"{ON_STSB} --objective cosine --eval-every 180"),
    Run("stsb-cosent", "train_stsb", ("sts",), f"{ON_STSB} --objective cosent --eval-every 90"),
    *(
        Run(f"objective-{row}", "train_stsb", ("sts", "sick"), f"{options} {ONE_EPOCH}")
        for row, options in OBJECTIVES.items()
    ),
    Run(
        "multi-mpnet",
        "multi_dataset_train",
        ("sts", "ir-tuned"),
        "--plan {plan} --epochs 2 --eval-every 120 --checkpoint-every 25 --precision bf16",
        model=MPNET,
        prepare=debian_plan,
    ),
    Run(
        "cross-retrieval",
        "retrieval_cross_encoder",
        ("dbpedia", "debian"),
        "{train_pairs} --cross-encoder --dev {dev_pairs} --eval-every 300 "
        "--checkpoint-every 100 --precision bf16",
        prepare=rerank_data,
    ),
)


def train_arguments(run: Run, args) -> list[str]:
    """The run's `semsearch train` arguments, its data paths filled in."""
    fields = {"data": str(args.data_dir), "stsb": STSB.format(data=args.data_dir, split="train")}
    if "{random_init}" in run.train:
        fields.update(random_init(args.data_dir, args.out_dir))
    if run.prepare is not None:
        fields.update(run.prepare(args.data_dir, args.out_dir))
    arguments = shlex.split(run.train.format(**fields))
    if "--model" not in arguments:
        arguments += ["--model", run.model]
    arguments += ["--max-steps", str(args.max_steps)] if args.max_steps else []
    output = args.out_dir / "models" / run.name
    return ["train", *arguments, "-o", str(output), "--device", "cpu"]


def evaluate(run: Run, model: str, args, training: dict) -> list[dict]:
    """Each eval task of `run` on `model` as a user runs it; one line per figure."""
    lines = []
    for task in args.evals or run.evals:
        out = args.out_dir / "evals" / f"{run.name}-{task}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        fields = {"data": args.data_dir, "out": args.out_dir, "model": model}
        arguments = ["eval", *shlex.split(EVALS[task].format(**fields)), "--device", "cpu"]
        started = time.monotonic()
        subprocess.run(cli(*arguments, "--out", str(out)), check=True, cwd=REPO_ROOT)
        result, seconds = json.loads(out.read_text()), round(time.monotonic() - started, 1)
        figures = dict(result["metrics"]) if "modes" not in result else {}
        for mode, metrics in result.get("modes", {}).items():
            figures.update({f"{name} {mode}": value for name, value in metrics.items()})
        for metric, value in figures.items():
            if isinstance(value, (int, float)) and not metric.startswith("queries"):
                line = {"run": run.name, "model": model, "task": task, "metric": metric}
                line.update(value=round(float(value), 4), seconds=seconds, training=training)
                lines.append({**line, "eval_command": shlex.join(["semsearch", *arguments])})
    return lines


def measure(run: Run, args) -> None:
    model, training = run.model, {}
    if run.train is not None:
        arguments = train_arguments(run, args)
        output = Path(arguments[arguments.index("-o") + 1])
        print("training:", shlex.join(["semsearch", *arguments]), flush=True)
        finished = (output / "training.json").is_file()
        if not finished and run_for_minutes(cli(*arguments), args.minutes) != 0:
            print(f"{run.name}: stopped; run the same command again to resume", flush=True)
            return
        result = json.loads((output / "training.json").read_text())
        keys = ("steps", "seconds", "dev", "objective_options")
        training = {key: result.get(key) for key in keys}
        model, training["train_command"] = str(output), shlex.join(["semsearch", *arguments])
    lines = evaluate(run, model, args, training)
    record(args, run.benchmark, lines)
    for line in lines:
        print(f"{run.name:28} {line['task']:8} {line['metric']:40} {line['value']}")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run names or shell patterns (see --list)")
    parser.add_argument("--list", action="store_true", help="each run's train options")
    parser.add_argument("--evals", nargs="+", choices=list(EVALS), help="instead of the run's")
    parser.add_argument("--max-steps", type=int, default=None, help="a quick try")
    parser.add_argument("--minutes", type=float, default=600.0, help="then stop (resumable)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: two threads on a busy 2-core machine spin-wait)",
    )
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the semsearch commands' torch threads
    if args.list or not args.runs:
        for run in RUNS:
            print(f"{run.name} -> {run.benchmark}: {run.train or run.model}; eval {run.evals}")
        return
    chosen = [run for run in RUNS if any(fnmatch.fnmatchcase(run.name, p) for p in args.runs)]
    if not chosen:
        raise SystemExit(f"no run matches {args.runs}: see `python benchmarks/train.py --list`")
    for run in chosen:
        measure(run, args)


if __name__ == "__main__":
    main()
