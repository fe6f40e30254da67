"""The post-training SFT data builder on real inputs: the Python FAQ pages of Debian's
python3.11-doc (from the cache, as the sample corpus uses them) and Terminal-Bench-layout seed
archives (a small one made here; the real ones in ../shared/terminal-seeds when present)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from core.cache import cache_dir
from core.cached_samples import CORPUS_HTML
from samples.corpus import fetch_package
from samples.post_train import SHARED_SEEDS as SEEDS
from samples.post_train import build_post_train, faq_pairs, reasoning_records, seed_records
from training.chat_template import conversation_of, normalize, render


@pytest.fixture(scope="module")
def faq_dir() -> Path:
    fetch_package("python3.11-doc", cache_dir(), log=lambda m: None)
    return cache_dir() / CORPUS_HTML / "faq"


def test_faq_questions_and_answers_come_from_the_real_pages(faq_dir):
    pairs = faq_pairs((faq_dir / "programming.html").read_bytes(), max_answer_chars=700)
    questions = [q for q, _ in pairs]
    assert len(pairs) > 50 and all(q.endswith("?") and "\u00b6" not in q for q in questions)
    answer = dict(pairs)["How do I create a .pyc file?"]
    assert answer.startswith("When a module is imported for the first time") and len(answer) <= 700
    longer = dict(faq_pairs((faq_dir / "programming.html").read_bytes(), max_answer_chars=1500))
    assert longer["How do I create a .pyc file?"].startswith(answer + "\n\nOne reason")  # cut at a paragraph boundary
    # a nested question is its own pair, never part of its parent section's answer
    assert not any("Why am I getting an UnboundLocalError" in a for a in dict(pairs).values())


def test_first_paragraph_is_kept_whole_even_when_long(faq_dir):
    pairs = faq_pairs((faq_dir / "programming.html").read_bytes(), max_answer_chars=10)
    assert all("\n\n" not in a for _, a in pairs) and sum(len(a) > 10 for _, a in pairs) > 40


def _seed_tgz(path: Path, tasks: dict[str, dict[str, str]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for task, files in tasks.items():
            for name, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(f"seeds/{task}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_seed_tasks_become_one_bash_tool_call_and_bad_tasks_are_counted(tmp_path):
    _seed_tgz(tmp_path / "a.tgz", {
        "ok": {"task.yaml": "instruction: |\n  Write hello.txt\n", "solution.sh": "echo hi > hello.txt\n"},
        "no_solution": {"task.yaml": "instruction: x\n"},
        "empty": {"task.yaml": "difficulty: easy\n", "solution.sh": "true\n"},
        "broken_yaml": {"task.yaml": "instruction: [\n", "solution.sh": "true\n"},
    })
    rejects: dict[str, int] = {}
    rows = seed_records(tmp_path, rejects)
    assert len(rows) == 1 and rows[0]["source"] == "a.tgz:seeds/ok"
    msgs, tools = conversation_of(rows[0])
    call = normalize(msgs)[1]["tool_calls"][0]["function"]
    assert msgs[0]["content"] == "Write hello.txt" and call["name"] == "bash"
    assert json.loads(call["arguments"]) == {"command": "echo hi > hello.txt\n"} and tools[0]["function"]["name"] == "bash"
    assert sorted(k.split(":", 1)[1].split(":")[0] for k in rejects) == ["seeds/broken_yaml", "seeds/empty", "seeds/no_solution"]


@pytest.mark.skipif(not SEEDS.is_dir(), reason="no ../shared/terminal-seeds beside the checkout")
def test_build_writes_four_files_and_a_manifest_from_real_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr("samples.post_train.fetch_package", lambda *a, **k: None)
    cache = tmp_path / "cache"
    (cache / CORPUS_HTML).parent.mkdir(parents=True)
    (cache / CORPUS_HTML).symlink_to(cache_dir() / CORPUS_HTML)
    fetch_package("python3.11-doc", cache_dir(), log=lambda m: None)
    paths = build_post_train(cache, SEEDS, arithmetic=16, log=lambda m: None)
    manifest = json.loads((cache / "post_train" / "manifest.json").read_text())
    counts = {k: sum(1 for _ in open(p)) for k, p in paths.items()}
    assert counts == manifest["records"] and counts["arithmetic"] == counts["reasoning"] == 16
    assert counts["chat"] > 150 and counts["tool_calls"] == 320  # every real seed task has both files
    assert all(conversation_of(json.loads(line)) for line in open(paths["tool_calls"]))


def test_reasoning_records_are_right_and_the_three_thinking_modes_render_them_differently():
    rows = reasoning_records(40, seed=3)
    turns = [sum(m["role"] == "user" for m in r["messages"]) for r in rows]
    assert min(turns) == 1 and max(turns) == 3
    for r in rows:  # every worked step and answer is the true value of the chain
        msgs = r["messages"]
        for user, reply in zip(msgs[::2], msgs[1::2], strict=True):
            assert ("reasoning_content" in reply) == (user.get("thinking") is not False)
            if "reasoning_content" in reply:
                lhs, rhs = reply["reasoning_content"].rstrip(".").split(" = ")
                assert eval(lhs) == int(rhs) == int(reply["content"])  # noqa: S307 (our own digits and an operator)
    multi = next(r for r in rows if any(m.get("thinking") is False for m in r["messages"])
                 and sum("reasoning_content" in m for m in r["messages"]) >= 2)
    msgs, tools = conversation_of(multi)
    texts = {mode: [s.text for s in render(msgs, mode, tools)] for mode in ("interleaved", "preserved", "turn")}
    assert len(texts["preserved"]) == 1 < len(texts["interleaved"]) == len(texts["turn"])
    assert texts["interleaved"] != texts["turn"]  # an off turn's empty block is prompt, not a trained <think></think>
    # the whole conversation: preserved keeps every worked step, interleaved only the last turn's
    assert texts["preserved"][0].count(" = ") > texts["interleaved"][-1].count(" = ") >= 1
