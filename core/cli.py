"""What every command line of the toolkit shares: user errors end in one line and exit 2,
configs come from YAML plus ``--set`` overrides (or from overrides alone), ``__main__`` blocks
of modules that are also imported run their app the same way."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TypeVar

import typer
from pydantic import BaseModel

from core.config import apply_overrides, load_config, validate_config
from core.errors import UserError

M = TypeVar("M", bound=BaseModel)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def user_errors(fn: Callable | None = None, *, sigterm_unwinds: bool = False) -> Callable:
    """Decorate a typer command: a ``UserError`` prints ``error: ...`` on stderr and exits 2.

    ``sigterm_unwinds``: SIGTERM raises KeyboardInterrupt like Ctrl-C, so ``finally`` blocks
    (removing containers, temp files) run when a scheduler kills the command."""

    def decorate(f: Callable) -> Callable:
        @wraps(f)
        def wrapper(*args, **kwargs):
            if sigterm_unwinds:
                signal.signal(signal.SIGTERM, _raise_interrupt)
            try:
                return f(*args, **kwargs)
            except UserError as err:
                typer.echo(f"error: {err}", err=True)
                raise typer.Exit(2) from None

        return wrapper

    return decorate(fn) if fn is not None else decorate


def load_cli_config(model: type[M], config: Path | None, overrides: list[str] | None) -> M:
    """The YAML at ``config`` with ``--set`` overrides, or the model's defaults plus overrides."""
    if config is not None:
        return load_config(model, config, overrides)
    return validate_config(model, apply_overrides({}, overrides or []), source="--set")


def run_app(app: Callable[[], None]) -> None:
    """Run a typer app (or any callable) from a ``__main__`` block with the same error contract."""
    try:
        app()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


class StepTimer:
    """``with timer("name"):`` logs the step's start and end and records its seconds in
    ``timer.seconds`` (in order), for a job's progress lines and its summary."""

    def __init__(self, log: Callable[[str], None] = print):
        self.log = log
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.log(f"── {name} ──")
        t0 = time.monotonic()
        yield
        self.seconds[name] = time.monotonic() - t0
        self.log(f"   {name}: {self.seconds[name]:.1f}s")
