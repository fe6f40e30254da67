"""Small real work for the engine tests, needing no Docker: a fan-out ``Work`` that writes files and
rows (with an item that breaks and one that hangs), a row function, a corpus pass that says which
implementation ran. A module of its own so that Spark executors can unpickle it by value."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb


class Echo:
    """Writes ``items/<item>.txt`` under its workdir and emits a row naming that file; ``boom`` raises
    inside ``run``, ``slow`` sleeps (to be interrupted)."""

    def __init__(self):
        self.stopped = 0

    def connect(self):
        return "engine"

    def start(self, conn, workdir: Path, emit):
        return {"dir": workdir, "conn": conn}

    def run(self, st, item: str, emit) -> None:
        if item == "boom":
            raise RuntimeError("boom went the item")
        if item == "slow":
            time.sleep(60)
        path = st["dir"] / "items" / f"{item}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{item} via {st['conn']} at {path}\n")
        emit("log", f"did {item}")
        emit("row", {"item": item, "file": str(path), "nested": {"paths": [str(path)]}})

    def stop(self, st) -> None:
        self.stopped += 1

    def failed(self, item: str, reason: str):
        return [("row", {"item": item, "error": reason})]


def collect(engine, work, items, out: Path) -> tuple[dict, list[str]]:
    rows, logs = {}, []

    def on_event(kind, value):
        if kind == "log":
            logs.append(value)
        else:
            rows[value["item"]] = value

    engine.connect(work)
    engine.fan_out(work, items, out, on_event)
    return rows, sorted(logs)


def squares(rows, offset: int):
    """A row function: one output row per input row, plus a marker row per odd input; says where it ran."""
    for r in rows:
        yield {"n": r["n"], "square": r["n"] ** 2 + offset, "pid": os.getpid()}
        if r["n"] % 2:
            yield {"n": r["n"], "square": None, "pid": os.getpid()}


class RowCount:
    """A corpus pass whose two implementations say which one ran."""

    def local(self, documents_dir: str):
        n = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{documents_dir}/*.parquet')").fetchone()[0]
        return "local", n

    def spark(self, df):
        return "spark", df.count()
