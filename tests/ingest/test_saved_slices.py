"""A build saves its progress every 2,048 texts encoded: an interrupted build keeps what it
encoded, says so once, and a resumed one encodes only the rest."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import Interrupted
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.saved_slices import SAVE_EVERY, SavedSlices, encode_in_slices
from semsearch.models.encoder import TokenizedTexts
from semsearch.store.folders import IndexFolder, scan_indexes
from semsearch.store.segment import Segment

TEXTS = 5_000


@pytest.fixture()
def five_thousand(tmp_path):
    """Texts of many lengths, so that length order and row order differ."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    texts = [" ".join(words[: 1 + (i * 7) % 10]) + f" {i}" for i in range(TEXTS)]
    path = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"text": texts}), path)
    return path


def _counting(encoder, monkeypatch, stop_after: int | None = None) -> list[int]:
    """Count the texts each encode call gets; Ctrl-C once `stop_after` texts would be passed."""
    calls: list[int] = []
    original = encoder.encode

    def encode(texts, **kwargs):
        if stop_after is not None and sum(calls) + len(texts) > stop_after:
            raise KeyboardInterrupt
        calls.append(len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(encoder, "encode", encode)
    return calls


def _options(corpus, out_dir) -> BuildOptions:
    return BuildOptions(corpus=corpus, name="texts", out_dir=out_dir, show_progress=False)


def test_an_interrupted_build_keeps_what_it_encoded_and_the_resume_encodes_only_the_rest(
    five_thousand, tmp_path, tiny_encoder, monkeypatch
) -> None:
    """Ctrl-C during the third 2,048-text slice of the one 16,384-row part: 4,096 texts are
    kept and said to be, and the same build then encodes the other 904. Before, progress was
    saved a part (16,384 texts) at a time: nothing was kept, and the resume encoded all 5,000."""
    _counting(tiny_encoder, monkeypatch, stop_after=4_500)
    options = _options(five_thousand, tmp_path / "out")
    with pytest.raises(Interrupted) as stopped:
        build_index(options, encoder=tiny_encoder)
    partial = tmp_path / "out" / ".texts.partial"
    assert str(stopped.value) == (
        f"interrupted: 4,096 of 5,000 texts are encoded and kept in {partial}: "
        "run the same command again to resume from there"
    )
    assert stopped.value.exit_code == 130
    (entry,) = scan_indexes(tmp_path / "out")
    assert "stopped with 4,096 rows encoded and kept" in entry.reason

    monkeypatch.undo()
    calls = _counting(tiny_encoder, monkeypatch)
    folder = build_index(options, encoder=tiny_encoder)
    assert sum(calls) == TEXTS - 2 * SAVE_EVERY  # 904: only what was not saved
    assert not partial.exists()
    (record,) = folder.manifest().segments
    assert record.parts == 1  # the part is still one part of up to 16,384 rows
    assert not (folder.segment_dir(record.name) / ".encoding").exists()

    monkeypatch.undo()
    reference = build_index(_options(five_thousand, tmp_path / "ref"), encoder=tiny_encoder)
    ours, theirs = (_segment(f) for f in (folder, reference))
    np.testing.assert_allclose(
        ours.vectors_at(np.arange(TEXTS)), theirs.vectors_at(np.arange(TEXTS)), atol=1e-6
    )
    assert ours.metadata().equals(theirs.metadata())


def _segment(folder: IndexFolder) -> Segment:
    (record,) = folder.manifest().segments
    return Segment(folder.segment_dir(record.name), record)


def test_slices_follow_the_length_order_and_a_saved_slice_is_not_encoded_again(tmp_path) -> None:
    token_ids = [[1] * (1 + i % 9) for i in range(10)]
    texts = TokenizedTexts([f"t{i}" for i in range(10)], token_ids)
    seen: list[list[str]] = []

    def encode(chunk):
        seen.append(list(chunk))
        assert isinstance(chunk, TokenizedTexts)  # the tokens travel with the texts
        return np.array([[float(text[1:]), 1.0] for text in chunk], np.float32)

    saved = SavedSlices(tmp_path / "part")
    vectors = encode_in_slices(encode, texts, 2, saved, slice_rows=4)
    assert vectors[:, 0].tolist() == list(range(10))  # in input order
    lengths = [sorted(len(token_ids[int(text[1:])]) for text in chunk) for chunk in seen]
    assert lengths == [[6, 7, 8, 9], [2, 3, 4, 5], [1, 1]]  # the longest first, as batched
    assert len(saved.files()) == 3

    seen.clear()
    again = encode_in_slices(encode, texts, 2, saved, slice_rows=4)
    assert seen == [] and np.array_equal(again, vectors)  # all saved: nothing encoded

    (tmp_path / "part" / "slice-00009.npz").write_bytes(b"not a slice")  # a torn file
    np.savez(
        tmp_path / "part" / "slice-00010.npz", positions=np.array([99]), vectors=np.ones((1, 2))
    )
    assert np.array_equal(encode_in_slices(encode, texts, 2, saved, slice_rows=4), vectors)
    assert seen == []  # both ignored: their rows are those already saved
