"""What a run leaves to read: `train_log.jsonl`, `training.png`, the README.md model card
(how the model was made), and the result `train` returns.

Records carry an `event`: `train` (mean loss and learning rate over the last steps),
`eval` (dev metrics, the primary one, whether it is the best so far), `resume` and `test`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.training.checkpoint import LOG_FILE
from semsearch.training.config import TrainingConfig

PLOT_FILE = "training.png"


@dataclass(frozen=True)
class TrainingResult:
    """What `train` reports; the same figures are in `training.json` and the model card."""

    output_dir: Path
    steps: int
    seconds: float
    resumed_from: int | None
    dev_primary: str | None
    dev_best: float | None
    dev_best_step: int | None  # 0: no step beat the starting point, which is what was kept
    test_metrics: dict[str, float] | None
    dev_before: float | None = None  # the starting point's dev figure
    dev_best_trained: float | None = None  # the best dev figure of a fine-tuned step

    @property
    def kept_starting_point(self) -> bool:
        """True when fine-tuning did not beat the starting point on dev (so it was kept)."""
        return self.dev_best_step == 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "output_dir": str(self.output_dir)}

    def dev_record(self) -> dict[str, Any] | None:
        """What `training.json` says of dev (None without dev data)."""
        if self.dev_primary is None:
            return None
        return {
            "primary": self.dev_primary,
            "best": self.dev_best,
            "best_step": self.dev_best_step,
            "before": self.dev_before,
            "best_trained": self.dev_best_trained,
            "kept_starting_point": self.kept_starting_point,
        }


class TrainingLog:
    """An append-only JSON-lines file, flushed per record so a crash loses nothing logged."""

    def __init__(self, output_dir: Path) -> None:
        self.path = output_dir / LOG_FILE

    def write(self, event: str, **values: Any) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": event, **values}, default=float) + "\n")

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def dev_figures(self) -> tuple[float | None, float | None]:
        """The starting point's dev figure and the best of the fine-tuned steps."""
        evaluations = [r for r in self.records() if r.get("event") == "eval"]
        before = next((r["value"] for r in evaluations if r.get("baseline")), None)
        trained = [r["value"] for r in evaluations if not r.get("baseline")]
        return before, max(trained, default=None)

    def keep_until(self, step: int) -> None:
        """Forget what was logged after `step` (the steps a resumed run will redo)."""
        kept = [record for record in self.records() if record.get("step", 0) <= step]
        text = "".join(json.dumps(record) + "\n" for record in kept)
        self.path.write_text(text, encoding="utf-8")


def plot_training(records: list[dict[str, Any]], path: Path, title: str = "") -> None:
    """Training loss against step and, on a second axis, the dev metric."""
    from matplotlib.figure import Figure  # a bare Figure draws with Agg, no display needed

    losses = [(r["step"], r["loss"]) for r in records if r["event"] == "train"]
    evals = [(r["step"], r["value"]) for r in records if r["event"] == "eval"]
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.add_subplot()
    if losses:
        axes.plot(*zip(*losses), color="tab:blue", label="training loss")
    axes.set_xlabel("step")
    axes.set_ylabel("training loss", color="tab:blue")
    if evals:
        metric = next(r["primary"] for r in records if r["event"] == "eval")
        dev_axes = axes.twinx()
        dev_axes.plot(*zip(*evals), color="tab:orange", marker="o", label=f"dev {metric}")
        dev_axes.set_ylabel(f"dev {metric}", color="tab:orange")
    if title:
        axes.set_title(title)
    figure.savefig(path, dpi=110)


HYPER_PARAMETERS = (
    "epochs",
    "max_steps",
    "batch_size",
    "learning_rate",
    "warmup_fraction",
    "weight_decay",
    "max_grad_norm",
    "seed",
    "precision",
    "pooling",
    "normalize",
)
# Test metrics a card shows besides the primary (also those of a combined test, `NAME/metric`).
CARD_METRICS = ("pearson_cosine", "spearman_cosine", "cosine_ap", "ndcg@10")


def write_model_card(folder: Path, config: TrainingConfig, result: dict[str, Any]) -> Path:
    """Write `folder/README.md` from the config and the run's result (`training.json`):
    intro, data, objective and hyper-parameters, figures, files."""
    options = config.to_dict()  # flat: the groups' fields by their own names
    if result.get("kind") == "cross-encoder":
        intro, objective_rows, files = _cross_encoder_parts(config, result)
        parameters = tuple(
            name for name in HYPER_PARAMETERS if name not in ("pooling", "normalize")
        )
        figures = _figure_lines(result, "untrained head: ", shown_metrics=None)
    else:
        intro, objective_rows, files = _bi_encoder_parts(folder, config, result)
        parameters, figures = HYPER_PARAMETERS, _figure_lines(result, "before training ")
    lines = [
        f"# {folder.name}",
        "",
        intro,
        "",
        "## Data",
        "",
        *_data_lines(result),
        "",
        "## Objective and hyper-parameters",
        "",
        "| option | value |",
        "|---|---|",
        *objective_rows,
        *[f"| {name} | {options[name]} |" for name in parameters],
        f"| steps | {result['steps']} (warm-up {result['warmup_steps']}) |",
        f"| device | {result['device']} |",
        f"| training time | {result['seconds']:.0f} s |",
        "",
        "## Figures",
        "",
        *figures,
        "",
        "## Files",
        "",
        *files,
    ]
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _bi_encoder_parts(
    folder: Path, config: TrainingConfig, result: dict[str, Any]
) -> tuple[str, list[str], list[str]]:
    loads = (
        "not in sentence-transformers, which has no attention pooling."
        if result.get("pooling") == "attention"
        else f"in sentence-transformers (`SentenceTransformer({str(folder)!r})`)."
    )
    files = [
        "- the model: `model.safetensors`, `config.json`, tokenizer files, `modules.json`, "
        "`1_Pooling/`, `sentence_bert_config.json`",
        "- `train_log.jsonl`: the loss every few steps and each dev measurement; "
        "`training.png`: both plotted; `training.json`: the config and these figures",
    ]
    if result.get("head"):
        files.append(
            "- `head/`: the trained classifier head (`head.safetensors`, `config.json`), "
            "not needed for search; `semsearch.training.load_head(folder)` rebuilds it"
        )
    intro = (
        f"A bi-encoder fine-tuned from `{config.model}` with semsearch's "
        f"`{config.objective}` objective. The folder loads in semsearch (`--model`) and {loads}"
    )
    objective_rows = [
        f"| objective | `{config.objective}` |",
        f"| objective options | `{result.get('objective_options') or {}}` |",
    ]
    return intro, objective_rows, files


