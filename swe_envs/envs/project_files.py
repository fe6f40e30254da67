"""What a repository's own files say that its recipe and test command need, beyond the manifest's
name: a pre-modules Go tree's import path, the CMake switches that gate a library's tests, which
of a PHP library's composer dependencies a test loads, the steps of an npm test script that test. Found on real upstream trees
(``benchmarks/swe_langs_debian.py``)."""

from __future__ import annotations

import json
import re

from swe_envs.repos import Snapshot

_GO_IMPORT_COMMENT = re.compile(r'^package\s+\w+\s*//\s*import\s+"([^"]+)"', re.M)
_GO_IMPORT = re.compile(r'"([a-z0-9.-]+\.[a-z]+/[^"\s]+)"')


def go_module_path(snap: Snapshot) -> str:
    """The import path of a repository without go.mod (written before Go modules): its own
    import comment, else what its files import of its own directories, else a local name."""
    go_files = [f for f in snap.files if f.endswith(".go") and "/testdata/" not in f"/{f}"]
    texts = {f: snap.read(f, limit=20_000) or "" for f in go_files[:400]}
    for f, text in texts.items():
        if "/" not in f and (m := _GO_IMPORT_COMMENT.search(text)):
            return m.group(1)
    dirs = {f.rsplit("/", 1)[0] for f in go_files if "/" in f}
    root_pkgs = {m.group(1) for f, t in texts.items() if "/" not in f
                 for m in [re.search(r"^package\s+(\w+)", t, re.M)] if m and not m.group(1).endswith("_test")}
    for text in texts.values():
        for path in _GO_IMPORT.findall(text):
            for d in sorted(dirs, key=len, reverse=True):
                if path.endswith("/" + d):
                    return path[: -len(d) - 1]
            if path.rsplit("/", 1)[-1] in root_pkgs:
                return path
    return "testbed"


_CMAKE_OPTION = re.compile(r"(?:cmake_dependent_)?option\s*\(\s*(\w+)")
_TEST_SWITCH = re.compile(r"(?:^|_)(?:BUILD_?TESTS?|BuildTests|TESTS?|WITH_TESTS)$")
# switches that turn tests off (jansson's JANSSON_WITHOUT_TESTS) or need what the image lacks
_NOT_A_TEST_SWITCH = re.compile(r"SKIP|DISABLE|WITHOUT|(?:^|_)NO(?:_|$)|CUDA|VALGRIND|COVERAGE|FUZZ|BENCH", re.I)


def cmake_test_options(snap: Snapshot) -> str:
    """Libraries gate their tests behind an option that is off unless they are the top-level
    project (pugixml's PUGIXML_BUILD_TESTS, yaml-cpp's YAML_CPP_BUILD_TESTS, fmt's FMT_TEST):
    switch them on, with BUILD_TESTING, which the dependent ones require."""
    names = dict.fromkeys(_CMAKE_OPTION.findall(snap.read("CMakeLists.txt") or ""))
    names = [n for n in names if _TEST_SWITCH.search(n) and not _NOT_A_TEST_SWITCH.search(n)]
    return "".join(f" -D{n}=ON" for n in ["BUILD_TESTING", *names]) if names else ""


# require-dev entries that lint, analyse or benchmark, never load in a test: the image's phpunit runs
# the tests without them (Debian packages a library's tests the same way)
PHP_DEV_TOOLS = re.compile(r"^(phpunit/phpunit|phpstan/|vimeo/psalm|psalm/|squizlabs/|friendsofphp/php-cs-fixer|"
                           r"[\w-]+/coding-standard|phpbench/|slevomat/|dealerdirect/|roave/security-advisories|"
                           r"infection/|php-parallel-lint/|phpmd/|bamarni/)")


def composer(snap: Snapshot) -> dict:
    try:
        comp = json.loads(snap.read("composer.json") or "{}")
    except json.JSONDecodeError:
        return {}
    return comp if isinstance(comp, dict) else {}


def php_packages(snap: Snapshot) -> list[str]:
    """The composer packages (``vendor/name``) and PHP extensions (``ext-*``) that composer.json's
    require and require-dev declare and a test may load: linters, analysers and phpunit left out."""
    comp = composer(snap)
    declared = [k for section in ("require", "require-dev") if isinstance(comp.get(section), dict)
                for k in comp[section]]
    return [d for d in dict.fromkeys(declared)
            if ("/" in d or d.startswith("ext-")) and not PHP_DEV_TOOLS.match(d)]


def php_needs_install(snap: Snapshot) -> bool:
    return any("/" in d for d in php_packages(snap))


def php_autoload_dirs(snap: Snapshot) -> list[str]:
    """The directories composer.json's ``autoload`` names (psr-4, psr-0, classmap) that the tree has."""
    auto = composer(snap).get("autoload")
    auto = auto if isinstance(auto, dict) else {}
    named: list[str] = []
    for kind in ("psr-4", "psr-0", "classmap"):
        spec = auto.get(kind)
        values = spec.values() if isinstance(spec, dict) else spec if isinstance(spec, list) else []
        for value in values:
            named += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    dirs = {f.rsplit("/", 1)[0] for f in snap.files if "/" in f}
    found = [d.strip("/") or "." for d in named]
    return [d for d in dict.fromkeys(found) if d == "." or d in dirs or any(x.startswith(d + "/") for x in dirs)]


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


_COLLECT_IGNORE = re.compile(r"^collect_ignore\s*=\s*\[([^\]]*)\]", re.M)


def ignored_by_conftest(snap: Snapshot, path: str) -> bool:
    """``path`` lies under a directory a conftest.py's ``collect_ignore`` names (sphinx's
    ``tests/roots``: sample projects, not test modules; given to pytest by name, their modules
    are imported as tests and break the collection)."""
    parts = path.split("/")
    for i in range(len(parts) - 1):
        base = "/".join(parts[:i])
        text = snap.read(f"{base}/conftest.py" if base else "conftest.py", limit=100_000) or ""
        for m in _COLLECT_IGNORE.finditer(text):
            for name in re.findall(r"""['"]([^'"]+)['"]""", m.group(1)):
                target = f"{base}/{name}".strip("/") if base else name.strip("/")
                if path == target or path.startswith(target.rstrip("/") + "/"):
                    return True
    return False
