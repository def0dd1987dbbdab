"""Cache records: a file checked once is not read again until its inode changes, and a changed
file is never taken for the recorded one."""

from __future__ import annotations

import errno
import json
import os

import pytest

from semsearch import checksums
from semsearch.checksums import (
    VERIFIED_KEY,
    cache_file_problem,
    cache_record_path,
    write_cache_record,
)


@pytest.fixture()
def hashed(monkeypatch) -> list:
    """The files `cache_file_problem` reads to hash, in order; files count as settled at once."""
    monkeypatch.setattr(checksums, "SETTLED_S", 0.0)
    read = []
    digest = checksums.file_digest

    def counting(path):
        read.append(path.name)
        return digest(path)

    monkeypatch.setattr(checksums, "file_digest", counting)
    return read


def _entry(tmp_path, data: bytes = b"model weights " * 100):
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    write_cache_record(path)
    return path


def test_a_checked_file_is_not_read_again_until_it_changes(tmp_path, hashed) -> None:
    path = _entry(tmp_path)
    hashed.clear()
    assert cache_file_problem(path) is None and hashed == ["model.bin"]  # hashed, stamped
    assert VERIFIED_KEY in json.loads(cache_record_path(path).read_text())
    assert cache_file_problem(path) is None and hashed == ["model.bin"]  # a stat, no read


def test_a_file_changed_in_place_after_its_check_is_refused(tmp_path, hashed) -> None:
    path = _entry(tmp_path)
    assert cache_file_problem(path) is None  # stamped
    data = bytearray(path.read_bytes())
    data[7] ^= 0x01  # the same size, one bit
    status = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))  # even with its old mtime
    assert "not the recorded one" in cache_file_problem(path)


def test_a_file_replaced_by_another_of_the_same_size_is_refused(tmp_path, hashed) -> None:
    path = _entry(tmp_path)
    assert cache_file_problem(path) is None
    other = tmp_path / "other.bin"
    other.write_bytes(b"other weights " * 100)
    os.replace(other, path)
    assert "not the recorded one" in cache_file_problem(path)


def test_a_file_written_just_now_is_hashed_until_it_settles(tmp_path, monkeypatch) -> None:
    """Its times could stay the same through another write within one tick of the file clock."""
    path = _entry(tmp_path)
    assert cache_file_problem(path) is None
    assert VERIFIED_KEY not in json.loads(cache_record_path(path).read_text())


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC])
def test_a_cache_folder_that_takes_no_writes_still_checks(tmp_path, hashed, monkeypatch, code):
    path = _entry(tmp_path)
    record = cache_record_path(path).read_text()

    def refused(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(checksums.os, "replace", refused)
    hashed.clear()
    assert cache_file_problem(path) is None and cache_file_problem(path) is None
    assert hashed == ["model.bin", "model.bin"]  # each check reads it: only slower
    assert cache_record_path(path).read_text() == record
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model.bin.record.json"]
