"""The volume benchmark's own arithmetic, on a job.json of known figures (the run itself is
`python benchmarks/web_volume.py`: an hour or more per engine on two cores)."""

import pytest

from benchmarks import web_volume as bench

JOB = {
    "stages": ["read", "html_to_text", "dclm_keep_top"],
    "counts": {
        "read": {"docs_in": 1010, "kept": 1000, "rejected": 10, "reasons": {"warcinfo_record": 10}},
        "html_to_text": {"docs_in": 1000, "kept": 990, "rejected": 10,
                         "reasons": {"no_text_extracted": 4, "extract_timeout": 6}},
        "dclm_keep_top": {"docs_in": 0, "kept": 0, "rejected": 0, "reasons": {}},
    },
    "timings": {"read": {"seconds": 2.0, "cpu_seconds": 1.0, "bytes_in": 50_000_000},
                "html_to_text": {"seconds": 30.0, "cpu_seconds": 20.0, "bytes_in": 50_000_000}},
}


def test_stage_rows_give_keep_rates_reasons_and_rates_per_cpu_second():
    read, extract, empty = bench.stage_rows(JOB)
    assert read == {"stage": "read", "in": 1010, "kept": 1000, "keep_rate": 0.9901, "reasons": {"warcinfo_record": 10},
                    "seconds": 2.0, "cpu_seconds": 1.0, "mb_in": 50.0, "docs_per_cpu_s": 1010.0, "mb_per_cpu_s": 50.0}
    assert list(extract["reasons"]) == ["extract_timeout", "no_text_extracted"]  # most frequent first
    assert (extract["docs_per_cpu_s"], extract["mb_per_cpu_s"]) == (50.0, 2.5)
    # a stage nothing reached, without timings: no rate rather than a division by zero
    assert (empty["keep_rate"], empty["docs_per_cpu_s"], empty["mb_per_cpu_s"], empty["cpu_seconds"]) == (None,) * 3 + (0,)


def test_crawl_arithmetic_from_bytes_per_core_second():
    # 60 MB of WARC in 600 CPU-s is 0.1 MB per core-second: 100 TB is 1e9 core-seconds
    c = bench.crawl_arithmetic(600.0, 60_000_000, 100e12, 1000)
    assert c == {"warc_mb_per_core_s": 0.1, "core_hours": round(1e9 / 3600), "cores": 1000,
                 "hours": round(1e9 / 3600 / 1000, 1), "days": round(1e9 / 3600 / 1000 / 24, 2)}
    assert bench.crawl_arithmetic(300.0, 60_000_000, 100e12, 1000)["core_hours"] == pytest.approx(c["core_hours"] / 2, abs=1)


def test_wall_breakdown_dates_phases_by_the_jobs_log_lines():
    lines = [(0.5, "loading"), (10.0, "── phase 1: quality (local) ──"), (100.0, "── phase 2: score (local) ──"),
             (130.0, "── phase 3: select (local) ──"), (200.0, "── phase 4: edu (local) ──")]
    w = bench.wall_breakdown(lines, [80.0, 20.0, 60.0, 5.0], 210.0)
    assert list(w.values()) == [10.0, 80.0, 10.0, 20.0, 10.0, 60.0, 10.0, 5.0, 5.0]
    assert list(w)[1::2] == ["phase 1", "phase 2", "phase 3", "phase 4"] and list(w)[-1] == bench.GAPS[-1]
    assert bench.wall_breakdown(lines[:2], [80.0, 20.0], 210.0) == {}  # a log that does not match: nothing made up
