"""The 9 languages: detection, install recipe from the repo's manifest, test command.

A *recipe* is the list of shell commands that turn the toolchain image plus the repository
(copied to /testbed) into a working environment; each becomes one ``RUN`` line, so a build
log names the step that failed. The test command is a shell script run in /testbed; the
runner it names picks the log parser. Recipes install from the repo's own manifest
(requirements/pyproject, package.json, pom.xml/gradle, go.mod, Cargo.toml, CMake/Make,
composer.json, Gemfile); without third-party dependencies they need no network at all.

One module per language holds its recipe, its test command and what the tree's own files say
that they need (a pre-modules Go tree's import path, the CMake switches that gate a library's
tests, a PHP library's composer dependencies, the steps of an npm test script that test):
``python``, ``javascript``, ``java``, ``go``, ``rust``, ``native`` (C and C++), ``php``, ``ruby``;
their shared types are in ``base``. This module detects the language and dispatches.
"""

from __future__ import annotations

from collections import Counter

from swe_envs.envs.languages import go, java, javascript, native, php, python, ruby, rust
from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot

EXTENSIONS = {
    "python": (".py",),
    "javascript": (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx"),
    "java": (".java", ".kt"),
    "go": (".go",),
    "rust": (".rs",),
    "c": (".c",),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "php": (".php",),
    "ruby": (".rb",),
}
MANIFESTS = {  # strong evidence, checked at the repository root first
    "rust": ("Cargo.toml",),
    "go": ("go.mod",),
    "javascript": ("package.json",),
    "java": ("pom.xml", "build.gradle", "build.gradle.kts"),
    "php": ("composer.json",),
    "ruby": ("Gemfile", ".rspec"),
    "python": ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt"),
}


def detect_language(snap: Snapshot) -> str | None:
    """Root manifest first (C/C++ by CMake/Make + sources), then the most common source extension.
    Among several root manifests, the language with the most source files: a Python project's
    package.json for its JavaScript tooling (sphinx's karma tests) does not make it JavaScript."""
    counts: Counter = Counter()
    for f in snap.files:
        for lang, exts in EXTENSIONS.items():
            if f.endswith(exts):
                counts[lang] += 1
    found = [lang for lang, names in MANIFESTS.items() if any(snap.has(n) for n in names)]
    if found:
        return max(found, key=lambda lang: (counts[lang], -found.index(lang)))
    if snap.has("CMakeLists.txt") or snap.has("Makefile") or snap.has("meson.build"):
        return "cpp" if counts["cpp"] >= counts["c"] and counts["cpp"] else "c"
    return counts.most_common(1)[0][0] if counts else None


def recipe(language: str, snap: Snapshot, opts: RecipeOptions | None = None) -> list[str]:
    return _RECIPES[language](snap, opts or RecipeOptions())


def test_plan(language: str, snap: Snapshot, selected: list[str] | None = None) -> TestPlan:
    """How to run the tests; ``selected`` = test files a patch touches (used where it is safe)."""
    return _PLANS[language](snap, selected or [])


_RECIPES = {
    "python": python.recipe,
    "javascript": javascript.recipe,
    "java": java.recipe,
    "go": go.recipe,
    "rust": rust.recipe,
    "c": native.recipe,
    "cpp": native.recipe,
    "php": php.recipe,
    "ruby": ruby.recipe,
}
_PLANS = {
    "python": python.plan,
    "javascript": javascript.plan,
    "java": java.plan,
    "go": go.plan,
    "rust": rust.plan,
    "c": native.plan,
    "cpp": native.plan,
    "php": php.plan,
    "ruby": ruby.plan,
}
