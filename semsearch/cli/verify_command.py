"""`semsearch verify`: check every file of an index against the sizes and hashes it records."""

from __future__ import annotations

from typing import Annotated

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, user_errors
from semsearch.cli.options import (
    IndexDir,
    IndexOption,
    IndexOrMostRecent,
    JsonFlag,
    chosen_index,
)
from semsearch.cli.output import print_json_lines
from semsearch.errors import SemsearchError
from semsearch.store.folders import find_index


@app.command()
@user_errors
def verify(
    name: IndexOrMostRecent = None,
    index: IndexOption = None,
    generation: Annotated[
        int | None, typer.Option(help="Verify this generation instead of the current one.")
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            help="For an index made before checksums: hash its files as they are now "
            "and record them in a new generation."
        ),
    ] = False,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Check every file of an index in full: sizes, hashes, FAISS metric and row counts.

    A damaged index is refused with the file at fault and the newest earlier generation
    that verifies, to roll back to.
    """
    from semsearch.store.verify import record_checksums, verify_index

    folder = find_index(chosen_index(name, index), index_dir)
    if record:
        record_checksums(folder)
    report = verify_index(folder, generation)
    if json_output:
        print_json_lines([{"path": str(folder.path), **report.to_dict()}])
    if report.status == "damaged":
        raise SemsearchError(report.line())
    if not json_output:
        console.print(report.line(), markup=False, highlight=False, soft_wrap=True)
