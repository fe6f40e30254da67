"""Finding task dirs under a path: Harbor tasks (task.toml) and old Terminal-Bench ones (task.yaml)."""

from __future__ import annotations

from pathlib import Path

from core.errors import UserError


def find_tasks(root: Path, allow_old: bool = True) -> list[Path]:
    """The task dirs at or under ``root`` (sorted); a task dir's own subdirs are not searched."""
    root = Path(root)
    if not root.exists():
        raise UserError(f"tasks path not found: {root}")
    names = ("task.toml", "task.yaml") if allow_old else ("task.toml",)
    if any((root / n).is_file() for n in names):
        return [root]
    found: list[Path] = []
    stack = [root]
    while stack:
        d = stack.pop()
        for child in sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if any((child / n).is_file() for n in names):
                found.append(child)
            else:
                stack.append(child)
    if not found:
        raise UserError(f"no task dirs (with {' or '.join(names)}) under {root}")
    return sorted(found)
