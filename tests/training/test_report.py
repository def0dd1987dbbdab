"""The JSON-lines log (and forgetting what a resumed run redoes) and the training plot."""

from __future__ import annotations

from semsearch.training.report import TrainingLog, plot_training


def test_log_keeps_records_up_to_a_step(tmp_path) -> None:
    log = TrainingLog(tmp_path)
    for step in (1, 2, 3):
        log.write("train", step=step, loss=1.0 / step)
    log.write("eval", step=3, primary="spearman_cosine", value=0.5)
    log.keep_until(2)
    assert [(r["event"], r["step"]) for r in log.records()] == [("train", 1), ("train", 2)]


def test_plot_draws_loss_and_dev_metric(tmp_path) -> None:
    records = [{"event": "train", "step": s, "loss": 1 / s} for s in range(1, 5)]
    records += [{"event": "eval", "step": 4, "primary": "spearman_cosine", "value": 0.8}]
    plot_training(records, tmp_path / "training.png", title="cosine")
    assert (tmp_path / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
