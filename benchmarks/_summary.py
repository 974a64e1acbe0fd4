"""Where every benchmark reports its figures, so that `make bench` can gather them in one table.

Each benchmark prints its own table as before and, for each figure that has a target, calls
`report`. With `KAFKA_EDU_BENCH_RESULTS` set to a file (as `make bench` does), the figure is also
appended to it as one JSON line, from which the summary table, the JSON file and the chart are made.
"""
from __future__ import annotations

import json
import os


def report(benchmark: str, case: str, value: float, target: float | None, *, unit: str = "ratio",
           higher_is_better: bool = True, **details) -> None:
    """Print one result line and record it; `target` None means reported only (e.g. seconds)."""
    bound = "" if target is None else f" (target {'>=' if higher_is_better else '<='} {target:g})"
    print(f"RESULT {benchmark} | {case}: {value:.3g} {unit}{bound}", flush=True)
    path = os.environ.get("KAFKA_EDU_BENCH_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"benchmark": benchmark, "case": case, "value": value, "unit": unit,
                                  "target": target, "higher_is_better": higher_is_better, **details}) + "\n")
