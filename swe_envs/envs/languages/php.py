"""PHP: composer installs what composer.json declares (or only its autoloader when the tests load
no dependency), phpunit with TeamCity messages."""

from __future__ import annotations

import json
import re
import shlex

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if php_needs_install(snap):
        return ["apt-get install -y --no-install-recommends composer", "composer install --no-interaction"]
    comp = composer(snap)
    if comp.get("autoload") or comp.get("autoload-dev"):
        # phpunit's bootstrap is vendor/autoload.php: composer writes it from composer.json, offline;
        # --dev: with no install to infer it from, composer leaves autoload-dev (the tests' classes) out
        return ["apt-get install -y --no-install-recommends composer", "composer dump-autoload --dev --no-interaction"]
    return []


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    exe = "vendor/bin/phpunit" if php_needs_install(snap) else "phpunit"
    config = snap.read("phpunit.xml") or snap.read("phpunit.xml.dist") or ""
    where = " " + ("tests" if any(f.startswith("tests/") for f in snap.files) else "test")
    if "<testsuites" in config:
        where = ""
    elif m := re.search(r"<testsuite\b.*?<directory[^>]*>\s*([^<\s]+)", config, re.S):
        where = " " + shlex.quote(m.group(1))  # a lone <testsuite> (PHPUnit < 6 form): PHPUnit 9 ignores it
    # TeamCity messages name every test, passing ones too (the default output lists failures only)
    return TestPlan(f"{exe} --teamcity{where}", "phpunit")


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
