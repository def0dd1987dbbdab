"""The training loop end to end on the tiny model: artefacts, loadable output, best model, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from semsearch.errors import SemsearchError
from semsearch.evaluation import STSEvaluator, read_stsb
from semsearch.models import BiEncoder
from semsearch.training import load_head, train
from semsearch.training.trainer import Trainer


def _records(folder, event: str) -> list[dict]:
    lines = (folder / "train_log.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["event"] == event]


def test_a_short_run_lowers_the_loss_and_writes_every_artefact(quick_config, stsb_file) -> None:
    config = quick_config(epochs=6, data={"test": f"stsb:{stsb_file}"})
    result = train(config)
    folder = config.output_dir
    losses = [record["loss"] for record in _records(folder, "train")]
    assert len(losses) == result.steps == 24
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    for name in (
        "model.safetensors",
        "modules.json",
        "1_Pooling/config.json",
        "README.md",
        "train_log.jsonl",
        "training.png",
        "training.json",
    ):
        assert (folder / name).is_file(), name
    assert not (folder / "checkpoint").exists()  # a finished run keeps no resumable state
    record = json.loads((folder / "training.json").read_text())
    assert record["finished"] and record["steps"] == 24 and record["warmup_steps"] == 3
    assert record["test"]["metrics"]["spearman_cosine"] == pytest.approx(
        result.test_metrics["spearman_cosine"]
    )
    card = (folder / "README.md").read_text()
    assert "cosine" in card and "learning_rate | 0.001" in card and "dev spearman_cosine" in card


def test_the_saved_folder_gives_the_same_vectors_in_semsearch_and_sentence_transformers(
    quick_config, sentences
) -> None:
    from sentence_transformers import SentenceTransformer

    config = quick_config(max_steps=3)
    train(config)
    ours = BiEncoder.load(str(config.output_dir), device="cpu").encode(sentences)
    theirs = SentenceTransformer(str(config.output_dir), device="cpu").encode(sentences)
    assert np.abs(ours - theirs).max() < 1e-5


def test_the_kept_model_is_the_best_on_dev(quick_config, stsb_file) -> None:
    config = quick_config(epochs=3, eval_every=1, checkpoint_every=100)
    result = train(config)
    evaluations = [r for r in _records(config.output_dir, "eval") if not r["baseline"]]
    best = max(evaluations, key=lambda record: record["value"])
    assert (result.dev_best, result.dev_best_step) == (best["value"], best["step"])
    saved = BiEncoder.load(str(config.output_dir), device="cpu")
    measured = STSEvaluator.from_columns(read_stsb(stsb_file))(saved)["spearman_cosine"]
    assert measured == pytest.approx(best["value"], abs=1e-6)


def test_an_interrupted_run_resumes_and_ends_where_an_uninterrupted_one_ends(
    quick_config, monkeypatch
) -> None:
    options = {"epochs": 3, "checkpoint_every": 4}  # 12 steps, with dropout on
    reference = train(quick_config("whole", **options))

    original_step = Trainer._step

    def interrupted_step(self, rows):
        if self.state.step == 9:
            raise KeyboardInterrupt
        return original_step(self, rows)

    monkeypatch.setattr(Trainer, "_step", interrupted_step)
    config = quick_config("interrupted", **options)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    assert (config.output_dir / "checkpoint" / "state.json").is_file()
    monkeypatch.setattr(Trainer, "_step", original_step)
    resumed = train(config)  # the same call again

    assert resumed.resumed_from == 8 and resumed.steps == reference.steps == 12
    whole, parts = (_records(c.output_dir, "train") for c in (quick_config("whole"), config))
    assert [r["step"] for r in parts] == list(range(1, 13))
    assert [r["loss"] for r in parts] == pytest.approx([r["loss"] for r in whole], abs=1e-6)
    assert resumed.dev_best == pytest.approx(reference.dev_best, abs=1e-6)
    final, expected = (
        load_file(str(c.output_dir / "model.safetensors")) for c in (config, quick_config("whole"))
    )
    assert all(np.allclose(final[key], expected[key], atol=1e-6) for key in expected)


def test_a_finished_run_is_kept_unless_overwritten(quick_config) -> None:
    config = quick_config(max_steps=1)
    train(config)
    with pytest.raises(SemsearchError, match="already holds a finished training run"):
        train(config)
    assert train(config, overwrite=True).steps == 1


def test_resuming_with_other_options_is_refused(quick_config, monkeypatch) -> None:
    def stop(self, rows):
        raise KeyboardInterrupt

    config = quick_config(checkpoint_every=1)
    original_step = Trainer._step
    calls = iter(range(100))
    monkeypatch.setattr(
        Trainer,
        "_step",
        lambda self, rows: original_step(self, rows) if next(calls) < 2 else stop(self, rows),
    )
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.setattr(Trainer, "_step", original_step)
    with pytest.raises(SemsearchError, match="learning_rate"):
        train(quick_config(checkpoint_every=1, learning_rate=5e-4))


def test_a_folder_that_is_not_a_run_is_never_emptied(quick_config) -> None:
    config = quick_config()
    config.output_dir.mkdir()
    (config.output_dir / "notes.txt").write_text("mine")
    with pytest.raises(SemsearchError, match="holds no training run"):
        train(config, overwrite=True)
    assert (config.output_dir / "notes.txt").read_text() == "mine"


def test_softmax_keeps_its_head_beside_the_model(quick_config, sick_file) -> None:
    config = quick_config(
        objective="softmax", max_steps=2, data={"train": f"sick:{sick_file}", "dev": None}
    )
    train(config)
    head_config = json.loads((config.output_dir / "head" / "config.json").read_text())
    assert head_config["options"]["num_labels"] == 3
    assert head_config["label_names"] == ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]
    loss = load_head(config.output_dir)
    logits = loss.classifier(torch.zeros(1, 96))  # (u, v, |u - v|) of the 32-d tiny model
    assert logits.shape == (1, 3)
    saved = load_file(str(config.output_dir / "head" / "head.safetensors"))
    assert np.allclose(loss.classifier.weight.detach().numpy(), saved["weight"])


def test_mnr_trains_on_positives_formed_from_scores(quick_config) -> None:
    config = quick_config(objective="mnr", max_steps=2, data={"form": "positives"})
    train(config)
    record = json.loads((config.output_dir / "training.json").read_text())
    assert record["data"]["train"]["columns"] == ["anchor", "positive"]
    assert record["data"]["train"]["rows_used"] == 8  # the pairs scoring 4 or more of 5


def test_a_missing_column_fails_before_the_model_loads(
    quick_config, pairs_file, monkeypatch
) -> None:
    monkeypatch.setattr(BiEncoder, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    config = quick_config(data={"train": str(pairs_file), "dev": None})
    with pytest.raises(
        SemsearchError,
        match="needs the column\\(s\\) sentence1, sentence2, score.*question, answer",
    ):
        train(config)


def test_a_run_refused_while_setting_up_leaves_no_empty_folder(quick_config, sick_file) -> None:
    config = quick_config(
        objective="softmax",
        objective_options={"parts": ("u", "bogus")},
        data={"train": f"sick:{sick_file}", "dev": None},
    )
    with pytest.raises(SemsearchError, match="bogus"):
        train(config)
    assert not config.output_dir.exists()


def test_attention_pooling_learns_its_scorer_and_is_saved(quick_config) -> None:
    config = quick_config(pooling="attention", max_steps=3, data={"dev": None})
    train(config)
    scorer = load_file(str(config.output_dir / "1_Pooling" / "attention.safetensors"))
    assert np.abs(scorer["scorer.weight"]).max() > 0  # it starts at zero
    assert BiEncoder.load(str(config.output_dir), device="cpu").pooling.mode == "attention"
    assert "not in sentence-transformers" in (config.output_dir / "README.md").read_text()


def test_a_run_that_does_not_beat_the_starting_point_says_so_and_keeps_it(
    quick_config, tiny_model_dir, monkeypatch, caplog
) -> None:
    # Dev says 0.8672 before training and less after every step (the figures): the
    # folder must hold the starting point, not the "best" step.
    figures = iter([0.8672, 0.8601, 0.8665, 0.8650, 0.8640, 0.8630])
    original = Trainer._evaluation_data

    def scripted(self, role):
        data, evaluator = original(self, role)
        if evaluator is not None and role == "dev":
            measure = evaluator.__class__.__call__
            primary = evaluator.primary_metric

            def call(encoder, measure=measure, evaluator=evaluator):
                return {**measure(evaluator, encoder), primary: next(figures)}

            return data, _Scripted(evaluator, call)
        return data, evaluator

    monkeypatch.setattr(Trainer, "_evaluation_data", scripted)
    config = quick_config(epochs=1, eval_every=1, checkpoint_every=100)  # 4 steps
    with caplog.at_level("WARNING"):
        result = train(config)
    assert result.kept_starting_point and result.dev_best == 0.8672
    assert (result.dev_before, result.dev_best_trained) == (0.8672, 0.8665)
    assert any("did not beat the starting point" in r.getMessage() for r in caplog.records)
    saved = BiEncoder.load(str(config.output_dir), device="cpu")
    start = BiEncoder.load(str(tiny_model_dir), device="cpu")
    sentences = ["A man plays a guitar.", "The cat sleeps."]
    assert np.allclose(saved.encode(sentences), start.encode(sentences), atol=1e-6)
    record = json.loads((config.output_dir / "training.json").read_text())
    assert record["dev"]["kept_starting_point"] and record["dev"]["best_step"] == 0
    assert "did not beat the starting point" in (config.output_dir / "README.md").read_text()


class _Scripted:
    """An evaluator whose figures are scripted, the rest of it the real one's."""

    def __init__(self, evaluator, call) -> None:
        self._evaluator, self._call = evaluator, call

    def __call__(self, encoder):
        return self._call(encoder)

    def __getattr__(self, name):
        return getattr(self._evaluator, name)
