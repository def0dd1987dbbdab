"""A stand-in for tqdm that records each update, for tests of how progress moves."""

from __future__ import annotations


class RecordingBar:
    """Records every `update(n)` in `updates` and every bar's keyword arguments in `opened`."""

    updates: list[int] = []
    opened: list[dict] = []

    def __init__(self, *args, **kwargs) -> None:
        self.opened.append(kwargs)

    def __enter__(self) -> RecordingBar:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, rows: int) -> None:
        self.updates.append(rows)


def recording_bar() -> type[RecordingBar]:
    """A fresh RecordingBar class, so tests never share what they recorded."""
    return type("Bar", (RecordingBar,), {"updates": [], "opened": []})
