"""Tests skipped for want of a system tool: the Debian package that ships it, installed in the environment.

A suite that calls a program (sphinx's inheritance and graphviz tests run ``dot``) skips those tests
where it is missing, and the run still parses: without this rule the environment is "verified" and
the fix's tests never run (SWE-bench's sphinx 7.2+ images install graphviz; an instance whose
FAIL_TO_PASS is such a test had none). The skip reasons the run prints (pytest's ``-rA``/``-rs``
``SKIPPED [N] file:line: reason``, every era's spelling) are read; only tools named here, each with
the package that ships it. The install may fail (a mirror without the package): ``|| true``, and the
rule is not tried twice, so a missing tool never costs an environment that builds without it.
"""

from __future__ import annotations

import re

# Debian package -> how a skip reason names the tool it ships (quoted program names, tool names)
TOOLS = {
    "graphviz": re.compile(r"\bgraphviz\b|[\"'`]dot[\"'`]", re.I),
    "imagemagick": re.compile(r"\bimagemagick\b|[\"'`]convert[\"'`]", re.I),
    "git": re.compile(r"[\"'`]git[\"'`]|\bgit (?:is )?not (?:found|installed|available)", re.I),
}
_SKIP = re.compile(r"^(?:SKIP|SKIPPED) \[\d+\] \S+?:\d+: (.+)$", re.M)
_WANTING = re.compile(r"not (?:available|found|installed)|missing|cannot (?:find|run)|could not (?:find|run)|"
                      r"requires?\b|no such file|unavailable", re.I)
APT = "apt-get install -y --no-install-recommends"


def missing_tools(log: str, recipe: list[str]) -> list[str]:
    """Packages of the tools the run's skip reasons say are missing, not yet tried by the recipe."""
    wanted = set()
    for reason in _SKIP.findall(log):
        if _WANTING.search(reason):
            wanted |= {pkg for pkg, rx in TOOLS.items() if rx.search(reason)}
    return sorted(p for p in wanted if not any(f"{APT} {p} " in f"{line} " for line in recipe))


def system_tools_rule(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    pkgs = missing_tools(log, recipe)
    if not pkgs:
        return None
    # last: the layers before it are reused; one line per package, so each is tried once
    return recipe + [f"{APT} {p} || true" for p in pkgs], "system tool"
