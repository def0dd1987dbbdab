"""`semsearch.disk`: the errors a full disk raises in each library told as one, temporaries
removed, the fault seam, and a training checkpoint saved on a full disk."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from semsearch import disk
from semsearch.errors import NoSpaceError, NotWritableError


@pytest.fixture()
def full_device(tmp_path) -> Path:
    """A device like /dev/full (every write fails with ENOSPC), of the test's own: pyarrow
    deletes a file it failed to write, a device too, which must not be the system's."""
    path = tmp_path / "full"
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot make a /dev/full device here ({exc.strerror})")
    return path


@pytest.fixture()
def disk_full(monkeypatch):
    def full_after(limit: int) -> None:
        monkeypatch.setenv(disk.FULL_AFTER_ENV, str(limit))
        disk.reset_fault_seam()

    return full_after


def _raised(write) -> BaseException:
    try:
        write()
    except Exception as exc:
        return exc
    raise AssertionError("the write to a full device did not fail")


@pytest.mark.parametrize("library", ["python", "numpy", "pyarrow", "faiss"])
def test_each_librarys_full_disk_error_is_a_full_disk(library, full_device) -> None:
    """Each writes through its own code and says so in its own words (numpy without an
    errno, FAISS as a RuntimeError): all are told as a full disk, none as read-only."""
    vectors = np.ones((4096, 64), dtype=np.float32)

    def python() -> None:
        with open(full_device, "wb") as out:
            out.write(vectors.tobytes())

    def numpy() -> None:
        with open(full_device, "wb") as out:
            np.save(out, vectors)

    def pyarrow() -> None:
        pq.write_table(pa.table({"x": np.arange(100_000)}), str(full_device))

    def faiss_index() -> None:
        index = faiss.IndexFlatIP(64)
        index.add(vectors)
        faiss.write_index(index, str(full_device))

    writes = {"python": python, "numpy": numpy, "pyarrow": pyarrow, "faiss": faiss_index}
    exc = _raised(writes[library])
    assert disk.is_no_space(exc) and not disk.is_not_writable(exc), repr(exc)


def test_a_failed_write_leaves_no_temporary_and_a_good_one_is_committed(tmp_path) -> None:
    target = tmp_path / "a.txt"
    with pytest.raises(ValueError), disk.temporary_for(target) as temporary:
        temporary.write_text("half")
        raise ValueError
    assert list(tmp_path.iterdir()) == []
    with disk.temporary_for(target) as temporary:
        temporary.write_text("whole")
    assert [path.name for path in tmp_path.iterdir()] == ["a.txt"]


def test_the_seam_fails_commits_past_its_limit_and_shrinks_free_space(tmp_path, disk_full) -> None:
    disk_full(10)
    assert disk.free_bytes(tmp_path) == 10
    with disk.temporary_for(tmp_path / "small") as temporary:
        temporary.write_bytes(b"12345678")
    assert disk.free_bytes(tmp_path) == 2
    with pytest.raises(OSError) as raised, disk.temporary_for(tmp_path / "big") as temporary:
        temporary.write_bytes(b"123")
    assert raised.value.errno == errno.ENOSPC
    assert sorted(path.name for path in tmp_path.iterdir()) == ["small"]
    with pytest.raises(NoSpaceError, match=r"no space for a step in .*: it needs about 1\.0 KiB"):
        disk.check_free_space(tmp_path, 1024, "a step")


def test_disk_problems_names_the_folder_what_was_needed_and_what_is_free(tmp_path) -> None:
    with pytest.raises(NoSpaceError) as raised, disk.disk_problems(tmp_path, "x", 1 << 50):
        raise OSError("Not enough free space to write 4096 bytes after offset 128")
    assert str(raised.value).startswith(
        f"no space left in {tmp_path}: x needed about 1048576.0 GiB"
    )
    assert " is free; free some space and run it again" in str(raised.value)
    with (
        pytest.raises(NotWritableError, match="read-only file system"),
        disk.disk_problems(tmp_path, "x"),
    ):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "f"))
    with pytest.raises(KeyError), disk.disk_problems(tmp_path, "x"):
        raise KeyError("not a disk problem")


def test_a_checkpoint_saved_on_a_full_disk_keeps_the_previous_one(tmp_path, disk_full) -> None:
    from semsearch.training.checkpoint import (
        Trainables,
        TrainingState,
        read_checkpoint_state,
        save_checkpoint,
    )

    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.AdamW(model.parameters())
    trainables = Trainables(
        model,
        optimizer,
        torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        torch.amp.GradScaler(enabled=False),
    )
    save_checkpoint(tmp_path, trainables, TrainingState(step=1), {})
    disk_full(0)
    with pytest.raises(NoSpaceError) as raised:
        save_checkpoint(tmp_path, trainables, TrainingState(step=2), {})
    message = str(raised.value)
    assert f"no space left in {tmp_path}: saving a checkpoint needed" in message
    assert "any previous checkpoint is kept" in message and "resume" in message
    # The seam fails the last rename, after the old checkpoint moved aside (as `.old`, which
    # a resume reads); a real full disk fails earlier, with it still in place.
    assert [path.name for path in tmp_path.iterdir()] in (["checkpoint"], [".checkpoint.old"])
    state, _ = read_checkpoint_state(tmp_path)
    assert state.step == 1
