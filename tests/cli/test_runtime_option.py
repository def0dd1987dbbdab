"""`--runtime openvino` on build, add and query: recorded in the operation, the same answers
as torch, and a bad name refused in one line."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")


@pytest.fixture(autouse=True)
def converted_once(monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> None:
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)


def _info(cli) -> dict:
    return json.loads(cli("info", "docs", "--index-dir", cli.index_dir, "--json").stdout)


def _ids(cli, text: str, runtime: str) -> list[str]:
    result = cli("query", text, "--index-dir", cli.index_dir, "-k", "5", "--json",
                 "--device", "cpu", "--runtime", runtime)  # fmt: skip
    assert result.exit_code == 0, result.output
    return [json.loads(line)["id"] for line in result.stdout.splitlines()]


def test_build_add_and_query_on_openvino(cli, corpus_file, sentences, tmp_path) -> None:
    built = cli("build", str(corpus_file), "--name", "docs", "--id-column", "doc_id",
                "--model", cli.model, "--out-dir", cli.index_dir, "--device", "cpu",
                "--runtime", "openvino")  # fmt: skip
    assert built.exit_code == 0, built.output
    assert "encoder on openvino-" in built.stdout
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")
    assert _ids(cli, sentences[2], "openvino") == _ids(cli, sentences[2], "torch")
    pq.write_table(pa.table({"doc_id": ["n1"], "text": ["a new row about guitars"],
                             "topic": ["music"]}), tmp_path / "new.parquet")  # fmt: skip
    added = cli("add", str(tmp_path / "new.parquet"), "--index", "docs", "--index-dir",
                cli.index_dir, "--device", "cpu", "--runtime", "openvino")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")


def test_a_torch_build_records_torch(cli, corpus_file) -> None:
    built = cli("build", str(corpus_file), "--name", "docs", "--model", cli.model,
                "--out-dir", cli.index_dir, "--device", "cpu")  # fmt: skip
    assert built.exit_code == 0 and _info(cli)["operation"]["runtime"] == "torch"


def test_an_unknown_runtime_is_one_line(cli, corpus_file) -> None:
    result = cli("build", str(corpus_file), "--model", cli.model, "--out-dir", cli.index_dir,
                 "--device", "cpu", "--runtime", "onnx")  # fmt: skip
    assert "unknown runtime 'onnx'" in error_line(result)
