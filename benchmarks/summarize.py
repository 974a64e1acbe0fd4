"""The summary of a `make bench` run: one table of every reported figure against its target, a JSON file
of the figures and an SVG chart of them (the book's performance appendix explains each one).

    python benchmarks/summarize.py RESULTS.jsonl [--out _build/bench] [--book] [--seconds S]

RESULTS.jsonl is the file the benchmarks appended to through `_summary.report` (KAFKA_EDU_BENCH_RESULTS).
Writes OUT/results.json and OUT/results.svg; with --book also book/appendix/bench_results.json, the
copy the appendix reads (so that the book never runs the benchmarks). --seconds records how long the
run took.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka_edu.viz.bench import bench_chart, load_results, summary_table, verdict  # noqa: E402

BOOK_COPY = ROOT / "book" / "appendix" / "bench_results.json"


def summarize(results: Path, out: Path, book: bool = False, seconds: float | None = None) -> dict:
    figures = load_results(results)
    document = {
        "taken": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, "
                   f"Python {platform.python_version()}",
        "seconds": seconds,
        "figures": [{**f, "verdict": verdict(f)} for f in figures],
    }
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=1) + "\n"
    (out / "results.json").write_text(text, encoding="utf-8")
    (out / "results.svg").write_text(bench_chart(figures).svg, encoding="utf-8")
    if book:
        BOOK_COPY.write_text(text, encoding="utf-8")
    return document


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the JSON-lines file the benchmarks reported to")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "bench")
    parser.add_argument("--book", action="store_true", help=f"also write {BOOK_COPY.relative_to(ROOT)}")
    parser.add_argument("--seconds", type=float, default=None, help="how long the whole run took")
    args = parser.parse_args(argv)
    document = summarize(args.results, args.out, args.book, args.seconds)
    print(summary_table(document["figures"]))
    took = "" if args.seconds is None else f" (the run took {args.seconds / 60:.1f} min)"
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.svg'}{took}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
