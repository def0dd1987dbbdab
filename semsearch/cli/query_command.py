"""`semsearch query`: nearest neighbours of one or many queries, as tables or JSON lines."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, user_errors
from semsearch.cli.options import IndexDir
from semsearch.cli.output import print_hits, print_json_lines, say_no_results
from semsearch.cli.query_options import (
    Alpha,
    At,
    EfSearch,
    Explain,
    FusionMethod,
    Group,
    IndexChoice,
    JsonLines,
    Mode,
    Nprobe,
    Oversample,
    QueriesFile,
    QueryDevice,
    QueryPromptOverride,
    QueryRuntime,
    QueryText,
    Rerank,
    RerankTop,
    Show,
    SkipModelCheck,
    TopK,
    VectorsFile,
    Where,
)
from semsearch.errors import SemsearchError
from semsearch.io.inputs import read_lines
from semsearch.options import (
    DEFAULT_ALPHA,
    DEFAULT_FUSION,
    DEFAULT_RERANK_TOP,
)
from semsearch.search.limits import queries_per_call
from semsearch.store.folders import IndexFolder, find_index

if TYPE_CHECKING:
    from semsearch.rerank import Reranker
    from semsearch.search.searcher import Hit, Searcher


@app.command()
@user_errors
def query(
    text: QueryText = None,
    index: IndexChoice = None,
    k: TopK = 10,
    file: QueriesFile = None,
    where: Where = None,
    show: Show = None,
    json_output: JsonLines = False,
    explain: Explain = False,
    vectors: VectorsFile = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    mode: Mode = "dense",
    group: Group = "documents",
    fusion: FusionMethod = DEFAULT_FUSION,
    alpha: Alpha = DEFAULT_ALPHA,
    rerank: Rerank = None,
    rerank_top: RerankTop = DEFAULT_RERANK_TOP,
    nprobe: Nprobe = None,
    ef_search: EfSearch = None,
    oversample: Oversample = None,
    at: At = None,
    device: QueryDevice = "auto",
    runtime: QueryRuntime = "auto",
    skip_model_check: SkipModelCheck = False,
    query_prompt: QueryPromptOverride = None,
) -> None:
    """Find the rows nearest in meaning to TEXT (or to each line of --file).

    With --rerank, a cross-encoder keeps the best -k of --rerank-top candidates.
    """
    request = QueryRequest(**locals())  # first: locals() are the options alone
    from semsearch.search.hybrid import Fusion, check_mode

    check_mode(mode)
    fused = Fusion(fusion, alpha=alpha)
    if vectors is not None:
        _query_vectors(request, vectors)
        return
    queries = _read_queries(text, file)
    folder = find_index(index, index_dir)
    searcher = _open_searcher(request, folder)
    _check_show(searcher, show)
    reranker, score_name = _open_reranker(request, searcher)
    options = {**request.index_parameters(), "where": where, "mode": mode, "group": group}
    options["explain"] = explain
    depth = k if reranker is None else max(reranker.top, k)
    per_call = queries_per_call(depth)  # a long --file goes in calls the library accepts
    for start in range(0, len(queries), per_call):
        chunk = queries[start : start + per_call]
        found = searcher.search(chunk, k=depth, fusion=fused, **options)
        if start == 0 and index is None:
            _say_which_index(folder, index_dir)
        notes = _print_notes([_renumbered(note, start) for note in _notes_on_k(found, k, depth)])
        results = found if reranker is None else reranker.rerank_hits(chunk, found, k)
        _print_results(request, chunk, results, score_name, folder.name, notes)
        _print_explain(request, found)


@dataclass(frozen=True)
class QueryRequest:
    """`semsearch query`'s options as parsed."""

    text: str | None
    index: str | None
    k: int
    file: Path | None
    where: str | None
    show: list[str] | None
    json_output: bool
    explain: bool
    vectors: Path | None
    index_dir: Path
    mode: str
    group: str
    fusion: str
    alpha: float
    rerank: str | None
    rerank_top: int
    nprobe: int | None
    ef_search: int | None
    oversample: int | None
    at: int | None
    device: str
    runtime: str
    skip_model_check: bool
    query_prompt: str | None

    def index_parameters(self) -> dict[str, int | None]:
        """The index's search parameters the call overrides, named as the searcher names them."""
        return {"nprobe": self.nprobe, "efSearch": self.ef_search, "oversample": self.oversample}


