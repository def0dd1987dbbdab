"""The manifest: validated when written and read, format 1 refused, no torch to read it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from living_support import build, generated_table, write

from semsearch.checksums import content_digest
from semsearch.errors import SemsearchError
from semsearch.store import manifest_fields
from semsearch.store.manifest import read_manifest, write_manifest


def test_reading_a_manifest_imports_neither_torch_nor_faiss() -> None:
    code = (
        "import sys, semsearch.store.manifest, semsearch.store.folders; "
        "print('torch' in sys.modules, 'faiss' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _rewritten(folder, data: dict) -> None:
    """manifest.json replaced by `data` with a matching checksum, as a buggy writer would."""
    data = {key: value for key, value in data.items() if key != "checksum"}
    folder.manifest_file.write_text(json.dumps({**data, "checksum": content_digest(data)}))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("index", "search_params"), {"nprobe": -5}, "index.search_params.nprobe"),
        (("index", "search_params"), {"nprobe": True}, "index.search_params.nprobe"),
        (("index", "search_params"), {"ef": 10}, "index.search_params.ef"),
        (("index", "search_params"), "fast", "index.search_params"),
        (("index", "metric"), "sideways", "index.metric"),
        (("index", "factory"), "", "index.factory"),
        (("model", "max_length"), -5, "model.max_length"),
        (("model", "dimension"), "384", "model.dimension"),
        (("model", "pooling"), "median", "model.pooling"),
        (("model", "normalize"), "yes", "model.normalize"),
        (("model", "quantization"), "int4", "model.quantization"),
        (("model", "fingerprint"), None, "model.fingerprint"),
        (("source", "text_column"), "", "source.text_column"),
        (("source", "id_column"), 7, "source.id_column"),
        (("source", "format"), "xlsx", "source.format"),
        (("source", "rows_read"), -1, "source.rows_read"),
        (
            ("segments",),
            [
                {
                    "name": "../../etc",
                    "rows": 1,
                    "parts": 1,
                    "index_file": "x",
                    "index_file_bytes": 1,
                }
            ],
            "segments.name",
        ),
        (("rows",), 7, "rows"),
        (("generation",), 0, "generation"),
        (("next_id",), 1.5, "next_id"),
        (("vector_dtype",), "int8", "vector_dtype"),
        (("created_at",), "yesterday", "created_at"),
        (("build_seconds",), -1, "build_seconds"),
        (("operation",), {}, "operation"),
        (("name",), "", "name"),
        (
            ("files",),
            {"segments/s000000/part-00000.npy": {"bytes": 1, "xxh3": "zz"}},
            "files.segments/s000000/part-00000.npy",
        ),
    ],
)
def test_a_garbage_field_is_refused_in_one_line_naming_it(
    tmp_path, tiny_encoder, path, value, field
) -> None:
    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    data = json.loads(folder.manifest_file.read_text())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _rewritten(folder, data)
    with pytest.raises(SemsearchError, match="is damaged.*rollback docs 1.*--overwrite") as caught:
        read_manifest(folder.path)
    assert f"(field {field} = " in str(caught.value) and "\n" not in str(caught.value)


def test_an_edit_without_a_new_checksum_is_refused(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    data = json.loads(folder.manifest_file.read_text())
    data["source"]["text_column"] = "title"  # a valid value, but not the one written
    folder.manifest_file.write_text(json.dumps(data))
    with pytest.raises(SemsearchError, match="edited after semsearch wrote it.*rollback docs 1"):
        read_manifest(folder.path)
    assert read_manifest(folder.path, 1).text_column == "text"  # the generation's own record


def test_known_values_match_the_models_and_the_corpus_readers() -> None:
    from semsearch.ann.vector_index import METRICS
    from semsearch.io.corpus_readers import FORMATS
    from semsearch.io.documents import DOCUMENTS_FORMAT
    from semsearch.models.openvino_int8 import QUANTIZATION_MODES
    from semsearch.models.pooling import POOLING_MODES

    assert manifest_fields.POOLING_MODES == POOLING_MODES
    assert manifest_fields.QUANTIZATION_MODES == QUANTIZATION_MODES
    assert set(manifest_fields.SOURCE_FORMATS) == {*FORMATS.values(), DOCUMENTS_FORMAT}
    assert set(manifest_fields.METRIC_NAMES) == set(METRICS)


def test_identity_and_creation_time_are_kept_by_every_generation(tmp_path, tiny_encoder) -> None:
    from semsearch.ingest.update import delete_rows

    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    first = folder.manifest()
    assert len(first.index_id) == 32 and first.index_created_at.startswith(first.created_at[:10])
    delete_rows(folder, ids=["d1"])
    second = folder.manifest()
    assert (second.index_id, second.index_created_at) == (first.index_id, first.index_created_at)
    assert second.generation == 2


def test_an_index_of_the_first_format_is_told_to_rebuild(tmp_path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text(json.dumps({"format_version": 1, "rows": 3}))
    with pytest.raises(
        SemsearchError,
        match="format 1.*rebuild it with 'semsearch build CORPUS --name old --overwrite'",
    ):
        read_manifest(tmp_path / "old")


def test_a_bad_manifest_is_never_written(tmp_path, tiny_encoder) -> None:
    from dataclasses import replace

    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    manifest = folder.manifest()
    with pytest.raises(SemsearchError, match="refusing to write a manifest with a bad field rows"):
        write_manifest(folder.path, replace(manifest, generation=2, rows=99))
    assert folder.generations() == [1] and folder.manifest() == manifest
