"""Which repository files a source file imports, per language (regexes, no parsers).

Python (``import a.b`` / ``from .x import y``), JavaScript/TypeScript (relative ``import``,
``require``, ``export … from``), Go (import paths matched to package directories by their
longest existing suffix), Java/Kotlin/Scala (``import a.b.C``), C/C++ (``#include "x.h"`` and
the header/source sibling), Rust (``mod x;``, ``use crate::a::b``), Ruby (``require`` /
``require_relative``) and PHP (``use A\\B\\C``). Resolution is against the file list of the
base commit, by exact path or path suffix.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict

_PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.M)
_PY_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w \t,.*]+))", re.M)
_JS = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"](\.{1,2}/[^'"]+)['"]""")
_GO_BLOCK = re.compile(r"^\s*import\s*\((.*?)\)", re.M | re.S)
_GO_ONE = re.compile(r"^\s*import\s+(?:\w+\s+)?\"([^\"]+)\"", re.M)
_GO_PATH = re.compile(r"\"([^\"]+)\"")
_JVM = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+?)(?:\.\*)?\s*;?\s*$", re.M)
_INCLUDE = re.compile(r"^\s*#\s*include\s*\"([^\"]+)\"", re.M)
_RUST_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
_RUST_USE = re.compile(r"^\s*(?:pub\s+)?use\s+crate::([\w:]+)", re.M)
_RUBY = re.compile(r"^\s*require(_relative)?\s*\(?\s*['\"]([^'\"]+)['\"]", re.M)
_PHP = re.compile(r"^\s*use\s+([\w\\]+)", re.M)
_JS_EXT = ("", ".js", ".ts", ".jsx", ".tsx", ".mjs", ".cjs", ".vue", "/index.js", "/index.ts", "/index.tsx")


class FileIndex:
    def __init__(self, paths: list[str]):
        self.paths = set(paths)
        self.by_name: dict[str, list[str]] = defaultdict(list)
        self.by_dir: dict[str, list[str]] = defaultdict(list)
        for p in sorted(paths):
            self.by_name[p.rsplit("/", 1)[-1]].append(p)
            self.by_dir[posixpath.dirname(p)].append(p)

    def suffix(self, suffix: str) -> list[str]:
        """Paths equal to ``suffix`` or ending in ``/suffix``."""
        suffix = suffix.strip("/")
        name = suffix.rsplit("/", 1)[-1]
        return [p for p in self.by_name.get(name, ()) if p == suffix or p.endswith("/" + suffix)]

    def exact(self, path: str) -> list[str]:
        path = posixpath.normpath(path)
        return [path] if path in self.paths else []


def _python(path: str, text: str, idx: FileIndex) -> set[str]:
    out: set[str] = set()
    mods: list[str] = []
    for m in _PY_IMPORT.finditer(text):
        mods += [x.strip().split(" as ")[0] for x in m.group(1).split(",")]
    for m in _PY_FROM.finditer(text):
        listed = m.group(2) if m.group(2) is not None else m.group(3)
        mod, names = m.group(1), [n.strip().split(" as ")[0].strip() for n in listed.split(",") if n.strip()]
        if mod.startswith("."):
            dots = len(mod) - len(mod.lstrip("."))
            base = posixpath.dirname(path)
            for _ in range(dots - 1):
                base = posixpath.dirname(base)
            rel = mod.lstrip(".").replace(".", "/")
            stem = posixpath.join(base, rel) if rel else base
            for cand in [stem] + [posixpath.join(stem, n) for n in names if n != "*"]:
                out.update(idx.exact(cand + ".py") + idx.exact(cand + "/__init__.py"))
            continue
        mods.append(mod)
        mods += [f"{mod}.{n}" for n in names if n != "*"]
    for mod in mods:
        stem = mod.replace(".", "/")
        out.update(idx.suffix(stem + ".py") + idx.suffix(stem + "/__init__.py"))
    return out


def _js(path: str, text: str, idx: FileIndex) -> set[str]:
    out: set[str] = set()
    base = posixpath.dirname(path)
    for m in _JS.finditer(text):
        target = posixpath.normpath(posixpath.join(base, m.group(1)))
        for ext in _JS_EXT:
            out.update(idx.exact(target + ext))
    return out


def _go(text: str, idx: FileIndex) -> set[str]:
    imports = _GO_ONE.findall(text)
    for block in _GO_BLOCK.findall(text):
        imports += _GO_PATH.findall(block)
    out: set[str] = set()
    for imp in imports:
        parts = imp.split("/")
        for k in range(len(parts), 0, -1):
            suffix = "/".join(parts[-k:])
            dirs = [d for d in idx.by_dir if d == suffix or d.endswith("/" + suffix)]
            if dirs:
                for d in dirs:
                    out.update(p for p in idx.by_dir[d] if p.endswith(".go") and not p.endswith("_test.go"))
                break
    return out


def _rust(path: str, text: str, idx: FileIndex) -> set[str]:
    out: set[str] = set()
    base = posixpath.dirname(path)
    stem = posixpath.splitext(posixpath.basename(path))[0]
    mod_dir = base if stem in ("lib", "main", "mod") else posixpath.join(base, stem)
    for name in _RUST_MOD.findall(text):
        out.update(idx.exact(f"{mod_dir}/{name}.rs") + idx.exact(f"{mod_dir}/{name}/mod.rs"))
    for use in _RUST_USE.findall(text):
        parts = use.split("::")
        for k in range(len(parts), 0, -1):
            stem_path = "/".join(parts[:k])
            found = idx.suffix(f"src/{stem_path}.rs") + idx.suffix(f"src/{stem_path}/mod.rs")
            if found:
                out.update(found)
                break
    return out


def imported_paths(path: str, text: str, idx: FileIndex) -> set[str]:
    """Repository paths ``path`` imports (never itself)."""
    ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    out: set[str] = set()
    if ext in ("py", "pyi", "pyx"):
        out = _python(path, text, idx)
    elif ext in ("js", "jsx", "ts", "tsx", "mjs", "cjs", "vue", "svelte"):
        out = _js(path, text, idx)
    elif ext == "go":
        out = _go(text, idx)
    elif ext in ("java", "kt", "kts", "scala", "groovy"):
        for imp in _JVM.findall(text):
            stem = imp.replace(".", "/")
            for e in ("java", "kt", "scala", "groovy"):
                out.update(idx.suffix(f"{stem}.{e}"))
    elif ext in ("c", "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "m", "mm"):
        base = posixpath.dirname(path)
        for inc in _INCLUDE.findall(text):
            out.update(idx.exact(posixpath.join(base, inc)) or idx.suffix(inc))
        stem = posixpath.splitext(path)[0]
        for e in ("c", "h", "cc", "cpp", "hpp", "hh", "cxx", "m", "mm"):
            out.update(idx.exact(f"{stem}.{e}"))
    elif ext == "rs":
        out = _rust(path, text, idx)
    elif ext == "rb":
        base = posixpath.dirname(path)
        for relative, target in _RUBY.findall(text):
            target = target if target.endswith(".rb") else target + ".rb"
            out.update(idx.exact(posixpath.join(base, target)) if relative else idx.suffix(target))
    elif ext == "php":
        for use in _PHP.findall(text):
            parts = use.split("\\")
            for k in range(len(parts), 0, -1):
                found = idx.suffix("/".join(parts[-k:]) + ".php")
                if found:
                    out.update(found)
                    break
    out.discard(path)
    return out
