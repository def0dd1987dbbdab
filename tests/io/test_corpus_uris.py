"""A corpus named by a URI (`file://`, an fsspec `memory://`): the local engine builds, adds and
mines from it as from the plain path; an unknown scheme, a missing package, or a URI given
for the index folder is one line."""

from __future__ import annotations

import sys

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line, runner

from semsearch.cli.app import app
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions, default_name
from semsearch.ingest.corpus_files import resolve_files
from semsearch.ingest.update import add_rows
from semsearch.io.corpus import open_corpus
from semsearch.io.filesystems import RemoteFile, open_uri
from semsearch.mining import CorpusSource, MiningOptions, mine_corpus
from semsearch.store.folders import IndexFolder
from semsearch.store.segment import Segment


def _write(path, first: int, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = [
        "" if i % 10 == 3 else f"{('cat', 'json', 'chess', 'cake')[i % 4]} text {first + i}"
        for i in range(rows)
    ]
    pq.write_table(
        pa.table({"id": [f"r{first + i}" for i in range(rows)], "text": texts}),
        path,
        row_group_size=7,
    )


def _stored(folder: IndexFolder) -> tuple[list[int], np.ndarray]:
    (record,) = folder.manifest().segments
    segment = Segment(folder.segment_dir(record.name), record)
    return np.concatenate(segment.part_ids).tolist(), np.concatenate(
        [vectors for _, vectors in segment.iter_parts()]
    )


def _options(corpus, out_dir, name=None) -> BuildOptions:
    return BuildOptions(
        corpus=corpus,
        name=name,
        id_column="id",
        out_dir=out_dir,
        index="flat",
        part_rows=8,
        show_progress=False,
        lexical=None,
    )


def test_file_uris_name_a_file_a_folder_or_a_glob(tmp_path) -> None:
    data = tmp_path / "my data"  # a space: URIs carry it as %20
    _write(data / "b.parquet", 0, 3)
    _write(data / "sub" / "a.parquet", 3, 3)
    for ignored in ("_SUCCESS", ".hidden.parquet", "notes.txt"):
        (data / ignored).write_text("x")
    root = data.as_uri() + "/"
    assert "%20" in root
    assert [f.name for f in resolve_files(root)] == ["b.parquet", "a.parquet"]
    assert [f.name for f in resolve_files(root + "**/*.parquet")] == ["b.parquet", "a.parquet"]
    assert [f.name for f in resolve_files(root + "*.parquet")] == ["b.parquet"]
    assert [f.name for f in resolve_files(root + "[ab].parquet")] == ["b.parquet"]
    assert [str(f) for f in resolve_files(root + "b.parquet")] == [f"{root}b.parquet"]
    assert default_name(root + "*.parquet") == default_name(root) == "my data"
    assert default_name(root + "sub/a.parquet") == "a"
    with pytest.raises(Exception, match="no file matches"):
        resolve_files(root + "*.csv")
    corpus = open_corpus(root + "sub/a.parquet")
    assert (corpus.path.name, corpus.num_rows, corpus.format) == ("a.parquet", 3, "parquet")


def test_a_uri_shows_no_credentials_and_opens_its_filesystem_once() -> None:
    secret = RemoteFile(
        "s3://KEY:SECRET@bucket/docs/a.parquet?region=eu-west-1&endpoint_override=h:9"
    )
    assert str(secret) == "s3://bucket/docs/a.parquet" and secret.name == "a.parquet"
    assert str(RemoteFile("abfs://container@account.dfs.core.windows.net/a.csv")).startswith(
        "abfs://container@"
    )
    first, path = open_uri("s3://bucket/docs/a.parquet?region=eu-west-1")
    again, other = open_uri("s3://bucket/more/b.parquet?region=eu-west-1")
    assert first is again and (path, other) == ("bucket/docs/a.parquet", "bucket/more/b.parquet")


def test_a_build_from_file_uris_is_the_build_from_the_paths(tmp_path, tiny_encoder) -> None:
    data = tmp_path / "data"
    _write(data / "part-0.parquet", 0, 20)
    _write(data / "part-1.parquet", 20, 13)
    plain = build_index(_options(data, tmp_path / "plain"), encoder=tiny_encoder)
    by_glob = build_index(
        _options(data.as_uri() + "/*.parquet", tmp_path / "glob"), encoder=tiny_encoder
    )
    assert by_glob.name == "data" and by_glob.manifest().operation["files"] == 2
    assert by_glob.manifest().source.path == data.as_uri() + "/*.parquet"
    assert by_glob.manifest().source.sha256 == plain.manifest().source.sha256
    ours, theirs = _stored(plain), _stored(by_glob)
    assert theirs[0] == ours[0] and len(ours[0]) == 30
    np.testing.assert_allclose(theirs[1], ours[1], atol=1e-6)
    one = build_index(
        _options((data / "part-0.parquet").as_uri(), tmp_path / "one"), encoder=tiny_encoder
    )
    local = build_index(_options(data / "part-0.parquet", tmp_path / "local"), encoder=tiny_encoder)
    assert one.name == local.name == "part-0"
    assert (one.manifest().source.sha256, _stored(one)[0]) == (
        local.manifest().source.sha256,
        _stored(local)[0],
    )


def test_an_fsspec_filesystem_builds_adds_and_mines(tmp_path, tiny_encoder) -> None:
    memory = fsspec.filesystem("memory")
    for name, first, rows in (("a", 0, 20), ("b", 20, 12)):
        _write(tmp_path / f"{name}.parquet", first, rows)
        memory.pipe(f"/semsearch-test/{name}.parquet", (tmp_path / f"{name}.parquet").read_bytes())
    try:
        built = build_index(
            _options("memory://semsearch-test/*.parquet", tmp_path / "idx", "mem"),
            encoder=tiny_encoder,
        )
        assert built.manifest().rows == 29
        _write(tmp_path / "more.parquet", 32, 5)
        memory.pipe("/semsearch-test/more.parquet", (tmp_path / "more.parquet").read_bytes())
        assert add_rows(built, "memory://semsearch-test/more.parquet", tiny_encoder).added == 4
        assert built.manifest().operation["source"] == "memory://semsearch-test/more.parquet"
        mining = MiningOptions(top_k=3)
        remote = mine_corpus(
            CorpusSource("memory://semsearch-test/a.parquet", id_column="id"), mining, tiny_encoder
        )
        local = mine_corpus(
            CorpusSource(tmp_path / "a.parquet", id_column="id"), mining, tiny_encoder
        )
        assert remote.to_table().equals(local.to_table()) and len(local) > 0
    finally:
        memory.rm("/semsearch-test", recursive=True)


def _cli(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_bad_uris_and_a_uri_for_the_index_folder_are_one_line(
    tmp_path, corpus_file, monkeypatch
) -> None:
    idx = ["--out-dir", str(tmp_path / "idx")]
    line = error_line(_cli("build", "nosuch://bucket/docs/*.parquet", *idx))
    assert line.startswith(
        "error: unknown filesystem nosuch:// in nosuch://bucket/docs: use file://, s3://"
    )
    monkeypatch.setitem(sys.modules, "paramiko", None)  # as if fsspec's sftp package were missing
    line = error_line(_cli("build", "sftp://host/docs.parquet", *idx))
    assert (
        line
        == 'error: reading sftp:// needs a package that is not installed: SFTPFileSystem requires "paramiko" to be installed'
    )
    uri = (tmp_path / "missing.parquet").as_uri()
    assert (
        error_line(_cli("build", uri, *idx)) == f"error: corpus {uri} does not exist: check the URI"
    )
    assert "corpus file" in error_line(_cli("mine", uri, "--engine", "local"))
    folder_line = error_line(_cli("build", str(corpus_file), "--out-dir", "s3://bucket/indexes"))
    assert folder_line.startswith(
        "error: --out-dir s3://bucket/indexes is a URI, but an index folder must be a local path"
    )
    assert "--index-dir gs://b/x is a URI" in error_line(
        _cli("add", str(corpus_file), "--index", "docs", "--index-dir", "gs://b/x")
    )
    assert "--index s3://b/docs is a URI" in error_line(_cli("mine", "--index", "s3://b/docs"))
    assert not (tmp_path / "idx").exists()
