"""`bench pairs` as a library: the sentences, both measurements, the arithmetic, the report."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tiny_cross import make_tiny_cross_encoder
from training.tiny_data import PAIRS, write_stsb

import semsearch.bench.pairs as pairs_module
from semsearch.bench import PairsBenchOptions, load_sentences, pairs_markdown, run_pairs_bench
from semsearch.bench.pairs import BiMeasure, CrossMeasure, SizeResult, random_pairs
from semsearch.bench.report import format_duration
from semsearch.bench.sentences import SentenceSet
from semsearch.errors import SemsearchError
from semsearch.models.cross_encoder import CrossEncoder

QUICK = PairsBenchOptions(min_pairs=40, min_seconds=0, top_k=3, top=5, batch_size=8)


@pytest.fixture()
def data_dir(tmp_path):
    """The shared layout: three STS-B splits (31 distinct sentences) and a PyPI table."""
    (tmp_path / "stsb").mkdir()
    for split in ("train", "dev", "test"):
        write_stsb(tmp_path / "stsb" / f"stsb_{split}.tsv.gz")
    (tmp_path / "pypi").mkdir()
    summaries = [f"A package that does thing number {i}" for i in range(60)] + ["", "dup", "dup"]
    pq.write_table(pa.table({"summary": summaries}), tmp_path / "pypi" / "pypi_summaries.parquet")
    return tmp_path


def _bi(seconds: float) -> BiMeasure:
    return BiMeasure(seconds, seconds / 2, seconds / 2, "Flat (exact)", 5, {})


def test_all_pairs_and_the_extrapolation() -> None:
    size = SizeResult(1_000, "test", CrossMeasure(pairs_scored=500, seconds=2.0), _bi(4.0))
    assert size.all_pairs == 1_000 * 999 // 2 == 499_500
    assert size.cross.pairs_per_second == 250
    assert size.cross_all_seconds == pytest.approx(499_500 / 250)
    assert size.speedup == pytest.approx(499_500 / 250 / 4.0)
    assert size.exact and size.to_dict()["cross_encoder"]["extrapolated"] is True
    # Extrapolation is linear in the pairs: ten times the sentences, ~100 times the time.
    bigger = SizeResult(10_000, "test", size.cross, _bi(4.0))
    assert bigger.cross_all_seconds / size.cross_all_seconds == pytest.approx(49_995_000 / 499_500)


def test_random_pairs_never_pair_a_sentence_with_itself() -> None:
    texts = [f"s{i}" for i in range(5)]
    pairs = random_pairs(texts, 2_000, np.random.default_rng(0))
    assert len(pairs) == 2_000 and all(a != b for a, b in pairs)
    assert len(set(pairs)) == 20  # every ordered pair of 5 sentences turns up
    assert set(random_pairs(["x", "y"], 50, np.random.default_rng(1))) == {("x", "y"), ("y", "x")}


def test_sentences_come_from_stsb_when_they_fit_and_from_pypi_beyond(data_dir) -> None:
    distinct = len({text for pair in PAIRS for text in pair[:2]})
    small = load_sentences(20, data_dir)
    assert len(set(small.texts)) == 20 and small.source.startswith("STS-B")
    assert load_sentences(20, data_dir).texts == small.texts  # seeded
    large = load_sentences(distinct + 5, data_dir)
    assert large.source.startswith("PyPI") and all(t.startswith("A package") for t in large.texts)
    with pytest.raises(SemsearchError, match="more than the 61 distinct PyPI summaries"):
        load_sentences(62, data_dir)


def test_bad_sizes_and_a_missing_folder_are_one_line_errors(data_dir, tmp_path) -> None:
    with pytest.raises(SemsearchError, match="at least 2"):
        load_sentences(1, data_dir)
    with pytest.raises(SemsearchError, match="--data-dir"):
        load_sentences(10, tmp_path / "nowhere")
    lines = tmp_path / "mine.txt"
    lines.write_text("one\ntwo\ntwo\nthree\n")
    assert load_sentences(3, file=lines).texts == ["one", "two", "three"]
    with pytest.raises(SemsearchError, match="more than the 3 distinct lines"):
        load_sentences(4, file=lines)


def test_both_methods_run_and_the_bi_encoder_finds_the_most_similar_pair(
    tiny_model_dir, tiny_encoder, sentences, tmp_path
) -> None:
    cross = CrossEncoder.load(str(make_tiny_cross_encoder(tiny_model_dir, tmp_path / "x")))
    sets = [SentenceSet(sentences, "test"), SentenceSet(sentences[:4], "test")]
    written = []
    result = run_pairs_bench(
        sets, cross, tiny_encoder, QUICK, on_size=lambda so_far: written.append(len(so_far.sizes))
    )
    assert written == [1, 2]  # told after each size, for writing the figures as they come
    first = result.sizes[0]
    assert [size.n for size in result.sizes] == [12, 4] and first.all_pairs == 66
    assert first.cross.pairs_scored >= QUICK.min_pairs and first.cross.seconds > 0
    assert first.bi.structure.startswith("Flat") and first.bi.pairs_kept == 5
    assert first.bi.seconds >= first.bi.encode_seconds > 0
    vectors = tiny_encoder.encode(sentences)
    similarity = np.triu(vectors @ vectors.T, k=1) - np.tril(np.full((12, 12), 9.0))
    a, b = np.unravel_index(np.argmax(similarity), similarity.shape)
    assert {first.bi.best_pair["text_a"], first.bi.best_pair["text_b"]} == {
        sentences[a],
        sentences[b],
    }
    assert first.bi.best_pair["score"] == pytest.approx(similarity[a, b], abs=1e-5)
    json.dumps(result.to_dict())  # JSON-ready
    markdown = pairs_markdown(result)
    assert "| 12 | test | cross-encoder" in markdown and "all 66 (exact search)" in markdown
    assert "Quoted, not measured here" in markdown and "65 hours" in markdown


class _SlowCrossEncoder:
    """Scores nothing, a millisecond per batch, and reports each batch as `predict` does."""

    def predict(self, pairs, batch_size=32, progress=None):
        for start in range(0, len(pairs), batch_size):
            time.sleep(0.001)
            if progress is not None:
                progress(min(batch_size, len(pairs) - start))
        return np.zeros(len(pairs), np.float32)


class _WatchedBar:
    """A tqdm stand-in that records (n, total) at every move."""

    seen: list[tuple[int, int]] = []

    def __init__(self, total, **kwargs) -> None:
        self.n, self.total = 0, total

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, n: int) -> None:
        self.n += n
        self.seen.append((self.n, self.total))

    def refresh(self) -> None:
        self.seen.append((self.n, self.total))


@pytest.mark.parametrize("min_pairs, min_seconds", [(2048, 0.001), (64, 0.05)])
def test_the_cross_encoder_bar_is_full_only_when_the_sample_is_done(
    monkeypatch, sentences, min_pairs, min_seconds
) -> None:
    """Its bar counted seconds towards --min-seconds: it stood at 100 % for as long again
    while the pairs --min-pairs asks for were still being scored."""
    monkeypatch.setattr(pairs_module, "tqdm", _WatchedBar)
    _WatchedBar.seen = []
    options = PairsBenchOptions(min_pairs=min_pairs, min_seconds=min_seconds, batch_size=64)
    measured = pairs_module.measure_cross_encoder(_SlowCrossEncoder(), sentences, options)
    seen, scored = _WatchedBar.seen, measured.pairs_scored
    assert all(n < total for n, total in seen if n < scored), seen  # not full before the end
    assert seen[-1] == (scored, scored)
    assert len(seen) > scored // 64  # it moves batch by batch


def test_options_are_checked() -> None:
    with pytest.raises(SemsearchError, match="--min-pairs must be at least 1"):
        PairsBenchOptions(min_pairs=0).check()
    with pytest.raises(SemsearchError, match="--min-seconds"):
        PairsBenchOptions(min_seconds=-1).check()


def test_durations_read_as_people_read_them() -> None:
    assert format_duration(0.4213) == "0.42 s"
    assert format_duration(75) == "75.0 s"
    assert format_duration(65 * 3600) == "65.0 h"
    assert format_duration(10 * 86400) == "10.0 days"
    assert format_duration(3 * 365 * 86400) == "3.0 years"
