"""Choosing a FAISS structure for a corpus and turning a user's choice into a factory string.

`auto` searches exactly (Flat) up to AUTO_EXACT_LIMIT vectors: below that a brute-force
scan takes a few milliseconds per query on a laptop CPU, is always correct, and needs no
training. Above it, auto picks IVF over half-precision codes (`IVFn,SQfp16`): it trains in
minutes on a sample, its one knob, nprobe, trades speed for recall predictably, and its
lists take half the memory of float32 ones and are scanned faster at the same nprobe (on
the 841k PyPI summaries: 623 against 1,239 MiB, 1.11 against 1.92 ms a query, recall@10
0.9506 against 0.9502 once tuned; measured by `benchmarks/ivf_code_search.py`, since
deleted: see git history). fp16 keeps 11 bits of each coordinate, so only near-ties can
swap places; tuning rescoring answers from the stored float32 vectors counts those as ties.
Manhattan distances need full vectors: there auto keeps IVF-Flat.

`ivfpq` names the same structure as `disk` (since the held-out recall work: PQ codes alone
cap recall@10 near 0.67 on PyPI summaries, refined from the stored vectors they reach the
target); indexes built before as plain IVF-PQ keep their recorded factory string and open
as they were.

Where that does not fit the memory budget (`--memory-budget`, by default half the memory
the process can still get: `memory_budget.py`), auto picks `disk`: IVF-PQ codes whose lists
stay in the file, memory-mapped, and whose top-k is re-scored exactly from the stored
vectors (`rescoring.py`); only its centroids, codebooks and the searcher's per-row arrays
count as memory, the codes are file pages the kernel can reclaim.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field

from semsearch.ann.memory_budget import default_memory_budget
from semsearch.errors import SemsearchError
from semsearch.options import METRIC_NAMES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexSpec:
    """The FAISS structure: the user's choice, the factory string it became, its search knobs.

    `trained_file` (under `trained/`) is the trained, empty structure that every segment of
    a trained type (IVF, PQ) starts from, so that a segment added later shares its centroids.
    """

    requested: str
    factory: str
    metric: str
    search_params: dict[str, int] = field(default_factory=dict)
    trained_file: str | None = None


AUTO_EXACT_LIMIT = 100_000
NAMED_TYPES = ("auto", "flat", "ivf", "ivfsq", "hnsw", "ivfpq", "disk")
HNSW_M = 32
DEFAULT_EF_SEARCH = 64
DEFAULT_NPROBE = 32
# FAISS wants about 39 training points per centroid at least; more gives better centroids.
MIN_POINTS_PER_CENTROID = 39
# Bits of a product quantizer's code: 2**8 centroids per codebook, where the rows can train
# them (9,984 rows); fewer below (`pq_bits`).
PQ_BITS = 8
# IVF lists per square root of the rows. A `disk` index takes a quarter as many, as LanceDB's
# IVF-PQ does (sqrt(rows)): its 48-byte codes are scanned ~8x faster than fp16 vectors, so
# longer lists cost little per query, while training (k-means on 64 points a list) grows with
# the square of the list count and assigning rows with the list count: at 20M rows on a
# 2-core CPU, 16,384 lists would take about an hour of the build, 4,096 about ten minutes.
LISTS_PER_SQRT = 4
DISK_LISTS_PER_SQRT = 1
# A `disk` index's search parameter: candidates taken from the codes per result wanted, to
# be re-scored exactly (`rescoring.py`); its presence marks a rescoring index.
OVERSAMPLE = "oversample"
DEFAULT_OVERSAMPLE = 4
# What a searcher holds per row of a `disk` index besides its mapped codes: the ids (8 bytes)
# and two live masks (1 byte each) of `snapshot.IndexSnapshot`; metadata not counted.
SEARCHER_BYTES_PER_ROW = 10
# What a FAISS factory string starts with.
FACTORY_PREFIXES = ("IVF", "HNSW", "Flat", "PQ", "OPQ", "PCA", "SQ", "IDMap", "LSH", "NSG", "RFlat")
MANHATTAN_FACTORIES = re.compile(r"(PCA\d+,)?(Flat|IVF\d+,Flat|HNSW\d*(,Flat)?)")


def choose_index(
    requested: str, rows: int, dimension: int, metric: str, memory_budget: int | None = None
) -> IndexSpec:
    """The factory string and default search parameters for `requested` on `rows` vectors.

    `auto` takes the first of flat (small corpora only), IVF-SQfp16 (IVF-Flat for manhattan)
    and disk whose estimated memory fits `memory_budget` (bytes; default: a share of the
    memory available, `default_memory_budget`); an explicit type that does not fit an
    explicit budget is refused before anything is built.
    """
    if metric not in METRIC_NAMES:
        raise SemsearchError(f"unknown metric {metric!r}: choose one of {', '.join(METRIC_NAMES)}")
    if requested.lower() == "auto":
        kinds = ["flat"] if rows <= AUTO_EXACT_LIMIT else []
        kinds += ["ivf" if metric == "manhattan" else "ivfsq"]
        kinds += ["disk"]
        if memory_budget is None:
            memory_budget = default_memory_budget()
        specs = [_named_spec(kind, requested, rows, dimension, metric) for kind in kinds]
        specs = [spec for spec in specs if _usable(spec, rows)]  # flat and ivf always are
        for spec in specs:
            if memory_budget is None or estimate_spec_bytes(spec, rows, dimension) <= memory_budget:
                return spec
        return _over_budget(specs[-1], rows, dimension, memory_budget)
    spec = _named_spec(requested.lower(), requested, rows, dimension, metric)
    if rows < minimum_rows(spec.factory):
        log.warning(
            "%s needs at least %d vectors to train and there are %d: building a flat index "
            "(exact search) instead",
            spec.factory,
            minimum_rows(spec.factory),
            rows,
        )
        spec = IndexSpec(requested, "Flat", metric, {})
    if not _usable(spec, rows):
        raise SemsearchError(
            f"{spec.factory} cannot compute the manhattan metric (FAISS computes it on full "
            "vectors only): choose flat, ivf or hnsw, or another --metric"
        )
    estimate = estimate_spec_bytes(spec, rows, dimension)
    if memory_budget is not None and estimate is not None and estimate > memory_budget:
        return _over_budget(spec, rows, dimension, memory_budget)
    return spec


def is_rescoring(spec: IndexSpec) -> bool:
    """Whether searches of `spec`'s index oversample codes and rescore from stored vectors."""
    return OVERSAMPLE in spec.search_params


