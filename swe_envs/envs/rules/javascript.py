"""JavaScript: npm's ``--before`` finding no version that old (resolve without the date), a
missing module (its Debian ``node-*`` package)."""

from __future__ import annotations

import re

from swe_envs.envs.rules.base import apt_missing

_JS_MISSING = re.compile(r"Cannot find module '([a-z0-9@][a-z0-9@/._-]*)'")


# npm's --before keeps the versions whose registry publish time is older than the date; a
# registry mirror that records the time it copied a package (not upstream's) has none that old
_NPM_NO_VERSIONS = re.compile(r"ENOVERSIONS|No versions available for|No matching version found for \S+ with a date before")


def _npm_drop_before(recipe: list[str], log: str) -> list[str] | None:
    """No version older than the era by the registry's publish times: resolve within the
    manifest's own version ranges, without the date."""
    if not _NPM_NO_VERSIONS.search(log) or not any(" --before=" in line for line in recipe):
        return None
    return [re.sub(r" --before=\S+", "", line) for line in recipe]


def js_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    fixed = _npm_drop_before(recipe, log)
    if fixed is not None:
        return fixed, "drop npm --before"
    return apt_missing(_JS_MISSING, "node-{}")(recipe, log)
