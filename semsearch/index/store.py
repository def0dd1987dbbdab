"""Index folders on disk: where they live, which exist, and moving a finished build into place.

A build writes into `.<name>.partial/` beside the final folder and renames it at the end,
so a folder named `<name>` is always complete.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import faiss

from semsearch.errors import SemsearchError
from semsearch.index.manifest import MANIFEST_FILE, Manifest

DEFAULT_INDEX_DIR = Path("indexes")
INDEX_FILE = "index.faiss"
METADATA_FILE = "metadata.parquet"
PARTIAL_SUFFIX = ".partial"


@dataclass(frozen=True)
class IndexFolder:
    """The paths of one index folder."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def index_file(self) -> Path:
        return self.path / INDEX_FILE

    @property
    def metadata_file(self) -> Path:
        return self.path / METADATA_FILE

    @property
    def manifest_file(self) -> Path:
        return self.path / MANIFEST_FILE

    def manifest(self) -> Manifest:
        return Manifest.read(self.path)

    def read_index(self, manifest: Manifest) -> faiss.Index:
        """Load `index.faiss`, refusing a file that is truncated or does not match the manifest."""
        if not self.index_file.is_file():
            raise SemsearchError(
                f"{self.index_file} is missing: rebuild the index with --overwrite"
            )
        size = self.index_file.stat().st_size
        if size != manifest.index_file_bytes:
            raise SemsearchError(
                f"{self.index_file} is {size} bytes, the manifest says {manifest.index_file_bytes}: "
                "it is truncated or was replaced; rebuild the index with --overwrite"
            )
        try:
            index = faiss.read_index(str(self.index_file))
        except RuntimeError as exc:
            raise SemsearchError(
                f"{self.index_file} is corrupt (FAISS cannot read it): rebuild the index with --overwrite"
            ) from exc
        if index.ntotal != manifest.rows or index.d != manifest.model.dimension:
            raise SemsearchError(
                f"{self.index_file} holds {index.ntotal} vectors of {index.d} dimensions, the manifest "
                f"says {manifest.rows} of {manifest.model.dimension}: rebuild the index with --overwrite"
            )
        return index

    def size_bytes(self) -> dict[str, int]:
        return {
            path.name: path.stat().st_size for path in sorted(self.path.iterdir()) if path.is_file()
        }


def list_indexes(index_dir: Path = DEFAULT_INDEX_DIR) -> list[IndexFolder]:
    """Complete index folders under `index_dir`, most recently built first."""
    if not index_dir.is_dir():
        return []
    folders = [
        IndexFolder(path)
        for path in index_dir.iterdir()
        if path.is_dir() and not path.name.startswith(".") and (path / MANIFEST_FILE).is_file()
    ]
    return sorted(folders, key=lambda folder: folder.manifest_file.stat().st_mtime, reverse=True)


def find_index(name: str | None, index_dir: Path = DEFAULT_INDEX_DIR) -> IndexFolder:
    """The index called `name`, or with no name the only (or the most recent) one."""
    available = list_indexes(index_dir)
    if name is None:
        if not available:
            raise SemsearchError(
                f"there is no index in {index_dir}/: build one with 'semsearch build CORPUS'"
            )
        return available[0]
    candidate = Path(name).expanduser()
    if candidate.is_dir() and (candidate / MANIFEST_FILE).is_file():
        return IndexFolder(candidate)
    for folder in available:
        if folder.name == name:
            return folder
    there = ", ".join(folder.name for folder in available) or "none"
    raise SemsearchError(f"no index named {name!r} in {index_dir}/ (indexes there: {there})")


def partial_folder(index_dir: Path, name: str) -> Path:
    """Where a build of `name` writes until it is complete (and where an interrupted one waits)."""
    return index_dir / f".{name}{PARTIAL_SUFFIX}"


def check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\\" in name:
        raise SemsearchError(f"index name {name!r} is not usable: use letters, digits, - and _")


def publish(partial: Path, final: Path, overwrite: bool) -> None:
    """Move a finished build into place; an existing index is replaced only when asked."""
    if final.exists() and not overwrite:
        raise SemsearchError(
            f"index {final.name!r} already exists in {final.parent}/: pass --overwrite to replace it"
        )
    retired = final.with_name(f".{final.name}.old")
    if final.exists():
        shutil.rmtree(retired, ignore_errors=True)
        final.rename(retired)
    partial.rename(final)
    shutil.rmtree(retired, ignore_errors=True)
