"""What `--quantize` accepts, and the fixed texts an int8 encoder is calibrated on.

Why a module of its own: the index manifest, the encoder's loading and the OpenVINO int8
runtime (`openvino_int8`, the one int8 path: NNCF's static scales on the exported IR) all
need the same modes and texts. A hand-written torch int8 layer (`Int8Linear`) was measured
beside it and removed (issue 38; docs/encoder-and-runtimes.md): the default runtime,
unquantised, was both faster and closer to fp32 than it.
"""

from __future__ import annotations

from semsearch.errors import SemsearchError

QUANTIZATION_MODES = ("int8",)
# Varied short and long texts, fixed, so the quantised model (and so every vector) is the
# same at every load: `openvino_int8.BUILTIN_CALIBRATION` starts with them. Changing them
# changes every int8 vector: int8 indexes built before would then need rebuilding.
CALIBRATION_TEXTS = (
    "A man is playing a guitar.",
    "How do I compress a folder on Linux?",
    "Stock markets fell sharply on Monday.",
    "The cat sleeps on the sofa while it rains outside.",
    "Fast JSON decoding for Python programs",
    "A library for parsing command-line options",
    "Async HTTP client and server framework",
    "Utilities for reading and writing Parquet files with pandas",
    "python3 bindings for the GTK toolkit",
    "transitional dummy package",
    "Add your description here",
    "machine learning model deployment",
    "what is the capital of France",
    "Two men pushed carts through the woods.",
    "Ünïcödé text, emoji 🎉 and CJK 漢字 in one line.",
    "This package contains the documentation for the library, in HTML and PDF formats, "
    "with examples of every function and a tutorial for new users.",
    "GNU Make is a utility which controls the generation of executables and other "
    "target files of a program from the program's source files. It determines "
    "automatically which pieces of a program need to be (re)created.",
    "The recipe needs two eggs, some flour and a cup of milk; bake the cake for "
    "forty minutes, let it cool, then cover it with chocolate.",
    "Shares dropped steeply at the start of the week after the central bank raised "
    "interest rates by half a point, the largest rise in twenty years.",
    "This is a development package: it holds the header files and the static library "
    "needed to compile programs that use libfoo. Install it only to build software.",
)


def check_quantization(mode: str | None) -> None:
    if mode is not None and mode not in QUANTIZATION_MODES:
        raise SemsearchError(
            f"unknown quantisation {mode!r}: choose {', '.join(QUANTIZATION_MODES)} or leave it out"
        )
