"""The manifest: validated when written and read, format 1 refused, no torch to read it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from index.living_support import build, generated_table, write

from semsearch.errors import SemsearchError
from semsearch.index.manifest import read_manifest, write_manifest


def test_reading_a_manifest_imports_neither_torch_nor_faiss() -> None:
    code = ("import sys, semsearch.index.manifest, semsearch.index.store; "
            "print('torch' in sys.modules, 'faiss' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("index", "search_params"), {"nprobe": -5}),
        (("index", "search_params"), "fast"),
        (("model", "max_length"), -5),
        (("index", "metric"), "sideways"),
        (("segments",), [{"name": "../../etc", "rows": 1, "parts": 1, "index_file": "x", "index_file_bytes": 1}]),
        (("rows",), 7),
    ],
)
def test_edited_fields_are_refused_in_one_line(tmp_path, tiny_encoder, path, value) -> None:
    folder = build(write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    data = json.loads(folder.manifest_file.read_text())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    folder.manifest_file.write_text(json.dumps(data))
    with pytest.raises(SemsearchError, match="is damaged.*rollback.*--overwrite") as caught:
        read_manifest(folder.path)
    assert "\n" not in str(caught.value)


def test_an_index_of_the_first_format_is_told_to_rebuild(tmp_path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text(json.dumps({"format_version": 1, "rows": 3}))
    with pytest.raises(SemsearchError, match="format 1.*rebuild it with 'semsearch build CORPUS --name old --overwrite'"):
        read_manifest(tmp_path / "old")


def test_a_bad_manifest_is_never_written(tmp_path, tiny_encoder) -> None:
    from dataclasses import replace

    folder = build(write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    manifest = folder.manifest()
    with pytest.raises(SemsearchError, match="refusing to write a manifest with a bad field rows"):
        write_manifest(folder.path, replace(manifest, generation=2, rows=99))
    assert folder.generations() == [1] and folder.manifest() == manifest
