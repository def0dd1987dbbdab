"""`--engine`, `--address` and `--workers`: where `build`, `add` and `mine` run; and where
their corpus and index folder may be (`corpus_location`, `index_folder`).

Kept apart so a command imports nothing of Ray's unless `--engine ray` is given.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semsearch.errors import SemsearchError

if TYPE_CHECKING:
    from semsearch.distributed.cluster import RayOptions

ENGINES = ("local", "ray")

Engine = Annotated[
    str,
    typer.Option(help="local (this process) or ray (a Ray cluster; pip install -e '.\\[ray]')."),
]
Address = Annotated[
    str | None,
    typer.Option(
        help="--engine ray: the cluster, 'auto' (the one 'ray start' runs on this "
        "machine) or HOST:PORT; default: start Ray on this machine for the job."
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        help="--engine ray: encoder actors (default: one per GPU; else one per 4 CPUs, "
        "or per node where nodes have fewer, sharing the CPUs as threads)."
    ),
]


def corpus_location(corpus: str) -> str | Path:
    """A corpus argument as given: a URI stays text (a `Path` would fold `s3://` into `s3:/`)."""
    from semsearch.io.filesystems import is_uri  # pyarrow: not for --help

    return corpus if is_uri(corpus) else Path(corpus)


def index_folder(folder: str | Path, option: str = "--index-dir") -> str | Path:
    """An index folder (or the folder of the indexes), refused in one line when it is a URI:
    semsearch writes it with POSIX calls (on a cluster, a shared filesystem every node mounts)."""
    from semsearch.io.filesystems import check_local_folder

    check_local_folder(folder, option)
    return folder


def ray_options(
    engine: str, address: str | None, workers: int | None, show_progress: bool
) -> RayOptions | None:
    """The Ray options for `--engine ray`; None for the local engine (which takes neither
    --address nor --workers)."""
    if engine not in ENGINES:
        raise SemsearchError(f"unknown --engine {engine!r}: choose {' or '.join(ENGINES)}")
    if engine == "local":
        if address is not None or workers is not None:
            raise SemsearchError(
                "--address and --workers are for --engine ray: add it, or leave them out"
            )
        return None
    if workers is not None and workers < 1:
        raise SemsearchError(f"--workers must be at least 1, not {workers}")
    from semsearch.distributed.cluster import INSTALL_HINT, RayOptions

    if importlib.util.find_spec("ray") is None:  # before any file is read or model loaded
        raise SemsearchError(f"--engine ray needs Ray Data, which is not installed: {INSTALL_HINT}")

    return RayOptions(address=address, workers=workers, show_progress=show_progress)
