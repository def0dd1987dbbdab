"""`semsearch tune`: choose an index's nprobe/efSearch from a recall target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, user_errors
from semsearch.cli.options import (
    Device,
    IndexDir,
    IndexOption,
    IndexOrMostRecent,
    JsonFlag,
    chosen_index,
)
from semsearch.cli.output import print_json_lines
from semsearch.errors import SemsearchError
from semsearch.io.inputs import read_lines
from semsearch.options import DEFAULT_TUNING_QUERIES
from semsearch.store.folders import find_index

TargetRecall = Annotated[float, typer.Option(help="Recall@k to reach against exact search.")]
TuningQueries = Annotated[
    Path | None,
    typer.Option(
        help="Text file of queries (default: the rows the index keeps out of its "
        "structure for tuning)."
    ),
]
RecallK = Annotated[int, typer.Option("-k", help="The k of recall@k.")]
TuningSample = Annotated[
    int,
    typer.Option(
        help="How many of the rows kept out of the structure (in an index built before "
        "those, of its rows) to use as queries."
    ),
]
Strict = Annotated[
    bool, typer.Option(help="Fail (and record nothing) when the target is not reached.")
]


@app.command()
@user_errors
def tune(
    name: IndexOrMostRecent = None,
    index: IndexOption = None,
    target_recall: TargetRecall = 0.95,
    queries: TuningQueries = None,
    k: RecallK = 10,
    sample: TuningSample = DEFAULT_TUNING_QUERIES,
    device: Device = "auto",
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
    strict: Strict = False,
) -> None:
    """Measure recall against exact search and store the smallest nprobe/efSearch that meets the target."""
    if k < 1 or sample < 1:
        raise SemsearchError(f"-k and --sample must be at least 1, not {min(k, sample)}")
    folder = find_index(chosen_index(name, index), index_dir)
    index_spec = folder.manifest().index
    if not index_spec.search_params:  # Flat (or a structure with no knob): a fact, not an error
        how = "searches exactly" if index_spec.factory == "Flat" else "has no search parameter"
        if json_output:
            print_json_lines(
                [{"index": folder.name, "factory": index_spec.factory, "parameter": None}]
            )
        else:
            console.print(
                f"{folder.name}: {index_spec.factory} {how}: nothing to tune", markup=False
            )
        return
    texts = read_lines(queries) if queries else None
    vectors = None
    if texts:
        from semsearch.models.bi_encoder import BiEncoder

        encoder = BiEncoder.for_index(folder.manifest().model, device)
        vectors = encoder.encode_query(texts)  # with the query prompt the index records
    from semsearch.ingest.maintain import retune

    result = retune(
        folder, target_recall, vectors, k=k, sample=sample, device=device, strict=strict
    )
    if json_output:
        print_json_lines([{"index": folder.name, **result.to_dict()}])
        return
    tried = ", ".join(f"{value}: {recall:.3f}" for value, recall in sorted(result.tried.items()))
    verdict = "meets" if result.met else "does NOT meet (best found)"
    console.print(
        f"{folder.name}: {result.parameter}={result.value} gives recall@{result.k} {result.recall:.3f} "
        f"on {result.queries} queries, which {verdict} the target {result.target}\ntried {tried}",
        markup=False,
    )
