"""SWE environments for Python code of 2013-2020: real releases from the package index.

SWE-bench's Python repositories reach back to 2013 (requests 1.x); ``swe_real.py`` measures the
20 instances in ``../shared/swe-real`` (2019-2023). This takes older code no one here wrote: each
project's sdist at a release (``samples/swe_envs/pypi_sdists.py``: the index the host's pip uses,
sha256 checked; the release's upload time is its era, as an instance's created_at would be), as a
git repository of one commit, through the builder ``python -m swe_envs validate`` uses (era
interpreter among 3.9/3.11/3.13, era-pinned dependencies, rule-based refine, collect check), then
one run of the tests, parsed and checked against pytest's own summary counts (the same
measurement as ``swe_langs_debian.py``, whose ``measure_env`` this shares). Tests that need the
network (requests 1.x-2.3 call httpbin.org) fail here, as they would in any sandbox without one:
they count as failed tests, not as a broken environment.

Headline: per set of 10 (``PROJECTS``, on which the rules were made, and ``SECOND``, a different
set measured to show whether they generalise), the fraction of projects built with parse ==
summary; goal 0.9 each (issue 15's per-language goal, issue 26's second set). Writes
out/bench/swe_py_eras.json; exits 0 whatever the result.
Run: ``python benchmarks/swe_py_eras.py [--projects requests==2.3.0,six==1.10.0]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _debian_sources import as_repo  # noqa: E402
from _report import Result, write, write_status  # noqa: E402
from swe_langs_debian import measure_env  # noqa: E402

from core.cache import cache_dir  # noqa: E402

# small projects whose sdists ship their tests, oldest first
PROJECTS = ["requests==1.1.0", "requests==2.0.1", "itsdangerous==0.24", "requests==2.3.0", "simplejson==3.8.0",
            "six==1.10.0", "MarkupSafe==1.0", "python-dateutil==2.6.1", "attrs==17.4.0", "requests==2.24.0"]
# a second, different set, chosen before it was first measured (2026-12-03) to show whether rules made
# on the first generalise: none of these projects is in the first; docopt 0.6.2, first chosen, ships
# no tests in its sdist, so pytz 2016.10 took its place
SECOND = ["Jinja2==2.7.3", "pytz==2016.10", "wcwidth==0.1.7", "click==6.7", "jsonschema==2.6.0",
          "cachetools==2.0.1", "pyasn1==0.4.2", "idna==2.8", "Werkzeug==0.14.1", "tqdm==4.45.0"]
SETS = {"first": PROJECTS, "second": SECOND}
DATA = cache_dir() / "pypi-sdists"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default=",".join(PROJECTS + SECOND),
                    help="comma-separated name==version (default: both sets, each with its own ratio)")
    ap.add_argument("--data", type=Path, default=DATA, help="cache of sdists, trees, repositories and logs")
    args = ap.parse_args()
    try:
        from swe_envs.config import SweEnvsConfig
        from swe_envs.docker_setup import docker_client
        from swe_envs.envs.environment.group import make_builder

        client = docker_client()
    except Exception as err:  # no engine: a skipped row, not a crash
        write_status(__file__, "skipped", f"no Docker engine: {err}")
        return 0
    from samples.swe_envs.pypi_sdists import fetch_sdist, unpack

    builder = make_builder(client, SweEnvsConfig(), args.data / "out")
    rows: list[dict] = []
    t0 = time.monotonic()
    try:
        for spec in [p for p in args.projects.split(",") if p]:
            name, _, version = spec.partition("==")
            print(f"=== {spec}", flush=True)
            row: dict = {"project": spec, "built": False, "parsed_ok": False}
            t1 = time.monotonic()
            try:
                sdist = fetch_sdist(name, version, args.data / "sdists")
                tree = unpack(sdist, args.data / "trees")
                commit = as_repo(tree, args.data / "repos" / spec)
                row["era_date"] = sdist.uploaded
                env = builder.build(f"pypi/{name}", args.data / "repos" / spec, commit, language="python",
                                    created_at=[sdist.uploaded], version=version)
                row |= measure_env(builder, env, args.data / "logs" / f"{spec}.log", t1)
                row |= {"interpreter": env.toolchain.get("version"), "recipe": env.recipe}
            except Exception as err:  # one broken project never ends the run
                row |= {"stage": "internal", "reason": f"{type(err).__name__}: {err}"[:500]}
            print(json.dumps({k: row.get(k) for k in ("project", "interpreter", "built", "parsed_ok", "stage",
                                                      "reason", "rounds", "parsed", "summary", "seconds")}),
                  flush=True)
            rows.append(row)
    finally:
        builder.sandbox.close()
    results = []
    for name, members in [*SETS.items(), ("other", None)]:
        mine = [r for r in rows if (r["project"] in members if members else
                                    not any(r["project"] in m for m in SETS.values()))]
        if not mine:
            continue
        n, ok, built = len(mine), sum(r["parsed_ok"] for r in mine), sum(r["built"] for r in mine)
        print(f"{name} set: {ok}/{n} built with parse == pytest's summary ({built} built)")
        results.append(Result(f"swe_py_eras_ok_{name}", ok / n, 1.0, "fraction of projects", goal=0.9,
                              ours_label=f"{ok}/{n} PyPI releases of 2013-2020 ({name} set) built with parse == "
                                         "pytest's summary", baseline_label="every project"))
    if not results:
        write_status(__file__, "skipped", "no project given")
        return 0
    write(__file__, results[0], {"projects": rows, "seconds": round(time.monotonic() - t0, 1),
                                 "config": "shipped defaults"}, also=results[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
