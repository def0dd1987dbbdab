"""A bounded HTTP/1.1 load generator that costs its host little CPU.

httpx spends about 1 ms of CPU a request on a client sharing 2 cores with the server, which
would set the ceiling: this keeps a keep-alive connection per user and reads by Content-Length.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit


class Connection:
    """One keep-alive connection to a local server."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, target: str) -> tuple[int, bytes]:
        """(status, body) of GET `target`; reconnects when the server closed the connection."""
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        request = f"GET {target} HTTP/1.1\r\nHost: {self.host}\r\n{self.extra}\r\n"
        self.writer.write(request.encode("ascii"))
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        body = await self.reader.readexactly(length)
        if close:
            await self.close()
        return status, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.writer = None


def target_for(path: str, query_name: str, extra: dict[str, str | int]) -> Callable[[str], str]:
    """A function from a query text to the request target `path?query_name=...&extra`."""
    return lambda query: f"{path}?{urlencode({query_name: query, **extra})}"


async def load(
    base: str,
    target: Callable[[str], str],
    queries: list[str],
    concurrency: int,
    count: int,
    max_s: float,
    headers: dict[str, str] | None = None,
) -> dict:
    """`count` GET requests from `concurrency` users, each waiting for its answer before the
    next (stopping early after `max_s`): q/s, latency percentiles and errors."""
    parts = urlsplit(base)
    latencies: list[float] = []
    errors: list[str] = []
    issued = 0
    started = time.perf_counter()

    async def user() -> None:
        nonlocal issued
        connection = Connection(parts.hostname or "127.0.0.1", parts.port or 80, headers or {})
        try:
            while issued < count and time.perf_counter() - started < max_s:
                query = queries[issued % len(queries)]
                issued += 1
                sent = time.perf_counter()
                try:
                    status, body = await asyncio.wait_for(connection.get(target(query)), 30)
                except (
                    OSError,
                    asyncio.IncompleteReadError,
                    asyncio.TimeoutError,
                    ValueError,
                ) as exc:
                    errors.append(type(exc).__name__)
                    await connection.close()
                    continue
                if status != 200:
                    errors.append(f"{status}: {body[:100].decode('utf-8', 'replace')}")
                    continue
                latencies.append(time.perf_counter() - sent)
        finally:
            await connection.close()

    await asyncio.gather(*(user() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies) or [float("nan")]

    def percentile(p: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)

    return {
        "concurrency": concurrency,
        "requests": len(latencies) + len(errors),
        "errors": len(errors),
        "error_examples": errors[:3],
        "qps": round(len(latencies) / elapsed, 1),
        "p50_ms": percentile(0.50),
        "p95_ms": percentile(0.95),
        "p99_ms": percentile(0.99),
        "seconds": round(elapsed, 1),
    }
