"""The benchmark result contract: out/bench/<script>.json with the fields `make bench` tabulates,
and a runner that tabulates every script's JSON and exits 0 whatever the goals or failures."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _report
from benchmarks._report import FIELDS, Result

RUN_ALL = Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"


def test_ratio_is_how_many_times_better_ours_is_in_either_direction():
    assert Result("rate", ours=30.0, baseline=10.0, unit="MB/s").ratio == 3.0
    assert Result("time", ours=2.0, baseline=3.0, unit="ms", higher_is_better=False).ratio == 1.5
    row = Result("t", 2.0, 3.0, "ms", goal=1.3, higher_is_better=False).row()
    assert row["ratio"] == 1.5 and row["goal_met"] is True
    assert Result("t", 1.0, 1.0, "x", goal=2.0).row()["goal_met"] is False
    assert Result("none", 1.0, 0.0, "x").row()["ratio"] is None  # no division by zero


def test_extra_fields_never_replace_the_measured_ones():
    assert Result("r", 2.0, 1.0, "x", extra={"runs": [1, 2]}).row()["runs"] == [1, 2]
    with pytest.raises(ValueError, match="baseline"):  # the table would show the extra dict as the figure
        Result("r", 2.0, 1.0, "x", extra={"ours": {"wall_s": 1}, "baseline": {"wall_s": 2}}).row()


def test_write_then_table(tmp_path):
    path = _report.write(
        "benchmarks/some_bench.py",
        Result("headline", 8.0, 2.0, "MB/s", goal=8.0, ours_label="ours", baseline_label="theirs"),
        {"mb": 4},
        [Result("secondary", 1.0, 2.0, "s", higher_is_better=False)],
        out_dir=tmp_path,
    )
    obj = json.loads(path.read_text())
    assert path.name == "some_bench.json" and set(FIELDS) <= set(obj)
    assert obj["ratio"] == 4.0 and obj["goal"] == 8.0 and obj["goal_met"] is False and obj["inputs"] == {"mb": 4}
    assert obj["also"][0]["ratio"] == 2.0
    _report.write_status("benchmarks/gpu_only.py", "skipped", "no CUDA", out_dir=tmp_path)
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "previous").mkdir()
    prev = dict(obj, ratio=3.5)
    (tmp_path / "previous" / "some_bench.json").write_text(json.dumps(prev))
    text = _report.table(_report.collect(tmp_path), _report.collect(tmp_path / "previous"))
    lines = text.splitlines()
    head = next(ln for ln in lines if ln.startswith("headline"))
    assert "4" in head and ">= 8" in head and "NO" in head and "3.5" in head  # last run's ratio
    assert any(ln.startswith("  secondary") for ln in lines)
    assert any(ln.startswith("gpu_only") and "skipped" in ln and "no CUDA" in ln for ln in lines)
    assert any(ln.startswith("broken") and "failed" in ln for ln in lines)


@pytest.fixture()
def scripts(tmp_path):
    """Three stand-in benchmark scripts: one meets its goal, one misses it, one crashes."""
    d = tmp_path / "scripts"
    d.mkdir()
    bench = Path(_report.__file__).parent
    for name, ratio in (("good", 2.0), ("slow", 0.5)):
        (d / f"{name}.py").write_text(
            f"import sys; sys.path.insert(0, {str(bench)!r})\n"
            "from _report import Result, write\n"
            f"write(__file__, Result({name!r}, {ratio}, 1.0, 'x/s', goal=1.0), {{}})\n"
        )
    (d / "crash.py").write_text("print('working'); raise SystemExit('boom: no engine')\n")
    (d / "_helper.py").write_text("raise SystemExit('helpers are not benchmarks')\n")
    return d


def test_run_all_tabulates_every_script_and_exits_0(scripts, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(RUN_ALL), "--scripts", str(scripts), "--out", str(out)]
    assert subprocess.run([*cmd, "--list"], capture_output=True, text=True).stdout.split() == ["crash", "good", "slow"]
    for _ in range(2):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        table = p.stdout[p.stdout.index("benchmark  "):]
        assert {json.loads(f.read_text())["name"] for f in out.glob("*.json")} == {"good", "slow", "crash"}
        assert "boom: no engine" in table and "failed" in table
        assert any(ln.startswith("slow") and "NO" in ln for ln in table.splitlines())
        assert any(ln.startswith("good") and "yes" in ln for ln in table.splitlines())
    assert (out / "previous" / "good.json").is_file()  # the first run, kept for comparison
    bad = subprocess.run([*cmd, "--only", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown benchmark" in bad.stderr



def test_markdown_table_carries_provenance_marks_stale_rows_and_fills_the_readme(tmp_path):
    path = _report.write("benchmarks/minhash.py", Result("sig", 8.0, 2.0, "MB/s", goal=4.0), {}, out_dir=tmp_path)
    prov = json.loads(path.read_text())["provenance"]
    assert prov["commit"] != "unknown" and prov["cores"] >= 1 and prov["measured_at"].endswith("Z")
    assert isinstance(prov["load_avg_1m"], float)
    # the same script measured at the repository's first commit: benchmarks/minhash.py changed since
    first = _report._git("rev-list", "--max-parents=0", "HEAD").split()[-1][:10]
    old = dict(json.loads(path.read_text()), provenance=dict(prov, commit=first))
    (tmp_path / "sampler.json").write_text(json.dumps(old | {"name": "old"}))
    (tmp_path / "engines.json").write_text(json.dumps({"name": "engines", "ours": 1.0, "baseline": 1.0, "ratio": 1.0}))
    # measured on a commit this history does not hold (a branch rebased since): nothing vouches for it
    (tmp_path / "dsa_attention.json").write_text(json.dumps(old | {"name": "rebased",
                                                                 "provenance": dict(prov, commit="0123456789")}))
    rows = _report.collect(tmp_path)
    by = {r["_file"]: r for r in rows}
    assert _report.staleness(by["minhash"]) == ""
    assert _report.staleness(by["sampler"]).startswith("stale: the script changed after")
    assert _report.staleness(by["engines"]) == "stale: no provenance"
    assert _report.staleness(by["dsa_attention"]) == "stale: 0123456789 is not in this checkout's history"
    md = _report.markdown(rows, ["engines", "minhash", "sampler", "swe_real"])
    line = next(ln for ln in md.splitlines() if ln.startswith("| `minhash.py`"))
    assert "**4**" in line and ">= 4 (met)" in line and prov["commit"] in line and "load" in line
    assert "| `swe_real.py` |" in md and "not run" in md
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\nbefore\n{_report.MARK_START}\nold table\n{_report.MARK_END}\nafter\n")
    assert _report.update_readme(readme, md)
    text = readme.read_text()
    assert "old table" not in text and md in text and text.startswith("# x\nbefore\n") and text.endswith("after\n")
    (tmp_path / "none.md").write_text("no markers\n")
    assert not _report.update_readme(tmp_path / "none.md", md)


def test_scripts_importing_report_find_the_samples_from_any_directory(tmp_path):
    """Benchmark scripts run as `python benchmarks/X.py` from anywhere; `samples` is not installed,
    and seven scripts build their inputs with it (warc_read, longctx_retrieval, … failed on
    `No module named 'samples'`)."""
    bench = Path(_report.__file__).resolve().parent
    code = f"import sys; sys.path[0] = {str(bench)!r}; import _report; import samples.corpus, samples.web_archives"
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert res.returncode == 0, res.stderr[-500:]


def test_only_replaces_one_scripts_rows_and_keeps_the_others(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    _report.write("benchmarks/minhash.py", Result("sig", 8.0, 2.0, "MB/s", goal=4.0), {}, out_dir=first)
    _report.write("benchmarks/sampler.py", Result("tok", 3.0, 1.0, "tok/s"), {},
                  [Result("sub", 6.0, 2.0, "tok/s")], out_dir=first)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{_report.MARK_START}\nold\n{_report.MARK_END}\nafter\n")
    assert _report.main(["--markdown", str(first), "--readme", str(readme)]) == 0
    # another machine re-ran only the sampler, with one secondary row fewer
    _report.write("benchmarks/sampler.py", Result("tok", 9.0, 1.0, "tok/s"), {}, out_dir=second)
    assert _report.main(["--markdown", str(second), "--readme", str(readme), "--only", "sampler.py"]) == 0
    table = _report.readme_table(readme)
    assert "| `minhash.py` | sig |" in table and "**4**" in table  # kept as it was
    assert "**9**" in table and "**3**" not in table and "| sub |" not in table  # the sampler's rows replaced
    assert "| `engines.py` |" in table and readme.read_text().endswith(f"{_report.MARK_END}\nafter\n")
    assert _report.main(["--markdown", str(second), "--readme", str(readme), "--only", "minhash"]) == 2
    assert _report.main(["--markdown", str(second), "--only", "sampler"]) == 2
    assert "no minhash.json" in capsys.readouterr().err


def test_provenance_names_the_code_the_run_started_with(monkeypatch):
    """A commit made while a long benchmark runs must not label the run: the commit is read once,
    when the benchmark imports this module."""
    start = _report.provenance()["commit"]
    assert start == _report.CODE_AT_START != "unknown"
    monkeypatch.setattr(_report, "_git", lambda *a: "feedfacefe")  # HEAD moved on meanwhile
    assert _report._code_state() == "feedfacefe+dirty" and _report.provenance()["commit"] == start
