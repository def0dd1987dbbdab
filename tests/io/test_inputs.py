"""Ids, queries and sentences files: every line read as written, and never without a bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from semsearch.errors import SemsearchError
from semsearch.io.inputs import read_lines


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_bytes("\ufeffd1\r\nd2\n\n".encode())
    assert read_lines(path) == ["d1", "d2"]


def test_a_file_beyond_the_limit_is_one_line_not_all_of_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("x\n" * 600)
    with pytest.raises(SemsearchError, match="larger than"):
        read_lines(path, limit=1000)
    assert len(read_lines(path, limit=1200)) == 600


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_file_that_never_ends_is_refused() -> None:
    with pytest.raises(SemsearchError, match="/dev/zero is larger than 1 MiB"):
        read_lines(Path("/dev/zero"), limit=1 << 20)
