"""Grading deep-search answers: exact match after normalisation against the answer's aliases.

A response may be the bare answer or end with a line ``Answer: ...``; case, punctuation and
spacing are ignored. Longer responses that merely contain the answer score 0 (a list of
every page title must not pass).
"""

from __future__ import annotations

import re
from pathlib import Path

from core.errors import InputError
from core.io import read_jsonl

_ANSWER_LINE = re.compile(r"(?im)^\s*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$")


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def score(response: str, answers: list[str]) -> float:
    if not isinstance(response, str) or not response.strip():
        return 0.0
    found = _ANSWER_LINE.findall(response)
    cand = _norm(found[-1] if found else response.strip().splitlines()[-1])
    return 1.0 if cand and any(cand == _norm(a) for a in answers if a) else 0.0


def answers_of(task: dict) -> list[str]:
    return [task["answer"], *task.get("aliases", [])]


def grade_files(tasks_path: Path, responses_path: Path) -> list[tuple[dict, float]]:
    """(task, score) per task. Responses carry ``id`` (matched by id; a missing one scores 0)
    or come in the tasks' order, one per task."""
    tasks = read_jsonl(tasks_path, "tasks")
    responses = read_jsonl(responses_path, "responses")
    for n, t in enumerate(tasks, 1):
        if not isinstance(t.get("answer"), str) or "id" not in t:
            raise InputError(f"{tasks_path}:{n}: a task needs 'id' and a string 'answer'")
    for n, r in enumerate(responses, 1):
        if not isinstance(r.get("response"), str):
            raise InputError(f"{responses_path}:{n}: missing string field 'response'")
    if responses and all("id" in r for r in responses):
        by_id = {str(r["id"]): r["response"] for r in responses}
        return [(t, score(by_id.get(str(t["id"]), ""), answers_of(t))) for t in tasks]
    if len(responses) != len(tasks):
        raise InputError(f"{tasks_path} has {len(tasks)} tasks but {responses_path} has {len(responses)} "
                         "responses (give 'id' in each response, or one per task in order)")
    return [(t, score(r["response"], answers_of(t))) for t, r in zip(tasks, responses, strict=True)]
