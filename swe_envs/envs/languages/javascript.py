"""JavaScript / TypeScript: npm installs from package.json (the era's releases without a lockfile),
the test script's own runner (TAP, mocha, jest, vitest) without npm."""

from __future__ import annotations

import json
import re

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot


def _package_json(snap: Snapshot) -> dict:
    try:
        data = json.loads(snap.read("package.json") or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    pkg = _package_json(snap)
    if pkg.get("dependencies") or pkg.get("devDependencies"):
        install = "npm ci" if snap.has("package-lock.json") else "npm install"
        # without a lockfile, the era's releases (a lockfile pins them already)
        before = f" --before={opts.exclude_newer}" if opts.exclude_newer and install == "npm install" else ""
        return ["apt-get install -y --no-install-recommends npm", f"{install} --no-audit --no-fund{before}"]
    return []


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    scripts = _package_json(snap).get("scripts") or {}
    script = npm_test_script(scripts) if isinstance(scripts, dict) else ""
    if not script or "no test specified" in script:
        return TestPlan("node --test", "tap")
    runner = "tap"
    for name in ("jest", "vitest", "mocha"):
        if re.search(rf"(^|[\s/]){name}\b", script):
            runner = name
    if runner == "jest" and "--verbose" not in script:
        script += " --verbose"  # without it jest lists passing tests only for a single file
    if runner == "tap" and re.search(r"(^|[\s;&|(])ava\b(?![-.])", script) and "--tap" not in script:
        # ava's own reporter names failures only; its TAP reporter names every test
        script = re.sub(r"(^|[\s;&|(])ava\b(?![-.])", r"\1ava --tap", script)
    if runner in ("mocha", "jest"):
        script = re.sub(r"\s--bail\b", "", script)  # every test's outcome, not up to the first failure
    prefix = "PATH=/testbed/node_modules/.bin:$PATH; "
    if runner == "mocha":
        # old mocha's `mocha` spawns `_mocha` with customFds, which Node dropped long ago: the run
        # printed nothing. `_mocha` is the runner itself, same arguments
        prefix += ('mocha() { if grep -qs customFds /testbed/node_modules/mocha/bin/mocha; then _mocha "$@"; '
                   'else command mocha "$@"; fi; }; ')
    # what `npm test` does, without needing npm in the image
    return TestPlan(prefix + script, runner)


# steps of an npm test script that check style or types and report no test: a lint finding
# (likely when a newer linter than the era's resolves) would stop `a && b` before the tests ran
# (not tsc: a TypeScript project's tests run on what it compiles)
NPM_NOT_TESTS = ("xo", "eslint", "standard", "semistandard", "tsd", "tslint", "jshint", "jscs", "prettier",
                 "dtslint", "check-dts", "markdownlint", "depcheck")
_NPM_RUN = re.compile(r"^npm\s+(?:run|run-script)\s+([\w:.-]+)\s*$")


def npm_test_script(scripts: dict, name: str = "test", depth: int = 0) -> str:
    """The ``test`` script as the commands it runs: ``npm run X`` steps spelled out (npm may not
    be in the image), linters and type checkers left out; the script unchanged when that would
    leave nothing."""
    script = str(scripts.get(name) or "")
    if depth > 3 or "||" in script or ";" in script:
        return script  # beyond a plain chain of steps: as written
    steps = []
    for step in (s.strip() for s in script.split("&&")):
        m = _NPM_RUN.match(step)
        if m and m.group(1) in scripts and m.group(1) != name:
            step = npm_test_script(scripts, m.group(1), depth + 1)
        words = step.split()
        if words and words[0] in NPM_NOT_TESTS:
            continue
        if step:
            steps.append(step)
    return " && ".join(steps) or script
