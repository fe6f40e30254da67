"""SWE environments for 8 languages on real upstream code: Debian source packages.

For each language other than Python (measured on real SWE-bench data by ``swe_real.py``), a
list of small upstream projects packaged by Debian, each with its own test suite. Each is
fetched with ``apt-get source --download-only`` (cached in the user cache's ``debian-src/``, ``core.cache``;
a private apt root with ``deb-src`` lines made from the host's own Debian sources, the system
configuration untouched) and unpacked with ``dpkg-source -x --skip-patches``: Debian's patches
are NOT applied, so what is measured is upstream's tree and test suite (Debian patches tests to
its own runners and drops what it does not package) -- except for a repacked orig tarball
(``+dfsg``/``+ds``: Debian removed vendored copies or non-free files), which is not upstream's tree
either and builds only with the patches that replace what was removed. The tree (``debian/`` dropped; where the
mirror serves the orig tarball but not Debian's packaging, the orig tarball alone, its era then
the newest file in it) becomes a git repository of one commit, and then goes through the product's code path that
``python -m swe_envs validate`` uses: ``make_builder`` -> ``EnvBuilder.build`` (recipe, toolchain,
rule-based refine, collect check), one more run of the test command in the sandbox, the
runner's parser, and ``check_run`` (the validator's trust check). What is compared: the parsed
per-test statuses tallied (passed / failed+error / skipped) against the counts the runner's own
summary states. ``go test`` prints no counts: its test plan runs ``go test -json``, and the counts
are the ``--- PASS/FAIL/SKIP`` lines the test binaries themselves printed (the ``Output`` events),
per package, while the parser reads test2json's ``Action`` events. Runners whose summary states no
counts (node-tap 14) are reported as such, checked by ``check_run`` only. A summary computed by our
own Maven/Gradle stand-ins (``swe_envs/offline/``) from the report XML the parser also reads is no
independent check: such rows say ``summary_independent: false``.

Headline: the fraction of projects that built and whose parse equals an independent summary of the
runner (stand-in summaries and runners without counts do not count); beside it, the fraction that
built and parsed under ``check_run``. Goal 0.9 (issue 15: >= 90% of the real upstream projects per
language). Exits 0 whatever the result.
Run: ``python benchmarks/swe_langs_debian.py [--only go,c] [--packages a,b] [--limit N]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._debian_sources import AptSource, as_repo, release_date, upload_date  # noqa: E402
from benchmarks._report import Result, write, write_status  # noqa: E402
from core.cache import cache_dir  # noqa: E402

# small upstream projects with their own tests that need no network and no registry beyond
# Debian's and npm's, in the order tried: each language's first --limit that the machine's mirror
# serves are measured (the mirror here serves a subset of the archive's source files; the
# others are listed as unavailable, with apt's reason)
PACKAGES: dict[str, list[str]] = {
    "go": ["golang-github-google-go-cmp", "golang-github-cespare-xxhash", "golang-github-hashicorp-golang-lru",
           "golang-github-google-uuid", "golang-github-davecgh-go-spew", "golang-github-pmezard-go-difflib",
           "golang-github-pkg-errors", "golang-github-dustin-go-humanize"],
    "c": ["jansson", "libyaml", "cjson", "json-c", "cmocka", "libinih"],
    "cpp": ["tinyxml2", "pugixml", "libjsoncpp", "yaml-cpp", "fmtlib", "nlohmann-json3"],  # quick builds first
    "php": ["php-doctrine-instantiator", "php-webmozart-assert", "php-doctrine-lexer", "php-masterminds-html5",
            "php-text-template", "php-deepcopy", "php-phar-io-version", "php-invoker"],
    "java": ["libcommons-codec-java", "libcommons-lang3-java", "libcommons-io-java",
             "libcommons-collections4-java", "libhamcrest-java", "libcommons-cli-java", "libcommons-csv-java"],
    "javascript": ["node-ansi-regex", "node-parseurl", "node-merge-descriptors", "node-array-union", "node-brorand",
                   "node-after", "node-throttleit", "node-methods", "node-escape-string-regexp", "node-inherits"],
    # (not ruby-citrus 3.0.2: its orig tarball lacks the grammar files its tests load)
    "ruby": ["ruby-hashie", "ruby-base32", "ruby-multipart-parser", "ruby-colorator", "ruby-attr-required",
             "ruby-blankslate", "ruby-base62", "ruby-akismet", "ruby-rainbow", "ruby-diff-lcs"],
    "rust": ["rust-fnv", "rust-hex", "rust-ident-case", "rust-pin-utils", "rust-adler32", "rust-fixedbitset",
             "rust-itoa", "rust-either", "rust-strsim"],
}
DATA = cache_dir() / "debian-src"


# -- one project -------------------------------------------------------------------------------
_GO_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(")


def go_json_counts(log: str) -> dict[str, int] | None:
    """What the Go test binaries themselves reported in a ``go test -json`` log: their ``--- PASS:``
    / ``--- FAIL:`` / ``--- SKIP:`` lines (``Output`` events), one per test and package (a name in
    two packages is two tests); None when the log holds no -json events."""
    final: dict[tuple[str, str], str] = {}
    seen = False
    for line in log.splitlines():
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(ev, dict) or "Action" not in ev:
            continue
        seen = True
        if ev["Action"] == "output" and (m := _GO_LINE.match(str(ev.get("Output", "")))):
            final[(str(ev.get("Package", "")), m.group(2))] = m.group(1)
    if not seen:
        return None
    values = list(final.values())
    return {"passed": values.count("PASS"), "failed": values.count("FAIL"), "skipped": values.count("SKIP")}


def summary_check(parsed, log: str = "") -> tuple[bool | None, dict]:
    """(parse == the runner's own counts, or None when the runner states none; the tallies and
    where the counts came from)."""
    from swe_envs.envs.parsers import FAILED, PASSED, SKIPPED

    tally = parsed.tally()
    got = {"passed": tally[PASSED], "failed": tally[FAILED] + tally["error"], "skipped": tally[SKIPPED]}
    if parsed.counts is not None:
        want = {"passed": parsed.counts["passed"], "failed": parsed.counts["failed"] + parsed.counts["error"],
                "skipped": parsed.counts["skipped"]}
        source = "the runner's summary line"
    elif parsed.runner == "go-test" and (want := go_json_counts(log)) is not None:
        source = "go test -json: the test binaries' own --- PASS/FAIL/SKIP lines"
    else:
        return None, {"parsed": got, "summary": None, "summary_source": None}
    return got == want, {"parsed": got, "summary": want, "summary_source": source}


def stand_in(rounds: list[str]) -> str:
    """The stand-in runner an environment was built with ('' for the real one): its summary is ours."""
    from swe_envs.envs.rules.java import GRADLE_RULE, MAVEN_RULE

    return next((rule for rule in (MAVEN_RULE, GRADLE_RULE) if any(rule in r for r in rounds)), "")


def run_project(builder, language: str, package: str, apt: AptSource) -> dict:
    row: dict = {"package": package, "language": language, "built": False, "parsed_ok": False}
    t0 = time.monotonic()
    tree, version, err = apt.fetch(package)
    if tree is None:
        return row | {"stage": "fetch", "reason": err}
    row["version"] = version
    repo_dir = apt.root / "repos" / package
    commit = as_repo(tree, repo_dir)
    # the era (toolchain version, npm --before, ...) is the Debian upload's date, as an instance's
    # created_at would give it: the repository's one commit carries a fixed date
    when, era_from = upload_date(tree), "debian/changelog"
    if when is None:
        when, era_from = release_date(tree), "newest file in the orig tarball"
    row |= {"era_date": when, "era_from": era_from if when else None,
            "sources": "debian source package" if (tree / "debian").is_dir() else "orig tarball only"}
    env = builder.build(f"debian/{package}", repo_dir, commit, language=language, created_at=[when] if when else [])
    return row | measure_env(builder, env, apt.root / "logs" / f"{package}.log", t0)


def measure_env(builder, env, log_path: Path, t0: float) -> dict:
    """A built (or failed) environment's row: its build, one run of its tests, parse vs summary."""
    from swe_envs.envs.parsers import parse_log
    from swe_envs.envs.validate.validator import check_run

    row: dict = {"built": False, "parsed_ok": False}
    row |= {"build_s": round(env.seconds, 1), "cached": env.cached, "runner": env.runner,
            "test_command": env.test_command.splitlines()[0][:200] if env.test_command else "",
            "rounds": [f"{a.source}:{a.stage}" + (f"({a.rule})" if a.rule else "") for a in env.attempts]}
    if not env.ok:
        return row | {"stage": "build", "reason": env.reason[:500], "seconds": round(time.monotonic() - t0, 1)}
    row |= {"built": True, "image_bytes": env.image_bytes, "env_layer_bytes": env.env_layer_bytes}
    # what a rule left out of the upstream tree (dev-dependencies Debian lacks, say), never silent
    dropped = [line for line in env.resolved if line.startswith(("dropped ", "left out"))]
    if dropped:
        row["dropped"] = dropped
    res = builder.sandbox.run(env.image, env.test_command, [], runs=1, network=env.network)
    if not res.runs:
        return row | {"stage": "run", "reason": res.error[:500], "seconds": round(time.monotonic() - t0, 1)}
    run = res.runs[0]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(run.log, encoding="utf-8")
    parsed = parse_log(env.runner, run.log)
    match, tallies = summary_check(parsed.guard or parsed, run.log)
    why = check_run(run, parsed)
    ours = stand_in(row["rounds"])
    row |= {"rc": run.rc, "tests": len(parsed.statuses), "summary_seen": parsed.summary_seen,
            "summary_match": match, **tallies, "log": str(log_path), "seconds": round(time.monotonic() - t0, 1),
            # a summary our own stand-in computed from the XML the parser reads vouches for nothing
            "summary_independent": match is not None and not ours}
    if ours:
        row["summary_source"] = f"not independent: {ours} (our summary of the report XML the parser reads)"
    if match is False:
        return row | {"stage": "parse", "reason": f"parsed {tallies['parsed']} != summary {tallies['summary']}"}
    # failing upstream tests are allowed (a Debian build may skip them too); a run that cannot be
    # trusted is not: no tests, no summary line, or counts the runner contradicts
    if why and not why.startswith(("exit code", "parsed")):
        return row | {"stage": "parse", "reason": why}
    return row | {"parsed_ok": True, "note": why or ""}


