"""A build's resumable state: the partial folder it writes into, the state that says which
build it belongs to, and what an interrupted or failed build keeps and says.

Why apart from the build: the build's steps (read, encode, index, tune) and the bookkeeping
that lets the same command resume them change for different reasons.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from semsearch.disk import no_space, temporary_for
from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import BuildOptions
from semsearch.store.folders import keep_finished_parts, kept_rows

if TYPE_CHECKING:
    from semsearch.ingest.build import PartSource

log = logging.getLogger(__name__)

STATE_FILE = "build_state.json"


def out_of_space(
    partial: Path, options: BuildOptions, free_before: int, needed: int
) -> SemsearchError:
    """A build stopped by a full disk: its finished parts kept for the same command to
    resume from, everything else it wrote removed; the one-line error that says so."""
    parts, rows = keep_finished_parts(partial, STATE_FILE)
    if parts:
        kept = f"its {parts} finished parts ({rows} rows) are kept in {partial}"
        advice = "free some space and run the same command to resume from them"
    else:
        shutil.rmtree(partial, ignore_errors=True)
        kept, advice = "nothing was kept", "free some space and run it again"
    return no_space(Path(options.out_dir), "build", free_before, needed, kept, advice)


def build_state(options: BuildOptions, encoder, source_sha256: str) -> dict:
    """Everything that decides the parts' content; a resume needs all of it unchanged."""
    return {
        "source_sha256": source_sha256,
        "model": replace(encoder.spec, name="").to_dict(),
        "text_column": options.text_column,
        "id_column": options.id_column,
        "strict": options.strict,
        "part_rows": options.part_rows,
        "store_vectors": options.store_vectors,
        "vector_column": options.vector_column,
    }


def kept_message(partial: Path, usable: int, options: BuildOptions, source: PartSource) -> str:
    """What an interrupted build kept, and how to go on: for its one line."""
    what = (
        "rows"
        if options.vector_column
        else "chunks"
        if getattr(source, "chunks", None)
        else "texts"
    )
    return (
        f"{kept_rows(partial):,} of {usable:,} {what} are encoded and kept in {partial}: "
        "run the same command again to resume from there"
    )


def prepare_partial(partial: Path, state: dict) -> None:
    if partial.exists() and _read_state(partial) != state:
        shutil.rmtree(partial)  # a different build was interrupted here: start afresh
    elif partial.exists():
        log.warning(
            "resuming the interrupted build in %s: %s rows are encoded already",
            partial,
            f"{kept_rows(partial):,}",
        )
    partial.mkdir(parents=True, exist_ok=True)
    with temporary_for(partial / STATE_FILE) as temporary:  # never half a state
        temporary.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _read_state(folder: Path) -> dict | None:
    try:
        return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