def _open_searcher(request: QueryRequest, folder: IndexFolder) -> Searcher:
    """The searcher of `folder` for text queries: BM25 alone loads no model; anything else
    loads the index's encoder, refused before anything loads where the index records none."""
    from semsearch.models.query_loader import start_open_for_queries

    manifest = folder.manifest(request.at)
    if request.mode != "lexical" and not manifest.has_model:
        from semsearch.io.own_vectors import no_model_message

        raise SemsearchError(no_model_message(manifest.name))
    if request.mode == "lexical" and request.rerank is None:
        from semsearch.search.searcher import Searcher

        return Searcher(folder, at=request.at, lexical_only=True)
    encoder = start_open_for_queries(manifest.model, request.device, request.runtime)
    from semsearch.search.searcher import Searcher  # FAISS, pyarrow: while the encoder compiles

    return Searcher(
        folder,
        encoder=encoder(),
        at=request.at,
        model_check=not request.skip_model_check,
        query_prompt=request.query_prompt,
    )


def _open_reranker(request: QueryRequest, searcher: Searcher) -> tuple[Reranker | None, str]:
    """The cross-encoder that re-orders the hits (None without --rerank), and the name of the
    score the output shows."""
    if request.rerank is None:
        return None, searcher.score_name_for(request.mode)
    from semsearch.models.cross_encoder import CrossEncoder
    from semsearch.rerank import RERANK_SCORE, Reranker

    cross_encoder = CrossEncoder.load(request.rerank, device=request.device)
    return Reranker(cross_encoder, top=request.rerank_top), RERANK_SCORE


