"""Corpus files named by a URI: `s3://bucket/prefix/*.parquet`, `gs://…`, `hdfs://…`, `file:///…`.

A corpus may be on any filesystem `pyarrow.fs.FileSystem.from_uri` opens (file, s3, gs,
hdfs, abfs) or, for another scheme, one fsspec opens where its package is installed. A
`RemoteFile` stands where a `Path` stands for a local file; its URI (credentials and
`?options` included) travels to Ray workers as text, and messages and manifests show it
without them. Each process opens a filesystem once per scheme, host and options. The index
folder is always a local path: a URI given for it is refused.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from semsearch.checksums import file_sha256, stream_sha256
from semsearch.errors import SemsearchError, one_line

# A URI starts with a scheme of two or more characters (one letter is a Windows drive).
URI_PATTERN = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
# What a URI becomes as a `Path` (typer's, or `Path("s3://b/x")`): `s3:/b/x`.
COLLAPSED_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")
PYARROW_SCHEMES = "file://, s3://, gs://, hdfs:// or abfs://"
GLOB_CHARACTERS = "*?["


def is_uri(location: object) -> bool:
    """True for a `RemoteFile` or text that starts with `scheme://`."""
    return isinstance(location, RemoteFile) or (
        isinstance(location, str) and bool(URI_PATTERN.match(location))
    )


def is_glob(text: object) -> bool:
    return any(character in str(text) for character in GLOB_CHARACTERS)


def as_location(location: str | Path | RemoteFile) -> Path | RemoteFile:
    """A corpus location as a `RemoteFile` (a URI) or a local `Path` (`~` expanded)."""
    if isinstance(location, RemoteFile):
        return location
    if is_uri(location):
        return RemoteFile(str(location))
    return Path(location).expanduser()


def location_text(location: str | Path | RemoteFile) -> str:
    """The text that names a location everywhere, a Ray worker included (a URI in full)."""
    return location.uri if isinstance(location, RemoteFile) else str(location)


def file_name(location: str | Path | RemoteFile) -> str:
    """A location's file name, without a URI's query."""
    return as_location(location).name


def check_local_folder(folder: str | Path, option: str) -> None:
    """Refuse a URI where semsearch needs a folder it can write with POSIX calls (the index's)."""
    text = str(folder)
    if URI_PATTERN.match(text) or COLLAPSED_URI.match(text):
        shown = COLLAPSED_URI.sub(r"\1://", text)
        raise SemsearchError(
            f"{option} {shown} is a URI, but an index folder must be a local path (on a cluster, "
            "a shared filesystem every node mounts, e.g. NFS or a FUSE mount of the bucket): pass that path"
        )


@dataclass(frozen=True, order=True)
class RemoteFile:
    """A file (or a folder) on a filesystem named by a URI; see the module docstring."""

    uri: str

    @property
    def _path(self) -> PurePosixPath:
        split = urlsplit(self.uri)
        return PurePosixPath(unquote(split.path) or "/")

    @property
    def name(self) -> str:
        return self._path.name or urlsplit(self.uri).hostname or ""

    @property
    def suffix(self) -> str:
        return self._path.suffix

    @property
    def suffixes(self) -> list[str]:
        return self._path.suffixes

    @property
    def parts(self) -> tuple[str, ...]:
        """The host (an S3 or GCS bucket) and the path's components."""
        host = urlsplit(self.uri).hostname
        return ((host,) if host else ()) + tuple(part for part in self._path.parts if part != "/")

    def resolve(self) -> RemoteFile:
        return self

    def expanduser(self) -> RemoteFile:
        return self

    def __str__(self) -> str:
        """The URI as shown: without credentials (`user:password@`) or options (`?…`)."""
        split = urlsplit(self.uri)
        user, at, host = split.netloc.rpartition("@")
        netloc = host if ":" in user else split.netloc  # abfs' `container@account` stays
        return urlunsplit((split.scheme, netloc, split.path, "", ""))

    def child(self, relative: str) -> RemoteFile:
        """The file at `relative` (a /-separated path) under this folder, with its options."""
        split = urlsplit(self.uri)
        path = split.path.rstrip("/") + "/" + quote(relative, safe="/")
        return RemoteFile(urlunsplit(split._replace(path=path)))

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        """The pyarrow filesystem and the path in it."""
        return open_uri(self.uri)

    def info(self) -> pafs.FileInfo:
        filesystem, path = self.filesystem()
        try:
            return filesystem.get_file_info(path)
        except (pa.ArrowException, OSError) as exc:
            raise SemsearchError(
                f"cannot read {self} ({one_line(exc)}): check the URI and its credentials"
            ) from exc


_FILESYSTEMS: dict[tuple[str, str, str], tuple[pafs.FileSystem, str]] = {}
_LOCK = threading.Lock()


def open_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path) for `uri`; a filesystem is opened once per scheme, host and query
    (S3's `from_uri` asks AWS for a bucket's region when the URI does not say it)."""
    split = urlsplit(uri)
    key = (split.scheme.lower(), split.netloc, split.query)
    uri_path = unquote(split.path)
    if len(uri_path) > 1:
        uri_path = uri_path.rstrip("/")
    with _LOCK:
        cached = _FILESYSTEMS.get(key)
    if cached is not None:
        filesystem, prefix = cached
        return filesystem, prefix + uri_path
    filesystem, path = _from_uri(uri)
    if len(path) > 1:
        path = path.rstrip("/")
    # The filesystem's path is a fixed prefix (S3's bucket, fsspec's host) and the URI's path.
    if path.endswith(uri_path) or not uri_path:
        with _LOCK:
            _FILESYSTEMS[key] = (filesystem, path[: len(path) - len(uri_path)])
    return filesystem, path


def _from_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    shown = str(RemoteFile(uri))
    try:
        return pafs.FileSystem.from_uri(uri)
    except pa.ArrowInvalid as exc:
        if "Unrecognized filesystem type" not in str(exc):
            raise SemsearchError(f"cannot open {shown} ({one_line(exc)}): check the URI") from None
    except (pa.ArrowException, OSError) as exc:  # not built in, a library missing, no answer
        raise SemsearchError(
            f"cannot open {shown} ({one_line(exc)}): check the URI and its credentials"
        ) from None
    return _from_fsspec(uri, shown)


def _from_fsspec(uri: str, shown: str) -> tuple[pafs.FileSystem, str]:
    """A scheme pyarrow does not know, through fsspec where it and the scheme's package are installed."""
    scheme = urlsplit(uri).scheme
    unknown = (
        f"unknown filesystem {scheme}:// in {shown}: use {PYARROW_SCHEMES}, or a scheme "
        "fsspec knows (pip install fsspec and the package for it)"
    )
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise SemsearchError(unknown) from None
    try:
        filesystem, path = url_to_fs(uri)
    except ImportError as exc:
        raise SemsearchError(
            f"reading {scheme}:// needs a package that is not installed: {one_line(exc)}"
        ) from None
    except ValueError as exc:
        if "not known" in str(exc):
            raise SemsearchError(unknown) from None
        raise SemsearchError(f"cannot open {shown} ({one_line(exc)}): check the URI") from None
    except Exception as exc:  # noqa: BLE001 - a filesystem of fsspec's may fail in its own way
        raise SemsearchError(
            f"cannot open {shown} ({type(exc).__name__}: {one_line(exc)}): check the URI"
        ) from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem)), path


