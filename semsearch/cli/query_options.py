"""The options of `semsearch query`, each declared once with its help and panel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from semsearch.options import (
    DEFAULT_RRF_K,
    FUSION_METHODS,
    SEARCH_MODES,
)

# `query --help` lists the common options first, then these groups.
HYBRID_PANEL = "Hybrid search and re-ranking"
TUNING_PANEL = "Index parameters (override the index's tuned values)"
MODEL_PANEL = "Model"


QueryText = Annotated[
    str | None, typer.Argument(help="What to search for (after `--` if it starts with a dash).")
]
IndexChoice = Annotated[
    str | None, typer.Option(help="Index name or folder (default: the most recent).")
]
TopK = Annotated[int, typer.Option("-k", "--top-k", help="Results per query.")]
QueriesFile = Annotated[Path | None, typer.Option(help="A text file of queries, one per line.")]
Where = Annotated[
    str | None,
    typer.Option(help="SQL condition on the metadata, e.g. \"license = 'MIT' AND year >= 2020\"."),
]
Show = Annotated[
    list[str] | None, typer.Option(help="A metadata column to add to the table (repeatable).")
]
JsonLines = Annotated[
    bool, typer.Option("--json", help="JSON lines, one per result, with every column.")
]
Explain = Annotated[bool, typer.Option("--explain", help="Also how it ran, stage by stage.")]
VectorsFile = Annotated[
    Path | None,
    typer.Option(help="Query by vector: a .npy file, one query a row (no model; dense only)."),
]
Mode = Annotated[
    str,
    typer.Option(
        help=f"{' | '.join(SEARCH_MODES)}: the vectors, BM25, or both fused.",
        rich_help_panel=HYBRID_PANEL,
    ),
]
Group = Annotated[
    str, typer.Option(help="A chunked index's hits: documents (by their best chunk) or chunks.")
]
FusionMethod = Annotated[
    str,
    typer.Option(
        help=f"How hybrid fuses: {' | '.join(FUSION_METHODS)} (BM25 weighs less where its top "
        f"scores are flat; reciprocal ranks, k={DEFAULT_RRF_K}; alpha x dense + (1 - alpha) x "
        "lexical).",
        rich_help_panel=HYBRID_PANEL,
    ),
]
Alpha = Annotated[
    float,
    typer.Option(
        help="The dense side's weight in convex fusion, its least in adaptive.",
        rich_help_panel=HYBRID_PANEL,
    ),
]
Rerank = Annotated[
    str | None,
    typer.Option(
        help="A cross-encoder folder that re-orders the candidates.", rich_help_panel=HYBRID_PANEL
    ),
]
RerankTop = Annotated[
    int,
    typer.Option(
        help="Candidates per query for --rerank to re-order.", rich_help_panel=HYBRID_PANEL
    ),
]
Nprobe = Annotated[
    int | None, typer.Option(help="IVF lists to visit.", rich_help_panel=TUNING_PANEL)
]
EfSearch = Annotated[
    int | None, typer.Option(help="HNSW candidate list size.", rich_help_panel=TUNING_PANEL)
]
Oversample = Annotated[
    int | None,
    typer.Option(
        help="A disk index's candidates re-scored per result.", rich_help_panel=TUNING_PANEL
    ),
]
At = Annotated[
    int | None,
    typer.Option(help="Search this generation, not the current one.", rich_help_panel=TUNING_PANEL),
]
QueryDevice = Annotated[
    str,
    typer.Option(
        help="auto (CUDA when present), cpu, cuda or cuda:N.", rich_help_panel=MODEL_PANEL
    ),
]
QueryRuntime = Annotated[
    str,
    typer.Option(
        help="What encodes the queries: auto (OpenVINO where it runs, else torch), torch or "
        "openvino; the vectors are the same.",
        rich_help_panel=MODEL_PANEL,
    ),
]
SkipModelCheck = Annotated[
    bool,
    typer.Option(
        "--no-model-check",
        help="Query even where the model's weights are not those that "
        "built the index (or it records none).",
        rich_help_panel=MODEL_PANEL,
    ),
]
QueryPromptOverride = Annotated[
    str | None,
    typer.Option(
        help="Text put before each query for this call only, instead of the prompt the "
        "index records (see `semsearch info`); '' for none.",
        rich_help_panel=MODEL_PANEL,
        show_default=False,
    ),
]