def _print_notes(notes: list[str]) -> list[str]:
    """Each of a call's notes on stderr; returns them, for the JSON lines to carry."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    return notes


def _print_results(
    request: QueryRequest,
    chunk: list[str],
    results: list[list[Hit]],
    score_name: str,
    index_name: str,
    notes: list[str],
) -> None:
    """One call's hits: a table per query, or JSON lines (and a no-results line on stderr
    for a query that found nothing)."""
    if not request.json_output:
        for query_text, hits in zip(chunk, results):
            print_hits(query_text, hits, score_name, console, request.show or [])
        return
    print_json_lines(
        _json_record(hit.to_dict(score_name), index_name, notes) for hits in results for hit in hits
    )
    for query_text in (text for text, hits in zip(chunk, results) if not hits):
        say_no_results(query_text)


def _print_explain(request: QueryRequest, found) -> None:
    """With --explain, how the call ran and where its time went: a block for a person, or
    one more JSON line after the hits."""
    if not request.explain or found.explain is None:
        return
    if request.json_output:
        print_json_lines([{"explain": found.explain}])
        return
    from semsearch.search.explain import explain_lines

    console.print("\n".join(explain_lines(found.explain)), markup=False, highlight=False)


def _query_vectors(request: QueryRequest, path: Path) -> None:
    """`query --vectors FILE.npy`: each row a query, searched without a model."""
    alone = request.text is None and request.file is None and request.rerank is None
    if not alone or request.mode != "dense":
        raise SemsearchError(
            "--vectors searches by vector alone: leave out TEXT, --file, --rerank and --mode"
        )
    from semsearch.io.inputs import read_npy
    from semsearch.io.own_vectors import query_vectors
    from semsearch.search.searcher import Searcher

    array = read_npy(path)
    folder = find_index(request.index, request.index_dir)
    searcher = Searcher(folder, at=request.at, vectors_only=True)
    vectors = query_vectors(array, searcher.manifest.model.dimension, f"the vectors of {path.name}")
    _check_show(searcher, request.show)
    score_name = searcher.score_name_for("dense")
    per_call = queries_per_call(request.k)
    for start in range(0, len(vectors), per_call):
        found = searcher.search_vectors(
            vectors[start : start + per_call],
            k=request.k,
            where=request.where,
            explain=request.explain,
            **request.index_parameters(),
        )
        if start == 0 and request.index is None:
            _say_which_index(folder, request.index_dir)
        notes = _print_notes([_renumbered(note, start) for note in found.notes])
        for offset, hits in enumerate(found):
            _print_vector_hits(request, start + offset, hits, score_name, folder.name, notes)
        _print_explain(request, found)


def _print_vector_hits(
    request: QueryRequest,
    row: int,
    hits: list[Hit],
    score_name: str,
    index_name: str,
    notes: list[str],
) -> None:
    """The hits of the query vector in row `row`, as a table or JSON lines."""
    if not request.json_output:
        print_hits(f"vector {row}", hits, score_name, console, request.show or [])
        return
    print_json_lines(
        _json_record({"query_row": row, **_vector_hit(hit, score_name)}, index_name, notes)
        for hit in hits
    )
    if not hits:
        say_no_results(f"vector {row}")


def _vector_hit(hit, score_name: str) -> dict:
    """A hit of a vector query as JSON: its rank and row, no query text."""
    record = hit.to_dict(score_name)
    record.pop("query")
    return record


def _check_show(searcher, show: list[str] | None) -> None:
    missing = [column for column in show or [] if column not in searcher.user_columns]
    if missing:
        raise SemsearchError(
            f"no column {missing[0]!r} in the index's metadata; its columns are: "
            f"{', '.join(searcher.user_columns)}"
        )


def _renumbered(note: str, start: int) -> str:
    """A note about query N of a call, numbered as the query's line in the whole input."""
    prefix = "query "
    if (
        start
        and note.startswith(prefix)
        and (number := note[len(prefix) :].split(" ")[0]).isdigit()
    ):
        return f"{prefix}{int(number) + start}{note[len(prefix) + len(number) :]}"
    return note


def _notes_on_k(found, k: int, depth: int) -> list[str]:
    """The search's notes, as -k asked: with --rerank the index was asked for `depth`
    candidates, so a note that it clamped them speaks of -k, and only where -k was more too."""
    if depth == k:
        return found.notes
    clamped = f"k {depth:,} clamped to "
    notes = [note for note in found.notes if not note.startswith(clamped) or k > found.k]
    return [
        f"k {k:,} {note[len(f'k {depth:,} ') :]}" if note.startswith(clamped) else note
        for note in notes
    ]


def _json_record(record: dict, index_name: str, notes: list[str]) -> dict:
    """A JSON hit with the index that answered it and the call's notes (what a bound changed,
    when there are any); a metadata column called `index` or `notes` moves to `column:<name>`,
    as `Hit.to_dict` does."""
    added = {"index": index_name, **({"notes": notes} if notes else {})}
    for name in added:
        if name in record:
            record[f"column:{name}"] = record.pop(name)
    return {**record, **added}


def _say_which_index(folder: IndexFolder, index_dir: Path) -> None:
    """One line on stderr (unless -q) naming the index that answered, for a query without
    --index: the most recent one, which the user did not choose. Said once the first search
    worked, so that a refused query stays one error line."""
    if logging.getLogger().getEffectiveLevel() <= logging.WARNING:
        typer.echo(
            f"index: {folder.name} (the most recent in {index_dir}/; choose one with --index)",
            err=True,
        )


def _read_queries(text: str | None, file: Path | None) -> list[str]:
    if (text is None) == (file is None):
        raise SemsearchError("give either a query TEXT or --file QUERIES.txt (one of them)")
    return [text] if file is None else read_lines(file)
