"""Era-correct toolchains: which interpreter/compiler version a repo-version gets, and why.

SWE-bench pins an interpreter per repo-version because 2015 code does not import on a 2024
Python (``from collections import Mapping``). The choice here comes from evidence in the
repository and the task: the date (instances' ``created_at``, else the commit date), declared
minimums (``python_requires``, ``go.mod``'s ``go``, Cargo's ``rust-version``/edition, npm
``engines``, Maven's release), declared versions (trove classifiers, tox envlist, CI workflow
matrices). Among the configured versions (``toolchains.<lang>.versions``): those meeting the
minimum, not above the newest declared one, released by the date; the newest of those wins.
A log naming a removed stdlib module/attribute sends Python one version back (``older``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime

from swe_envs.git import commit_date as git_commit_date
from swe_envs.offline.maven import declared_java
from swe_envs.repos import Snapshot

# first release of each toolchain version Debian's suites ship (bullseye / bookworm / trixie)
RELEASED = {
    "python": {"3.9": "2020-10-05", "3.11": "2022-10-24", "3.13": "2024-10-07"},
    "go": {"1.15": "2020-08-11", "1.19": "2022-08-02", "1.24": "2025-02-11"},
    "rust": {"1.48": "2020-11-19", "1.63": "2022-08-11", "1.85": "2025-02-20"},
    "javascript": {"12": "2019-04-23", "18": "2022-04-19", "20": "2023-04-18"},
    "java": {"11": "2018-09-25", "17": "2021-09-14", "21": "2023-09-19"},
}
# what a newer Python removed: a build/collect log naming one of these wants an older interpreter
REMOVED_STDLIB = re.compile(
    r"cannot import name '(Mapping|MutableMapping|Sequence|Iterable|Callable|OrderedDict|Set|Hashable)' from "
    r"'collections'|No module named '(imp|distutils|asynchat|asyncore|smtpd|cgi|cgitb|crypt|telnetlib|nntplib|"
    r"pipes|audioop|imghdr|sndhdr|uu|xdrlib|msilib|chunk|mailcap|nis|ossaudiodev|spwd|sunau|lib2to3)'|"
    r"has no attribute '(getargspec|formatargspec|coroutine|SafeConfigParser|readfp|wrap_socket|assertEquals|"
    r"assertNotEquals|assertRegexpMatches|assertItemsEqual|_TemporaryFileWrapper|getchildren|getiterator)'|"
    r"module 'pkgutil' has no attribute 'ImpImporter'")


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3]) or (0,)


@dataclass
class Choice:
    language: str
    version: str | None  # None: the language has no version choice (base_image only)
    base_image: str
    era_date: str | None
    evidence: dict = field(default_factory=dict)

    def record(self) -> dict:
        return asdict(self)


def _date(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).date()
    except ValueError:
        m = re.match(r"(\d{4})-(\d{2})-(\d{2})", str(text))
        return date(int(m[1]), int(m[2]), int(m[3])) if m else None


def commit_date(snap: Snapshot) -> str | None:
    return git_commit_date(snap.path, snap.commit)


def era_date(snap: Snapshot, created_at: list[str]) -> tuple[str | None, str]:
    """The repo-version's date: the newest instance ``created_at``, else the commit date."""
    dates = sorted(d for d in (_date(c) for c in created_at) if d)
    if dates:
        return dates[-1].isoformat(), "created_at"
    d = _date(commit_date(snap))
    return (d.isoformat(), "commit date") if d else (None, "unknown")


# -- evidence per language ------------------------------------------------------------------------
def _python_evidence(snap: Snapshot) -> dict:
    texts = {n: snap.read(n) or "" for n in ("setup.py", "setup.cfg", "pyproject.toml", "tox.ini")}
    ev: dict = {}
    m = re.search(r"""python_requires\s*[=:]\s*['"]?([^'"\n]+)""", texts["setup.py"] + "\n" + texts["setup.cfg"])
    m = m or re.search(r"""requires-python\s*=\s*['"]([^'"]+)""", texts["pyproject.toml"])
    if m:
        ev["python_requires"] = m.group(1).strip()
        lows = [g for op, g in re.findall(r"(>=|>|~=|==)\s*(\d+\.\d+)", m.group(1))]
        if lows:
            ev["min"] = max(lows, key=vkey)
    declared = set(re.findall(r"Programming Language :: Python :: (3\.\d+)", "\n".join(texts.values())))
    if declared:
        ev["classifiers"] = sorted(declared, key=vkey)
    tox = re.search(r"envlist\s*=\s*(.+(?:\n[ \t]+.+)*)", texts["tox.ini"])
    if tox:
        envs = {f"{a}.{b}" for a, b in re.findall(r"py(3)(\d{1,2})\b", tox.group(1))}
        if envs:
            ev["tox"] = sorted(envs, key=vkey)
    ci = set()
    for f in snap.files:
        if f.startswith(".github/workflows/") or f in (".travis.yml", "azure-pipelines.yml", ".circleci/config.yml"):
            text = snap.read(f, limit=50_000) or ""
            ci |= set(re.findall(r"""(?:python(?:-version)?\s*:\s*\[?\s*|-\s*['"]?|py)['"]?(3\.\d{1,2})\b""", text))
    if ci:
        ev["ci"] = sorted(ci, key=vkey)
    seen = ev.get("classifiers", []) + ev.get("tox", []) + ev.get("ci", [])
    if seen:
        ev["max"] = max(seen, key=vkey)
    return ev


