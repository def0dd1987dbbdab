"""Pack what a GPU benchmark run needs into `.gpu/`, within the GPU machine's 64 MiB transfer.

The machine lacks the bundled model and the shared data: the model travels as fp16 with its
2 lowest mantissa bits zero (xz squeezes it; cosine >= 0.99999 to fp32, `--check-rounding`),
with column extracts of the corpora; `--widen` restores an fp32 folder there.

    python benchmarks/gpu_carry.py --bundle             # here: .gpu/bundle for gpu_suite.sh
    python benchmarks/gpu_carry.py --widen /tmp/model   # there: .gpu/model -> fp32 /tmp/model
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import REPO_ROOT, add_options, base_parser

if TYPE_CHECKING:
    import numpy as np
    import torch

CARRY = REPO_ROOT / ".gpu"
SKIPPED = {"model.safetensors", "README.md", "data_config.json", ".gitattributes"}
HALF_WEIGHTS = "model_fp16.safetensors"
CORPORA = ("pypi", "debian")
DROPPED_BITS = 2  # of the matrices' 10 fp16 mantissa bits: the bundle fits in CARRY_LIMIT_MIB
CARRY_LIMIT_MIB = 60.0  # the bundle with the repository: the call's 64 MiB, less a margin


def pack(
    data_dir: Path, pypi_rows: int, debian_rows: int, dropped_bits: int, report: bool = True
) -> None:
    """`.gpu/model` (fp16, see `pack_model`) and `.gpu/data`'s column extracts."""
    model = CARRY / "model"
    shutil.rmtree(CARRY, ignore_errors=True)
    pack_model(model, dropped_bits)
    pypi = pq.read_table(data_dir / "pypi" / "pypi_summaries.parquet", columns=["summary"])
    debian = pq.read_table(
        data_dir / "debian" / "debian_packages.parquet", columns=["long_description"]
    )
    text = debian.column("long_description")
    debian = debian.filter(pc.not_equal(pc.utf8_trim_whitespace(text), ""))
    for folder, table, rows, name in (
        ("pypi", pypi, pypi_rows, "pypi_summaries.parquet"),
        ("debian", debian, debian_rows, "debian_packages.parquet"),
    ):
        write_extract(table.slice(0, rows or None), CARRY / "data" / folder / name)
    shutil.copytree(data_dir / "stsb", CARRY / "data" / "stsb")  # bench pairs' sentences
    if report:
        report_folders(model)


def report_folders(model: Path) -> None:
    """What the plain folders weigh, and what a call carrying them would carry in all."""
    for part in (model, *(CARRY / "data" / folder for folder in ("pypi", "debian", "stsb"))):
        print(f"  {part.relative_to(CARRY.parent)}: {folder_mib(part):.1f} MiB")
    data = CARRY / "data"
    for what, parts in (
        ("an encode/build/mine", (model, data / "pypi", data / "debian")),
        ("a pairs", (model, data / "stsb")),
    ):
        total = sum(map(folder_mib, parts)) + repository_mib()
        print(
            f"{what} call carries {total:.1f} MiB of its 64 MiB with the repository's tracked "
            f"files{'' if total < 64 else ': TOO LARGE, carry less'}"
        )


def pack_model(target: Path, dropped_bits: int = DROPPED_BITS) -> None:
    """The default model's folder at `target` with its weights as fp16, the matrices'
    `dropped_bits` lowest mantissa bits rounded off (see `round_mantissa`)."""
    from safetensors.torch import load_file, save_file

    from semsearch.models.model_folder import resolve_model

    source = resolve_model("default").path
    for path in source.rglob("*"):
        if path.is_file() and path.name not in SKIPPED:
            copy = target / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
    weights = load_file(source / "model.safetensors")
    save_file(
        {
            name: round_mantissa(tensor.half(), dropped_bits if tensor.dim() >= 2 else 0)
            for name, tensor in weights.items()
        },
        target / HALF_WEIGHTS,
        metadata={"format": "pt"},
    )


