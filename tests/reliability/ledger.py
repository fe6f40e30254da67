"""What the reliability suites tried, per area, for the one table `make fuzz` / `make chaos` print.

Columns: inputs tried, faults injected (inputs that were deliberately malformed, or faults the
harness caused: killed processes, HTTP errors, hostile tasks), records lost (inputs neither kept
nor rejected with a reason — must be 0) and escapes (a crash, hang or containment breach that
reached the host or the job — must be 0; a failing test counts one for its area).

Bounds: CI runs each property with few examples (seeded, derandomized); RELIABILITY_LONG=1 (set
by `make fuzz` / `make chaos`) runs many more.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, settings

LONG = os.environ.get("RELIABILITY_LONG", "") not in ("", "0")
COLUMNS = ("inputs tried", "faults injected", "records lost", "escapes")


def fuzz_settings(ci_examples: int = 25, long_examples: int = 400) -> settings:
    """Seeded and bounded: the same examples every CI run; the long run explores more."""
    return settings(max_examples=long_examples if LONG else ci_examples, deadline=None,
                    derandomize=not LONG, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


class Ledger:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0))
        # figures beside the counts (load runs: peak RSS, disk, seconds), printed under the table
        self.figures: dict[str, dict[str, float | int | str]] = defaultdict(dict)
        self.attempts: dict[str, list[dict]] = defaultdict(list)

    def attempt(self, area: str, name: str, contained: bool, reason: str) -> None:
        """One hostile attempt: contained (with the reason the sandbox gave) or an escape."""
        self.add(area, tried=1, faults=1, escapes=int(not contained))
        self.attempts[area].append({"attempt": name, "contained": contained, "reason": reason[:300]})

    def rows_contained(self) -> list[dict]:
        """`make chaos`'s rows: {area, tried, contained, escaped} (+ records lost and each attempt's reason)."""
        return [{"area": area, "tried": vals["inputs tried"], "contained": vals["inputs tried"] - vals["escapes"],
                 "escaped": vals["escapes"], "records_lost": vals["records lost"],
                 "attempts": self.attempts.get(area, [])} for area, vals in sorted(self.rows.items())]

    def figure(self, area: str, **values: float | int | str) -> None:
        self.figures[area].update(values)

    def add(self, area: str, tried: int = 0, faults: int = 0, lost: int = 0, escapes: int = 0) -> None:
        row = self.rows[area]
        for col, n in zip(COLUMNS, (tried, faults, lost, escapes), strict=True):
            row[col] += n

    def table(self) -> str:
        width = max([len("area"), *map(len, self.rows)])
        head = f"{'area':<{width}} | " + " | ".join(COLUMNS)
        lines = [head, "-" * len(head)]
        for area in sorted(self.rows):
            vals = self.rows[area]
            lines.append(f"{area:<{width}} | " + " | ".join(f"{vals[c]:>{len(c)}}" for c in COLUMNS))
        for area in sorted(self.figures):
            lines.append(f"{area}: " + ", ".join(f"{k} {v}" for k, v in self.figures[area].items()))
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = ["| area | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
        for area in sorted(self.rows):
            lines.append(f"| {area} | " + " | ".join(str(self.rows[area][c]) for c in COLUMNS) + " |")
        lines += [""] + [f"- {area}: " + ", ".join(f"{k} {v}" for k, v in self.figures[area].items())
                         for area in sorted(self.figures)] if self.figures else []
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"long": LONG, "rows": self.rows_contained(),
                                    "areas": dict(sorted(self.rows.items())),
                                    "figures": dict(sorted(self.figures.items()))}, indent=1) + "\n")


LEDGER = Ledger()
