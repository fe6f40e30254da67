"""Rule-based recipe repairs: what a failed build or test collection says, and the fix it wants.

Tried before the LLM and without one, every refine round: each rule reads the failure log and
returns the revised recipe (or None when it does not apply, or its fix is already there), so
the loop keeps going for all ``refine_rounds``. The interpreter switch (a removed stdlib name
-> an older Python) is the builder's, since it changes the toolchain image (``era.older_wanted``).

This folder holds everything that decides a recipe beyond a language's default (``languages``):
``era`` (the toolchain version a repo-version gets, from the repository's evidence), ``system_tools``
(a program the tests skip without, any language), one module
of repairs per language (``python``, ``javascript``, ``java`` with the Maven/Gradle stand-ins of
``swe_envs.offline``, ``go``, ``rust``, ``php``, ``ruby``; ``base``: what several share), and
here the dispatch and ``RULES_VERSION``.
"""

from __future__ import annotations

from collections.abc import Callable

from swe_envs.envs.parsers.base import clean
from swe_envs.envs.rules import go, java, javascript, php, python, ruby, rust
from swe_envs.envs.rules.system_tools import system_tools_rule
from swe_envs.repos import Snapshot

# Part of every verified environment's cache key (builder): an image verified under older rules,
# parsers or collect checks is not reused once they change. Bump it with any change to what a
# recipe installs, how a run is parsed, or what the collect check accepts.
RULES_VERSION = "2026-12-03.1"

RULES: dict[str, Callable[[list[str], str], tuple[list[str], str] | None]] = {
    "python": python.python_rules,
    "javascript": javascript.js_rules,
    "ruby": ruby.ruby_rules,
    "rust": rust.cargo_rules,
    "java": java.java_rules,
    "go": go.go_rules,
    "php": php.php_rules,
}


# rules that read the repository's own files too (the declared dependencies)
_WITH_SNAPSHOT = {"rust", "java", "php"}


def rule_fix(language: str, recipe: list[str], log: str, snap: Snapshot | None = None,
             toolchain: str | None = None, era: str | None = None) -> tuple[list[str], str] | None:
    """(revised recipe, rule name), or None when no rule applies; toolchain: its version (Python's
    rules pick tooling of the interpreter's era); era: the environment's cut-off day, if any (what
    Python's rules pin an added package to where no install line of the recipe says it)."""
    log = clean(log)  # Docker colours a step's stderr: escapes split uv's "published at <date>"
    fixed = system_tools_rule(recipe, log)  # any language's tests may skip for want of a program
    if fixed is not None:
        return fixed
    rule = RULES.get(language)
    if rule is None:
        return None
    if language == "python":
        day = None
        if snap is not None and python.FILTERED_BY_CUTOFF in log:  # only that rule reads it: git is a call
            from swe_envs.envs.rules.era import commit_date

            day = (commit_date(snap) or "")[:10] or None
        return python.python_rules(recipe, log, toolchain, era, day)
    return rule(recipe, log, snap) if language in _WITH_SNAPSHOT else rule(recipe, log)
