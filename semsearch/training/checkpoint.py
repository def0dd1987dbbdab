"""The resumable state of a run, in `<output>/checkpoint/`, and the output folder's rules.

`checkpoint/` holds the weights of everything that learns (encoder and head, as the loss's
state dict), the optimiser, scheduler, gradient scaler and random-number states, and
`state.json` (step, position in the epoch, best dev figure, the run's config). It is
written to a temporary folder and swapped in, so an interruption while saving leaves the
previous checkpoint whole. A finished run deletes it and leaves `training.json`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from semsearch.disk import disk_problems, temporary_for
from semsearch.errors import SemsearchError

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.json"
WEIGHTS_FILE = "weights.safetensors"
OPTIMISER_FILE = "optimizer.pt"
RESULT_FILE = "training.json"
LOG_FILE = "train_log.jsonl"
KEPT = "any previous checkpoint is kept"
RESUME = "free some space and run the same command to resume from it"


@dataclass
class TrainingState:
    """Where a run stands: enough, with the weights and optimiser, to carry on exactly."""

    step: int = 0
    epoch: int = 0
    batches_done: int = 0  # batches of `epoch` already trained on
    best_metric: float | None = None
    best_step: int | None = None
    evaluated_step: int | None = None  # the last step dev was measured at
    seconds: float = 0.0


@dataclass
class Trainables:
    """What a checkpoint saves besides the state: the model and its optimisation."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler


def save_checkpoint(
    output_dir: Path, trainables: Trainables, state: TrainingState, config: dict[str, Any]
) -> None:
    final = output_dir / CHECKPOINT_DIR
    partial = output_dir / f".{CHECKPOINT_DIR}.partial"
    retired = output_dir / f".{CHECKPOINT_DIR}.old"
    shutil.rmtree(partial, ignore_errors=True)
    # The weights and AdamW's two moments of each: about what the files take.
    needed = 3 * sum(p.numel() * p.element_size() for p in trainables.model.parameters())
    # A failed save (a full disk) removes its partial folder; the previous checkpoint stays.
    with (
        disk_problems(output_dir, "saving a checkpoint", needed, KEPT, RESUME),
        temporary_for(final, partial),
    ):
        partial.mkdir(parents=True)
        save_model(trainables.model, str(partial / WEIGHTS_FILE))
        torch.save(
            {
                "optimizer": trainables.optimizer.state_dict(),
                "scheduler": trainables.scheduler.state_dict(),
                "scaler": trainables.scaler.state_dict(),
                "rng": _rng_state(),
            },
            partial / OPTIMISER_FILE,
        )
        state_record = {"state": asdict(state), "config": config}
        (partial / STATE_FILE).write_text(
            json.dumps(state_record, indent=2) + "\n", encoding="utf-8"
        )
        if final.exists():  # else `retired` may be the only checkpoint: kept until the swap
            shutil.rmtree(retired, ignore_errors=True)
            final.rename(retired)
    shutil.rmtree(retired, ignore_errors=True)


def read_checkpoint_state(output_dir: Path) -> tuple[TrainingState, dict[str, Any]] | None:
    """The saved state and config, or None when there is no checkpoint."""
    folder = _checkpoint_folder(output_dir)
    if folder is None:
        return None
    try:
        record = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        return TrainingState(**record["state"]), record["config"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise SemsearchError(
            f"the checkpoint in {folder} is damaged ({exc}): pass --overwrite to start again"
        ) from exc


def restore_checkpoint(output_dir: Path, trainables: Trainables) -> None:
    """Load weights, optimiser, scheduler, scaler and random states saved in `output_dir`."""
    folder = _checkpoint_folder(output_dir)
    if folder is None:
        raise SemsearchError(f"{output_dir} holds no checkpoint to resume from")
    load_model(trainables.model, str(folder / WEIGHTS_FILE), device=_device_of(trainables.model))
    saved = torch.load(folder / OPTIMISER_FILE, weights_only=True)
    trainables.optimizer.load_state_dict(saved["optimizer"])
    trainables.scheduler.load_state_dict(saved["scheduler"])
    trainables.scaler.load_state_dict(saved["scaler"])
    _set_rng_state(saved["rng"])


def remove_checkpoint(output_dir: Path) -> None:
    for name in (CHECKPOINT_DIR, f".{CHECKPOINT_DIR}.partial", f".{CHECKPOINT_DIR}.old"):
        shutil.rmtree(output_dir / name, ignore_errors=True)


@contextmanager
def no_empty_folder_if_refused(output_dir: Path) -> Iterator[None]:
    """A run refused while it is being set up (a bad objective option, say) leaves no empty
    output folder behind; a folder that was there before is left as it was."""
    existed = output_dir.exists()
    try:
        yield
    except BaseException:
        if not existed and output_dir.is_dir() and not any(output_dir.iterdir()):
            output_dir.rmdir()
        raise


def prepare_output_dir(output_dir: Path, overwrite: bool) -> bool:
    """Make `output_dir` ready; True when it holds a checkpoint to resume from.

    A finished run is kept unless `overwrite`; a folder that semsearch training did not
    write is never emptied, so a typo cannot delete someone's files.
    """
    if not output_dir.exists():
        output_dir.mkdir(parents=True)
        return False
    if not output_dir.is_dir():
        raise SemsearchError(f"output {output_dir} is a file: choose a folder")
    entries = list(output_dir.iterdir())
    if not entries:
        return False
    ours = any((output_dir / name).exists() for name in (LOG_FILE, RESULT_FILE, CHECKPOINT_DIR))
    if not ours:
        raise SemsearchError(
            f"output folder {output_dir} is not empty and holds no training run: choose a new folder"
        )
    if not overwrite and (output_dir / RESULT_FILE).exists():
        raise SemsearchError(
            f"{output_dir} already holds a finished training run: pass --overwrite to train again"
        )
    if not overwrite and _checkpoint_folder(output_dir) is not None:
        return True
    # Overwriting, or a run interrupted before its first checkpoint: start afresh.
    for entry in entries:
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return False


def _checkpoint_folder(output_dir: Path) -> Path | None:
    # `.old` is the previous checkpoint when an interruption fell between the two renames.
    for name in (CHECKPOINT_DIR, f".{CHECKPOINT_DIR}.old"):
        if (output_dir / name / STATE_FILE).is_file():
            return output_dir / name
    return None


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _device_of(model: nn.Module) -> str:
    return str(next(model.parameters()).device)
