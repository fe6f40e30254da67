"""The rubric judge (like Harbor's ``tasks check``): an LLM reads a task's files and answers per criterion.

Criteria: the behaviour the instruction asks for is what the tests check (both directions), the
tests cannot be passed by cheating (reading the tests or the solution, hard-coding an output),
dependencies are pinned, no solution or tests baked into the image, no hard-coded answer in the
solution. Static checks that need no LLM run first and short-circuit (tests/solution copied into
the image, a test.sh that never writes a reward).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from core.llm import LLMClient, LLMError
from swe_envs.terminal.task import HarborTask, validate_task

CRITERIA = {
    "behavior_in_tests": "every behaviour the instruction asks for is checked by the tests",
    "behavior_in_instruction": "everything the tests check is asked for (or implied) by the instruction",
    "anti_cheating": "the tests cannot be passed without doing the task (e.g. by reading /tests or /solution, "
                     "or writing a fixed output)",
    "pinned_dependencies": "packages installed in the Dockerfile or tests have pinned versions (or come from the "
                           "distribution)",
    "no_baked_files": "the Dockerfile does not copy tests/ or solution/ into the image",
    "no_hardcoded_answer": "the solution computes its result rather than printing a memorised answer",
}

PROMPT = """You review a terminal task for a benchmark. Judge each criterion and answer with JSON only:
{{"criteria": {{"<name>": {{"pass": true|false, "reason": "..."}}, ...}}}}
Criteria:
{criteria}

=== instruction.md ===
{instruction}
=== environment/Dockerfile ===
{dockerfile}
=== solution/solve.sh ===
{solution}
=== tests/test.sh and test files ===
{tests}
"""


@dataclass
class Verdict:
    passed: bool
    criteria: dict[str, dict] = field(default_factory=dict)
    error: str = ""


def _files_text(task: HarborTask, sub: str, limit: int = 6000) -> str:
    parts = []
    for step in task.steps:
        d = step.tests_dir if sub == "tests" else step.solution_dir
        if d is None:
            continue
        for p in sorted(d.rglob("*")):
            if p.is_file():
                parts.append(f"--- {p.relative_to(task.path)} ---\n{p.read_text(encoding='utf-8', errors='replace')}")
    text = "\n".join(parts)
    return text[:limit] + ("\n[...cut]" if len(text) > limit else "")


def static_problems(task: HarborTask) -> list[str]:
    problems = validate_task(task.path)
    for step in task.steps:
        t = (step.tests_dir / "test.sh").read_text(encoding="utf-8", errors="replace")
        if "/logs/verifier/reward" not in t and "reward.txt" not in t and "reward.json" not in t:
            problems.append(f"step {step.name}: test.sh never writes /logs/verifier/reward.txt or reward.json")
    return problems


def parse_verdict(text: str) -> Verdict:
    m = re.search(r"\{.*\}", text, re.DOTALL)
    if not m:
        return Verdict(False, error="judge reply has no JSON object")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as err:
        return Verdict(False, error=f"judge reply is not JSON: {err.msg}")
    crit = data.get("criteria") if isinstance(data, dict) else None
    if not isinstance(crit, dict):
        return Verdict(False, error="judge reply lacks 'criteria'")
    out, missing = {}, []
    for name in CRITERIA:
        c = crit.get(name)
        if not isinstance(c, dict) or not isinstance(c.get("pass"), bool):
            missing.append(name)
            continue
        out[name] = {"pass": c["pass"], "reason": str(c.get("reason", ""))[:500]}
    if missing:
        return Verdict(False, out, f"judge did not answer: {', '.join(missing)}")
    return Verdict(all(c["pass"] for c in out.values()), out)


def judge(task: HarborTask, client: LLMClient, max_tokens: int = 600) -> Verdict:
    problems = static_problems(task)
    if problems:
        return Verdict(False, {"static": {"pass": False, "reason": "; ".join(problems)}}, "static: " + problems[0])
    prompt = PROMPT.format(
        criteria="\n".join(f"- {k}: {v}" for k, v in CRITERIA.items()), instruction=task.instruction[:4000],
        dockerfile=(task.dockerfile.read_text(encoding="utf-8") if task.dockerfile else "(none)")[:3000],
        solution=_files_text(task, "solution"), tests=_files_text(task, "tests"))
    try:
        resp = client.chat([{"role": "user", "content": "RUBRIC REVIEW\n" + prompt}], max_tokens=max_tokens,
                           temperature=0.0)
    except LLMError as err:
        return Verdict(False, error=f"judge: {err}")
    return parse_verdict(resp.text)