def _usable(spec: IndexSpec, rows: int) -> bool:
    """Whether FAISS can make `spec` over `rows` vectors. Manhattan distances are computed on
    full vectors only: codes (PQ, SQ) or an HNSW quantizer fail, some of them by aborting the
    process from a worker thread, so they are refused before anything runs."""
    if rows < minimum_rows(spec.factory):
        return False
    return spec.metric != "manhattan" or bool(MANHATTAN_FACTORIES.fullmatch(spec.factory))


def estimate_spec_bytes(spec: IndexSpec, rows: int, dimension: int) -> int | None:
    """Memory a searcher holds for `spec` over `rows` vectors. A `disk` index's codes and ids
    are mapped from its file: page cache, not counted; its centroids, PQ codebooks and the
    searcher's per-row arrays are."""
    if is_rescoring(spec) and (match := re.match(r"IVF(\d+),", spec.factory)):
        return rows * SEARCHER_BYTES_PER_ROW + (int(match[1]) + 256) * 4 * dimension
    return estimate_bytes(spec.factory, rows, dimension)


def estimate_bytes(factory: str, rows: int, dimension: int) -> int | None:
    """Memory an index of `rows` vectors will take, for the structures semsearch names; else None."""
    vector = 4 * dimension
    if factory == "Flat":
        return rows * vector
    if match := re.fullmatch(r"IVF(\d+),Flat", factory):
        return rows * (vector + 8) + int(match[1]) * vector
    if match := re.fullmatch(r"IVF(\d+),SQfp16", factory):
        return rows * (2 * dimension + 8) + int(match[1]) * vector
    if match := re.fullmatch(r"HNSW(\d+),Flat", factory):
        return rows * (vector + 8 * int(match[1]) + 16)
    if match := re.fullmatch(r"IVF(\d+),PQ(\d+)x([1-8])", factory):
        code = -(-int(match[2]) * int(match[3]) // 8)  # bytes, rounded up
        return rows * (code + 8) + int(match[1]) * vector + 2 ** int(match[3]) * vector
    return None


def minimum_rows(factory: str) -> int:
    """Vectors FAISS needs to make `factory`: one per IVF list, 2**bits (256 for the usual 8)
    per product-quantizer codebook, 101 for an NSG graph, d for a PCA to d dimensions;
    fewer make FAISS fail."""
    need = 1
    if match := re.search(r"IVF(\d+)", factory):
        need = max(need, int(match[1]))
    for match in re.finditer(r"PQ\d+(?:x(\d+))?", factory):
        need = max(need, 2 ** int(match[1] or 8))
    if "NSG" in factory:  # its NN-descent graph needs more than 100 points
        need = max(need, 101)
    if match := re.search(r"PCAW?R?(\d+)", factory):  # as many as the dimensions it keeps
        need = max(need, int(match[1]))
    return need


def parse_bytes(text: str) -> int:
    """'4G', '512MB', '1.5GiB' -> bytes (powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b)?\s*", text.lower())
    if not match:
        raise SemsearchError(f"cannot read {text!r} as a size: write it like 512M or 4G")
    return int(float(match[1]) * 1024 ** " kmgt".index(match[2] or " "))


def _over_budget(spec: IndexSpec, rows: int, dimension: int, budget: int) -> IndexSpec:
    need = estimate_spec_bytes(spec, rows, dimension) or 0
    raise SemsearchError(
        f"{spec.factory} over {rows} vectors needs about {need / 2**20:.0f} MiB, more than the "
        f"memory budget of {budget / 2**20:.0f} MiB: raise --memory-budget or choose a smaller --index"
    )


def _named_spec(kind: str, requested: str, rows: int, dimension: int, metric: str) -> IndexSpec:
    if kind == "ivfpq":
        # IVF-PQ alone ranks by code estimates: on 150k PyPI summaries even every list
        # reached recall@10 0.67. Refined from the stored vectors (as LanceDB and Milvus
        # refine PQ) it is the `disk` structure, so the name points there: one structure.
        log.info("ivfpq is the disk index type: IVF-PQ codes, answers re-scored exactly")
        kind = "disk"
    nlist = ivf_list_count(rows, DISK_LISTS_PER_SQRT if kind == "disk" else LISTS_PER_SQRT)
    if kind == "flat":
        return IndexSpec(requested, "Flat", metric, {})
    if kind in ("ivf", "ivfsq"):
        codes = "Flat" if kind == "ivf" else "SQfp16"
        return IndexSpec(
            requested, f"IVF{nlist},{codes}", metric, {"nprobe": min(DEFAULT_NPROBE, nlist)}
        )
    if kind == "hnsw":
        return IndexSpec(requested, f"HNSW{HNSW_M},Flat", metric, {"efSearch": DEFAULT_EF_SEARCH})
    pq = f"PQ{_pq_subquantizers(dimension)}x{pq_bits(rows)}"
    if kind == "disk":  # np: no polysemous training (30x slower to train, unused here)
        return IndexSpec(
            requested,
            f"IVF{nlist},{pq}np",
            metric,
            {"nprobe": min(DEFAULT_NPROBE, nlist), OVERSAMPLE: DEFAULT_OVERSAMPLE},
        )
    _check_factory_string(requested)
    return IndexSpec(requested, requested, metric, _default_params(requested))


def check_index_type(requested: str) -> None:
    """Refuse an index type that is neither a named type nor a factory string semsearch can
    keep, in one line: checked before a model loads (what depends on the vectors' size and
    count is checked once they are known)."""
    if requested.lower() not in NAMED_TYPES:
        _check_factory_string(requested)


def _check_factory_string(requested: str) -> None:
    if requested.lower() in NAMED_TYPES or not requested.startswith(FACTORY_PREFIXES):
        raise SemsearchError(
            f"unknown index type {requested!r}: use {', '.join(NAMED_TYPES)} or a FAISS factory "
            "string such as 'IVF1024,Flat' or 'HNSW32,Flat'"
        )
    if requested.startswith("IDMap"):
        raise SemsearchError(
            f"{requested!r}: semsearch keeps each vector's id itself; drop the IDMap prefix"
        )
    if (lists := re.search(r"IVF(\d+)", requested)) and int(lists[1]) < 1:
        raise SemsearchError(f"{requested!r}: an IVF index needs at least 1 list, e.g. IVF16,Flat")


def ivf_list_count(rows: int, per_sqrt: int = 4) -> int:
    """About per_sqrt*sqrt(rows) lists, a power of two, with enough rows to train each centroid."""
    if rows < MIN_POINTS_PER_CENTROID:
        return 1
    target = 2 ** round(math.log2(per_sqrt * math.sqrt(rows)))
    return max(1, min(target, rows // MIN_POINTS_PER_CENTROID, 65536))


def pq_bits(rows: int) -> int:
    """Bits a PQ code takes (8), or fewer where `rows` cannot train 2**8 centroids per codebook
    (FAISS would train each on too few points, and say so once per sub-quantizer: 48 lines
    for 384-d vectors). Under 2**8 rows, 8: too few for any codebook, so `choose_index` builds
    a flat index instead."""
    if rows < 2**PQ_BITS:
        return PQ_BITS
    return min(PQ_BITS, (rows // MIN_POINTS_PER_CENTROID).bit_length() - 1)


def _pq_subquantizers(dimension: int) -> int:
    for bytes_per_code in (8, 4, 2, 1):  # 8-byte sub-vectors: 48 codes for 384-d
        if dimension % bytes_per_code == 0 and dimension // bytes_per_code <= 64:
            return dimension // bytes_per_code
    return dimension


def _default_params(factory: str) -> dict[str, int]:
    if "IVF" in factory:
        return {"nprobe": DEFAULT_NPROBE}
    if "HNSW" in factory:
        return {"efSearch": DEFAULT_EF_SEARCH}
    return {}
