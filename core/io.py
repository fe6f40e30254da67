"""Reading JSON Lines files that a user hands to a command: one rule for every CLI.

A missing file, an invalid line or a line that is not an object is one ``InputError`` naming the
file and line number (the CLI prints it as one line); blank lines are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import InputError


def read_jsonl(path: str | Path, what: str) -> list[dict]:
    """Every object in ``path`` in order; ``what`` names the file in errors ("tasks", "samples")."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file not found: {path}")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}:{n}: invalid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            rows.append(row)
    return rows
