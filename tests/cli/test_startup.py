"""The command line starts without the heavy libraries, and its help reads in use order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli.support import runner

from semsearch import __version__
from semsearch.cli.app import COMMAND_MODULES, app
from semsearch.cli.common import COMMAND_ORDER

# Together about 5 s to import on this project's machines: commands that need no model skip
# them. (FAISS takes 0.1 s, so a build may import it before it checks its corpus.)
HEAVY = ("torch", "transformers", "scipy", "matplotlib", "sentence_transformers")


def _heavy_modules_after(args: list[str]) -> list[str]:
    """Run `semsearch ARGS` in a fresh interpreter and list the heavy modules it imported."""
    script = (
        "import sys\n"
        "from semsearch.cli.app import app\n"
        "try:\n"
        f"    app({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('\\nHEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    line = process.stdout.strip().splitlines()[-1]
    assert line.startswith("HEAVY="), process.stdout + process.stderr
    return [name for name in line.removeprefix("HEAVY=").split(",") if name]


@pytest.fixture()
def built(cli, corpus_file):
    result = cli(
        "build",
        str(corpus_file),
        "--name",
        "docs",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    return cli


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["build", "--help"],
        ["query", "--help"],
        ["train", "--help"],
        ["eval", "sts", "--help"],
    ],
)
def test_help_imports_no_heavy_library(args) -> None:
    assert _heavy_modules_after(args) == []


def test_help_imports_neither_numpy_nor_pyarrow() -> None:
    """`--help` is the first thing a user runs: 0.26 s with them out, 0.45 s when a module
    the command line imports pulled numpy and pyarrow in at its top (store.folders did)."""
    script = (
        "import sys\n"
        "from semsearch.cli.app import app\n"
        "try:\n"
        "    app(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\nLOADED=' + ','.join(m for m in ('numpy', 'pyarrow') if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert process.stdout.strip().splitlines()[-1] == "LOADED=", process.stdout + process.stderr


def test_list_info_and_errors_import_no_heavy_library(built) -> None:
    for args in (
        ["list", "--index-dir", built.index_dir],
        ["info", "docs", "--index-dir", built.index_dir],
        ["query", "x", "--index", "nope", "--index-dir", built.index_dir],
        ["build", "missing.parquet", "--out-dir", built.index_dir],
    ):
        assert _heavy_modules_after(args) == [], args


def test_commands_that_encode_nothing_load_no_model(built, corpus_file) -> None:
    """An add of rows the index holds already, and mining an index's stored vectors,
    encode nothing: they spent 20-30 s importing torch and loading the model."""
    index_dir = built.index_dir
    for args, said in (
        (["add", str(corpus_file), "--index", "docs", "--index-dir", index_dir], "unchanged"),
        (["mine", "--index", "docs", "--index-dir", index_dir, "--show", "1"], "pairs"),
    ):
        found, output = _modules_after_main(args, HEAVY)
        assert found == [] and said in output, (args, found, output)


def test_an_add_with_a_checked_export_encodes_its_rows_without_torch(
    built, monkeypatch, openvino_tiny_model, tmp_path
) -> None:
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.openvino_runtime import export_for_queries

    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    assert export_for_queries(BiEncoder.load(built.model, device="cpu"))  # as a build on a CPU does
    more = tmp_path / "more.parquet"
    pq.write_table(
        pa.table({"doc_id": ["n1"], "text": ["a new song for the guitar"], "topic": ["music"]}),
        more,
    )
    args = ["add", str(more), "--index", "docs", "--index-dir", built.index_dir, "--device", "cpu"]
    found, output = _modules_after_main(args, ("torch", "transformers"))  # BM25 takes scipy
    assert found == [] and "added 1" in output, (found, output)
    manifest = json.loads((Path(built.index_dir) / "docs" / "manifest.json").read_text())
    assert manifest["operation"]["runtime"].startswith("openvino")


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    import typer

    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(COMMAND_MODULES)
    for name, command in group.commands.items():
        callback = command.callback or next(iter(command.commands.values())).callback
        assert callback.__module__ == f"semsearch.cli.{COMMAND_MODULES[name]}", name


def _modules_after_main(args: list[str], names: tuple[str, ...]) -> tuple[list[str], str]:
    """Run `semsearch ARGS` as the `semsearch` script does (`main`) in a fresh interpreter:
    which of the modules `names` it imported, and its output."""
    script = (
        "import sys\n"
        f"sys.argv = ['semsearch', *{args!r}]\n"
        "import semsearch.cli.app\n"
        "semsearch.cli.app.leave = sys.exit  # a query leaves by os._exit: report first\n"
        "try:\n"
        "    semsearch.cli.app.main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print('\\nMODULES=' + ','.join(m for m in {names!r} if m in sys.modules))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    lines = process.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("MODULES="), process.stdout + process.stderr
    found = [name for name in lines[-1].removeprefix("MODULES=").split(",") if name]
    return found, process.stdout


def test_main_registers_only_the_command_it_runs() -> None:
    others = tuple(f"semsearch.cli.{module}" for module in set(COMMAND_MODULES.values()))
    found, output = _modules_after_main(["query", "--help"], others)
    assert found == ["semsearch.cli.query_command"] and "--top-k" in output
    found, output = _modules_after_main(["--help"], others)  # the full list for --help
    assert sorted(found) == sorted(others) and "train-adapter" in output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"semsearch {__version__}"


def test_help_lists_commands_in_use_order() -> None:
    text = runner.invoke(app, ["--help"]).stdout
    listed = [
        line.split()[1]
        for line in text.splitlines()
        if line.startswith("│ ") and len(line.split()) > 1 and line.split()[1] in COMMAND_ORDER
    ]
    assert listed[:6] == ["build", "query", "list", "info", "tune", "mine"]
    assert listed.index("train") > listed.index("rollback") and listed[-1] == "bench"


@pytest.mark.parametrize("args", [["--help"], ["query", "--help"], ["bench", "pairs", "--help"]])
def test_help_shows_flags_as_flags(args) -> None:
    """typer's help gave every flag a type, `--json <bool>`, as if it took a value."""
    text = runner.invoke(app, args).stdout
    assert "--help" in text and "<bool>" not in text
    assert [line.split()[:2] for line in text.splitlines() if "│ --help " in line] == [
        ["│", "--help"]
    ]


