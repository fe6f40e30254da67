"""Config loading: YAML -> pydantic, strict.

Every job's configuration is a pydantic model built from YAML and passed in explicitly
(no globals). Unknown keys are an error naming the key: a typo in a config must never
silently fall back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are rejected, values validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


def _format_loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def format_validation_error(err: ValidationError, source: str) -> str:
    """One line per problem, each naming the dotted key, e.g. ``pack.seqlen: unknown key``."""
    lines = []
    for e in err.errors():
        loc = _format_loc(e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key '{loc}'")
        elif e["type"] == "missing":
            lines.append(f"{source}: missing required key '{loc}'")
        else:
            lines.append(f"{source}: {loc}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def validate_config(model: type[M], data: dict[str, Any] | None, source: str = "<config>") -> M:
    """Build ``model`` from a plain dict, raising ConfigError with every bad key named."""
    try:
        return model.model_validate(data or {})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source)) from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping, got {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML) onto a nested dict copy."""
    import copy

    out = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override must look like key.path=value, got {item!r}")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {key!r}: '{part}' is not a mapping")
            node = nxt
        node[parts[-1]] = yaml.safe_load(raw)
    return out


def load_config(model: type[M], path: str | Path, overrides: list[str] | None = None) -> M:
    """Load a YAML file into ``model``; ``overrides`` are ``dotted.key=value`` strings."""
    data = load_yaml(path)
    if overrides:
        data = apply_overrides(data, overrides)
    return validate_config(model, data, source=str(path))
