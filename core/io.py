"""JSON Lines in and out: one rule for every command.

Reading: a missing file, an invalid line or a line that is not an object is one ``InputError``
naming the file and line number (the CLI prints it as one line); blank lines are skipped.
``iter_jsonl`` streams (corpora, event dumps), ``numbered_jsonl`` also gives each object's line
number (for a caller's own field checks), ``read_jsonl`` loads a small file whole.
Writing: ``atomic_write_text`` and ``write_jsonl_atomic`` write beside the target and rename,
so a reader (or a resumed job) sees the old file or the new one, never half a file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError


def parsed_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any, json.JSONDecodeError | None]]:
    """(line number, value, None) or (line number, None, the decode error) for every non-blank
    line: the one JSONL loop. Readers that must keep going turn an error into a counted failure
    row; the strict readers below raise it."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line), None
        except json.JSONDecodeError as err:
            yield n, None, err


def numbered_jsonl(path: str | Path, what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every object in ``path`` in order, one at a time; ``what`` names
    the file in errors. The line number lets a caller that checks fields say where one is wrong."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        for n, row, err in parsed_lines(fh):
            if err is not None:
                raise InputError(f"{path}:{n}: invalid JSON ({err.msg})")
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            yield n, row


def iter_jsonl(path: str | Path, what: str) -> Iterator[dict]:
    """Every object in ``path`` in order, one at a time; ``what`` names the file in errors."""
    for _, row in numbered_jsonl(path, what):
        yield row


def read_jsonl(path: str | Path, what: str) -> list[dict]:
    """Every object in ``path`` in order; ``what`` names the file in errors ("tasks", "samples")."""
    return list(iter_jsonl(path, what))


def _temporary(path: Path) -> Path:
    """A temp name beside ``path`` carrying process and thread, so concurrent writers never
    share one (the rename is atomic only within one filesystem, hence beside the target)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temp name, then rename it to ``path``."""
    tmp = _temporary(path)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl_atomic(path: str | Path, rows: Iterable[dict]) -> int:
    """Write ``rows`` as JSON Lines to ``path`` through a temporary file and a rename; returns
    the number of rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
