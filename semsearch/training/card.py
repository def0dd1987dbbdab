"""The model card: a short README.md in the output folder saying how the model was made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from semsearch.training.config import TrainingConfig

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
