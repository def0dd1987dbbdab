"""Pack what a GPU benchmark run needs into `.gpu/`, within the GPU machine's 64 MiB transfer.

Why: the lent GPU machine has torch, transformers and sentence-transformers but neither the
bundled model package nor the shared data, and a call may carry 64 MiB. The default model
(91 MB in fp32) travels as fp16 safetensors (45 MB) with its tokenizer and configs, plus
column extracts of the two corpora: every PyPI summary (841,708 rows, the `summary` column
alone, zstd level 19: about 15.4 MiB, for gpu_build.py and mine_pypi.py; the first N rows
serve encode_throughput.py), the first 20,000 Debian long descriptions (1.2 MiB) and STS-B
(0.3 MiB, the sentences of gpu_pairs.py). On the machine, `--widen`
restores an fp32 folder that both encoders then load, so their comparison stays exact (on
the fp16-rounded weights). The scripts read the extracts with `--data-dir .gpu/data`.

`--bundle` (`make gpu-carry`) squeezes all of it, and faiss-cpu, into `.gpu/bundle` (about
60 MiB, 63 with the repository), which every call of the GPU suite (`gpu_suite.sh`) carries;
`--unpack` restores it there. The plain folders stay for a call that runs one script.

    python benchmarks/gpu_carry.py --bundle             # here: .gpu/bundle for gpu_suite.sh
    python benchmarks/gpu_carry.py                      # here: writes .gpu/ (git-ignored)
    python benchmarks/gpu_carry.py --widen /tmp/model   # there: .gpu/model -> fp32 /tmp/model
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import REPO_ROOT, base_parser

CARRY = REPO_ROOT / ".gpu"
SKIPPED = {"model.safetensors", "README.md", "data_config.json", ".gitattributes"}
HALF_WEIGHTS = "model_fp16.safetensors"


def pack(data_dir: Path, pypi_rows: int, debian_rows: int) -> None:
    from safetensors.torch import load_file, save_file

    from semsearch.models.model_folder import resolve_model

    source = resolve_model("default").path
    model = CARRY / "model"
    shutil.rmtree(CARRY, ignore_errors=True)
    for path in source.rglob("*"):
        if path.is_file() and path.name not in SKIPPED:
            target = model / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    weights = load_file(source / "model.safetensors")
    save_file(
        {name: tensor.half() for name, tensor in weights.items()},
        model / HALF_WEIGHTS,
        metadata={"format": "pt"},
    )
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


def widen(target: Path) -> None:
    """Copy `.gpu/model` to `target` with the fp16 weights widened back to fp32."""
    from safetensors.torch import load_file, save_file

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(CARRY / "model", target, ignore=shutil.ignore_patterns(HALF_WEIGHTS))
    weights = load_file(CARRY / "model" / HALF_WEIGHTS)
    save_file(
        {name: tensor.float() for name, tensor in weights.items()},
        target / "model.safetensors",
        metadata={"format": "pt"},
    )
    print(f"wrote {target}")


BUNDLE = CARRY / "bundle"
FAISS_WHEEL = "faiss-cpu==1.15.1"


def bundle(data_dir: Path) -> None:
    """Everything the GPU suite needs in one call's 64 MiB: `.gpu/bundle/` holds the fp16
    weights split into high and low byte planes (xz squeezes the exponent bytes: 44 -> 37
    MiB), the tokenizer and configs under xz (0.7 -> 0.2 MiB), every PyPI summary as newline-joined text under xz (15.4 -> 11.7 MiB; no summary
    contains a newline), the Debian and STS-B extracts, and faiss-cpu's installed tree under
    xz (the image has no FAISS; 18 -> 9 MiB). `--unpack` restores `.gpu/model`, `.gpu/data`
    and a FAISS site folder there."""
    import lzma
    import subprocess
    import tarfile
    import tempfile

    import numpy as np

    pack(data_dir, 0, 20_000)
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
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "--platform",
                "manylinux_2_28_x86_64",
                "-d",
                scratch,
                FAISS_WHEEL,
            ],
            check=True,
        )
        wheel = next(Path(scratch).glob("*.whl"))
        site = Path(scratch) / "site"
        shutil.unpack_archive(wheel, site, format="zip")
        with tarfile.open(BUNDLE / "faiss.tar.xz", "w:xz", preset=9) as tar:
            tar.add(site, arcname=".")
    total = folder_mib(BUNDLE) + repository_mib()
    print(
        f"{BUNDLE.relative_to(REPO_ROOT)}: {folder_mib(BUNDLE):.1f} MiB; a call carries "
        f"{total:.1f} MiB of its 64 MiB with the repository's tracked files"
    )


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


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pypi-rows", type=int, default=0, help="PyPI summaries (0: all 841,708)")
    parser.add_argument(
        "--debian-rows",
        type=int,
        default=20_000,
        help="non-empty Debian long descriptions (20,000: about 1.2 MiB)",
    )
    parser.add_argument(
        "--widen",
        type=Path,
        default=None,
        help="on the GPU machine: write the fp32 model folder here instead",
    )
    parser.add_argument(
        "--bundle", action="store_true", help="here: pack .gpu/bundle, all a GPU suite call carries"
    )
    parser.add_argument(
        "--unpack",
        type=Path,
        default=None,
        help="there: restore .gpu/bundle, FAISS into this site folder",
    )
    args = parser.parse_args()
    if args.bundle:
        bundle(args.data_dir)
    elif args.unpack is not None:
        unpack(args.unpack)
    elif args.widen is not None:
        widen(args.widen)
    else:
        pack(args.data_dir, args.pypi_rows, args.debian_rows)


if __name__ == "__main__":
    main()
