"""benchmarks/rl_agentic_real.py's inputs: the named real SWE-bench rows and Terminal-Bench seeds, the
seeds converted to Harbor tasks the session runner opens; an unknown id is an error, never a smaller set.
(The gold/nop sessions and the RL runs are the benchmark's, `python benchmarks/rl_agentic_real.py`.)"""

from __future__ import annotations

import json

import pytest

from benchmarks import rl_agentic_real as bench

SWE_REAL, SEEDS = bench.SHARED / "swe-real", bench.SHARED / "terminal-seeds"
pytestmark = pytest.mark.skipif(not (SWE_REAL.is_dir() and SEEDS.is_dir()), reason="../shared real sets absent")


def test_inputs_pick_the_named_rows_and_convert_the_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "WORK", tmp_path)
    paths = bench.inputs(SWE_REAL, SEEDS, ["pallets__flask-5014"], ["evoeval/0"])
    rows = [json.loads(x) for x in paths["instances"].read_text().splitlines()]
    assert [r["instance_id"] for r in rows] == ["pallets__flask-5014"] and rows[0]["patch"]
    assert (paths["tasks"] / "evoeval__0" / "task.toml").is_file()
    assert (paths["tasks"] / "evoeval__0" / "solution").is_dir()


def test_an_unknown_instance_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "WORK", tmp_path)
    with pytest.raises(SystemExit, match="no-such-instance"):
        bench.inputs(SWE_REAL, SEEDS, ["pallets__flask-5014", "no-such-instance"], ["evoeval/0"])
