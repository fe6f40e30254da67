"""The MRCR grader (as OpenAI-MRCR's): 0 unless the response starts with the random string,
otherwise difflib's ``SequenceMatcher`` ratio between response and answer with the string
removed from both."""

from __future__ import annotations

from difflib import SequenceMatcher
from pathlib import Path

from core.errors import InputError
from core.io import read_jsonl


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


def grade_files(samples_path: str | Path, responses_path: str | Path) -> list[tuple[dict, float]]:
    """(sample, score) per line; responses are ``{"response": ...}`` in the samples' order."""
    samples = read_jsonl(samples_path, "samples")
    responses = read_jsonl(responses_path, "responses")
    if len(samples) != len(responses):
        raise InputError(
            f"{samples_path} has {len(samples)} samples but {responses_path} has {len(responses)} responses"
        )
    out = []
    for n, (s, r) in enumerate(zip(samples, responses, strict=True), 1):
        for key in ("answer", "random_string_to_prepend"):
            if not isinstance(s.get(key), str):
                raise InputError(f"{samples_path}:{n}: missing string field {key!r}")
        if not isinstance(r.get("response"), str):
            raise InputError(f"{responses_path}:{n}: missing string field 'response'")
        out.append((s, grade(r["response"], s["answer"], s["random_string_to_prepend"])))
    return out
