"""A model shipped as PyPI pieces of a split zip: found through package metadata, assembled
once into the cache, verified, and refused in one line when anything is missing or wrong.

The pieces here are a tiny model's zip split in three and installed as fake distributions
(a `.dist-info` folder on `sys.path`), so the real 438 MB packages are never needed."""

from __future__ import annotations

import hashlib
import io
import threading
import zipfile
from pathlib import Path

import pytest
from cli.support import error_line, runner
from training.tiny_data import write_stsb

from semsearch.cli.app import app
from semsearch.errors import SemsearchError
from semsearch.models import packaged_model
from semsearch.models.model_folder import resolve_model
from semsearch.models.packaged_model import (
    MPNET,
    PACKAGED_MODELS,
    VERIFIED_MARKER,
    PackagedModel,
    installed_pieces,
    packaged_model_path,
)

PIECES = 3


def _zip_of(folder: Path) -> bytes:
    """The folder zipped under a top-level folder of its own, as the real zip is."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"tiny-packaged/{file.relative_to(folder)}")
    return buffer.getvalue()


def _install_fake_pieces(site: Path, name: str, data: bytes) -> tuple[str, ...]:
    """Split `data` into pieces, each in a distribution of its own under `site`."""
    size = -(-len(data) // PIECES)
    packages = []
    for number in range(1, PIECES + 1):
        package, module = f"{name}-part-{number:03d}", f"{name.replace('-', '_')}_part_{number:03d}"
        piece = f"{module}/input/{name}.zip.{number:03d}"
        (site / piece).parent.mkdir(parents=True)
        (site / piece).write_bytes(data[(number - 1) * size : number * size])
        info = site / f"{package.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{piece},,\n{info.name}/METADATA,,\n")
        packages.append(package)
    return tuple(packages)


@pytest.fixture(scope="module")
def tiny_zip(tiny_model_dir: Path) -> tuple[bytes, str]:
    """The tiny model's zip and its weights' sha256."""
    weights = (tiny_model_dir / "model.safetensors").read_bytes()
    return _zip_of(tiny_model_dir), hashlib.sha256(weights).hexdigest()


@pytest.fixture()
def fake_model(tmp_path, monkeypatch, tiny_zip) -> PackagedModel:
    """A packaged model whose pieces are installed (as far as importlib.metadata can tell)."""
    data, sha256 = tiny_zip
    site = tmp_path / "site"
    site.mkdir()
    name = f"tiny-packaged-{tmp_path.name[-12:].replace('_', '-').strip('-')}"
    packages = _install_fake_pieces(site, name, data)
    monkeypatch.syspath_prepend(str(site))
    model = PackagedModel(
        name=name,
        extra="tiny",
        packages=packages,
        piece_names=tuple(f"{name}.zip.{n:03d}" for n in range(1, PIECES + 1)),
        weights_sha256=sha256,
    )
    monkeypatch.setitem(PACKAGED_MODELS, name, model)
    return model


def _leftovers(cache: Path) -> list[str]:
    return [p.name for p in (cache / "models").iterdir() if p.name.endswith(".partial")]


def test_pieces_are_found_through_package_metadata_and_assembled(fake_model, tmp_path) -> None:
    pieces = installed_pieces(fake_model)
    assert [p.name for p in pieces] == list(fake_model.piece_names)
    folder = packaged_model_path(fake_model, tmp_path / "cache")
    assert folder == tmp_path / "cache" / "models" / fake_model.name
    assert (folder / "model.safetensors").is_file() and (folder / VERIFIED_MARKER).is_file()
    assert not list(folder.glob("*.zip")) and not _leftovers(tmp_path / "cache")


def test_the_model_name_resolves_and_loads_like_any_model(
    fake_model, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = resolve_model(fake_model.name)
    assert folder.name == fake_model.name
    assert folder.path == tmp_path / "cache" / "models" / fake_model.name


def test_a_second_use_neither_reassembles_nor_rehashes(fake_model, tmp_path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    packaged_model_path(fake_model, cache)
    hashed: list[Path] = []
    original = packaged_model.file_sha256
    monkeypatch.setattr(packaged_model, "file_sha256", lambda p: hashed.append(p) or original(p))

    def no_pieces(model):
        raise AssertionError("assembled again")

    packaged_model_path(fake_model, cache, find_pieces=no_pieces)
    assert hashed == []
    weights = cache / "models" / fake_model.name / "model.safetensors"
    weights.touch()  # a new modification time: checked again, and still good
    packaged_model_path(fake_model, cache, find_pieces=no_pieces)
    assert hashed == [weights]


def test_changed_cached_weights_are_refused_with_what_to_do(fake_model, tmp_path) -> None:
    folder = packaged_model_path(fake_model, tmp_path / "cache")
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(SemsearchError, match=f"delete {folder} and run again"):
        packaged_model_path(fake_model, tmp_path / "cache")


def test_a_checksum_mismatch_is_refused_and_nothing_is_left(fake_model, tmp_path) -> None:
    wrong = PackagedModel(**{**fake_model.__dict__, "weights_sha256": "0" * 64})
    with pytest.raises(SemsearchError, match="expected 000000000000.*--force-reinstall --no-deps"):
        packaged_model_path(wrong, tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_damaged_piece_is_refused(fake_model, tmp_path) -> None:
    last = installed_pieces(fake_model)[-1]
    last.write_bytes(last.read_bytes()[:-100])
    with pytest.raises(SemsearchError, match="do not form a zip"):
        packaged_model_path(fake_model, tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_missing_piece_names_its_package(fake_model) -> None:
    installed_pieces(fake_model)[1].unlink()
    with pytest.raises(
        SemsearchError, match=f"{fake_model.packages[1]} is installed but its piece"
    ):
        installed_pieces(fake_model)


def test_missing_packages_say_how_to_install_them(fake_model) -> None:
    absent = PackagedModel(
        **{**fake_model.__dict__, "packages": ("semsearch-no-such-piece-1",) * 3}
    )
    with pytest.raises(SemsearchError, match=r"is not installed: pip install -e '\.\[tiny\]'"):
        installed_pieces(absent)
    some = PackagedModel(
        **{
            **fake_model.__dict__,
            "packages": (*fake_model.packages[:2], "semsearch-no-such-piece-3"),
        }
    )
    with pytest.raises(SemsearchError, match="missing 1 of its 3 packages"):
        installed_pieces(some)


def test_two_processes_assembling_at_once_both_get_one_whole_copy(fake_model, tmp_path) -> None:
    both_started = threading.Barrier(2)

    def pieces_after_the_other_started(model):
        both_started.wait(timeout=10)  # both have seen no folder and assemble their own
        return installed_pieces(model)

    results: list[Path | BaseException] = []

    def assemble() -> None:
        try:
            results.append(
                packaged_model_path(fake_model, tmp_path / "cache", pieces_after_the_other_started)
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(exc)

    threads = [threading.Thread(target=assemble) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    folder = tmp_path / "cache" / "models" / fake_model.name
    assert results == [folder, folder]
    assert sorted(p.name for p in (tmp_path / "cache" / "models").iterdir()) == [fake_model.name]
    packaged_model.check_weights(fake_model, folder)


def test_the_cli_refuses_mpnet_without_its_packages_in_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(packaged_model, "_installed", lambda package: False)
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    result = runner.invoke(app, ["eval", "sts", f"stsb:{stsb}", "--model", MPNET.name])
    line = error_line(result)
    assert "pip install -e '.[mpnet]'" in line
    assert not (tmp_path / "cache" / "models" / MPNET.name).exists()
