"""``python -m samples.swe_mine [DATA_DIR]``: build the swe-mine sample (see the package docstring)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import UserError
from samples.swe_mine.build import build_sample


def main(argv: list[str] | None = None) -> int:
    import samples.swe_mine as package

    ap = argparse.ArgumentParser(
        prog="python -m samples.swe_mine",
        description=package.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("data_dir", nargs="?", default="data", type=Path, help="data directory (default: data)")
    args = ap.parse_args(argv)
    try:
        paths = build_sample(args.data_dir)
    except (UserError, OSError) as err:  # bad input or an unwritable data dir: one line, no trace
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, p in paths.items():
        print(f"{name}: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