def _cross_encoder_parts(
    config: TrainingConfig, result: dict[str, Any]
) -> tuple[str, list[str], list[str]]:
    intro = (
        f"A **self-trained** cross-encoder: a new {result['num_labels']}-output "
        f"classification head on the transformer of `{config.model}`, trained by semsearch with "
        f"the `{config.objective}` objective (no pretrained cross-encoder was used). It reads a "
        f"pair as `[CLS] a [SEP] b [SEP]`, truncated at {result['max_length']} tokens, and "
        "scores it; use it to re-rank (`semsearch query --rerank`), not to build an index."
    )
    objective_rows = [
        f"| objective | `{config.objective}` (target column "
        f"`{result['objective_options']['target']}`) |"
    ]
    files = [
        "- a Hugging Face sequence classifier (`config.json`, `model.safetensors`, tokenizer "
        "files): `AutoModelForSequenceClassification` and sentence-transformers' "
        "`CrossEncoder` load it; `cross_encoder.json` marks it as a cross-encoder for semsearch",
        "- `train_log.jsonl`, `training.png`, `training.json`: the run's log, plot and figures",
    ]
    return intro, objective_rows, files


def _data_lines(result: dict[str, Any]) -> list[str]:
    if "mixing" in result["data"]:
        return _plan_lines(result["data"])
    train = result["data"]["train"]
    lines = [
        f"- training: `{train['source']}`, {train['rows_used']} examples "
        f"({train['rows_dropped']} dropped for an empty text), columns {', '.join(train['columns'])}"
    ]
    lines += [f"  - {note}" for note in train.get("notes", [])]
    for role in ("dev", "test"):
        if result["data"].get(role):
            summary = result["data"][role]
            lines.append(f"- {role}: `{summary['source']}`, {summary['rows_read']} rows")
    return lines


def _plan_lines(data: dict[str, Any]) -> list[str]:
    """The datasets of a multi-dataset run, how they mixed, and the dev and test sets."""
    lines = [f"- {len(data['train'])} datasets, batches mixed {data['mixing']}:"]
    for name, train in data["train"].items():
        lines.append(
            f"  - {name}: `{train['source']}`, {train['rows_used']} examples, objective "
            f"`{train['objective']}` (weight {train['weight']:g}), columns "
            f"{', '.join(train['columns'])}"
        )
    for role in ("dev", "test"):
        if data.get(role):
            sets = ", ".join(
                f"{name} (`{summary['source']}`, {summary['rows_read']} rows)"
                for name, summary in data[role]["sets"].items()
            )
            lines.append(f"- {role}: {sets}; {data[role]['combined']}")
    return lines


def _figure_lines(
    result: dict[str, Any], before_words: str, shown_metrics: tuple[str, ...] | None = CARD_METRICS
) -> list[str]:
    """The dev and test figures; `shown_metrics` None shows every test metric."""
    lines = []
    dev = result.get("dev")
    if dev:
        before = dev.get("before")
        if dev.get("kept_starting_point"):
            lines.append(starting_point_line(dev))
        else:
            lines.append(
                f"- dev {dev['primary']}: best {dev['best']:.4f} at step {dev['best_step']}"
                + (f" ({before_words}{before:.4f})" if before is not None else "")
            )
    else:
        lines.append("- no dev data: the model saved is the last step's")
    test = result.get("test")
    if test:
        shown = ", ".join(
            f"{name} {value:.4f}"
            for name, value in test["metrics"].items()
            if shown_metrics is None
            or name == test["primary"]
            or name.split("/")[-1] in shown_metrics
        )
        lines.append(f"- test (the model in this folder): {shown}")
    return lines


def starting_point_line(dev: dict[str, Any]) -> str:
    """The card's line when no fine-tuned step beat the starting point on dev."""
    trained = dev.get("best_trained")
    after = "no step was measured" if trained is None else f"the best step reached {trained:.4f}"
    return (
        f"- dev {dev['primary']}: fine-tuning did not beat the starting point "
        f"({dev['best']:.4f} before training; {after}), so this folder holds the "
        "starting point"
    )
