"""Property: whatever corpus a user hands `build` and `query`, they work or fail cleanly.

Hypothesis writes random small corpora (Parquet, CSV, TSV, JSON lines, sometimes gzipped;
random column names, types, nulls, NaN, lists, unicode and blank texts; 0-40 rows) and
runs `semsearch build` and `semsearch query` on them in-process with the tiny model. Every
run must either succeed with consistent counts (rows indexed == rows with a text; a query
returns min(k, rows) hits) or exit 2 with one `error:` line, and leave no hidden partial
folder behind. One time in three a second random corpus is then `add`ed: it works or fails
in one line, and the index still answers. Anything else (exit 1 from the catch-all, a
traceback) is a bug.

`make test` runs a fixed set of 40 examples (derandomized, about five seconds), `make
test-slow` 300 random ones; `make fuzz`
sets SEMSEARCH_FUZZ_EXAMPLES for a long random run.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli.support import runner
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from semsearch.cli.app import app
from semsearch.models import BiEncoder

LONG_RUN = os.environ.get("SEMSEARCH_FUZZ_EXAMPLES")
FUZZ_SETTINGS = settings(
    max_examples=int(LONG_RUN) if LONG_RUN else 40,
    derandomize=not LONG_RUN,  # `make test` runs the same examples every time
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

# Texts that have broken tools before: blanks, markup, quotes, separators, other scripts.
AWKWARD_TEXTS = [
    "",
    " ",
    "\t",
    "a\nb",
    "[bold]",
    "[/]",
    "[link=x]y",
    '"quoted"',
    "a,b\tc",
    "naïve café",
    "日本語のテキスト",
    "🙂🙃",
    "\\",
    "NaN",
    "null",
    "٣ أرقام",
]
COLUMN_NAMES = ["text", "id", "title", "tëxt", "текст", "📝 body", "a,b", 'q"t', "tab\tname", "n"]
ODD_COLUMN_NAMES = ["", " ", "_source_row", "_semsearch_id", "text"]
KINDS = ["string", "string", "string", "int", "float", "list", "bool", "mixed"]
INDEX_TYPES = [
    "auto",
    "flat",
    "ivf",
    "hnsw",
    "ivfpq",
    "IVF4,Flat",
    "HNSW8,Flat",
    "IVF2,PQ4x4",
    "PCA8,Flat",
    "NSG16,Flat",
    "IVF4,SQ8",
    "nonsense",
]
FORMATS = ["parquet", "csv", "tsv", "jsonl"]


def _column(kind: str, rows: int) -> st.SearchStrategy:
    if kind == "ids":
        return st.one_of(
            st.lists(st.integers(-(2**63), 2**63 - 1), min_size=rows, max_size=rows, unique=True),
            st.lists(st.text(min_size=1, max_size=8), min_size=rows, max_size=rows, unique=True),
        )
    return st.lists(_values(kind), min_size=rows, max_size=rows)


def _values(kind: str) -> st.SearchStrategy:
    texts = st.one_of(st.sampled_from(AWKWARD_TEXTS), st.text(max_size=24))
    value = {
        "string": texts,
        "int": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(allow_nan=True, allow_infinity=True),
        "list": st.lists(st.integers(-3, 3), max_size=3),
        "bool": st.booleans(),
        "mixed": st.one_of(texts, st.integers(-5, 5), st.floats(allow_nan=True)),
    }[kind]
    return st.one_of(st.none(), value) if kind != "string" else st.one_of(value, value, st.none())


@dataclass
class Case:
    """One generated corpus and what to do with it."""

    format: str
    gzipped: bool
    encoding: str  # of a text file; Latin-1 now and then, as files exported on Windows are
    names: list[str]
    kinds: list[str]
    rows: list[list]
    text_column: str
    id_column: str | None
    index_type: str
    metric: str
    strict: bool
    name: str | None
    query: str
    k: int


@st.composite
def cases(draw) -> Case:
    count = draw(st.integers(1, 4))
    usual = st.sampled_from(COLUMN_NAMES)  # mostly usable names, so most builds get far
    odd = st.one_of(st.sampled_from(ODD_COLUMN_NAMES), st.text(min_size=1, max_size=6))
    if draw(st.integers(0, 3)):
        names = draw(st.lists(usual, min_size=count, max_size=count, unique=True))
    else:  # anything, duplicates and reserved names included
        names = draw(st.lists(st.one_of(usual, odd), min_size=count, max_size=count))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=count, max_size=count))
    text_at = draw(st.integers(0, count - 1))
    if draw(st.integers(0, 3)):  # a text column of text, three times in four
        kinds[text_at] = "string"
    rows_count = draw(st.integers(0, 40))
    id_at = draw(st.one_of(st.none(), st.none(), st.integers(0, count - 1)))
    if id_at is not None and id_at != text_at and draw(st.integers(0, 2)):
        kinds[id_at] = "ids"  # unique ids, two times in three
    columns = [draw(_column(kind, rows_count)) for kind in kinds]
    file_format = draw(st.sampled_from(FORMATS))
    return Case(
        format=file_format,
        gzipped=draw(st.booleans()) and draw(st.booleans()),
        encoding=draw(st.sampled_from(["utf-8"] * 7 + ["latin-1"])),
        names=names,
        kinds=kinds,
        rows=[list(row) for row in zip(*columns)] if rows_count else [],
        text_column=names[text_at],
        id_column=None if id_at is None else names[id_at],
        index_type=draw(st.sampled_from(INDEX_TYPES)),
        metric=draw(st.sampled_from(["cosine", "cosine", "dot", "l2", "manhattan"])),
        strict=draw(st.booleans()) and draw(st.booleans()),
        name=draw(st.sampled_from([None] * 12 + ["docs", "dé-jà_vu", "", ".x", "a/b"])),
        query=draw(
            st.one_of(
                st.sampled_from(["guitar", "[/]", "café 🙂"]), st.text(min_size=1, max_size=12)
            )
        ),
        k=draw(st.integers(1, 50)),
    )


def _write(case: Case, folder: Path) -> Path:
    suffix = {"parquet": ".parquet", "csv": ".csv", "tsv": ".tsv", "jsonl": ".jsonl"}[case.format]
    path = folder / f"corpus{suffix}{'.gz' if case.gzipped else ''}"
    if case.format == "parquet":
        arrays = [
            _arrow_column(kind, [row[i] for row in case.rows]) for i, kind in enumerate(case.kinds)
        ]
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_arrays(arrays, names=case.names), sink)
        data = sink.getvalue()
    elif case.format == "jsonl":
        # written by hand, not json.dumps(dict): duplicate names stay duplicate keys
        pairs = (zip(case.names, row) for row in case.rows)
        lines = [
            "{"
            + ", ".join(f"{json.dumps(name)}: {json.dumps(value)}" for name, value in pair)
            + "}\n"
            for pair in pairs
        ]
        data = "".join(lines).encode(case.encoding, "replace")
    else:
        buffer = io.StringIO()
        # the csv writer quotes \r and \n
        writer = csv.writer(buffer, delimiter="\t" if case.format == "tsv" else ",")
        writer.writerow(case.names)
        writer.writerows([[_csv_cell(value) for value in row] for row in case.rows])
        data = buffer.getvalue().encode(case.encoding, "replace")
    path.write_bytes(gzip.compress(data) if case.gzipped else data)
    return path


def corpus_is_ascii(path: Path) -> bool:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).isascii()


def _arrow_column(kind: str, values: list) -> pa.Array:
    if kind == "ids":
        kind = "int" if all(isinstance(value, int) for value in values) else "string"
    if kind == "mixed":  # Parquet holds one type per column: write what a CSV export would
        values = [None if value is None else str(value) for value in values]
    types = {
        "string": pa.string(),
        "mixed": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "list": pa.list_(pa.int64()),
        "bool": pa.bool_(),
    }
    return pa.array(values, types[kind])


def _csv_cell(value) -> str:
    return "" if value is None else str(value)


def _expected_texts(case: Case) -> list[str]:
    """The texts a successful build must have indexed: the non-blank strings of the text
    column, as the file holds them (a CSV holds every value as text)."""
    position = case.names.index(case.text_column)
    values = [row[position] for row in case.rows]
    if case.format in ("csv", "tsv"):
        values = [_csv_cell(value) for value in values]
    elif case.format == "parquet" and case.kinds[position] == "mixed":
        values = [None if value is None else str(value) for value in values]
    strings = [value for value in values if isinstance(value, str)]
    if not strings:
        return []
    blank = pc.equal(pc.utf8_trim_whitespace(pa.array(strings, pa.string())), "").to_pylist()
    return [text for text, is_blank in zip(strings, blank) if not is_blank]


def _one_error_line(result, what: str) -> str:
    """The refusal: exit 2 and one `error:` line, the last on stderr (log lines such as
    "skipped 3 rows" may come before it), and no traceback."""
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}\n{result.output}"
    lines = result.stderr.strip().split("\n")
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == [lines[-1]], f"{what}: {result.stderr!r}"
    assert "Traceback" not in result.output
    return lines[-1]


@pytest.fixture(scope="module")
def cached_models(tiny_model_dir: Path):
    """Each build and query loads the model its index names; keep the tiny model loaded once
    (a real load, remembered) so a hundred examples take seconds."""
    loaded: dict[tuple, BiEncoder] = {}
    real_load = BiEncoder.load.__func__

    def load(cls, name_or_path=str(tiny_model_dir), **options):
        key = (str(name_or_path), *sorted(options.items()))
        if key not in loaded:
            loaded[key] = real_load(cls, name_or_path, **options)
        return loaded[key]

    import faiss  # one FAISS thread: on a busy small machine more only wait on each other

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BiEncoder, "load", classmethod(load))
        yield str(tiny_model_dir)
    faiss.omp_set_num_threads(threads)


# CI's random run found it: a query that looks like an option ("-0") must still be searched
DASH_QUERY = Case(
    format="parquet",
    gzipped=False,
    encoding="utf-8",
    names=["text"],
    kinds=["string"],
    rows=[["a\nb"]],
    text_column="text",
    id_column=None,
    index_type="auto",
    metric="cosine",
    strict=False,
    name=None,
    query="-0",
    k=1,
)


@FUZZ_SETTINGS
@given(case=cases(), more=st.one_of(st.none(), st.none(), cases()))
@example(case=DASH_QUERY, more=None)
def test_any_corpus_builds_and_answers_or_fails_with_one_line(
    cached_models: str, case: Case, more: Case | None
) -> None:
    """Build `case`, query it, and (one time in three) `add` the corpus `more` to it."""
    _build_query_add(cached_models, case, more)


@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=300, derandomize=False)
@given(case=cases(), more=st.one_of(st.none(), st.none(), cases()))
def test_any_corpus_builds_and_answers_or_fails_with_one_line_random(
    cached_models: str, case: Case, more: Case | None
) -> None:
    """The same property on 300 new random examples each run (`make test-slow`, CI)."""
    _build_query_add(cached_models, case, more)


def _build_query_add(cached_models: str, case: Case, more: Case | None) -> None:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        name = _check(case, folder, cached_models)
        if name is not None and more is not None:
            _check_add(more, name, folder, case)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_add(more: Case, name: str, folder: Path, case: Case) -> None:
    """`add` another random corpus: it works or fails in one line, and the index still answers."""
    (folder / "more").mkdir()
    corpus = _write(more, folder / "more")
    index_dir = str(folder / "idx")
    args = [
        "add",
        str(corpus),
        "--index",
        name,
        "--index-dir",
        index_dir,
        "--json",
        "--text-column",
        more.text_column,
        "--device",
        "cpu",
    ]
    args += ["--id-column", more.id_column] if more.id_column is not None else []
    added = runner.invoke(app, args, catch_exceptions=False)
    if added.exit_code == 0:
        event("added")
    else:
        reason = _one_error_line(added, "add").replace(str(folder) + "/", "")
        event(f"add refused: {reason.removeprefix('error: ')[:60]}")
    info = runner.invoke(
        app, ["info", name, "--index-dir", index_dir, "--json"], catch_exceptions=False
    )
    assert info.exit_code == 0, info.output
    rows = json.loads(info.stdout)["rows"]
    answered = runner.invoke(
        app,
        [
            "query",
            "--index",
            name,
            "--index-dir",
            index_dir,
            "-k",
            str(case.k),
            "--json",
            "--",
            case.query,
        ],
        catch_exceptions=False,
    )
    assert answered.exit_code == 0, answered.output
    assert len([line for line in answered.stdout.split("\n") if line]) == min(case.k, rows)


def _check(case: Case, folder: Path, model: str) -> str | None:
    """Build and query `case`; the index's name when it was built and queried."""
    corpus = _write(case, folder)
    index_dir = folder / "idx"
    args = [
        "build",
        str(corpus),
        "--model",
        model,
        "--out-dir",
        str(index_dir),
        "--json",
        "--text-column",
        case.text_column,
        "--index-type",
        case.index_type,
        "--metric",
        case.metric,
        "--device",
        "cpu",
    ]
    args += ["--id-column", case.id_column] if case.id_column is not None else []
    args += ["--name", case.name] if case.name is not None else []
    args += ["--strict"] if case.strict else []
    built = runner.invoke(app, args, catch_exceptions=False)
    leftovers = [path.name for path in index_dir.glob(".*")] if index_dir.is_dir() else []
    assert not leftovers, f"build left {leftovers} behind: {built.output}"
    if built.exit_code != 0:
        reason = _one_error_line(built, "build").replace(str(folder) + "/", "")
        event(f"refused: {reason.removeprefix('error: ')[:70]}")
        return None
    event("built")
    manifest = json.loads(built.stdout)
    if case.format != "parquet" and case.encoding != "utf-8" and not corpus_is_ascii(corpus):
        return None  # Latin-1 bytes that happen to be valid UTF-8 read as other texts: no oracle
    expected = _expected_texts(case)
    assert manifest["rows"] == len(expected), (manifest["rows"], expected)
    assert manifest["source"]["rows_read"] == len(case.rows)
    if case.id_column is not None:
        ids = [row[case.names.index(case.id_column)] for row in case.rows]
        if case.format in ("csv", "tsv"):
            ids = [_csv_cell(value) for value in ids]
        assert None not in ids and not any(isinstance(value, float | list | bool) for value in ids)
        assert all(value.strip() for value in ids if isinstance(value, str)), (
            "a blank id was accepted"
        )
        assert len({json.dumps(value) for value in ids}) == len(ids), "repeated ids were accepted"
    # `--` ends the options, as a user would type it: a query such as "-0" is text, not a flag
    query = [
        "query",
        "--index",
        manifest["name"],
        "--index-dir",
        str(index_dir),
        "-k",
        str(case.k),
        "--device",
        "cpu",
    ]
    answered = runner.invoke(app, [*query, "--json", "--", case.query], catch_exceptions=False)
    if not case.query.strip():
        _one_error_line(answered, "blank query")
        return None
    assert answered.exit_code == 0, answered.output
    hits = [json.loads(line) for line in answered.stdout.split("\n") if line]
    assert len(hits) == min(case.k, len(expected))
    assert {hit["text"] for hit in hits} <= set(expected)
    table = runner.invoke(app, [*query, "--", case.query], catch_exceptions=False)  # the table too
    assert table.exit_code == 0, table.output
    return manifest["name"]
