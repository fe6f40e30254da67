"""The synthesis refine loop's mechanics on a real Docker engine, with the scripted HTTP server as the
proposer and judge (good, broken-then-fixed, looping, unparseable and rubric-failing candidates).
SmolLM2 cannot be made to produce a chosen candidate; the real-model run is reported in the README."""

from __future__ import annotations

import json
import shutil

import pytest

from core.llm import LLMConfig
from swe_envs.terminal.config import SynthConfig, TerminalConfig
from swe_envs.terminal.synthesize import doc_prompts, parse_candidate, seed_prompts, synthesize
from swe_envs.terminal.task import load_task
from tests.support.scripted_server import Reply, ScriptedServer
from tests.swe_envs.terminal.tiny_tasks import BASE, tiny_task

pytestmark = pytest.mark.docker

TEST_SH = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
           "[ \"$(cat /app/sum.txt 2>/dev/null)\" = \"$(( {a} + {b} ))\" ] && echo 1 > /logs/verifier/reward.txt"
           " || echo 0 > /logs/verifier/reward.txt\n")


def cand(a: int, b: int, dockerfile: str = f"FROM {BASE}\nWORKDIR /app\n", test_sh: str | None = None) -> str:
    return json.dumps({"name": f"sum-{a}-{b}", "instruction": f"Write the sum of {a} and {b} to /app/sum.txt.",
                       "dockerfile": dockerfile, "solution_sh": f"#!/bin/bash\necho $(( {a} + {b} )) > /app/sum.txt\n",
                       "test_sh": test_sh or TEST_SH.format(a=a, b=b)})


def chat(text: str) -> Reply:
    return Reply(body={"choices": [{"message": {"role": "assistant", "content": text}}]})


def verdict(ok: bool) -> Reply:
    crit = ["behavior_in_tests", "behavior_in_instruction", "anti_cheating", "pinned_dependencies", "no_baked_files",
            "no_hardcoded_answer"]
    body = {"criteria": {c: {"pass": ok or c != "anti_cheating", "reason": "checked"} for c in crit}}
    return chat("```json\n" + json.dumps(body) + "\n```")


@pytest.fixture(scope="module")
def ctx():
    from swe_envs.docker_setup import ensure_docker
    from swe_envs.terminal.trial import Context

    ensure_docker(BASE)
    return Context(TerminalConfig(), log=lambda m: None)


def test_parse_candidate_errors():
    assert parse_candidate("Sure!\n```json\n" + cand(1, 2) + "\n```")["name"] == "sum-1-2"
    for text, msg in [("no braces", "no JSON object"), ('{"instruction": "x"}', "'dockerfile'"),
                      ('{"a": }', "invalid JSON"),
                      (json.dumps({**json.loads(cand(1, 2)), "test_files": {"../x": "y"}}), "relative paths")]:
        with pytest.raises(ValueError, match=msg):
            parse_candidate(text)


def test_refine_loop_gates_and_metrics(ctx, tmp_path):
    srv = ScriptedServer()
    url = srv.start()
    nop_passes = cand(5, 6, test_sh="#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    srv.script.extend([
        chat(cand(1, 2)), verdict(True),                                          # A: accepted in round 1
        chat(cand(3, 4, dockerfile=f"FROM {BASE}\nRUN exit 7\n")),                # B: build fails ...
        chat(cand(3, 4)), verdict(True),                                          # ... refined, accepted
        chat(nop_passes), chat(nop_passes),                                       # C: nop passes, then loops
        chat("I cannot do that."), chat(cand(7, 8)), verdict(False),              # D: unparseable, rubric fails
    ])
    try:
        cfg = SynthConfig(llm=LLMConfig(base_url=url, cache_dir=None), rounds=2)
        seeds = [load_task(tiny_task(tmp_path / "seeds"))]
        m = synthesize(ctx, cfg, tmp_path / "out", seed_prompts(seeds, 4, cfg), stub_check=False, log=lambda m: None)
    finally:
        srv.stop()
    rows = [json.loads(x) for x in (tmp_path / "out" / "attempts.jsonl").read_text().splitlines()]
    assert [(r["lineage"][:7], r["round"], r["stage"]) for r in rows] == [
        ("seed000", 1, "accepted"), ("seed001", 1, "build"), ("seed001", 2, "accepted"), ("seed002", 1, "nop"),
        ("seed002", 2, "repeated_candidate"), ("seed003", 1, "parse"), ("seed003", 2, "rubric")]
    assert m["accepted"] == 2 and m["lineages"] == 4 and m["build_pct"] == 0.8 and m["oracle_pass_pct"] == 1.0
    assert m["nop_fail_pct"] == 0.75 and m["rubric_pass_pct"] == pytest.approx(2 / 3, abs=1e-3)
    assert m["rounds_per_accepted"] == 1.5 and m["accepted_built_pct"] == 1.0
    assert "anti_cheating" in rows[-1]["reason"]
    # the refine prompt carried the build failure and its log
    refine = srv.received[3]["messages"][0]["content"]
    assert 'failed at the "build" gate' in refine and "exit 7" in refine
    accepted = sorted((tmp_path / "out" / "tasks").iterdir())
    assert len(accepted) == 2 and all(load_task(p).steps for p in accepted)


