"""Tiny real repositories, one per language, each with one bug fixed by a commit.

Base commit: the code (``add`` right, ``sub`` wrong) and one passing test. The "PR" commit
adds a test for ``sub`` (test patch) and fixes ``sub`` (code patch). Validation must find
exactly FAIL_TO_PASS = [the sub test] and PASS_TO_PASS = [the add test]. No third-party
dependency anywhere: the Debian toolchain images run them without network.

The sources are files under ``calc/<language>/``: ``base/`` (every file at the base commit),
``test_patch/`` and ``gold_patch/`` (whole files after the PR), and ``repo.yaml`` with the
expected test lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.config import StrictModel, load_config
from core.errors import InputError
from samples.swe_mine.gitrepo import git

SOURCES = Path(__file__).resolve().parent / "calc"


@dataclass
class LangRepo:
    language: str
    base: dict[str, str]  # path -> content at the base commit
    tests: dict[str, str]  # test files after the PR (the test patch)
    fix: dict[str, str]  # code files after the PR (the gold patch)
    f2p: list[str]
    p2p: list[str]


class Expected(StrictModel):
    fail_to_pass: list[str]
    pass_to_pass: list[str]


def _files(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        raise InputError(f"sample repository folder not found: {folder}")
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def load(language: str, sources: Path = SOURCES) -> LangRepo:
    """The sample repository of ``language`` from ``sources/<language>/``."""
    d = sources / language
    expected = load_config(Expected, d / "repo.yaml")
    return LangRepo(
        language,
        _files(d / "base"),
        _files(d / "test_patch"),
        _files(d / "gold_patch"),
        expected.fail_to_pass,
        expected.pass_to_pass,
    )


PY, JS, JAVA, GO, RUST, C, CPP, PHP, RUBY = (
    load(lang) for lang in ("python", "javascript", "java", "go", "rust", "c", "cpp", "php", "ruby")
)
ALL = {r.language: r for r in (PY, JS, JAVA, GO, RUST, C, CPP, PHP, RUBY)}


def _git(repo: Path, *args: str, date: str = "2024-01-01T00:00:00Z") -> str:
    return git(repo, *args, when=date, author="t")


def _write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)


def make_repo(root: Path, spec: LangRepo, name: str | None = None) -> dict:
    """Create ``root/tests/<name>`` with the two commits; return the SWE-bench instance."""
    name = name or f"calc-{spec.language}"
    repo = root / "tests" / name
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, spec.base)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "calc with add and sub")
    base = _git(repo, "rev-parse", "HEAD").strip()
    _write(repo, spec.tests)
    _write(repo, spec.fix)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "Fix sub (closes #1)", date="2024-01-02T00:00:00Z")
    head = _git(repo, "rev-parse", "HEAD").strip()
    test_patch = _git(repo, "diff", base, head, "--", *spec.tests)
    patch = _git(repo, "diff", base, head, "--", *spec.fix)
    return {
        "instance_id": f"tests__{name}-1", "repo": f"tests/{name}", "base_commit": base,
        "problem_statement": "sub() adds instead of subtracting", "hints_text": "", "patch": patch,
        "test_patch": test_patch, "created_at": "2024-01-02T00:00:00Z", "version": "",
        "environment_setup_commit": base, "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
    }
