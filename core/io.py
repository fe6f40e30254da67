"""JSON Lines in and out: one rule for every command.

Reading: a missing file, an invalid line or a line that is not an object is one ``InputError``
naming the file and line number (the CLI prints it as one line); blank lines are skipped.
``iter_jsonl`` streams (corpora, event dumps), ``read_jsonl`` loads a small file whole.
Writing: ``write_jsonl_atomic`` writes beside the target and renames, so a reader (or a
resumed job) never sees half a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from core.errors import InputError


def iter_jsonl(path: str | Path, what: str) -> Iterator[dict]:
    """Every object in ``path`` in order, one at a time; ``what`` names the file in errors."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file not found: {path}")
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
            yield row


def read_jsonl(path: str | Path, what: str) -> list[dict]:
    """Every object in ``path`` in order; ``what`` names the file in errors ("tasks", "samples")."""
    return list(iter_jsonl(path, what))


def write_jsonl_atomic(path: str | Path, rows: Iterable[dict]) -> int:
    """Write ``rows`` as JSON Lines to ``path`` through a temporary file and a rename; returns
    the number of rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
