"""Hypothesis strategies for hostile inputs: text with lone surrogates and control characters,
arbitrary JSON values, bytes that are not UTF-8, nesting deep enough to overflow a recursive
parser, and mutations of real samples (a real input with one field replaced or cut short)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

# characters crawled data really carries: lone surrogates (JSON-escaped), NUL, BOM, line/para
# separators (str.splitlines breaks on them, a byte reader does not), RTL marks, replacement char
ODD_CHARS = ["\udcff", "\ud800", "\udfff", "\x00", "\ufeff", "\u2028", "\u2029", "\x85", "\u202e", "\ufffd", "\r"]
TEXT = st.text(st.characters() | st.sampled_from(ODD_CHARS), max_size=300)
SHORT = st.text(st.characters() | st.sampled_from(ODD_CHARS), max_size=12)
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | TEXT)
JSON = st.recursive(SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(SHORT, c, max_size=4),
                    max_leaves=12)
# bytes that are not UTF-8 (latin-1 high bytes, truncated multibyte sequences, NUL)
RAW = st.binary(max_size=400)
DEEP = st.integers(min_value=2_000, max_value=50_000).map(lambda n: "[" * n + "]" * n)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a JSON-like value (dict keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):
            out += paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw, samples: list[Any], max_mutations: int = 3) -> tuple[Any, int]:
    """A real sample with 1..N fields replaced by arbitrary JSON or deleted; returns (value, n)."""
    value = copy.deepcopy(draw(st.sampled_from(samples)))
    n = draw(st.integers(min_value=1, max_value=max_mutations))
    for _ in range(n):
        options = paths(value)
        if not options:
            break
        path = draw(st.sampled_from(options))
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON)
    return value, n


def cut(data: bytes, draw) -> bytes:
    """The same bytes cut short at an arbitrary point (a truncated download or write)."""
    if not data:
        return data
    return data[: draw(st.integers(min_value=0, max_value=len(data) - 1))]
