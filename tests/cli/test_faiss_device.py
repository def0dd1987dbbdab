"""`--device` on the commands that run FAISS: refused in one line where there is no GPU,
and a build on the GPU (marked `gpu`) that writes an index any machine opens."""

from __future__ import annotations

import faiss
import pytest
import torch
from cli.support import error_line

from semsearch.ann.devices import gpu_count

no_gpu = pytest.mark.skipif(gpu_count() > 0 or torch.cuda.is_available(), reason="a GPU is visible")


@no_gpu
@pytest.mark.parametrize(
    "command",
    [
        ["build", "CORPUS", "--device", "cuda"],
        ["reindex", "NAME", "--index-type", "flat", "--device", "cuda"],
        ["compact", "NAME", "--device", "cuda"],
        ["tune", "NAME", "--device", "cuda"],
        ["mine", "--index", "NAME", "--device", "cuda"],
    ],
)
def test_commands_refuse_cuda_without_a_gpu_in_one_line(
    tmp_path, cli, corpus_file, command
) -> None:
    built = cli(
        "build",
        str(corpus_file),
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--name",
        "c",
        "--index-type",
        "ivf",
        "--json",
    )
    assert built.exit_code == 0, built.output
    before = sorted(path.name for path in (tmp_path / "idx" / "c").rglob("*"))
    args = [{"CORPUS": str(corpus_file), "NAME": "c"}.get(arg, arg) for arg in command]
    if command[0] == "build":
        args += ["--model", cli.model, "--name", "other"]
    result = cli(*args, "--index-dir" if command[0] != "build" else "--out-dir", cli.index_dir)
    line = error_line(result)
    assert "GPU" in line and "--device cpu" in line
    assert not (tmp_path / "idx" / "other").exists()  # nothing written
    assert sorted(path.name for path in (tmp_path / "idx" / "c").rglob("*")) == before


@pytest.mark.gpu
def test_build_on_the_gpu_writes_an_index_that_opens_on_the_cpu(tmp_path, cli, corpus_file) -> None:
    result = cli(
        "build",
        str(corpus_file),
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--name",
        "g",
        "--device",
        "cuda",
        "--json",
    )
    assert result.exit_code == 0, result.output
    index_files = list((tmp_path / "idx" / "g").rglob("index-g*.faiss"))
    assert index_files
    for path in index_files:
        assert "Gpu" not in type(faiss.downcast_index(faiss.read_index(str(path)))).__name__
    hits = cli(
        "query",
        "a guitar",
        "--index",
        "g",
        "--index-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--json",
    )
    assert hits.exit_code == 0 and hits.output.strip()
