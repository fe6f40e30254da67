"""swe-mine throughput: events/s of the DuckDB path vs the Spark ``local[2]`` path.

Generates N GH-Archive-style events (default 1,000,000) in hourly ``.json.gz`` files, shaped
on the real events recorded in github3.py's test cassettes (slimmed to the fields the miner
reads): issues opened/closed, pull requests closing issues ("Fixes #N"), comments, and the
event types the miner skips. Both engines mine the same files side by side in one process;
prints events/s for each, their ratio (baseline: DuckDB) and whether the outputs agree —
row by row: every column of every document and reject, and every instance line. Writes
out/bench/swe_mine_engines.json. Run: ``python benchmarks/swe_mine_engines.py [--events N] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb
from _report import Result, write

from core.cache import cache_dir
from core.local_engine import LocalEngine
from core.spark import SparkConfig, spark_session
from core.spark_engine import SparkEngine
from pipelines.jobs import swe_mine
from pipelines.jobs.swe_mine import MineInputs, SweMineConfig
from samples.swe_mine.recordings import obtain_cassettes, recorded_events

USER_KEYS = ("login", "id", "type")
ISSUE_KEYS = (
    "url",
    "repository_url",
    "html_url",
    "id",
    "number",
    "title",
    "user",
    "labels",
    "state",
    "comments",
    "created_at",
    "updated_at",
    "closed_at",
    "author_association",
    "body",
)
PULL_KEYS = (
    "url",
    "html_url",
    "id",
    "number",
    "state",
    "title",
    "user",
    "body",
    "created_at",
    "updated_at",
    "closed_at",
    "merged_at",
    "merge_commit_sha",
    "head",
    "base",
    "merged",
    "additions",
    "deletions",
    "changed_files",
)
REPO_KEYS = (
    "id",
    "name",
    "full_name",
    "fork",
    "stargazers_count",
    "language",
    "license",
    "default_branch",
    "archived",
)


def _slim(obj: dict, keys: tuple[str, ...]) -> dict:
    out = {k: obj.get(k) for k in keys if k in obj}
    if isinstance(out.get("user"), dict):
        out["user"] = {k: out["user"].get(k) for k in USER_KEYS}
    return out


def templates(cassettes: Path) -> dict[str, dict]:
    """One real event of each type the generator emits, slimmed."""
    found: dict[str, dict] = {}
    for e in recorded_events(cassettes):
        t = e["type"]
        if t in found:
            continue
        p = e["payload"]
        if t == "PullRequestEvent" and not p["pull_request"].get("merged"):
            continue
        if t == "IssuesEvent" and "pull_request" in p["issue"]:
            continue
        found[t] = copy.deepcopy(e)
    out = {}
    for t in ("IssuesEvent", "PullRequestEvent", "IssueCommentEvent", "WatchEvent", "PushEvent"):
        e = found[t]
        e = {k: e[k] for k in ("id", "type", "actor", "repo", "payload", "public", "created_at")}
        e["actor"] = {k: e["actor"].get(k) for k in USER_KEYS}
        p = e["payload"]
        if "issue" in p:
            p["issue"] = _slim(p["issue"], ISSUE_KEYS)
        if "comment" in p:
            p["comment"] = _slim(
                p["comment"], ("url", "html_url", "issue_url", "id", "user", "created_at", "body")
            )
        if "pull_request" in p:
            pr = _slim(p["pull_request"], PULL_KEYS)
            for side in ("head", "base"):
                pr[side] = {
                    "sha": pr[side]["sha"],
                    "ref": pr[side]["ref"],
                    "repo": _slim(pr[side]["repo"], REPO_KEYS),
                }
            p["pull_request"] = pr
        if "commits" in p:
            p["commits"] = p["commits"][:2]
        out[t] = e
    return out


def generate(out: Path, n: int, cassettes: Path, seed: int = 0) -> int:
    """``n`` events over 24 hourly files; ~50k issues and ~20k PRs across 200 repositories."""
    tpl = templates(cassettes)
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    files = [gzip.open(out / f"2024-01-01-{h}.json.gz", "wt", compresslevel=1) for h in range(24)]
    kinds = (
        ["IssuesEvent"] * 3
        + ["IssueCommentEvent"] * 4
        + ["PullRequestEvent"] * 2
        + ["WatchEvent", "PushEvent"]
    )
    for i in range(n):
        kind = kinds[rng.randrange(len(kinds))]
        repo = f"bench/r{rng.randrange(200)}"
        hour = i * 24 // n
        when = f"2024-01-01T{hour:02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"
        e = copy.copy(tpl[kind])
        e["id"], e["created_at"] = str(10**11 + i), when
        e["repo"] = {"name": repo, "url": f"https://api.github.com/repos/{repo}"}
        p = e["payload"] = dict(tpl[kind]["payload"])
        if kind in ("IssuesEvent", "IssueCommentEvent"):
            num = rng.randrange(1, 250) * 2  # even numbers: issues
            issue = dict(
                p["issue"],
                number=num,
                created_at=when,
                updated_at=when,
                url=f"https://api.github.com/repos/{repo}/issues/{num}",
                repository_url=f"https://api.github.com/repos/{repo}",
                html_url=f"https://github.com/{repo}/issues/{num}",
            )
            issue["body"] = f"{tpl['IssuesEvent']['payload']['issue']['body']}\n\nSeen in build {num}."
            p["issue"] = issue
            if kind == "IssueCommentEvent":
                p["comment"] = dict(p["comment"], id=10**10 + i, issue_url=issue["url"], created_at=when)
        elif kind == "PullRequestEvent":
            num = rng.randrange(0, 100) * 2 + 1  # odd numbers: pull requests
            pr = dict(
                p["pull_request"],
                number=num,
                created_at=when,
                updated_at=when,
                merged_at=when,
                url=f"https://api.github.com/repos/{repo}/pulls/{num}",
                html_url=f"https://github.com/{repo}/pull/{num}",
                body=f"Fixes #{num + 1}",
            )
            pr["base"] = dict(pr["base"], repo=dict(pr["base"]["repo"], full_name=repo))
            p["pull_request"] = pr
        files[hour].write(json.dumps(e) + "\n")
    for f in files:
        f.close()
    return n


def differences(a: Path, b: Path) -> dict[str, int]:
    """Rows found in one engine's output and not in the other's (multiset difference both ways,
    every column compared), per dataset; {} when the outputs are identical."""
    con = duckdb.connect()
    diff = {}
    for ds in ("documents", "rejects"):
        cols = [sorted(r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{o}/{ds}/*.parquet')").fetchall())
                for o in (a, b)]  # fmt: skip
        if cols[0] != cols[1]:
            diff[f"{ds}_columns"] = len(set(cols[0]) ^ set(cols[1]))
            continue
        sel = ", ".join(f'"{c}"' for c in cols[0])
        n = sum(
            con.execute(f"SELECT count(*) FROM (SELECT {sel} FROM read_parquet('{x}/{ds}/*.parquet') "
                        f"EXCEPT ALL SELECT {sel} FROM read_parquet('{y}/{ds}/*.parquet'))").fetchone()[0]
            for x, y in ((a, b), (b, a))
        )  # fmt: skip
        if n:
            diff[ds] = n
    inst = [Counter((o / "instances.jsonl").read_text().splitlines()) for o in (a, b)]
    if n := sum(((inst[0] - inst[1]) + (inst[1] - inst[0])).values()):
        diff["instances"] = n
    return diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="generate into / reuse this directory")
    args = ap.parse_args()
    cassettes = obtain_cassettes(cache_dir())
    with tempfile.TemporaryDirectory() as tmp:
        events = args.keep or Path(tmp) / "events"
        t0 = time.perf_counter()
        if not (events.is_dir() and any(events.glob("*.json.gz"))):
            generate(events, args.events, cassettes)
        mb = sum(p.stat().st_size for p in events.glob("*.json.gz")) / 1e6
        print(
            f"{args.events:,} events in 24 hourly files, {mb:.0f} MB gzipped (ready in {time.perf_counter() - t0:.0f}s)"
        )
        cfg = SweMineConfig.model_validate(
            {"pack_shards": False, "spark": {"master": "local[2]", "shuffle_partitions": 8}}
        )
        results = {}
        t0 = time.perf_counter()
        with LocalEngine(cfg.local) as engine:
            duck = swe_mine.run(cfg, MineInputs(events=[str(events)]), Path(tmp) / "duckdb", engine, progress=False)
        results["duckdb + 2 worker processes"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        spark = spark_session(SparkConfig(master="local[2]", shuffle_partitions=8, driver_memory="4g"))
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        sp = swe_mine.run(cfg, MineInputs(events=[str(events)]), Path(tmp) / "spark", SparkEngine(spark, cfg.spark),
                          progress=False)
        results["spark local[2]"] = time.perf_counter() - t0
        diff = differences(duck.out_dir, sp.out_dir)
        if duck.counts != sp.counts:
            diff["stage_counts"] = 1
        same = not diff
        spark.stop()
    n = duck.counts["parse"].docs_in
    print("phase seconds: duckdb", duck.stats.get("timings"), "spark", sp.stats.get("timings"))
    print(
        f"records parsed: {n:,}; pairs: {duck.stats['pairs']:,}; rejects by stage: "
        + ", ".join(f"{s}={c.rejected:,}" for s, c in duck.counts.items() if c.rejected)
    )
    for name, secs in results.items():
        print(f"  {name:30s} {secs:7.1f}s  {args.events / secs:9,.0f} events/s")
    print(f"  (spark session startup {startup:.1f}s, not included)")
    base = results["duckdb + 2 worker processes"]
    print(f"ratio spark/duckdb events/s: {base / results['spark local[2]']:.2f}; identical outputs: {same}"
          + ("" if same else f" (rows that differ: {diff})"))
    write(
        __file__,
        Result("swe-mine spark vs duckdb", args.events / results["spark local[2]"], args.events / base, "events/s",
               ours_label="Spark local[2]", baseline_label="DuckDB + 2 worker processes",
               extra={"identical_outputs": same, "differences": diff}),
        {"events": args.events, "mb_gzipped": round(mb, 1), "documents": duck.documents,
         "instances": duck.instances, "spark_startup_s": round(startup, 1)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