def round_mantissa(half: torch.Tensor, bits: int) -> torch.Tensor:
    """`half` (fp16) rounded to the nearest value (ties to even) whose `bits` lowest mantissa
    bits are zero: fp16's low byte is mostly mantissa, which xz cannot squeeze, and each bit
    zeroed there saves about 2.8 MiB of the bundle. Rounding the sign-magnitude bit pattern
    as an integer is rounding the value (a carry out of the mantissa steps the exponent)."""
    if bits == 0:
        return half
    import torch

    if not bool(torch.isfinite(half).all()):
        raise SystemExit("the model's fp16 weights hold an inf or NaN: carry them unrounded")
    raw = half.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    raw = raw + ((1 << (bits - 1)) - 1) + ((raw >> bits) & 1)
    raw = (raw & (0xFFFF ^ ((1 << bits) - 1))).to(torch.uint16)
    return raw.view(torch.float16)


def write_extract(table: pa.Table, path: Path, level: int = 19) -> None:
    """One text column as small as Parquet makes it: zstd at a high level (a low one where
    only speed matters: unpacking on the GPU machine, where seconds are device time), one
    dictionary-free column (summaries are mostly distinct, so dictionaries only add bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd", compression_level=level, use_dictionary=False)


def repository_mib() -> float:
    """What the repository's tracked files weigh (they travel with every call)."""
    import subprocess

    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True).stdout
    paths = [REPO_ROOT / name for name in names.decode().split("\0") if name]
    return sum(path.stat().st_size for path in paths if path.is_file()) / 2**20


def folder_mib(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20


def widen(target: Path, source: Path = CARRY / "model") -> None:
    """Copy `source` (`.gpu/model`) to `target` with the fp16 weights widened back to fp32."""
    from safetensors.torch import load_file, save_file

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(HALF_WEIGHTS))
    weights = load_file(source / HALF_WEIGHTS)
    save_file(
        {name: tensor.float() for name, tensor in weights.items()},
        target / "model.safetensors",
        metadata={"format": "pt"},
    )
    print(f"wrote {target}")


BUNDLE = CARRY / "bundle"
FAISS_WHEEL = "faiss-cpu==1.15.1"


def bundle(data_dir: Path, dropped_bits: int) -> None:
    """Everything the GPU suite needs in one call's 64 MiB: `.gpu/bundle/` holds the rounded
    fp16 weights split into high and low byte planes (xz squeezes the exponent bytes and the
    zeroed mantissa bits: 44 -> 31.7 MiB), the tokenizer and configs under xz (0.7 -> 0.2 MiB),
    every PyPI summary as newline-joined text under xz (15.4 -> 11.7 MiB; no summary
    contains a newline), the Debian and STS-B extracts, and faiss-cpu's installed tree under
    xz (the image has no FAISS; 63 -> 8.9 MiB). `--unpack` restores `.gpu/model`, `.gpu/data`
    and a FAISS site folder there."""
    import lzma
    import subprocess
    import tarfile
    import tempfile

    import numpy as np

    pack(data_dir, 0, 20_000, dropped_bits, report=False)
    shutil.rmtree(BUNDLE, ignore_errors=True)
    BUNDLE.mkdir(parents=True)
    weights = (CARRY / "model" / HALF_WEIGHTS).read_bytes()
    header = 8 + int.from_bytes(weights[:8], "little")
    planes = np.frombuffer(weights[header:], dtype=np.uint8)
    (BUNDLE / "weights_header.bin").write_bytes(weights[:header])
    for name, plane in (("weights_lo.xz", planes[0::2]), ("weights_hi.xz", planes[1::2])):
        (BUNDLE / name).write_bytes(lzma.compress(plane.tobytes(), preset=9 | lzma.PRESET_EXTREME))
    with tarfile.open(BUNDLE / "model.tar.xz", "w:xz", preset=9) as tar:  # tokenizer, configs
        tar.add(
            CARRY / "model",
            arcname=".",
            filter=lambda entry: None if entry.name.endswith(HALF_WEIGHTS) else entry,
        )
    summaries = pq.read_table(CARRY / "data" / "pypi" / "pypi_summaries.parquet")
    texts = summaries.column("summary").to_pylist()
    if any("\n" in text for text in texts):
        raise SystemExit("a PyPI summary contains a newline: carry the Parquet extract instead")
    (BUNDLE / "pypi.txt.xz").write_bytes(
        lzma.compress("\n".join(texts).encode(), preset=9 | lzma.PRESET_EXTREME)
    )
    for folder in ("debian", "stsb"):
        shutil.copytree(CARRY / "data" / folder, BUNDLE / "data" / folder)
    with tempfile.TemporaryDirectory() as scratch:
        platform = "--python-version 3.12 --platform manylinux_2_28_x86_64"
        download = f"-m pip download -q --no-deps --only-binary=:all: {platform} -d"
        subprocess.run([sys.executable, *download.split(), scratch, FAISS_WHEEL], check=True)
        wheel = next(Path(scratch).glob("*.whl"))
        site = Path(scratch) / "site"
        shutil.unpack_archive(wheel, site, format="zip")
        with tarfile.open(BUNDLE / "faiss.tar.xz", "w:xz", preset=9) as tar:
            tar.add(site, arcname=".")
    check_carry()


