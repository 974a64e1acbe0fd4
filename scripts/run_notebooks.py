#!/usr/bin/env python3
"""Execute notebooks top to bottom in a fresh kernel and save them with their outputs.

This is how a chapter is committed "executed": the same fresh-kernel run nbval repeats in CI.
Noisy metadata (timings, widget state) is dropped so a diff shows only what a reader sees.

    python scripts/run_notebooks.py book/ch2_producer/01_wire_protocol.ipynb [...]
    python scripts/run_notebooks.py            # every notebook under book/
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
KEEP_NOTEBOOK_METADATA = {"kernelspec", "language_info"}


def clean(nb: nbformat.NotebookNode) -> None:
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_NOTEBOOK_METADATA}
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    client = NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    clean(nb)
    nbformat.write(nb, path)
    print(f"{path.relative_to(ROOT)}: {len(nb.cells)} cells in {time.monotonic() - started:.1f}s")


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted(
        p for p in (ROOT / "book").rglob("*.ipynb") if not {"_build", ".ipynb_checkpoints"} & set(p.parts))
    for path in paths:
        run(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
