"""The real SWE-bench sets' benchmark, its report logic without Docker: per-instance results measured
by the newest run folder that had them (a re-run of some instances over an earlier run of all), each
row naming the run and rules it came from."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import swe_real as bench

ROWS = [{"instance_id": f"o__r-{i}", "repo": "o/r", "environment_setup_commit": "e" * 40,
         "FAIL_TO_PASS": json.dumps([f"tests/t.py::test_f{i}"]), "PASS_TO_PASS": json.dumps(["tests/t.py::test_p"])}
        for i in (1, 2, 3)]


def _run(folder: Path, rows: list[dict], rules: str | None, wrong: set[str] = frozenset()) -> Path:
    (folder / "validate").mkdir(parents=True)
    (folder / "evaluate").mkdir()
    validated = []
    for r in rows:
        p2p = json.loads(r["PASS_TO_PASS"]) + (["tests/x.py::extra"] if r["instance_id"] in wrong else [])
        validated.append(r | {"PASS_TO_PASS": json.dumps(p2p)})
    (folder / "validate" / "validated.jsonl").write_text("".join(json.dumps(r) + "\n" for r in validated))
    (folder / "validate" / "failures.jsonl").write_text("")
    (folder / "validate" / "environments.jsonl").write_text(json.dumps(
        {"commit": rows[0]["environment_setup_commit"], "ok": True, "seconds": 10.0, "env_layer_bytes": 1,
         "image_bytes": 2}) + "\n")
    (folder / "evaluate" / "report.json").write_text(json.dumps({"resolved_ids": [r["instance_id"] for r in rows]}))
    if rules:
        (folder / "run.json").write_text(json.dumps({"rules_version": rules, "validate_s": 5.0,
                                                     "finished": {"measured_at": "t", "commit": "c"},
                                                     "started": {"commit": "c"}}))
    return folder


def test_a_re_run_of_some_instances_replaces_only_theirs(tmp_path):
    rows = ROWS
    a, b, c = (r["instance_id"] for r in rows)
    src = tmp_path / "set.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    old = _run(tmp_path / "out" / "sphinx" / "20261202T030000", rows[:2], None, wrong={b})  # before run.json
    new = _run(tmp_path / "out" / "sphinx" / "20261202T060000", rows[1:2], "R2")
    runs = bench.run_folders(tmp_path / "out" / "sphinx")
    assert runs == [new, old]
    got = bench.measure_set(src, runs)
    per = got["per_instance"]
    assert per[a]["measured"]["run"] == str(old) and per[a]["measured"]["rules_version"] == "not recorded"
    assert per[b]["measured"] == {"run": str(new), "rules_version": "R2", "commit": "c", "at": "t"}
    assert per[b]["p2p_exact"]  # the re-run's result, not the old run's extra test
    assert per[c] == {"validated": False, "stage": "not run", "reason": "in no run folder"}
    assert (got["instances"], got["validated"], got["gold_exact"], got["gold_resolved"]) == (3, 2, 2, 2)
    # a run stopped before evaluate: its instances are not counted as unresolved
    (new / "evaluate" / "report.json").unlink()
    got = bench.measure_set(src, runs)
    assert got["per_instance"][b]["resolved"] is None and (got["gold_resolved"], got["gold_evaluated"]) == (1, 1)
    assert got["environments"] == 1
    # an --out folder that is itself one run (the layout before run folders) is one run
    assert bench.run_folders(old) == [old]


def test_misses_the_offline_run_explains_by_network_are_listed(tmp_path):
    """A FAIL_TO_PASS that needs network (a failure at stage "network") and a validated instance whose
    missing gold test ran into a refused connection are network misses; an exact one is not."""
    a, b, c = (r["instance_id"] for r in ROWS)
    src = tmp_path / "set.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run = _run(tmp_path / "out" / "20261203T000000", ROWS[1:], "R", wrong=set())
    rows = [json.loads(x) for x in (run / "validate" / "validated.jsonl").read_text().splitlines()]
    rows[0]["PASS_TO_PASS"] = "[]"  # b misses its gold PASS_TO_PASS test, and the log says why
    rows[0]["validation"] = {"needs_network": "NewConnectionError"}
    rows[1]["validation"] = {"needs_network": "NewConnectionError"}  # c is exact: nothing to explain
    (run / "validate" / "validated.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "validate" / "failures.jsonl").write_text(json.dumps(
        {"instance_id": a, "stage": "network", "reason": "FAIL_TO_PASS needs network"}) + "\n")
    got = bench.measure_set(src, bench.run_folders(tmp_path / "out"))
    assert got["network_misses"] == [a, b] and got["gold_exact"] == 1
    assert got["per_instance"][b]["needs_network"] == "NewConnectionError"
