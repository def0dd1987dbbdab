"""The training loop: batches -> loss -> AdamW step, with dev checks, checkpoints and a log.

`train(config)` reads the data (a bad column fails before the model loads), builds the
objective around the model, and steps through seeded batches. Dev data is measured
before training, every `eval_every` steps and at each epoch's end; the starting point is
saved first and each step that beats the best so far replaces it at the output folder's
root with `BiEncoder.save`, so the folder is always a loadable model, and never one worse
on dev than the model training started from (when fine-tuning does not beat it, the run
says so and keeps the starting point). The resumable state goes to `checkpoint/` at each measurement and every
`checkpoint_every` steps; running the same command again carries on from there and ends
exactly where an uninterrupted run would.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, ClassVar

import torch
from tqdm.auto import tqdm

from semsearch import __version__
from semsearch.errors import SemsearchError
from semsearch.evaluation.base import Evaluator
from semsearch.losses import build_loss
from semsearch.models import BiEncoder
from semsearch.models.torch_device import autocast_for
from semsearch.training import checkpoint as ckpt
from semsearch.training.config import TrainingConfig
from semsearch.training.data import (
    TrainingData,
    make_evaluator,
    prepare_training_data,
    read_eval_data,
)
from semsearch.training.heads import save_head
from semsearch.training.report import (
    PLOT_FILE,
    TrainingLog,
    TrainingResult,
    plot_training,
    write_model_card,
)
from semsearch.training.schedule import (
    BatchSource,
    make_trainables,
    mixed_batches,
    mixed_steps,
)

log = logging.getLogger(__name__)

LOSS_SMOOTHING = 0.05  # weight of the newest step in the progress bar's running loss
REPLOT_SECONDS = 60.0  # redraw training.png after a dev check at most this often (~1 s a plot)


class Trainer:
    """One run. Construction prepares everything (or restores a checkpoint); `run` trains."""

    checkpoint_marks: ClassVar[dict[str, str]] = {}  # saved beside the config

    def __init__(self, config: TrainingConfig, overwrite: bool = False) -> None:
        self.config = config
        self.output_dir = config.output_dir
        self.data = self._prepare_data()
        self.dev, self.dev_evaluator = self._evaluation_data("dev")
        self.test, self.test_evaluator = self._evaluation_data("test")
        resuming = ckpt.prepare_output_dir(self.output_dir, overwrite)
        saved = ckpt.read_checkpoint_state(self.output_dir) if resuming else None
        if saved is not None:
            self._check_resumable(saved[1])
        torch.manual_seed(config.optimization.seed)
        self._build_objective()
        self._plan_and_resume(saved)

    def _prepare_data(self) -> TrainingData:
        """The training data, read and checked for the objective."""
        config = self.config
        return prepare_training_data(config.objective, config.data, config.optimization.seed)

    def _load_encoder(self) -> BiEncoder:
        config = self.config
        # torch: the weights change as it trains (an export would be stale at once).
        encoder = BiEncoder.load(
            config.model,
            pooling=config.pooling,
            normalize=config.normalize,  # type: ignore[arg-type]
            device=config.run.device,
            runtime="torch",
        )
        self.device = encoder.device
        return encoder

    def _build_objective(self) -> None:
        """Model, loss, and the batch source of the columns they read."""
        config, data = self.config, self.data
        self.objective_options = options_for(config.objective, config.objective_options, data)
        self.loss = build_loss(config.objective, self._load_encoder(), **self.objective_options)
        columns = [data.columns[name] for name in self.loss.input_columns(data.names)]
        self.sources = [BatchSource(columns, no_duplicates=config.objective == "mnr")]

    def _plan_and_resume(self, saved) -> None:
        """Step counts, trainables, log and state; restored from `saved` when resuming."""
        options = self.config.optimization
        self.steps = mixed_steps(
            self.sources,
            options.batch_size,
            options.seed,
            options.epochs,
            self._mixing(),
            options.max_steps,
        )
        self.warmup_steps = math.ceil(self.steps * options.warmup_fraction)
        self.trainables = make_trainables(
            self.loss, options, self.device, self.warmup_steps, self.steps
        )
        self.state = ckpt.TrainingState()
        self.log = TrainingLog(self.output_dir)
        self.resumed_from: int | None = None
        if saved is not None:
            ckpt.restore_checkpoint(self.output_dir, self.trainables)
            self.state = saved[0]
            self.resumed_from = self.state.step
            self.log.keep_until(self.state.step)
            self.log.write("resume", step=self.state.step, epoch=self.state.epoch)
        self._pending_losses: list[float] = []
        self._running_loss: float | None = None

    def run(self) -> TrainingResult:
        started, seconds_before = time.monotonic(), self.state.seconds
        self._clock = lambda: seconds_before + time.monotonic() - started
        self._plotted_at = self._clock()
        if self.state.step == 0 and self.dev_evaluator is not None:
            self._evaluate(baseline=True)
        self.loss.train()
        with tqdm(
            total=self.steps,
            initial=self.state.step,
            desc="training",
            unit="step",
            disable=not self.config.run.show_progress,
            dynamic_ncols=True,
        ) as self._bar:
            while self.state.step < self.steps:
                self._train_epoch()
        self.loss.eval()
        if self.state.evaluated_step != self.state.step and self.dev_evaluator is not None:
            self._evaluate()
        return self._finish()

    def _mixing(self) -> str:
        return "round-robin"  # one dataset: its own batches in order

    def _batch_loss(self, batch: tuple[int, list[int]]) -> torch.Tensor:
        """The loss of one batch (dataset number, row indices), differentiable."""
        columns, labels = self.loss.make_batch(self.data.columns, batch[1])
        return self.loss(columns, labels)

    def _train_epoch(self) -> None:
        state, options = self.state, self.config.optimization
        batches = mixed_batches(
            self.sources, options.batch_size, options.seed, state.epoch, self._mixing()
        )
        for batch in batches[state.batches_done :]:
            value = self._step(batch)
            state.step += 1
            state.batches_done += 1
            self._after_step(value)
            if state.step >= self.steps:
                break
        if state.batches_done >= len(batches):
            state.epoch, state.batches_done = state.epoch + 1, 0
            self._evaluate()
            self._checkpoint()

    def _step(self, batch: tuple[int, list[int]]) -> float:
        """One optimisation step on `batch`; returns its loss."""
        trainables, options = self.trainables, self.config.optimization
        with autocast_for(self.device, options.precision):
            value = self._batch_loss(batch)
        trainables.scaler.scale(value).backward()
        trainables.scaler.unscale_(trainables.optimizer)
        torch.nn.utils.clip_grad_norm_(self.loss.parameters(), options.max_grad_norm)
        trainables.scaler.step(trainables.optimizer)
        trainables.scaler.update()
        trainables.scheduler.step()
        trainables.optimizer.zero_grad(set_to_none=True)
        return float(value.detach())

    def _after_step(self, value: float) -> None:
        step, run = self.state.step, self.config.run
        self._pending_losses.append(value)
        smoothed = self._running_loss
        self._running_loss = (
            value if smoothed is None else smoothed + LOSS_SMOOTHING * (value - smoothed)
        )
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{self._running_loss:.4f}", refresh=False)
        if step % run.log_every == 0 or step == self.steps:
            mean = sum(self._pending_losses) / len(self._pending_losses)
            self.log.write(
                "train",
                step=step,
                epoch=self.state.epoch,
                loss=mean,
                lr=self.trainables.scheduler.get_last_lr()[0],
                seconds=self._clock(),
            )
            self._pending_losses = []
        if run.eval_every and step % run.eval_every == 0:
            self._evaluate()
            self._checkpoint()
        elif step % run.checkpoint_every == 0:
            self._checkpoint()

    def _evaluate(self, baseline: bool = False) -> None:
        """Measure dev; the starting point (`baseline`) is saved as the model, and then each
        step that beats the best so far: a fine-tuned model must earn its place."""
        evaluator, state = self.dev_evaluator, self.state
        if evaluator is None or state.evaluated_step == state.step:
            return
        metrics = evaluator(self.loss.encoder)
        value = evaluator.primary(metrics)
        best = state.best_metric is None or value > state.best_metric
        if best:
            state.best_metric, state.best_step = value, state.step
            self._save_model()
        self.log.write(
            "eval",
            step=state.step,
            epoch=state.epoch,
            primary=evaluator.primary_metric,
            value=value,
            best=best,
            baseline=baseline,
            metrics=metrics,
            seconds=self._clock(),
        )
        state.evaluated_step = state.step
        if self._clock() - self._plotted_at >= REPLOT_SECONDS:
            self._plot()

    def _checkpoint(self) -> None:
        self.state.seconds = self._clock()
        config = {**self.config.to_dict(), **self.checkpoint_marks}
        ckpt.save_checkpoint(self.output_dir, self.trainables, self.state, config)

    def _save_model(self) -> None:
        self.loss.encoder.save(self.output_dir)
        save_head(
            self.loss,
            self.config.objective,
            self.objective_options,
            self.output_dir,
            self.data.label_names,
        )

    def _finish(self) -> TrainingResult:
        if self.dev_evaluator is None:
            self._save_model()  # without dev data, the model is the last step's
        before, best_trained = self.log.dev_figures()
        if self.state.best_step == 0 and self.dev_evaluator is not None:
            log.warning(
                "fine-tuning did not beat the starting point on dev (%s %.4f before training, "
                "%s after): %s holds the starting point",
                self.dev_evaluator.primary_metric,
                before,
                "no step measured" if best_trained is None else f"best {best_trained:.4f}",
                self.output_dir,
            )
        self.state.seconds = self._clock()
        test_metrics = None
        if self.test_evaluator is not None:
            test_metrics = self.test_evaluator(self._load_kept_model())
            self.log.write(
                "test",
                step=self.state.step,
                primary=self.test_evaluator.primary_metric,
                value=self.test_evaluator.primary(test_metrics),
                metrics=test_metrics,
            )
        result = TrainingResult(
            output_dir=self.output_dir,
            steps=self.state.step,
            seconds=self.state.seconds,
            resumed_from=self.resumed_from,
            dev_primary=self.dev_evaluator.primary_metric if self.dev_evaluator else None,
            dev_best=self.state.best_metric,
            dev_best_step=self.state.best_step,
            test_metrics=test_metrics,
            dev_before=before,
            dev_best_trained=best_trained,
        )
        record = self._record(result)
        result_file = self.output_dir / ckpt.RESULT_FILE
        result_file.write_text(json.dumps(record, indent=2, default=float) + "\n", encoding="utf-8")
        write_model_card(self.output_dir, self.config, record)
        self._plot()
        ckpt.remove_checkpoint(self.output_dir)
        return result

    def _load_kept_model(self) -> BiEncoder:
        """The model the run kept, read back from disk as a user will load it."""
        return BiEncoder.load(str(self.output_dir), device=str(self.device), runtime="torch")

    def _record(self, result: TrainingResult) -> dict[str, Any]:
        """`training.json`: the config, the data, the schedule, the figures, the model's facts."""
        test = None
        if result.test_metrics is not None and self.test_evaluator is not None:
            test = {"primary": self.test_evaluator.primary_metric, "metrics": result.test_metrics}
        return {
            "finished": True,
            "semsearch_version": __version__,
            **self._model_facts(),
            "config": self.config.to_dict(),
            "objective_options": self.objective_options,
            "data": self._data_summary(),
            "steps": result.steps,
            "warmup_steps": self.warmup_steps,
            "device": str(self.device),
            "seconds": round(result.seconds, 1),
            "resumed_from": result.resumed_from,
            "dev": result.dev_record(),
            "test": test,
        }

    def _data_summary(self) -> dict[str, Any]:
        """What `training.json` and the card say of the data."""
        return {
            "train": self.data.summary(),
            "dev": data_summary(self.dev),
            "test": data_summary(self.test),
        }

    def _model_facts(self) -> dict[str, Any]:
        """What `training.json` says of the trained model beyond the shared fields."""
        return {
            "pooling": self.loss.encoder.pooling.mode,
            "normalize": self.loss.encoder.normalize,
            "head": (self.output_dir / "head").is_dir() or None,
        }

    def _evaluation_data(self, role: str):
        """The `role` ("dev" or "test") data and its evaluator, or (None, None)."""
        source = getattr(self.config.data, role)
        if source is None:
            return None, None
        data = read_eval_data(source, self.config.data)
        return data, self._evaluator(data, role)

    def _evaluator(self, data: TrainingData, role: str) -> Evaluator:
        return make_evaluator(data, self.config.data.dev_task, role)

    def _check_resumable(self, saved_config: dict[str, Any]) -> None:
        changed = self.config.resume_differences(saved_config)
        if changed:
            raise SemsearchError(
                f"{self.output_dir} holds a checkpoint made with other options ({', '.join(changed)}): "
                "run with the same options to resume, or pass --overwrite to start again"
            )

    def _plot(self) -> None:
        title = f"{self.config.objective} from {Path(self.config.model).name}"
        plot_training(self.log.records(), self.output_dir / PLOT_FILE, title)
        self._plotted_at = self._clock()


def options_for(objective: str, given: dict[str, Any], data: TrainingData) -> dict[str, Any]:
    """`given` options of `objective`, with `num_labels` of `softmax` read off the data if absent."""
    options = dict(given)
    if objective == "softmax" and "num_labels" not in options:
        labels = data.columns["label"]
        options["num_labels"] = len(data.label_names) if data.label_names else max(labels) + 1
    return options


def data_summary(data: TrainingData | None) -> dict[str, Any] | None:
    """Where a dataset came from and how many rows were read, for the training log."""
    return None if data is None else {"source": data.source, "rows_read": data.rows_read}
