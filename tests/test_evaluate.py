"""The `semsearch eval` tasks as library functions, on the tiny model and real files."""

from __future__ import annotations

import pytest
from tiny_cross import make_tiny_cross_encoder
from training.tiny_data import write_pairs_parquet, write_stsb

from semsearch.errors import SemsearchError
from semsearch.evaluate import (
    ModelOptions,
    evaluate_heatmap,
    evaluate_ir,
    evaluate_pairs,
    evaluate_sts,
    labelled_pairs,
    load_model,
    read_labelled,
)
from semsearch.rerank import rerank_verdicts

DUPLICATES = {"sentence1": "question", "sentence2": "answer", "label": "is_dup"}


@pytest.fixture()
def tiny(tiny_model_dir) -> ModelOptions:
    return ModelOptions(model=str(tiny_model_dir), device="cpu", batch_size=8)


def test_sts_reports_the_figures_and_facts_in_the_json_order(tmp_path, tiny) -> None:
    data = f"stsb:{write_stsb(tmp_path / 'sts.tsv.gz')}"
    result = evaluate_sts(data, tiny)
    assert result.task == "sts" and result.model == tiny.model
    assert result.facts == {"data": data, "rows": 16}
    assert -1 <= result.metrics["spearman_cosine"] <= 1 and "pearson_manhattan" in result.metrics
    record = result.to_dict()
    assert list(record)[:4] == ["task", "model", "data", "rows"]
    assert list(record)[-3:] == ["metrics", "seconds", "semsearch_version"]


def test_sts_shows_a_bar_of_the_texts_it_encodes(tmp_path, tiny, monkeypatch) -> None:
    from dataclasses import replace

    from recording_bar import recording_bar

    import semsearch.models.batch_runner as batch_runner_module  # the encoder's bar

    Bar = recording_bar()
    monkeypatch.setattr(batch_runner_module, "tqdm", Bar)
    data = f"stsb:{write_stsb(tmp_path / 'sts.tsv.gz')}"
    evaluate_sts(data, replace(tiny, show_progress=True))
    texts = read_labelled(data, "sts").columns
    unique = len({*texts["sentence1"], *texts["sentence2"]})
    assert [bar["disable"] for bar in Bar.opened] == [False] and sum(Bar.updates) == unique
    assert len(Bar.updates) > 1  # it moves batch by batch (batch_size 8)


def test_pairs_map_columns_and_apply_dev_thresholds_to_test(tmp_path, tiny) -> None:
    pairs = str(write_pairs_parquet(tmp_path / "pairs.parquet"))
    result = evaluate_pairs(pairs, tiny, test=pairs, columns=DUPLICATES)
    assert result.facts["dev"] == result.facts["test"] == pairs and result.facts["dev_rows"] > 0
    assert 0 <= result.metrics["cosine_accuracy"] <= 1 and "cosine_ap" in result.metrics


def test_labels_other_than_0_and_1_are_refused(tmp_path) -> None:
    pairs = str(write_pairs_parquet(tmp_path / "pairs.parquet"))
    graded = read_labelled(pairs, "pairs", {**DUPLICATES, "label": "similarity"})
    with pytest.raises(SemsearchError, match="column 'label' must hold 0 or 1"):
        labelled_pairs(graded)
    with pytest.raises(SemsearchError, match="cannot be measured as sts: it lacks"):
        read_labelled(pairs, "sts")


def test_ir_rerank_keeps_the_exact_figures_as_before(tmp_path, tiny, beir, tiny_model_dir) -> None:
    exact = evaluate_ir(beir, tiny)
    assert exact.facts["ranking"] == "exact search" and exact.metrics["queries"] == 6
    cross = make_tiny_cross_encoder(tiny_model_dir, tmp_path / "cross")
    reranked = evaluate_ir(beir, tiny, rerank=str(cross), rerank_top=5)
    assert reranked.model == f"{tiny.model} re-ranked by {cross}"
    assert reranked.facts["before_rerank"]["ndcg@10"] == pytest.approx(exact.metrics["ndcg@10"])
    assert reranked.facts["rerank_top"] == 5 and reranked.metrics["queries"] == 6


def test_ir_rerank_reports_every_mode_before_and_after_with_a_verdict(
    tmp_path, tiny, beir, tiny_model_dir
) -> None:
    plain = evaluate_ir(beir, tiny)
    cross = make_tiny_cross_encoder(tiny_model_dir, tmp_path / "cross")
    result = evaluate_ir(beir, tiny, rerank=str(cross), rerank_top=5)
    modes = result.facts["modes"]
    assert list(modes) == [
        "dense",
        "dense + rerank",
        "lexical",
        "lexical + rerank",
        "hybrid adaptive 0.5",
        "hybrid adaptive 0.5 + rerank",
    ]
    for mode in ("dense", "lexical", "hybrid adaptive 0.5"):
        assert modes[mode]["ndcg@10"] == pytest.approx(plain.facts["modes"][mode]["ndcg@10"])
    assert result.metrics == modes["dense + rerank"]
    verdicts = result.facts["rerank_verdicts"]
    assert len(verdicts) == 3 and verdicts[0].startswith("re-ranking ")


