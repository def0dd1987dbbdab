"""`semsearch devices`: where `--device auto` will run the model and FAISS, and why."""

from __future__ import annotations

from semsearch.cli.common import app, console, user_errors
from semsearch.cli.options import JsonFlag
from semsearch.cli.output import print_json_lines


@app.command()
@user_errors
def devices(json_output: JsonFlag = False) -> None:
    """Show the GPUs torch and FAISS see, and where --device auto runs the model and FAISS."""
    from semsearch.ann.devices import device_report

    report = device_report()
    if json_output:
        print_json_lines([report])
        return
    gpus = ", ".join(
        f"{gpu['index']}: {gpu['name']} ({gpu['memory_gib']} GiB)" for gpu in report["gpus"]
    )
    lines = [
        f"torch {report['torch']} (CUDA {report['torch_cuda'] or 'none'}): {gpus or 'no CUDA GPU'}",
        f"FAISS {report['faiss']}: {report['faiss_why']}",
        f"--device auto: the model on {report['model_auto']}, FAISS on {report['faiss_auto']}",
    ]
    console.print("\n".join(lines), markup=False)
