"""Checksums: recorded for every file, checked on open and in full; the tester's four
tamper cases are refused in one line instead of answering wrongly."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from living_support import build, generated_table, write

from semsearch.checksums import file_digest
from semsearch.errors import SemsearchError
from semsearch.ingest.update import add_rows, delete_rows
from semsearch.search.searcher import Searcher
from semsearch.store.folders import IndexFolder
from semsearch.store.verify import record_checksums, verify_index


@pytest.fixture()
def folder(tmp_path, tiny_encoder) -> IndexFolder:
    return build(write(generated_table(40), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)


def _index_file(folder: IndexFolder):
    record = folder.manifest().segments[-1]
    return folder.segment_dir(record.name) / record.index_file


def _refused(folder: IndexFolder, tiny_encoder, match: str) -> str:
    with pytest.raises(SemsearchError, match=match) as caught:
        Searcher(folder, encoder=tiny_encoder).search(["guitar"], k=3)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_every_file_of_a_generation_is_recorded_with_its_size_and_hash(folder) -> None:
    manifest = folder.manifest()
    assert set(manifest.files) == set(manifest.file_names())
    assert any(name.endswith(".parquet") for name in manifest.files)
    for name, entry in manifest.files.items():
        path = folder.path / name
        assert entry == {"bytes": path.stat().st_size, "xxh3": file_digest(path)}
    report = verify_index(folder)
    assert report.status == "ok" and report.files == len(manifest.files) and not report.problems


def test_a_change_hashes_only_its_new_files_and_keeps_the_rest(
    folder, tmp_path, tiny_encoder
) -> None:
    before = folder.manifest().files
    add_rows(folder, write(generated_table(5, start=100), tmp_path / "b.parquet"), tiny_encoder)
    delete_rows(folder, ids=["d1"])
    after = folder.manifest()
    assert {name: after.files[name] for name in before} == before
    assert any("deleted-g000003" in name for name in after.files)
    assert verify_index(folder).status == "ok"


def test_zeroed_bytes_in_a_faiss_file_of_the_same_size_are_refused(folder, tiny_encoder) -> None:
    path = _index_file(folder)
    data = bytearray(path.read_bytes())
    data[100:300] = bytes(200)
    path.write_bytes(bytes(data))
    line = _refused(folder, tiny_encoder, r"index-g000001\.faiss has the recorded size but not")
    assert "semsearch verify docs" in line and "--overwrite" in line


def test_a_metadata_file_swapped_for_one_with_as_many_rows_is_refused(
    folder, tmp_path, tiny_encoder
) -> None:
    part = folder.segment_dir("s000000") / "part-00000.parquet"
    table = pq.read_table(part)
    swapped = table.set_column(
        table.column_names.index("text"), "text", pa.array(["swapped"] * table.num_rows)
    )
    pq.write_table(swapped, part)
    _refused(
        folder, tiny_encoder, r"part-00000\.parquet (has the recorded size but not|is \d+ bytes)"
    )


def test_an_edited_metric_is_refused(folder, tiny_encoder) -> None:
    data = json.loads(folder.manifest_file.read_text())
    data["index"]["metric"] = "l2"
    folder.manifest_file.write_text(json.dumps(data))
    line = _refused(folder, tiny_encoder, "edited after semsearch wrote it")
    assert "semsearch rollback docs 1" in line


def test_a_metric_edited_without_checksums_is_caught_by_the_faiss_file(
    folder, tiny_encoder
) -> None:
    data = json.loads(folder.manifest_file.read_text())
    data["index"]["metric"] = "l2"
    for key in ("checksum", "files"):  # as an index written before checksums
        del data[key]
    folder.manifest_file.write_text(json.dumps(data))
    _refused(folder, tiny_encoder, "built for the cosine/dot metric but the manifest says l2")


def test_an_emptied_fingerprint_is_refused(folder, tiny_encoder) -> None:
    data = json.loads(folder.manifest_file.read_text())
    data["model"]["fingerprint"] = ""
    folder.manifest_file.write_text(json.dumps(data))
    _refused(folder, tiny_encoder, "edited after semsearch wrote it")
    del data["checksum"], data["files"]  # the manifest's own check out of the way
    folder.manifest_file.write_text(json.dumps(data))
    _refused(folder, tiny_encoder, "records no model fingerprint.*--no-model-check")
    hits = Searcher(folder, encoder=tiny_encoder, model_check=False).search(["guitar"], k=3)
    assert len(hits[0]) == 3


def test_full_verify_names_the_file_and_a_generation_that_verifies(
    folder, tmp_path, tiny_encoder
) -> None:
    add_rows(folder, write(generated_table(5, start=100), tmp_path / "b.parquet"), tiny_encoder)
    vectors = folder.segment_dir("s000001") / "part-00000.npy"  # only gen 2 holds it
    data = bytearray(vectors.read_bytes())
    data[-8:] = bytes(8)
    vectors.write_bytes(bytes(data))
    report = verify_index(folder)
    assert report.status == "damaged" and report.rollback_to == 1
    assert report.problems == [
        "segments/s000001/part-00000.npy has the recorded size but not the recorded xxh3 hash "
        "(its content changed)"
    ]
    assert "'semsearch rollback docs 1' (generation 1 verifies)" in report.line()
    vectors.write_bytes(b"short")
    assert "is 5 bytes, the manifest records" in verify_index(folder).problems[0]


def test_an_index_without_checksums_is_checked_by_size_and_can_record_them(
    folder, tiny_encoder
) -> None:
    data = json.loads(folder.manifest_file.read_text())
    del data["checksum"], data["files"]
    folder.manifest_file.write_text(json.dumps(data))
    (folder.path / "generations" / "g000001.json").write_text(json.dumps(data))
    report = verify_index(folder)
    assert report.status == "unchecked" and "--record" in report.line()
    Searcher(folder, encoder=tiny_encoder).search(["guitar"], k=1)  # still opens
    manifest = record_checksums(folder)
    assert manifest.generation == 2 and set(manifest.files) == set(manifest.file_names())
    assert verify_index(folder).status == "ok"


def test_rollback_repairs_an_edited_manifest(folder) -> None:
    from semsearch.ingest.maintain import rollback

    data = json.loads(folder.manifest_file.read_text())
    data["rows"] = 3
    folder.manifest_file.write_text(json.dumps(data))
    manifest = rollback(folder, 1)
    assert manifest.generation == 2 and manifest.rows == 40
    assert verify_index(folder).status == "ok"


def test_verify_imports_no_faiss_nor_torch_to_start() -> None:
    code = (
        "import sys, semsearch.store.verify, semsearch.cli.verify_command; "
        "print('torch' in sys.modules, 'faiss' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_writers_refuse_to_build_on_a_changed_file(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(300), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        index="IVF4,Flat",
        target_recall=None,
    )
    trained = folder.path / "trained" / folder.manifest().index.trained_file
    more = write(generated_table(5, start=1000), tmp_path / "b.parquet")
    data = bytearray(trained.read_bytes())
    data[-100:] = bytes(100)
    trained.write_bytes(bytes(data))
    with pytest.raises(SemsearchError, match=r"trained/t-g000001\.faiss has the recorded size"):
        add_rows(folder, more, tiny_encoder)
    ids = folder.segment_dir("s000000") / "part-00000.ids.npy"
    ids.write_bytes(ids.read_bytes()[:-8] + bytes(8))
    with pytest.raises(SemsearchError, match=r"part-00000\.ids\.npy has the recorded size"):
        delete_rows(folder, ids=["d1"])
    assert folder.generations() == [1]


def _vectors_file(folder: IndexFolder):
    return folder.segment_dir(folder.manifest().segments[-1].name) / "part-00000.npy"


def _zero_tail(path, count: int = 64) -> None:
    """Change a file in place, keeping its size (what an open by size alone cannot see)."""
    data = bytearray(path.read_bytes())
    data[-count:] = bytes(count)
    path.write_bytes(bytes(data))


def test_vectors_changed_in_place_are_refused_before_a_filtered_exact_search(
    folder, tiny_encoder
) -> None:
    searcher = Searcher(folder, encoder=tiny_encoder)
    searcher.search(["guitar"], k=3)  # a plain search reads no stored vector
    _zero_tail(_vectors_file(folder))
    with pytest.raises(SemsearchError, match=r"part-00000\.npy has the recorded size") as caught:
        Searcher(folder, encoder=tiny_encoder).search(["guitar"], k=3, where="year >= 2000")
    assert "\n" not in str(caught.value) and "semsearch verify docs" in str(caught.value)


def test_rollback_to_a_damaged_generation_is_refused_and_changes_nothing(
    folder, tmp_path, tiny_encoder
) -> None:
    from semsearch.ingest.maintain import rollback

    delete_rows(folder, ids=["d1"])
    _zero_tail(folder.path / "segments" / "s000000" / "part-00000.parquet", 16)
    before = (folder.manifest_file.read_bytes(), folder.generations())
    with pytest.raises(
        SemsearchError, match=r"cannot roll back: .*generation 1: .*part-00000\.parquet"
    ) as caught:
        rollback(folder, 1)
    assert "\n" not in str(caught.value)
    assert (folder.manifest_file.read_bytes(), folder.generations()) == before


def test_vectors_an_exact_stand_in_reads_at_open_are_hashed(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(300), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        index="IVF4,Flat",
        target_recall=None,
    )
    add_rows(folder, write(generated_table(3, start=1000), tmp_path / "b.parquet"), tiny_encoder)
    _zero_tail(_vectors_file(folder))  # the added segment: fewer rows than lists, searched exactly
    with pytest.raises(SemsearchError, match=r"s000001/part-00000\.npy has the recorded size"):
        Searcher(folder, encoder=tiny_encoder)


@pytest.mark.parametrize("field", ["text_column", "id_column"])
def test_a_manifest_naming_a_column_that_does_not_exist_is_one_line(
    folder, tmp_path, tiny_encoder, field
) -> None:
    from semsearch.checksums import content_digest
    from semsearch.ingest import maintain

    for path in (folder.manifest_file, folder.path / "generations" / "g000001.json"):
        data = json.loads(path.read_text())
        data["source"][field] = "nowhere"
        data.pop("checksum")
        data["checksum"] = content_digest(data)  # as a careful hand-editor would
        path.write_text(json.dumps(data))
    line = _refused(folder, tiny_encoder, r"names 'nowhere' as the (text|id) column")
    assert "g000001.json" in line and "segment s000000" in line and "doc, text" in line
    assert "'nowhere' as the" in verify_index(folder).line()
    more = generated_table(2, start=500).rename_columns(["nowhere", "text", "year", "license"])
    if field == "text_column":
        more = generated_table(2, start=500).rename_columns(["doc", "nowhere", "year", "license"])
    writers = [
        lambda: add_rows(folder, write(more, tmp_path / "b.parquet"), tiny_encoder),
        lambda: delete_rows(folder, ids=["d1"]),
        lambda: maintain.reindex(folder, "flat", target_recall=None),
        lambda: maintain.compact(folder),
    ]
    for writer in writers:  # none builds a generation on the edited record
        with pytest.raises(SemsearchError, match="names 'nowhere' as the"):
            writer()
    assert folder.generations() == [1]


def test_a_manifest_resealed_with_the_text_column_as_the_id_column_is_searched(
    folder, tiny_encoder
) -> None:
    """The text column is a legitimate id column (it exists in every segment): a manifest
    re-sealed to name it is consistent, and a search answers with each row's text as its id."""
    from semsearch.checksums import content_digest

    for path in (folder.manifest_file, folder.path / "generations" / "g000001.json"):
        data = json.loads(path.read_text())
        data["source"]["id_column"] = "text"
        data.pop("checksum")
        data["checksum"] = content_digest(data)  # sealed again, as semsearch seals it
        path.write_text(json.dumps(data))
    assert verify_index(folder).status == "ok"
    hits = Searcher(folder, encoder=tiny_encoder).search(["guitar"], k=3)[0]
    assert len(hits) == 3
    assert all(hit.id == hit.text and hit.text for hit in hits)
    assert "doc" in hits[0].metadata and "text" not in hits[0].metadata


@pytest.mark.parametrize("operation", ["reindex", "compact"])
def test_writers_that_copy_the_vectors_refuse_ones_changed_in_place(
    folder, tiny_encoder, operation
) -> None:
    from semsearch.ingest import maintain

    delete_rows(folder, ids=["d1"])  # so that compact has something to merge
    _zero_tail(_vectors_file(folder))
    with pytest.raises(SemsearchError, match=r"part-00000\.npy has the recorded size"):
        if operation == "reindex":
            maintain.reindex(folder, "flat", target_recall=None)
        else:
            maintain.compact(folder)
    assert folder.generations() == [1, 2]  # no generation records the changed file as good