def resolve_uri_files(uri: str, supported) -> list[RemoteFile]:
    """The files a URI names, sorted: itself, a folder's `supported` files (hidden ones and
    those starting with `_` left out), or those matching a glob in its path (`*`, `[…]`,
    `**`; `?` starts a URI's query)."""
    location = RemoteFile(uri)
    split = urlsplit(uri)
    components = unquote(split.path).split("/")
    first_glob = next((n for n, part in enumerate(components) if is_glob(part)), None)
    if first_glob is None:
        info = location.info()
        if info.type == pafs.FileType.File:
            return [location]
        if info.type == pafs.FileType.NotFound:
            raise SemsearchError(f"corpus {location} does not exist: check the URI")
        files = [
            file
            for relative, file in _listing(location, recursive=True)
            if supported(file) and not any(part.startswith((".", "_")) for part in relative)
        ]
        if not files:
            raise SemsearchError(
                f"folder {location} holds no .parquet, .csv, .tsv or .jsonl files (optionally .gz)"
            )
        return sorted(files)
    base = RemoteFile(
        urlunsplit(split._replace(path=quote("/".join(components[:first_glob]) or "/")))
    )
    pattern = [part for part in components[first_glob:] if part]
    recursive = "**" in pattern or len(pattern) > 1
    files = [
        file
        for relative, file in _listing(base, recursive)
        if glob_match(list(relative), pattern) and not any(p.startswith(".") for p in relative)
    ]
    if not files:
        raise SemsearchError(
            f"no file matches {location}: check the pattern (quote it, so the shell leaves it alone)"
        )
    return sorted(files)


def _listing(folder: RemoteFile, recursive: bool) -> list[tuple[tuple[str, ...], RemoteFile]]:
    """(path relative to `folder` as components, file) of every file under `folder`."""
    filesystem, path = folder.filesystem()
    try:
        infos = filesystem.get_file_info(
            pafs.FileSelector(path, recursive=recursive, allow_not_found=True)
        )
    except (pa.ArrowException, OSError) as exc:
        raise SemsearchError(
            f"cannot list {folder} ({one_line(exc)}): check the URI and its credentials"
        ) from exc
    root = path.rstrip("/") + "/"
    found = []
    for info in infos:
        if info.type == pafs.FileType.File and info.path.startswith(root):
            relative = info.path[len(root) :]
            found.append((tuple(relative.split("/")), folder.child(relative)))
    return found


def glob_match(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """Glob matching by path component: `*`, `?` and `[…]` within one, `**` across any number."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(glob_match(parts[start:], rest) for start in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and glob_match(parts[1:], rest)


def parquet_file(location: Path | RemoteFile) -> pq.ParquetFile:
    """A Parquet file to read, local or on its filesystem, without pre-buffering: its cache kept
    every row group read until the file closed (15 GB for a 20M-row vector column)."""
    if isinstance(location, RemoteFile):
        filesystem, path = location.filesystem()
        return pq.ParquetFile(path, filesystem=filesystem, pre_buffer=False)
    return pq.ParquetFile(location, pre_buffer=False)


def input_stream(location: Path | RemoteFile, compression: str | None = "detect") -> pa.NativeFile:
    """A file's bytes as a stream (`detect`: gunzipped when its name ends in .gz)."""
    if isinstance(location, RemoteFile):
        filesystem, path = location.filesystem()
        return filesystem.open_input_stream(path, compression=compression)
    return pa.input_stream(str(location), compression=compression)


def location_sha256(location: Path | RemoteFile) -> str:
    """The sha256 of a local or remote file's bytes: a source's checksum in the manifest, used to
    resume builds."""
    if isinstance(location, RemoteFile):
        with input_stream(location, compression=None) as stream:
            return stream_sha256(stream)
    return file_sha256(location)