def independent_ok(row: dict) -> bool:
    """Built, parsed, and the parse equals counts the runner itself printed (not our stand-in's)."""
    return bool(row.get("parsed_ok") and row.get("summary_match") and row.get("summary_independent", True)
                and not stand_in(row.get("rounds") or []))


def reuse_rows(paths: list[Path], skip: set[str]) -> list[dict]:
    """Project rows of earlier runs for the packages not run now (``skip``); the last file naming a
    package wins."""
    by_package: dict[str, dict] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            rows = json.loads(text)["inputs"]["projects"]  # a report of this benchmark
        except (ValueError, KeyError, TypeError):
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]  # --rows JSONL
        for row in rows:
            if isinstance(row, dict) and row.get("language") in PACKAGES and row.get("package") not in skip:
                by_package[row["package"]] = row | {"reused_from": str(path)}
    order = {pkg: i for pkgs in PACKAGES.values() for i, pkg in enumerate(pkgs)}
    return sorted(by_package.values(), key=lambda r: (list(PACKAGES).index(r["language"]),
                                                       order.get(r["package"], len(order)), r["package"]))


# -- the benchmark -----------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated languages (default: all 8)")
    ap.add_argument("--packages", default="", help="comma-separated source packages (default: each language's list)")
    ap.add_argument("--limit", type=int, default=5,
                    help="projects per language (default 5): the first that the mirror serves, in list order")
    ap.add_argument("--data", type=Path, default=DATA, help="cache of sources, repositories and logs")
    ap.add_argument("--rows", type=Path, default=None, help="also append each project's row to this JSONL")
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="rows of an earlier run (a --rows JSONL or this benchmark's report JSON) for the packages "
                         "this run leaves out (--only/--packages), so one report covers all 8; repeatable, later "
                         "files win")
    args = ap.parse_args()
    try:
        from swe_envs.config import SweEnvsConfig
        from swe_envs.docker_setup import docker_client
        from swe_envs.envs.environment.group import make_builder

        client = docker_client()
    except Exception as err:  # no engine: a skipped row, not a crash
        write_status(__file__, "skipped", f"no Docker engine: {err}")
        return 0
    apt = AptSource(args.data)
    why = apt.ready()
    if why:
        write_status(__file__, "skipped", why)
        return 0
    langs = [x for x in args.only.split(",") if x] or list(PACKAGES)
    unknown = [x for x in langs if x not in PACKAGES]
    if unknown:
        print(f"unknown language(s): {', '.join(unknown)}; known: {', '.join(PACKAGES)}", file=sys.stderr)
        return 2
    wanted = {x for x in args.packages.split(",") if x}
    cfg = SweEnvsConfig()
    builder = make_builder(client, cfg, args.data / "out")
    rows: list[dict] = []
    t0 = time.monotonic()
    try:
        for lang in langs:
            pkgs = [p for p in PACKAGES[lang] if p in wanted] if wanted else PACKAGES[lang]
            for pkg in pkgs:
                if sum(r["language"] == lang and r.get("stage") != "fetch" for r in rows) >= args.limit:
                    break
                print(f"=== {lang} {pkg}", flush=True)
                try:
                    row = run_project(builder, lang, pkg, apt)
                except Exception as err:  # one broken project never ends the run
                    row = {"package": pkg, "language": lang, "built": False, "parsed_ok": False,
                           "stage": "internal", "reason": f"{type(err).__name__}: {err}"[:500]}
                print(json.dumps({k: row.get(k) for k in ("package", "built", "parsed_ok", "stage", "reason",
                                                          "parsed", "summary", "seconds")}), flush=True)
                rows.append(row)
                if args.rows:
                    with open(args.rows, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
    finally:
        builder.sandbox.close()
    reused = reuse_rows(args.reuse, skip={r["package"] for r in rows})
    rows += reused
    langs += sorted({r["language"] for r in reused} - set(langs), key=list(PACKAGES).index)
    per_lang = {}
    for lang in langs:
        # a source the mirror does not serve is no project of ours: listed, not counted
        missing = {r["package"]: r["reason"][-120:] for r in rows if r["language"] == lang and r.get("stage") == "fetch"}
        mine = [r for r in rows if r["language"] == lang and r.get("stage") != "fetch"]
        if not mine:
            per_lang[lang] = {"projects": 0, "unavailable": missing}
            continue
        per_lang[lang] = {"projects": len(mine), "unavailable": missing, "built": sum(r["built"] for r in mine),
                          "parsed_ok": sum(r["parsed_ok"] for r in mine),
                          "summary_compared": sum(r.get("summary_match") is not None for r in mine),
                          "independent_ok": sum(independent_ok(r) for r in mine),
                          "failures": {r["package"]: f"{r.get('stage')}: {r.get('reason', '')}"[:300]
                                       for r in mine if not r["parsed_ok"]}}
    measured = [r for r in rows if r.get("stage") != "fetch"]
    n = len(measured)
    ok = sum(r["parsed_ok"] for r in measured)
    indep = sum(independent_ok(r) for r in measured)
    inputs = {"languages": per_lang, "projects": rows, "seconds": round(time.monotonic() - t0, 1),
              "config": "shipped defaults"}
    headline = Result("swe_langs_debian_independent", indep / max(n, 1), 1.0, "fraction of projects", goal=0.9,
                      ours_label=f"{indep}/{n} Debian upstream projects built with parse == an independent runner "
                      "summary", baseline_label="every project",
                      notes=f"{ok}/{n} built and parsed; stand-in summaries and runners without counts not counted")
    also = [Result("swe_langs_debian_ok", ok / max(n, 1), 1.0, "fraction of projects",
                   ours_label=f"{ok}/{n} built and parsed (check_run; parse == summary where one exists)",
                   baseline_label="every project")]
    also += [Result(f"swe_langs_debian_{lang}", v["parsed_ok"] / v["projects"], 1.0, "fraction of projects",
                    goal=0.9, ours_label=f"{v['parsed_ok']}/{v['projects']} ok, {v['independent_ok']} against an "
                    f"independent summary, {v['built']} built", baseline_label="every project")
             for lang, v in per_lang.items() if v["projects"]]
    write(__file__, headline, inputs, also)
    return 0


if __name__ == "__main__":
    sys.exit(main())