def _go_evidence(snap: Snapshot) -> dict:
    m = re.search(r"^go (\d+\.\d+)", snap.read("go.mod") or "", re.M)
    return {"go.mod": m.group(1), "min": m.group(1)} if m else {}


def _rust_evidence(snap: Snapshot) -> dict:
    text = snap.read("Cargo.toml") or ""
    if m := re.search(r"""rust-version\s*=\s*['"](\d+\.\d+)""", text):
        return {"rust-version": m.group(1), "min": m.group(1)}
    if m := re.search(r"""edition\s*=\s*['"](\d{4})""", text):
        return {"edition": m.group(1), "min": {"2015": "1.0", "2018": "1.31", "2021": "1.56", "2024": "1.85"}[m.group(1)]
                if m.group(1) in ("2015", "2018", "2021", "2024") else "1.0"}
    return {}


def _node_evidence(snap: Snapshot) -> dict:
    import json

    try:
        pkg = json.loads(snap.read("package.json") or "{}")
    except json.JSONDecodeError:
        return {}
    engines = (pkg.get("engines") or {}).get("node") if isinstance(pkg, dict) else None
    if isinstance(engines, str) and (m := re.search(r">=?\s*v?(\d+)", engines)):
        return {"engines.node": engines, "min": m.group(1)}
    return {}


def _java_evidence(snap: Snapshot) -> dict:
    level = declared_java(snap)
    return {"java": level, "min": level} if level else {}


_EVIDENCE = {"python": _python_evidence, "go": _go_evidence, "rust": _rust_evidence,
             "javascript": _node_evidence, "java": _java_evidence}
# languages whose version follows the date even without a declared minimum (interpreted code
# breaks on newer versions; compilers stay backward compatible, so they keep the default)
_BY_DATE = {"python"}


def choose(language: str, snap: Snapshot, versions: dict[str, str], default_image: str,
           created_at: list[str] | None = None, exclude: set[str] | None = None) -> Choice:
    """The toolchain version for this repo-version, with the evidence that chose it."""
    when, source = era_date(snap, created_at or [])
    if not versions:
        return Choice(language, None, default_image, when, {"date_source": source})
    ev = _EVIDENCE.get(language, lambda s: {})(snap)
    ev["date_source"] = source
    avail = sorted((v for v in versions if v not in (exclude or set())), key=vkey)
    if exclude:
        ev["excluded"] = sorted(exclude, key=vkey)
    if not avail:
        avail = sorted(versions, key=vkey)
    default = next((v for v, img in versions.items() if img == default_image), None)
    cands = [v for v in avail if "min" not in ev or vkey(v) >= vkey(ev["min"])]
    if "max" in ev:
        # declared support is a lower bound of what works, not an upper one: allow one step
        # past it only when nothing declared is available
        within = [v for v in cands if vkey(v) <= vkey(ev["max"])]
        cands = within or cands[:1]
    released = RELEASED.get(language, {})
    d = _date(when)
    if d and (language in _BY_DATE or "min" in ev):
        dated = [v for v in cands if v not in released or _date(released[v]) <= d]
        cands = dated or cands[:1]  # older than every version: the oldest available
    if not cands:  # a minimum above every version: the newest, and the build will say
        cands = avail[-1:]
    if language in _BY_DATE or "min" in ev or default not in cands:
        version = cands[-1]
    else:
        version = default
    ev["candidates"] = cands
    return Choice(language, version, versions[version], when, ev)


def older_wanted(log: str) -> str | None:
    """The removed-stdlib name a log trips over (the next round tries an older interpreter)."""
    m = REMOVED_STDLIB.search(log)
    return m.group(0) if m else None
