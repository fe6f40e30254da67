"""What every log parser returns, and how repeated reports of one test are merged."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"
STATUSES = (PASSED, FAILED, SKIPPED, ERROR)
# a test reported twice (pytest's -v line and its -rA summary, a teardown error after a pass)
# keeps its worst status
_RANK = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class ParseResult:
    runner: str
    statuses: dict[str, str] = field(default_factory=dict)
    # the runner's end-of-run summary appeared: the suite ran to its end (fake-pass guard)
    summary_seen: bool = False
    # totals the summary states, when it states them: cross-checked against the parse
    counts: dict[str, int] | None = None
    # where the ids follow another tool's convention (SWE-bench's truncated pytest ids), the
    # full parse of the same log that the fake-pass guards check instead
    guard: ParseResult | None = None
    # skips the runner's summary lines report by location, not by test id (pytest's ``-rs``/``-rA``
    # ``SKIPPED [3] tests/x.py:12: reason``, old pytest's ``SKIP [1] ...``): a module skipped at
    # import has no test line, so the summary's skipped total may exceed the named skips by these
    located_skips: int = 0

    def add(self, test_id: str, status: str) -> None:
        test_id = test_id.strip()
        if not test_id:
            return
        old = self.statuses.get(test_id)
        if old is None or _RANK[status] > _RANK[old]:
            self.statuses[test_id] = status

    def tally(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for s in self.statuses.values():
            out[s] += 1
        return out

    def to_json(self) -> dict:
        return {"runner": self.runner, "summary_seen": self.summary_seen, "counts": self.counts,
                "tests": dict(sorted(self.statuses.items()))}


def clean(log: str) -> str:
    return ANSI.sub("", log).replace("\r\n", "\n")
