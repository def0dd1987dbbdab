"""`build --engine ray` from a URI of a pyarrow filesystem: a `file://` glob of JSONL or gzipped
CSV files, and a prefix of Parquet files on S3 (a local moto server, skipped without moto),
read by the workers themselves, give the local build of the plain folder."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from distributed import conftest as support

from semsearch.distributed import RayOptions, build_index_on_ray
from semsearch.ingest.build import build_index

pytestmark = [*support.ray_tests, pytest.mark.usefixtures("local_ray")]

FILES = ((0, 130), (130, 90))  # (first row, rows) of each file


def _folder(tmp_path, suffix: str = "parquet"):
    """Two files of `write_corpus` rows as Parquet, JSON lines or gzipped CSV."""
    folder = tmp_path / "data"
    for number, (first, rows) in enumerate(FILES):
        path = support.write_corpus(
            folder / f"part-{number}.parquet", rows, seed=number, first_id=first
        )
        if suffix == "jsonl":
            path.with_suffix(".jsonl").write_text(
                "".join(json.dumps(row) + "\n" for row in pq.read_table(path).to_pylist()),
                encoding="utf-8",
            )
        elif suffix == "csv.gz":
            with pa.CompressedOutputStream(str(path.with_suffix(".csv.gz")), "gzip") as stream:
                pcsv.write_csv(pq.read_table(path), stream)
        if suffix != "parquet":
            path.unlink()
    return folder


@pytest.mark.parametrize("suffix", ["jsonl", "csv.gz"])
def test_a_file_uri_glob_on_ray_is_the_local_build_of_the_folder(
    suffix, tmp_path, tiny_model_dir, tiny_encoder
) -> None:
    folder = _folder(tmp_path, suffix)
    settings = {"model": str(tiny_model_dir), "part_rows": 50, "index": "flat"}
    local = build_index(
        support.options(folder, tmp_path / "local", None, **settings), encoder=tiny_encoder
    )
    assert local.manifest().source.format == suffix.removesuffix(".gz")
    uri = folder.as_uri() + f"/*.{suffix}"
    on_ray = build_index_on_ray(
        support.options(uri, tmp_path / "ray", None, **settings), RayOptions(workers=2)
    )
    assert on_ray.name == "data" and on_ray.manifest().source.path == uri
    assert on_ray.manifest().source.sha256 == local.manifest().source.sha256
    support.assert_same_rows(local, on_ray)


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[pafs.S3FileSystem, str]]:
    """A moto S3 server on this machine: (filesystem, the URI options that reach it)."""
    server_module = pytest.importorskip(
        "moto.server", reason="moto is not installed: pip install -e '.[test]'"
    )
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    filesystem = pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        endpoint_override=f"{host}:{port}",
        scheme="http",
        allow_bucket_creation=True,
    )
    filesystem.create_dir("corpora")
    yield filesystem, options
    server.stop()


def test_an_s3_prefix_builds_on_either_engine_as_the_local_folder(
    s3, tmp_path, tiny_model_dir, tiny_encoder
) -> None:
    filesystem, query = s3
    folder = _folder(tmp_path)
    for path in sorted(folder.glob("*.parquet")):
        pq.write_table(
            pq.read_table(path),
            f"corpora/docs/{path.name}",
            filesystem=filesystem,
            row_group_size=100,
        )
    pq.write_table(pa.table({"x": [1]}), "corpora/docs/_SUCCESS", filesystem=filesystem)
    settings = {"model": str(tiny_model_dir), "part_rows": 50, "index": "flat"}
    local = build_index(
        support.options(folder, tmp_path / "local", None, **settings), encoder=tiny_encoder
    )
    prefix = f"s3://testing:testing@corpora/docs/?{query}"  # credentials in the URI: the workers get them too
    from_s3 = build_index(
        support.options(prefix, tmp_path / "s3", None, **settings), encoder=tiny_encoder
    )
    assert from_s3.name == "docs" and from_s3.manifest().source.path == "s3://corpora/docs/"
    support.assert_same_rows(local, from_s3)
    glob = f"s3://testing:testing@corpora/docs/part-*.parquet?{query}"
    on_ray = build_index_on_ray(
        support.options(glob, tmp_path / "ray", None, **settings), RayOptions(workers=2)
    )
    assert on_ray.manifest().operation["files"] == 2
    support.assert_same_rows(local, on_ray)
