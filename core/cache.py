"""Where the project keeps what it fetches or builds once: sample data, models, LLM answers.

The one rule: ``$GLM5_RECIPE_CACHE`` if set, else ``${XDG_CACHE_HOME:-~/.cache}/glm5-recipe``
— a user cache, as pip and Hugging Face keep theirs, so a job finds its samples and models with
its defaults from any working directory (a ``./data`` of the working directory did not: a job
started elsewhere failed on its first default path). Paths are resolved where this runs (the
driver); Spark executors get the files they need shipped, not this path.

``python -m core.cache`` prints the directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ENV = "GLM5_RECIPE_CACHE"
NAME = "glm5-recipe"
RULE = f"${ENV}, else ${{XDG_CACHE_HOME:-~/.cache}}/{NAME}"


def cache_dir(override: str | Path | None = None) -> Path:
    """``override`` when given (a caller's explicit choice), else the user cache (the rule above)."""
    if override:
        return Path(override).expanduser()
    if value := os.environ.get(ENV):
        # absolute now: a relative value means the directory it named where the job started
        return Path(value).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / NAME


def cache_field(*parts: str) -> Any:
    """A config field whose default is ``cache_dir()/parts`` as a string, computed when the config
    is built (so the environment at that moment decides, and the dumped config names the path)."""
    from pydantic import Field  # here: `python -m core.cache` runs on a bare interpreter (make distclean)

    return Field(default_factory=lambda: str(cache_dir().joinpath(*parts)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(f"usage: python -m core.cache\n\nPrints the cache directory: {RULE}.",
              file=sys.stdout if args[0] in ("-h", "--help") else sys.stderr)
        return 0 if args[0] in ("-h", "--help") else 2
    print(cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