def test_query_help_is_short_and_grouped() -> None:
    """135 lines at 80 columns, every option in one list; the rarer ones now go in groups."""
    text = runner.invoke(app, ["query", "--help"], env={"COLUMNS": "80"}).stdout
    assert len(text.splitlines()) <= 75
    for panel in ("Hybrid search and re-ranking", "Index parameters", "Model"):
        assert f"─ {panel}" in text
    assert "--no-model-check " in text and "--model-check " not in text
    assert text.index("│ --json") < text.index("─ Hybrid") < text.index("│ --rerank-top")


def test_second_query_skips_transformers_and_answers_the_same(built) -> None:
    pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    args = ["query", "guitar", "--index-dir", built.index_dir, "-k", "5", "--json"]
    first = built(*args)
    second = built(*args)  # on the export the first query made and checked
    hits = [[json.loads(line) for line in run.stdout.splitlines()] for run in (first, second)]
    assert first.exit_code == 0 and len(hits[0]) == 5
    assert [hit["id"] for hit in hits[1]] == [hit["id"] for hit in hits[0]]
    assert [hit["score"] for hit in hits[1]] == pytest.approx(
        [hit["score"] for hit in hits[0]], abs=1e-5
    )
    assert "transformers" not in _heavy_modules_after(args)


def test_a_query_with_a_checked_export_imports_neither_torch_nor_transformers(
    built, monkeypatch, openvino_tiny_model
) -> None:
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.openvino_runtime import export_for_queries

    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    assert export_for_queries(BiEncoder.load(built.model, device="cpu"))  # as a first query does
    args = ["query", "fast json", "--index", "docs", "--index-dir", built.index_dir, "--json"]
    # Nor what only other commands need (corpus readers, Parquet): a query reads the
    # metadata's memory-mapped Arrow copy.
    # Nor OpenVINO's model converter (0.2 s of CPU) or numpy.ma (13 ms, np.unique's), nor
    # pydantic, which typer converts options with (0.14 s; `plain_params`).
    unneeded = (
        "pydantic",
        "pyarrow.parquet",
        "pyarrow.compute",
        "semsearch.io.corpus",
        "semsearch.cli.bench_command",
        "openvino.tools.ovc",
        "numpy.ma",
    )
    found, output = _modules_after_main(args, HEAVY + unneeded)
    assert found == [], found
    lines = output.strip().splitlines()
    hits = [json.loads(line) for line in lines[:-1] if line.startswith("{")]
    assert hits and hits[0]["rank"] == 1 and hits[0]["query"] == "fast json"


def test_openvino_without_its_converter_still_converts_on_first_use() -> None:
    """`import_openvino` skips the converter that `openvino`'s own `__init__` imports; a
    later `convert_model` (an export) imports it then."""
    pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    script = (
        "import sys\n"
        "from semsearch.models.exported_query_encoder import import_openvino\n"
        "ov = import_openvino()\n"
        "before = 'openvino.tools.ovc' in sys.modules\n"
        "import openvino\n"
        "from openvino.tools.ovc import convert_model\n"
        "assert openvino is ov and import_openvino() is ov and ov.Core is not None\n"
        "print(before, ov.convert_model is convert_model, 'openvino.tools.ovc' in sys.modules)\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert process.stdout.split() == ["False", "True", "True"], process.stdout + process.stderr