def test_rerank_verdicts_say_plainly_when_re_ranking_hurts() -> None:
    modes = {
        "dense": {"ndcg@10": 0.5114},
        "dense + rerank": {"ndcg@10": 0.2311},
        "hybrid": {"ndcg@10": 0.50},
        "hybrid + rerank": {"ndcg@10": 0.56},
        "lexical": {"ndcg@10": 0.40},
        "lexical + rerank": {"ndcg@10": 0.4002},
    }
    lowered, raised, unchanged = rerank_verdicts(modes)
    assert lowered == (
        "re-ranking LOWERS dense ndcg@10 0.5114 -> 0.2311 (-0.2803): this "
        "cross-encoder hurts on this data; search without --rerank"
    )
    assert raised == "re-ranking raises hybrid ndcg@10 0.5000 -> 0.5600 (+0.0600)"
    assert unchanged.startswith("re-ranking leaves lexical unchanged")


def test_a_reranker_that_is_not_a_cross_encoder_fails_before_the_model_loads(
    tmp_path, beir, monkeypatch
) -> None:
    not_a_model = tmp_path / "notes"
    not_a_model.mkdir()
    (not_a_model / "readme.txt").write_text("hello")
    monkeypatch.setattr("semsearch.evaluate.load_model", lambda options: 1 / 0)
    with pytest.raises(SemsearchError, match="holds no config.json"):
        evaluate_ir(beir, ModelOptions(device="cpu"), rerank=str(not_a_model))
    with pytest.raises(SemsearchError, match="is a bi-encoder"):
        evaluate_ir(beir, ModelOptions(device="cpu"), rerank="default")


def test_ir_reports_dense_lexical_and_hybrid_and_tunes_alpha(beir, tiny) -> None:
    result = evaluate_ir(beir, tiny, tune=True)
    modes = result.facts["modes"]
    assert list(modes) == ["dense", "lexical", "hybrid adaptive 0.5", "hybrid convex tuned"]
    assert modes["dense"] == result.metrics and all(m["queries"] == 6 for m in modes.values())
    assert modes["lexical"]["recall@100"] > 0  # each query shares words with its document
    tuned = result.facts["tuned_alpha"]
    assert 0 <= tuned["all_queries"] <= 1 and len(tuned["folds"]) == 2
    assert (
        max(tuned["ndcg@10_by_alpha"].values()) == tuned["ndcg@10_by_alpha"][tuned["all_queries"]]
    )


def test_ranking_with_the_index_needs_an_index(beir, tiny) -> None:
    with pytest.raises(SemsearchError, match="--search-index needs --index"):
        evaluate_ir(beir, tiny, search_index=True)


def test_a_model_or_an_index_not_both_and_no_quantised_index() -> None:
    with pytest.raises(SemsearchError, match="either --model or --index, not both"):
        load_model(ModelOptions(model="x", index="y"))
    with pytest.raises(SemsearchError, match="--quantize goes with --model"):
        load_model(ModelOptions(index="y", quantization="int8"))


def test_heatmap_writes_the_png_and_returns_the_matrix(tmp_path, tiny, sentences) -> None:
    lines = tmp_path / "s.txt"
    lines.write_text("\n".join(sentences[:3]))
    result = evaluate_heatmap(lines, tmp_path / "h.png", tiny)
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"
    assert result.matrix.shape == (3, 3) and result.sentences == sentences[:3]
    assert result.to_dict()["matrix"][1][1] == pytest.approx(1.0, abs=1e-5)
    lines.write_text(sentences[0])
    with pytest.raises(SemsearchError, match="holds 1 sentence: a heat-map needs two or more"):
        evaluate_heatmap(lines, tmp_path / "one.png", tiny)


@pytest.mark.parametrize("name", ["folder", "picture.jpg"])
def test_heatmap_refuses_a_path_that_is_not_a_png_file(tmp_path, tiny, sentences, name) -> None:
    lines = tmp_path / "s.txt"
    lines.write_text("\n".join(sentences[:3]))
    (tmp_path / "folder").mkdir()
    with pytest.raises(SemsearchError, match="must name a .png file"):
        evaluate_heatmap(lines, tmp_path / name, tiny)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["folder", "s.txt"]
