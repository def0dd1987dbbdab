"""Finding index folders and refusing damaged ones."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.index.build import BuildOptions, build_index
from semsearch.index.store import find_index, list_indexes


@pytest.fixture()
def built(corpus_file, tmp_path, tiny_encoder):
    options = BuildOptions(
        corpus=corpus_file, name="docs", out_dir=tmp_path / "idx", show_progress=False
    )
    return build_index(options, encoder=tiny_encoder)


def test_most_recent_index_is_the_default(built, corpus_file, tmp_path, tiny_encoder) -> None:
    options = BuildOptions(
        corpus=corpus_file, name="newer", out_dir=tmp_path / "idx", show_progress=False
    )
    build_index(options, encoder=tiny_encoder)
    assert [f.name for f in list_indexes(tmp_path / "idx")] == ["newer", "docs"]
    assert find_index(None, tmp_path / "idx").name == "newer"
    assert find_index("docs", tmp_path / "idx").name == "docs"


def test_missing_index_lists_the_ones_there_are(built, tmp_path) -> None:
    with pytest.raises(SemsearchError, match=r"no index named 'nope'.*docs"):
        find_index("nope", tmp_path / "idx")
    with pytest.raises(SemsearchError, match="semsearch build"):
        find_index(None, tmp_path / "empty")


def test_truncated_index_file_is_refused(built) -> None:
    data = built.index_file.read_bytes()
    built.index_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(SemsearchError, match="truncated"):
        built.read_index(built.manifest())


def test_corrupt_index_file_of_the_right_size_is_refused(built) -> None:
    size = built.index_file.stat().st_size
    built.index_file.write_bytes(b"\x00" * size)
    with pytest.raises(SemsearchError, match="corrupt"):
        built.read_index(built.manifest())


def test_damaged_manifest_is_refused(built) -> None:
    built.manifest_file.write_text("{not json")
    with pytest.raises(SemsearchError, match="damaged"):
        built.manifest()
