"""Where every benchmark records its result, and the one table of all of them.

Each script writes ``out/bench/<script>.json``::

    {"name": "minhash", "ours": 21.3, "baseline": 2.4, "ratio": 8.9, "goal": 8.0, "unit": "MB/s",
     "inputs": {...}, "ours_label": "...", "baseline_label": "...", "goal_met": true,
     "also": [{"name": ..., "ours": ..., ...}, ...], "notes": "..."}

``ratio`` is always "how many times better ours is than the baseline" (> 1: ours is better),
whatever the direction of the unit: a rate is ours / baseline, a time or a size is
baseline / ours. ``goal`` is the smallest ratio wanted, or null where there is none. The
headline row answers the benchmark's question; ``also`` holds the secondary measurements of the
same run, each a row of the same shape. A script that could not run writes
``{"name", "status": "skipped"|"failed", "reason"}`` instead (see ``write_status``).

Every file also records where and when it was measured (``provenance``): the UTC time, the commit
the run started at (``+dirty`` when the tree had uncommitted changes then), the 1-minute load average
and the core count.

`python benchmarks/_report.py [DIR]` prints the table of every JSON in DIR (default out/bench),
with the previous run's ratio next to each row when ``DIR/previous/`` holds one.
`python benchmarks/_report.py --markdown [DIR] [--readme README.md]` prints the Markdown table the
README shows (each row with its date, commit and load; a row is marked stale when its script's text
differs from the commit it was measured at, when it has no provenance, or when it is older than 30 days;
scripts without a result are listed as not run) and, with ``--readme``, writes it between the
README's ``<!-- bench-table -->`` markers. ``--only SCRIPT`` (repeatable) replaces just those scripts'
rows in the README's table and keeps the others as they are: out/bench is not versioned, so a machine
that re-ran one benchmark holds only that one's JSON, and the other rows keep their own provenance.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# every script imports this module first: the checkout's root goes on the path here, once, because
# the sample builders (`samples`) are not installed with the product and scripts run from anywhere
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.io import atomic_write_text  # noqa: E402

# BENCH_OUT: run_all.py --out hands its folder to the scripts it starts
OUT_DIR = Path(os.environ.get("BENCH_OUT") or ROOT / "out" / "bench")
FIELDS = ("name", "ours", "baseline", "ratio", "goal", "unit", "inputs")


@dataclass
class Result:
    """One measurement: ours and the named baseline, measured side by side in one run."""

    name: str
    ours: float
    baseline: float
    unit: str
    goal: float | None = None
    higher_is_better: bool = True  # False for seconds, bytes, FLOPs
    ours_label: str = ""
    baseline_label: str = ""
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        num, den = (self.ours, self.baseline) if self.higher_is_better else (self.baseline, self.ours)
        return float(num) / float(den) if den else math.inf

    def row(self) -> dict[str, Any]:
        r = self.ratio
        row = {
            "name": self.name,
            "ours": float(self.ours),
            "baseline": float(self.baseline),
            "ratio": round(r, 4) if math.isfinite(r) else None,
            "goal": self.goal,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "ours_label": self.ours_label,
            "baseline_label": self.baseline_label,
            "goal_met": None if self.goal is None else bool(math.isfinite(r) and r >= self.goal),
            **({"notes": self.notes} if self.notes else {}),
        }
        clash = sorted(set(self.extra) & set(row))
        if clash:  # an extra field named like a measured one would replace the figure in the table
            raise ValueError(f"{self.name}: extra fields {clash} would overwrite the result's own")
        return row | self.extra


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended: a shared, loaded machine
    disturbs them far less than wall time, and work done in a child process (datatrove's extractor
    sandbox) counts once the child is reaped."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _is_ancestor(commit: str) -> bool:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _code_state() -> str:
    commit = _git("rev-parse", "--short=10", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return (commit + ("+dirty" if dirty else "")) or "unknown"


# the code a run measures is the tree when it started (this module is imported as a benchmark
# starts), not when it writes its result minutes or hours later: a commit made meanwhile must not
# label a run of the code before it
CODE_AT_START = _code_state()


def provenance() -> dict[str, Any]:
    """When, at which commit and under what load a result was measured (the README prints all three)."""
    return {"measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": CODE_AT_START,
            "load_avg_1m": round(os.getloadavg()[0], 2), "cores": os.cpu_count()}


def _path(script: str, out_dir: Path | None) -> Path:
    d = Path(out_dir) if out_dir is not None else OUT_DIR
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{Path(script).stem}.json"


def _write(path: Path, obj: dict) -> Path:
    atomic_write_text(path, json.dumps(obj, indent=2, default=str) + "\n")  # a reader never sees half a file
    return path


def write(
    script: str, headline: Result, inputs: dict[str, Any], also: list[Result] = (), out_dir: Path | None = None
) -> Path:
    """Write ``out/bench/<script stem>.json`` (``script`` is the caller's ``__file__``) and print
    the headline line every benchmark ends with."""
    obj = {**headline.row(), "inputs": inputs, "also": [r.row() for r in also], "provenance": provenance()}
    path = _write(_path(script, out_dir), obj)
    goal = f" (goal >= {headline.goal:g})" if headline.goal is not None else ""
    print(f"{headline.name}: ratio {_fmt(obj['ratio'])}{goal} -> {path}")
    return path


def write_status(script: str, status: str, reason: str, out_dir: Path | None = None) -> Path:
    """Record that a benchmark did not produce numbers this run (no GPU, no Docker, it failed)."""
    name = Path(script).stem
    return _write(_path(script, out_dir), {"name": name, "status": status, "reason": reason,
                                           "provenance": provenance()})


# -- the table --------------------------------------------------------------------------------
def collect(out_dir: Path) -> list[dict[str, Any]]:
    """Every benchmark JSON in ``out_dir``, in name order; unreadable files become failed rows."""
    rows = []
    for p in sorted(Path(out_dir).glob("*.json")):
        try:
            obj = json.loads(p.read_text())
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            obj = {"status": "failed", "reason": f"unreadable {p.name}: {e}"}
        obj.setdefault("name", p.stem)
        obj["_file"] = p.stem
        rows.append(obj)
    return rows


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    if x == 0 or 0.01 <= abs(x) < 1e5:
        return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"
    return f"{x:.3g}"


def _line(r: dict[str, Any], prev: dict[str, Any] | None, indent: str = "") -> list[str]:
    if "ours" not in r or "ratio" not in r:  # a status file, or another schema (kernels_gpu)
        why = r.get("reason") or r.get("error") or ""
        return [indent + r["name"], "", "", "", r.get("status", "no ratio"), "", "", str(why)[:60]]
    goal = r.get("goal")
    met = "" if goal is None else ("yes" if r.get("goal_met") else "NO")
    last = prev.get("ratio") if prev else None
    unit = r.get("unit", "")
    return [indent + r["name"], _fmt(r["ours"]), _fmt(r["baseline"]), unit, _fmt(r["ratio"]),
            "-" if goal is None else f">= {goal:g}", met, _fmt(last)]  # fmt: skip


def table(rows: list[dict[str, Any]], previous: list[dict[str, Any]] = ()) -> str:
    """One text table: a line per headline and one per secondary measurement (indented)."""
    prev = {r["name"]: r for p in previous for r in [p, *p.get("also", [])] if isinstance(r, dict)}
    lines = [["benchmark", "ours", "baseline", "unit", "ratio", "goal", "met", "last ratio / note"]]
    for r in rows:
        lines.append(_line(r, prev.get(r["name"])))
        for sub in r.get("also", []):
            lines.append(_line(sub, prev.get(sub["name"]), "  "))
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


STALE_DAYS = 30
MARK_START, MARK_END = "<!-- bench-table -->", "<!-- /bench-table -->"


def staleness(r: dict[str, Any], now: dt.datetime | None = None) -> str:
    """Why a result no longer describes the code ('' when it still does)."""
    prov = r.get("provenance")
    if not isinstance(prov, dict) or not prov.get("commit") or prov["commit"] == "unknown":
        return "stale: no provenance"
    commit = prov["commit"].removesuffix("+dirty")
    if not _is_ancestor(commit):  # a branch rebased since, or another clone: nothing says the script is the same
        return f"stale: {commit} is not in this checkout's history"
    # the script's text, not its history: a change made and reverted since leaves the measured script
    changed = _git("diff", "--name-only", commit, "HEAD", "--", f"benchmarks/{r['_file']}.py")
    if changed:
        return f"stale: the script changed after {commit}"
    when = dt.datetime.strptime(prov["measured_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    if ((now or dt.datetime.now(dt.UTC)) - when).days > STALE_DAYS:
        return f"stale: older than {STALE_DAYS} days"
    return ""


def _md_cells(r: dict[str, Any], script: str, prov: dict[str, Any], stale: str) -> list[str]:
    when = f"{prov.get('measured_at', '?')[:10]} `{prov.get('commit', '?')}` load {prov.get('load_avg_1m', '?')}"
    when += f"/{prov.get('cores', '?')} cores"
    if "ours" not in r or "ratio" not in r:
        return [script, r["name"], "", "", r.get("status", "no ratio") + ": " + str(r.get("reason", ""))[:80], "", when,
                stale]
    goal = r.get("goal")
    met = "" if goal is None else (" (met)" if r.get("goal_met") else " (**not met**)")
    figure = f"{_fmt(r['ours'])} vs {_fmt(r['baseline'])} {r.get('unit', '')}".strip()
    label = f"{r.get('ours_label') or 'ours'} vs {r.get('baseline_label') or 'baseline'}"
    return [script, r["name"], label[:120], figure, f"**{_fmt(r['ratio'])}**",
            "-" if goal is None else f">= {goal:g}{met}", when, stale]


def markdown(rows: list[dict[str, Any]], scripts: list[str]) -> str:
    """The README's table: one line per headline and secondary row, each with its provenance."""
    lines = ["| script | benchmark | ours vs baseline | figures | ratio | goal | measured (date, commit, load/cores) | |",
             "|---|---|---|---|---:|---|---|---|"]
    seen = set()
    for r in rows:
        seen.add(r["_file"])
        prov, stale = r.get("provenance") or {}, staleness(r)
        for i, sub in enumerate([r, *r.get("also", [])]):
            cells = _md_cells(sub, f"`{r['_file']}.py`" if i == 0 else "", prov, stale)
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    for name in scripts:
        if name not in seen:
            lines.append(f"| `{name}.py` | | | | | | not run into this out/bench | |")
    return "\n".join(lines)


def update_readme(readme: Path, table_md: str) -> bool:
    """Replace the text between the README's markers; False when it has none."""
    text = readme.read_text(encoding="utf-8")
    if MARK_START not in text or MARK_END not in text:
        return False
    head, rest = text.split(MARK_START, 1)
    _, tail = rest.split(MARK_END, 1)
    atomic_write_text(readme, f"{head}{MARK_START}\n{table_md}\n{MARK_END}{tail}")
    return True


def splice_rows(table_md: str, script: str, rows_md: list[str]) -> str:
    """``table_md`` (the README's table) with ``script``'s rows (its line and the ``|  |`` lines under
    it) replaced by ``rows_md``, or appended where it has none."""
    lines = table_md.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| `{script}.py` |")), None)
    if start is None:
        return "\n".join(lines + rows_md)
    end = start + 1
    while end < len(lines) and lines[end].startswith("|  |"):
        end += 1
    return "\n".join(lines[:start] + rows_md + lines[end:])


def readme_table(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    if MARK_START not in text or MARK_END not in text:
        return ""
    return text.split(MARK_START, 1)[1].split(MARK_END, 1)[0].strip("\n")


def _scripts() -> list[str]:
    return sorted(p.stem for p in Path(__file__).resolve().parent.glob("*.py")
                  if not p.stem.startswith("_") and p.stem != "run_all")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    md = "--markdown" in args
    readme = None
    if "--readme" in args:
        i = args.index("--readme")
        readme, args = Path(args[i + 1]), args[:i] + args[i + 2:]
    only: list[str] = []
    while "--only" in args:
        i = args.index("--only")
        only, args = only + [args[i + 1].removesuffix(".py")], args[:i] + args[i + 2:]
    args = [a for a in args if a != "--markdown"]
    out_dir = Path(args[0]) if args else OUT_DIR
    rows = collect(out_dir)
    if md and only:
        if readme is None:
            print("error: --only needs --readme (it replaces rows of the README's table)", file=sys.stderr)
            return 2
        table_md = readme_table(readme)
        for script in only:
            mine = [r for r in rows if r["_file"] == script]
            if not mine:
                print(f"error: no {script}.json in {out_dir}", file=sys.stderr)
                return 2
            table_md = splice_rows(table_md, script, markdown(mine, [script]).splitlines()[2:])
        print(table_md)
        if not update_readme(readme, table_md):
            print(f"error: {readme} has no {MARK_START} ... {MARK_END} markers", file=sys.stderr)
            return 2
        return 0
    if md:
        table_md = markdown(rows, _scripts())
        print(table_md)
        if readme is not None and not update_readme(readme, table_md):
            print(f"error: {readme} has no {MARK_START} ... {MARK_END} markers", file=sys.stderr)
            return 2
        return 0
    if not rows:
        print(f"no benchmark results in {out_dir}")
        return 0
    print(table(rows, collect(out_dir / "previous")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