def test_docs_closed_loop_rejects_trivially_satisfiable_tests(ctx, tmp_path):
    srv = ScriptedServer()
    url = srv.start()
    exists_only = cand(2, 2, test_sh="#!/bin/bash\nmkdir -p /logs/verifier\n"
                       "[ -f /app/sum.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n")
    srv.script.extend([chat(exists_only)])
    try:
        cfg = SynthConfig(llm=LLMConfig(base_url=url, cache_dir=None), rounds=1)
        docs = [("library/operator.html", "operator", "The operator module exports functions such as add. " * 20)]
        m = synthesize(ctx, cfg, tmp_path / "out", doc_prompts(docs, 1, cfg), stub_check=True, log=lambda m: None)
    finally:
        srv.stop()
    assert "operator module exports" in srv.received[0]["messages"][0]["content"]
    assert m["accepted"] == 0 and m["rejected_by_stage"] == {"stub": 1}


@pytest.mark.skipif(not (shutil.which("apt-get") and shutil.which("dpkg-deb")), reason="man pages come from .debs")
def test_docs_closed_loop_on_a_debian_man_page(ctx, tmp_path):
    from synth.manpages.fetch import fetch_manpages

    rows, _ = fetch_manpages(["sed"], tmp_path / "debs", log=lambda m: None)
    page = next(r for r in rows if r["id"] == "sed/1/sed")
    test_sh = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
               "[ \"$(cat /app/out.txt 2>/dev/null)\" = \"$(printf 'b\\nb\\nc')\" ] && echo 1 > /logs/verifier/reward.txt"
               " || echo 0 > /logs/verifier/reward.txt\n")
    good = json.dumps({"name": "sed-substitute", "instruction": "With sed, replace every a by b in /app/in.txt "
                       "(lines a, b, c) and write the result to /app/out.txt.",
                       "dockerfile": f"FROM {BASE}\nWORKDIR /app\nRUN printf 'a\\nb\\nc\\n' > /app/in.txt\n",
                       "solution_sh": "#!/bin/bash\nsed 's/a/b/g' /app/in.txt > /app/out.txt\n", "test_sh": test_sh})
    srv = ScriptedServer()
    url = srv.start()
    srv.script.extend([chat(good), verdict(True)])
    try:
        cfg = SynthConfig(llm=LLMConfig(base_url=url, cache_dir=None), rounds=1)
        docs = [(page["id"], page["title"], page["text"])]
        m = synthesize(ctx, cfg, tmp_path / "out", doc_prompts(docs, 1, cfg), stub_check=True, log=lambda m: None)
    finally:
        srv.stop()
    # the proposer saw the rendered page and the package it comes from; the loop closed: the solution
    # passes, the untouched (nop) and the stubbed (empty out.txt) environments fail
    prompt = srv.received[0]["messages"][0]["content"]
    assert "=== document: sed(1) ===\nDebian package: sed" in prompt and "stream editor" in prompt
    assert m["accepted"] == 1 and m["rejected_by_stage"] == {}
