"""Pack what a GPU benchmark run needs into `.gpu/`, within the GPU machine's 64 MiB transfer.

Why: the lent GPU machine has torch, transformers and sentence-transformers but neither the
bundled model package nor the shared data, and a call may carry 64 MiB. The default model
(91 MB in fp32) travels as fp16 safetensors (45 MB) with its tokenizer and configs, plus
column extracts of the two corpora. On the machine, `--widen` restores an fp32 folder that
both encoders then load, so their comparison stays exact (on the fp16-rounded weights).

    python benchmarks/gpu_carry.py                      # here: writes .gpu/ (git-ignored)
    python benchmarks/gpu_carry.py --widen /tmp/model   # there: .gpu/model -> fp32 /tmp/model
"""

from __future__ import annotations

import shutil
from pathlib import Path

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
    save_file({name: tensor.half() for name, tensor in weights.items()}, model / HALF_WEIGHTS,
              metadata={"format": "pt"})  # fmt: skip
    pypi = pq.read_table(data_dir / "pypi" / "pypi_summaries.parquet", columns=["summary"])
    debian = pq.read_table(data_dir / "debian" / "debian_packages.parquet",
                           columns=["long_description"])  # fmt: skip
    text = debian.column("long_description")
    debian = debian.filter(pc.not_equal(pc.utf8_trim_whitespace(text), ""))
    for folder, table, rows, name in (("pypi", pypi, pypi_rows, "pypi_summaries.parquet"),
                                      ("debian", debian, debian_rows, "debian_packages.parquet")):  # fmt: skip
        (CARRY / "data" / folder).mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(0, rows), CARRY / "data" / folder / name, compression="zstd")
    size = sum(path.stat().st_size for path in CARRY.rglob("*") if path.is_file())
    print(f"wrote {CARRY}: {size / 2**20:.1f} MiB (the repository travels beside it)")


def widen(target: Path) -> None:
    """Copy `.gpu/model` to `target` with the fp16 weights widened back to fp32."""
    from safetensors.torch import load_file, save_file

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(CARRY / "model", target, ignore=shutil.ignore_patterns(HALF_WEIGHTS))
    weights = load_file(CARRY / "model" / HALF_WEIGHTS)
    save_file({name: tensor.float() for name, tensor in weights.items()},
              target / "model.safetensors", metadata={"format": "pt"})  # fmt: skip
    print(f"wrote {target}")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pypi-rows", type=int, default=200_000)
    parser.add_argument("--debian-rows", type=int, default=40_000)
    parser.add_argument("--widen", type=Path, default=None,
                        help="on the GPU machine: write the fp32 model folder here instead")  # fmt: skip
    args = parser.parse_args()
    if args.widen is not None:
        widen(args.widen)
    else:
        pack(args.data_dir, args.pypi_rows, args.debian_rows)


if __name__ == "__main__":
    main()
