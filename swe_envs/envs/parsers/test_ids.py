"""Test ids in the scheme a dataset uses for a repository, so F2P/P2P compare with its lists.

SWE-bench grades each repository with its own log parser, and its FAIL_TO_PASS / PASS_TO_PASS
hold whatever that parser keys tests by. Learned from its public harness (no code of it here):
- most pytest repositories: the token after the status word of an ``-rA`` line (``pytest-swebench``
  parser: a parametrized id is cut at its first space);
- requests, pylint, pydicom: the same, with a parameter that is an absolute path shortened to its
  last component (``test_x[/tmp/pytest-0/a.txt]`` -> ``test_x[/a.txt]``): ``pytest-options``;
- sympy: ``bin/test``'s bare function names (``test_symbols``), also when pytest ran the suite
  (``sympy/core/tests/test_symbol.py::test_symbols`` -> ``test_symbols``): ``bare-name``;
- django: its runner's unittest description (``test_x (app.tests.Class)``): the ``django`` parser's
  own ids: ``native``.
The scheme of a repository is recorded in its environment spec (``id_scheme``); a user's
``validation.id_schemes`` entry overrides the table, a repository in neither keeps its runner's ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from swe_envs.envs.parsers.base import ParseResult


def _native(test_id: str) -> str:
    return test_id


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def _pytest_options(test_id: str) -> str:
    m = _OPTION.search(test_id)
    if not m:
        return test_id
    main, option = m.groups()
    # a tmp path differs per run and per machine: its last component is what stays put
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def _bare_name(test_id: str) -> str:
    return test_id.rsplit("::", 1)[-1]


SCHEMES: dict[str, Callable[[str], str]] = {"native": _native, "pytest-options": _pytest_options,
                                           "bare-name": _bare_name}
# per repository, where the dataset's ids are not the runner's own (SWE-bench's harness)
REPO_SCHEMES = {"psf/requests": "pytest-options", "pylint-dev/pylint": "pytest-options",
                "pydicom/pydicom": "pytest-options", "sympy/sympy": "bare-name"}


def scheme_for(repo: str, overrides: dict[str, str] | None = None) -> str:
    scheme = (overrides or {}).get(repo) or REPO_SCHEMES.get(repo, "native")
    if scheme not in SCHEMES:
        from core.errors import UserError

        raise UserError(f"unknown test id scheme {scheme!r} for {repo}; known: {', '.join(sorted(SCHEMES))}")
    return scheme


def map_ids(scheme: str, parsed: ParseResult) -> dict[str, str]:
    """``parsed``'s statuses under ``scheme``; tests that map to one id keep the worst status (a
    name passes only if every test of that name passed)."""
    if scheme == "native":
        return dict(parsed.statuses)
    fn = SCHEMES[scheme]
    out = ParseResult(parsed.runner)
    for test_id, status in parsed.statuses.items():
        out.add(fn(test_id), status)
    return out.statuses