def check_carry(limit_mib: float = CARRY_LIMIT_MIB) -> float:
    """Print the bundle's parts and what a call carries with the repository's tracked files
    (MiB); exit with one line when that passes `limit_mib`."""
    parts = sorted(
        (path.stat().st_size, path.relative_to(BUNDLE))
        for path in BUNDLE.rglob("*")
        if path.is_file()
    )
    print("  " + ", ".join(f"{name} {size / 2**20:.2f} MiB" for size, name in reversed(parts)))
    bundle_mib, tracked_mib = folder_mib(BUNDLE), repository_mib()
    total = bundle_mib + tracked_mib
    print(
        f"{BUNDLE.relative_to(REPO_ROOT)}: {bundle_mib:.2f} MiB + the repository's tracked "
        f"files {tracked_mib:.2f} MiB = a call carries {total:.2f} MiB (limit "
        f"{limit_mib:.0f} of the call's 64 MiB)"
    )
    if total > limit_mib:
        raise SystemExit(
            f"the GPU carry is {total:.2f} MiB, over {limit_mib:.0f} MiB: carry less "
            "(the bundle's parts are listed above)"
        )
    return total


def unpack(site: Path) -> None:
    """On the GPU machine: `.gpu/bundle` back into `.gpu/model`, `.gpu/data` and `site`."""
    import lzma
    import tarfile

    import numpy as np

    lo, hi = (
        np.frombuffer(lzma.decompress((BUNDLE / name).read_bytes()), dtype=np.uint8)
        for name in ("weights_lo.xz", "weights_hi.xz")
    )
    planes = np.empty(lo.size * 2, dtype=np.uint8)
    planes[0::2], planes[1::2] = lo, hi
    shutil.rmtree(CARRY / "model", ignore_errors=True)
    with tarfile.open(BUNDLE / "model.tar.xz") as tar:
        tar.extractall(CARRY / "model", filter="data")
    (CARRY / "model" / HALF_WEIGHTS).write_bytes(
        (BUNDLE / "weights_header.bin").read_bytes() + planes.tobytes()
    )
    texts = lzma.decompress((BUNDLE / "pypi.txt.xz").read_bytes()).decode().split("\n")
    write_extract(
        pa.table({"summary": texts}), CARRY / "data" / "pypi" / "pypi_summaries.parquet", level=1
    )
    for folder in ("debian", "stsb"):
        shutil.rmtree(CARRY / "data" / folder, ignore_errors=True)
        shutil.copytree(BUNDLE / "data" / folder, CARRY / "data" / folder)
    with tarfile.open(BUNDLE / "faiss.tar.xz") as tar:
        tar.extractall(site, filter="data")
    print(f"unpacked {len(texts):,} summaries, the model and FAISS into {site}")


