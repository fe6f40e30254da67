"""Fuzzing Harbor ``task.toml`` parsing and the Terminal-Bench ``task.yaml`` converter with real
task files (the shared Terminal-Bench seeds, and their Harbor conversions) mutated: fields replaced by arbitrary values,
deleted, lines cut or garbled. A task is untrusted input (LLM-written, downloaded): it loads, or
it is refused with a TaskFormatError naming the problem — never another exception."""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from core.cache import cache_dir
from tests.reliability.ledger import LEDGER, fuzz_settings
from tests.reliability.strategies import JSON, TEXT, mutated

terminal = pytest.importorskip("swe_envs.terminal.task")
convert = pytest.importorskip("swe_envs.terminal.convert")

ROOT = Path(__file__).resolve().parents[2]


def _seed_tasks() -> tuple[list[str], list[Path]]:
    """The shared Terminal-Bench seeds (extracted once into the cache's terminal-seeds/) and the Harbor
    task.toml of the first 20, converted by our converter into a scratch dir."""
    from tests.swe_envs.terminal.conftest import SEEDS, extract_seeds

    if not any(SEEDS.glob("*.tgz")):
        return [], []
    tb = sorted(p.parent for p in extract_seeds(SEEDS, cache_dir() / "terminal-seeds").rglob("task.yaml"))
    harbor = Path(tempfile.mkdtemp(prefix="harbor-seeds-"))
    tomls = []
    for src in tb[:20]:
        tomls.append((convert.convert_task(src, harbor / src.name) / "task.toml").read_text())
    shutil.rmtree(harbor)
    return tomls, tb[:10]


TOMLS, TB_TASKS = _seed_tasks()
if not TOMLS or not TB_TASKS:
    pytest.skip("the shared Terminal-Bench seed archives are absent (set TERMINAL_SEEDS)", allow_module_level=True)


def _garble(text: str, draw) -> str:
    lines = text.splitlines(keepends=True)
    at = draw(st.integers(min_value=0, max_value=max(0, len(lines) - 1)))
    op = draw(st.sampled_from(["cut", "insert", "replace"]))
    if op == "cut":
        return "".join(lines[:at])
    if op == "insert":
        lines.insert(at, draw(TEXT) + "\n")
    elif lines:
        lines[at] = draw(TEXT) + "\n"
    return "".join(lines)


@st.composite
def task_toml(draw) -> str:
    text = draw(st.sampled_from(TOMLS))
    if draw(st.booleans()):
        return _garble(text, draw)
    import tomli_w

    value, _ = draw(mutated([tomllib.loads(text)]))
    try:
        return tomli_w.dumps(_drop_none(value))
    except (TypeError, ValueError):  # not representable in TOML (e.g. mixed arrays): garble instead
        return _garble(text, draw)


def _drop_none(v):
    if isinstance(v, dict):
        return {str(k): _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v if x is not None]
    return v


@pytest.mark.area("Harbor task.toml/task.yaml")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=40)
@given(text=task_toml())
def test_task_toml_loads_or_is_refused_with_a_reason(text):
    try:
        cfg = terminal.parse_task_toml(text)
    except terminal.TaskFormatError as err:
        assert str(err).strip()
        LEDGER.add("Harbor task.toml/task.yaml", tried=1, faults=1)
        return
    written = cfg.to_toml()  # what we accept, we can write back and read again (as text: NaN != NaN)
    assert terminal.parse_task_toml(written).to_toml() == written
    LEDGER.add("Harbor task.toml/task.yaml", tried=1)


@st.composite
def task_yaml(draw) -> tuple[Path, str]:
    src = draw(st.sampled_from(TB_TASKS))
    text = (src / "task.yaml").read_text()
    if draw(st.booleans()):
        return src, _garble(text, draw)
    value, _ = draw(mutated([yaml.safe_load(text)]))
    if draw(st.booleans()):
        value = draw(JSON)
    return src, yaml.safe_dump(value, allow_unicode=False)


@pytest.mark.area("Harbor task.toml/task.yaml")
@pytest.mark.timeout(300)
@fuzz_settings(ci_examples=25, long_examples=200)
@given(task=task_yaml())
def test_task_yaml_converts_or_is_refused_with_a_reason(task):
    src, text = task
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(src, copy, symlinks=True)
        (copy / "task.yaml").write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            out = convert.convert_task(copy, Path(tmp) / "out")
        except terminal.TaskFormatError as err:
            assert str(err).strip()
            LEDGER.add("Harbor task.toml/task.yaml", tried=1, faults=1)
            return
        terminal.load_task(out)
    LEDGER.add("Harbor task.toml/task.yaml", tried=1)


def test_task_yaml_with_an_escaped_lone_surrogate_is_refused(tmp_path):
    """Found by the long fuzz run: YAML's "\\uD800" escape made the converter crash writing task.toml."""
    src = tmp_path / "src"
    shutil.copytree(TB_TASKS[0], src, symlinks=True)
    meta = yaml.safe_load((src / "task.yaml").read_text())
    meta["author_name"] = {"\ud800": False}
    (src / "task.yaml").write_text(yaml.safe_dump(meta, allow_unicode=False))
    with pytest.raises(terminal.TaskFormatError, match="lone surrogate"):
        convert.convert_task(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
