"""make bench's summary: figures reported by benchmarks through `_summary.report`, read back, judged,
tabled, and written by benchmarks/summarize.py as JSON and SVG (no benchmark runs here)."""
import json
import sys
from pathlib import Path

import pytest

from kafka_edu.viz.bench import load_results, summary_table, verdict

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch, tmp_path):
    """The benchmarks' modules, importable as a benchmark script imports them, reporting to a fresh file."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setenv("KAFKA_EDU_BENCH_RESULTS", str(tmp_path / "results.jsonl"))
    import _summary
    import summarize
    yield _summary.report, summarize, tmp_path / "results.jsonl"
    for name in ("_summary", "summarize"):
        sys.modules.pop(name, None)


def test_reported_figures_are_judged_in_their_direction_and_a_repeat_replaces(bench, capsys):
    report, _, results = bench
    report("partitions", "produce", 0.3, 0.5)
    report("memory", "RSS idle", 180.0, 200, unit="MiB", higher_is_better=False)
    report("memory", "RSS 10,000 connections", 300.0, 256, unit="MiB", higher_is_better=False)
    report("restart", "start-up", 12.5, None, unit="s")
    report("partitions", "produce", 0.7, 0.5, records=20000)
    assert "RESULT memory | RSS idle: 180 MiB (target <= 200)" in capsys.readouterr().out
    figures = load_results(results)
    assert [(f["case"], f["value"], verdict(f)) for f in figures] == [
        ("RSS idle", 180.0, "pass"), ("RSS 10,000 connections", 300.0, "miss"),
        ("start-up", 12.5, "-"), ("produce", 0.7, "pass")]
    table = summary_table(figures).splitlines()
    assert table[0].split() == ["benchmark", "case", "value", "target", "result"]
    assert table[2].split()[-4:] == ["MiB", "<=", "200", "pass"]
    assert table[3].split()[-4:] == ["MiB", "<=", "256", "miss"]
    assert table[4].split()[-3:] == ["12.5", "s", "-"]
    assert table[5].split()[-4:] == ["ratio", ">=", "0.5", "pass"]
    assert table[-1] == "2 pass, 1 miss, 1 reported only"


def test_summarize_writes_json_and_svg(bench, capsys):
    report, summarize, results = bench
    report("large_log", "consume start / tail", 0.95, 0.9)
    out = results.parent / "bench"
    assert summarize.main([str(results), "--out", str(out), "--seconds", "600"]) == 0
    assert "1 pass, 0 miss, 0 reported only" in capsys.readouterr().out
    document = json.loads((out / "results.json").read_text())
    assert document["seconds"] == 600
    assert document["figures"] == [{"benchmark": "large_log", "case": "consume start / tail", "value": 0.95,
                                    "unit": "ratio", "target": 0.9, "higher_is_better": True, "verdict": "pass"}]
    svg = (out / "results.svg").read_text()
    assert svg.startswith("<?xml") and "consume start / tail" in svg