def check_rounding(args: argparse.Namespace) -> None:
    """How far rounding the carried weights moves the model: vectors of the first `--texts`
    PyPI summaries and as many Debian descriptions from the widened, rounded weights against
    the default model's own fp32 vectors, on this CPU (cosine per text, mean and min, and how
    many of each text's 10 nearest among all of them stay the same); one line to
    benchmarks/results/gpu_carry.jsonl."""
    import tempfile

    from common import corpus_texts, record

    from semsearch.ann.tune import recall_at_k
    from semsearch.evaluation.similarity import row_cosines
    from semsearch.models import BiEncoder
    from semsearch.models.model_folder import resolve_model

    texts = {corpus: corpus_texts(args.data_dir, corpus, args.texts) for corpus in CORPORA}
    everything = [text for corpus in CORPORA for text in texts[corpus]]
    with tempfile.TemporaryDirectory() as scratch:
        half, widened = Path(scratch) / "fp16", Path(scratch) / "fp32"
        pack_model(half, args.dropped_bits)
        widen(widened, half)
        vectors = [
            BiEncoder.load(str(path), device="cpu", runtime="torch").encode(everything)
            for path in (resolve_model("default").path, widened)
        ]
    cosines = row_cosines(*vectors)
    figures: dict[str, object] = {
        "dropped_mantissa_bits": args.dropped_bits,
        "texts": {corpus: len(texts[corpus]) for corpus in CORPORA},
    }
    start = 0
    for corpus in CORPORA:
        part = cosines[start : start + len(texts[corpus])]
        start += len(texts[corpus])
        figures[f"{corpus}_cosine_mean"] = round(float(part.mean()), 7)
        figures[f"{corpus}_cosine_min"] = round(float(part.min()), 7)
    figures["cosine_mean"] = round(float(cosines.mean()), 7)
    figures["cosine_min"] = round(float(cosines.min()), 7)
    neighbours = [nearest_others(matrix, 10) for matrix in vectors]
    figures["neighbours_at_10_kept"] = round(recall_at_k(neighbours[1], neighbours[0], 10), 5)
    print(", ".join(f"{key} {value}" for key, value in figures.items()))
    record(args, "gpu_carry", figures)


def nearest_others(vectors: np.ndarray, k: int) -> np.ndarray:
    """Each row's `k` nearest other rows by cosine, best first (a row is not its own
    neighbour, even where a duplicate text ties with it)."""
    import numpy as np

    from semsearch.evaluation.ir import exact_search
    from semsearch.evaluation.similarity import normalize_rows

    unit = normalize_rows(vectors)
    found = exact_search(unit, unit, k + 1)
    return np.array([[i for i in row if i != own][:k] for own, row in enumerate(found)])


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_options(
        parser,
        pypi_rows=(0, "PyPI summaries (0: all 841,708)"),
        debian_rows=(20_000, "non-empty Debian long descriptions (20,000: about 1.2 MiB)"),
        widen=(Path, "on the GPU machine: write the fp32 model folder here instead"),
        bundle=(False, "here: pack .gpu/bundle, all a GPU suite call carries"),
        dropped_bits=(DROPPED_BITS, "fp16 mantissa bits rounded off the model's matrices"),
        check_rounding=(False, "here: how far the rounded weights' vectors are from fp32's"),
        texts=(2_000, "--check-rounding's texts of each corpus"),
        unpack=(Path, "there: restore .gpu/bundle, FAISS into this site folder"),
    )
    args = parser.parse_args()
    if not 0 <= args.dropped_bits <= 10:
        parser.error("--dropped-bits: 0 to 10 of fp16's mantissa bits")
    if args.check_rounding:
        check_rounding(args)
    elif args.bundle:
        bundle(args.data_dir, args.dropped_bits)
    elif args.unpack is not None:
        unpack(args.unpack)
    elif args.widen is not None:
        widen(args.widen)
    else:
        pack(args.data_dir, args.pypi_rows, args.debian_rows, args.dropped_bits)


if __name__ == "__main__":
    main()
