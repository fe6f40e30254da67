"""What more than one language's rules share: a missing module named in the log, installed as the
Debian package that ships it."""

from __future__ import annotations

import re
from collections.abc import Callable


def apt_missing(rx: re.Pattern, pattern: str) -> Callable[[list[str], str], tuple[list[str], str] | None]:
    def rule(recipe: list[str], log: str) -> tuple[list[str], str] | None:
        names = sorted({m.lower().replace("_", "-").lstrip("@").replace("/", "-") for m in rx.findall(log)})
        pkgs = [pattern.format(n) for n in names if not any(pattern.format(n) in line for line in recipe)]
        if not pkgs:
            return None
        return recipe + [f"apt-get install -y --no-install-recommends {' '.join(pkgs)}"], "missing module"
    return rule
