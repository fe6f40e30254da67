"""The Debian upstream-projects benchmark's own logic, without Docker or a mirror: the parse-vs-summary
check (Go's -json lines, stand-in summaries not independent) and reusing earlier rows."""

from __future__ import annotations

from pathlib import Path

from benchmarks import swe_langs_debian as bench
from swe_envs.envs.parsers import parse_log

CARGO_OK = """running 2 tests
test a ... ok
test b ... ignored

test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out
"""


def test_summary_check_compares_parse_with_the_runners_counts():
    match, tallies = bench.summary_check(parse_log("cargo", CARGO_OK))
    assert match is True and tallies["parsed"] == {"passed": 1, "failed": 0, "skipped": 1}
    # a test line the parser missed: the runner's own count disagrees
    match, tallies = bench.summary_check(parse_log("cargo", CARGO_OK.replace("test b ... ignored\n", "")))
    assert match is False and tallies["summary"] == {"passed": 1, "failed": 0, "skipped": 1}
    # a runner whose summary states no counts (go test -v): nothing to compare, said as such
    match, tallies = bench.summary_check(parse_log("go-test", "--- PASS: TestA (0.00s)\nok  \tm\t0.01s\n"))
    assert match is None and tallies["summary"] is None


GO_JSON = (Path(__file__).parents[1] / "swe_envs" / "envs" / "fixtures" / "go-json.log").read_text()


def test_go_json_is_checked_against_the_test_binaries_own_lines():
    """A real ``go test -json`` log: the parser's Action events against the --- PASS/FAIL/SKIP lines."""
    log = GO_JSON
    assert bench.go_json_counts(log) == {"passed": 3, "failed": 3, "skipped": 1}
    match, tallies = bench.summary_check(parse_log("go-test", log), log)
    assert match is True and tallies["summary_source"].startswith("go test -json")
    # the same test name in a second package is a second test; the parser's ids are test names
    # (parse_go_test), so it counts one: the check reports the disagreement instead of trusting it
    import json

    twin = [json.loads(x) for x in log.splitlines() if '"example.com/mix/other"' in x]
    log2 = log + "".join(json.dumps({**ev, "Package": "example.com/mix/twin"}) + "\n" for ev in twin)
    match, tallies = bench.summary_check(parse_log("go-test", log2), log2)
    assert tallies["summary"]["passed"] == 4 and tallies["parsed"]["passed"] == 3 and match is False
    # an event the parser reads but no line the binary printed: the counts disagree
    dropped = "\n".join(x for x in log.splitlines() if "--- PASS: TestPass" not in x) + "\n"
    match, _ = bench.summary_check(parse_log("go-test", dropped), dropped)
    assert match is False


def test_stand_in_summaries_are_not_independent():
    from swe_envs.envs.rules.java import MAVEN_RULE

    row = {"parsed_ok": True, "summary_match": True, "rounds": ["template:build", f"rule:build({MAVEN_RULE})"]}
    assert bench.stand_in(row["rounds"]) == MAVEN_RULE and not bench.independent_ok(row)
    assert bench.independent_ok({**row, "rounds": ["template:build"], "summary_independent": True})
    assert not bench.independent_ok({**row, "rounds": [], "summary_match": None})


def test_reuse_takes_earlier_rows_for_languages_not_run_now(tmp_path):
    import json

    report = tmp_path / "old.json"
    report.write_text(json.dumps({"inputs": {"projects": [
        {"package": "jansson", "language": "c", "parsed_ok": True},
        {"package": "node-ms", "language": "javascript", "parsed_ok": False}]}}))
    rows = tmp_path / "js.jsonl"
    rows.write_text(json.dumps({"package": "node-parseurl", "language": "javascript", "parsed_ok": True}) + "\n")
    got = bench.reuse_rows([report, rows], skip={"golang-github-pkg-errors"})
    # in the benchmark's order; every row says where it came from
    assert [(r["package"], r["reused_from"]) for r in got] == [
        ("jansson", str(report)), ("node-parseurl", str(rows)), ("node-ms", str(report))]
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps({"package": "jansson", "language": "c", "parsed_ok": False}) + "\n")
    assert bench.reuse_rows([report, later], skip=set())[0]["parsed_ok"] is False  # the later file wins
    assert [r["package"] for r in bench.reuse_rows([report, rows], skip={"jansson", "node-ms"})] == [
        "node-parseurl"]  # run now: not reused


