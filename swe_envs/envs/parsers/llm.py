"""LLM-generated log parsers for runners without a built-in parser.

The endpoint is asked for ``def parse(log: str) -> dict[str, str]`` (test id -> passed /
failed / skipped / error). A candidate is untrusted code: it runs only in the jail of
``core/jail.py`` (bubblewrap namespaces with a read-only root of the interpreter alone, seccomp
refusing processes and sockets, rlimits, a wall-clock limit and an output cap), and is not run at
all where that jail cannot be built. It is accepted only if it reproduces, exactly, the statuses of every log whose truth
is known from elsewhere: JUnit XML written by the same run, a built-in parser, or the exit
codes of single-test runs (``truth_from_single_runs``). The truth must hold at least one
failing and one passing test (configurable): an empty truth accepts ``return {}``. A candidate
passes the same fake-pass guards as a built-in parser: it must report the runner's end-of-run
summary (and may state its totals, which must agree with its statuses), must not claim that
summary on a log cut in half, and must not return an empty result. A rejected candidate's
mismatches go back to the endpoint for the next round. Every attempt is recorded.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core import jail
from core.llm import LLMClient, LLMError
from swe_envs.config import LLMParserConfig
from swe_envs.envs.parsers.base import ERROR, FAILED, PASSED, SKIPPED, STATUSES, ParseResult

# the trusted harness the jail runs (core/jail.py adds limits and seccomp before it): reads
# {"code", "log"} on stdin, runs the candidate's parse() and checks the shape of what it returned
CHILD = r"""
import json, sys
import re, collections, itertools, functools, string, xml.etree.ElementTree  # what a parser may use
spec = json.loads(sys.stdin.read())
ns = {"__name__": "llm_parser"}
exec(compile(spec["code"], "<llm parser>", "exec"), ns)
out = ns["parse"](spec["log"])
summary = None
if isinstance(out, dict) and isinstance(out.get("tests"), dict):
    summary = out.get("summary")
    out = out["tests"]
if not isinstance(out, dict):
    raise TypeError(f"parse() returned {type(out).__name__}, not dict")
clean = {}
for k, v in out.items():
    v = str(v).lower()
    if v not in ("passed", "failed", "skipped", "error"):
        raise ValueError(f"status {v!r} for {k!r} is not passed/failed/skipped/error")
    clean[str(k)] = v
if summary is not None and summary is not True:
    if not isinstance(summary, dict):
        raise TypeError(f"summary is {type(summary).__name__}, not a dict of totals, True or None")
    summary = {k: int(summary.get(k) or 0) for k in ("passed", "failed", "skipped", "error")}
sys.stdout.write("\n@@RESULT@@" + json.dumps({"tests": clean, "summary": summary}))
"""

# exit statuses of a jailed child the kernel stopped: SIGXCPU (soft CPU limit), SIGKILL (hard one)
_CPU_LIMIT_RC = (128 + 24, -24, 128 + 9)


class ParserRunError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def run_parser(code: str, log: str, timeout_s: float = 10.0, memory_mb: int = 512) -> dict[str, str]:
    """The statuses a candidate parses from one log (see ``run_parser_full``)."""
    return run_parser_full(code, log, timeout_s, memory_mb)[0]


def run_parser_full(code: str, log: str, timeout_s: float = 10.0,
                    memory_mb: int = 512) -> tuple[dict[str, str], dict[str, int] | bool | None]:
    """(statuses, summary) of a candidate on one log, run in the jail (core/jail.py).

    summary: None (no end-of-run summary seen), True (seen, no totals) or the stated totals.
    Raises ParserRunError on crash / loop / bad output / no isolation (the candidate is then not run)."""
    spec = json.dumps({"code": code, "log": log}).encode()
    limits = jail.Limits(timeout_s=timeout_s, memory_mb=memory_mb, output_mb=max(16, 8 * len(spec) // 2**20))
    try:
        res = jail.run(CHILD, spec, limits)
    except jail.JailError as err:
        raise ParserRunError(err.kind, err.message) from None
    out = res.stdout.decode("utf-8", "replace")
    if res.returncode != 0 or "@@RESULT@@" not in out:
        err = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        kind = ("cpu_limit" if res.returncode in _CPU_LIMIT_RC else
                "memory_limit" if err.startswith("MemoryError") else "crash")
        raise ParserRunError(kind, err[:300])
    try:
        result = json.loads(out.rsplit("@@RESULT@@", 1)[1])
    except ValueError as err:  # the candidate printed after the harness's line
        raise ParserRunError("crash", f"unreadable result: {err}") from None
    return result["tests"], result["summary"]


@dataclass
class Verdict:
    accepted: bool
    reasons: list[str] = field(default_factory=list)


def truth_size(cases: list[tuple[str, dict[str, str]]]) -> tuple[int, int]:
    """(failing, passing) tests over every case's truth."""
    failing = sum(1 for _, t in cases for s in t.values() if s in (FAILED, ERROR))
    return failing, sum(1 for _, t in cases for s in t.values() if s == PASSED)


class SampledTruth(dict):
    """Statuses of a *sample* of a suite's tests (single-test exit codes), not of every test.

    With the runner's own summary ``counts`` (read by whoever ran it: ``make-parser --counts``) a parser
    is checked on two independent facts, so suites of any size can be checked: the sampled ids must have
    exactly these statuses in its parse (which may hold any number of other tests), and the totals of
    its parse must equal those counts. Without counts the sample must cover the whole parse (a suite no
    larger than the sample), as a complete truth would: a candidate's own totals are not evidence."""

    def __init__(self, statuses: dict[str, str], counts: dict[str, int] | None = None):
        super().__init__(statuses)
        self.counts = counts


def _sample_problems(got: dict[str, str], truth: SampledTruth) -> list[str]:
    """Why a parse disagrees with a sampled truth and the runner's counts ([] when it agrees)."""
    out = []
    missing = sorted(t for t in truth if t not in got)[:5]
    wrong = sorted(t for t in truth if t in got and got[t] != truth[t])[:5]
    if missing:
        out.append(f"sampled tests missing from the parse: {missing}")
    if wrong:
        out.append("wrong status for sampled " + ", ".join(f"{t} ({got[t]} != {truth[t]})" for t in wrong))
    tally = {s: sum(1 for v in got.values() if v == s) for s in STATUSES}
    parsed = {"passed": tally[PASSED], "failed": tally[FAILED] + tally[ERROR], "skipped": tally[SKIPPED]}
    want = {"passed": truth.counts.get("passed", 0),
            "failed": truth.counts.get("failed", 0) + truth.counts.get("error", 0),
            "skipped": truth.counts.get("skipped", 0)}
    if parsed != want:
        out.append(f"the parse's totals {parsed} differ from the runner's summary counts {want}")
    return out


def check_parser(code: str, cases: list[tuple[str, dict[str, str]]], cfg: LLMParserConfig) -> Verdict:
    """Accept only if the candidate reproduces every known truth and passes the fake-pass guards.

    A complete truth must be reproduced exactly; a ``SampledTruth`` with the runner's counts on its
    sampled ids, the parse's totals equal to those counts."""
    if not cases:
        return Verdict(False, ["no log with known statuses to check the parser against"])
    failing, passing = truth_size(cases)
    if failing < cfg.min_truth_failing or passing < cfg.min_truth_passing:
        # a truth without a failing test cannot tell a parser from `return {t: "passed" ...}`
        return Verdict(False, [f"the known statuses hold {failing} failing and {passing} passing test(s); "
                               f"at least {cfg.min_truth_failing} failing and {cfg.min_truth_passing} passing "
                               "are needed to check a parser"])
    reasons = []
    for i, (log, truth) in enumerate(cases, 1):
        if not truth:
            reasons.append(f"log {i}: no known status to check against")
            continue
        try:
            got, summary = run_parser_full(code, log, cfg.timeout_s, cfg.memory_mb)
        except ParserRunError as err:
            reasons.append(f"log {i}: parser {err.kind}: {err.message}")
            continue
        if not got:
            reasons.append(f"log {i}: empty result (no test parsed)")
            continue
        if isinstance(truth, SampledTruth) and truth.counts is not None:
            problems = _sample_problems(got, truth)
            if problems:
                reasons += [f"log {i}: {why}" for why in problems]
                continue
        elif got != truth:
            if isinstance(truth, SampledTruth) and len(got) > len(truth):
                reasons.append(f"log {i}: the parse holds {len(got)} tests and {len(truth)} were run alone: "
                               "give the runner's summary counts (make-parser --counts) to check a sample")
                continue
            missing = sorted(set(truth) - set(got))[:5]
            extra = sorted(set(got) - set(truth))[:5]
            wrong = sorted(t for t in set(got) & set(truth) if got[t] != truth[t])[:5]
            parts = [f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else "",
                     "wrong status for " + ", ".join(f"{t} ({got[t]} != {truth[t]})" for t in wrong) if wrong else ""]
            reasons.append(f"log {i}: " + "; ".join(p for p in parts if p))
            continue
        reasons += [f"log {i}: {why}" for why in _summary_problems(code, log, got, summary, cfg)]
    return Verdict(not reasons, reasons)


def _summary_problems(code: str, log: str, got: dict[str, str], summary, cfg: LLMParserConfig) -> list[str]:
    """The built-in parsers' fake-pass guards, applied to a candidate's summary detection."""
    if summary is None:
        return ["no runner summary detected (return {'tests': ..., 'summary': totals or None})"]
    out = []
    if isinstance(summary, dict):
        tally = {s: sum(1 for v in got.values() if v == s) for s in STATUSES}
        if (tally[PASSED], tally[FAILED] + tally[ERROR], tally[SKIPPED]) != (
                summary["passed"], summary["failed"] + summary["error"], summary["skipped"]):
            out.append(f"summary totals {summary} disagree with the parsed statuses {tally}")
    lines = log.splitlines()
    if cfg.check_truncated and len(lines) >= 4:
        try:
            _, cut_summary = run_parser_full(code, "\n".join(lines[: len(lines) // 2]), cfg.timeout_s, cfg.memory_mb)
        except ParserRunError as err:
            return out + [f"parser {err.kind} on the log cut in half: {err.message}"]
        if cut_summary is not None:
            out.append("claims a runner summary on the log cut in half (a suite that did not finish)")
    return out


SYSTEM = "You write small, correct Python functions that parse test-runner logs. Reply with one ```python block."
PROMPT = """Write a Python function `parse(log: str) -> dict[str, str]` for the test runner "{runner}".
It must return {{"tests": {{test id: status}}, "summary": totals}}: every test in the log mapped to one of
"passed", "failed", "skipped", "error"; "summary" is None when the runner's end-of-run summary line is absent
(a run cut short), otherwise a dict {{"passed": n, "failed": n, "skipped": n, "error": n}} of the totals that
line states (or True when it states none).
Use only the standard library (re, json). No I/O, no network, no subprocesses.
{examples}
Here is a real log from this runner:
```
{log}
```
"""
FEEDBACK = """Your previous function was rejected:
{reasons}
```python
{code}
```
Fix it and reply with the complete corrected function in one ```python block."""


def extract_code(text: str) -> str:
    m = re.search(r"```(?:python|py)?\s*\n(.*?)```", text, re.S)
    return (m.group(1) if m else text).strip() + "\n"


@dataclass
class SynthAttempt:
    round: int
    code: str
    accepted: bool
    reasons: list[str]
    seconds: float


@dataclass
class SynthResult:
    runner: str
    accepted: bool
    code: str = ""
    attempts: list[SynthAttempt] = field(default_factory=list)
    error: str = ""

    def record(self) -> dict:
        return asdict(self)


def synthesize_parser(client: LLMClient, runner: str, cases: list[tuple[str, dict[str, str]]],
                      cfg: LLMParserConfig,
                      truth_for: Callable[[str], list[tuple[str, dict[str, str]]]] | None = None) -> SynthResult:
    """``truth_for``: where the truth depends on the candidate (single tests picked from its parse of
    ``cases``' logs, whose statuses are then unknown), it gives each candidate's cases; a candidate is
    still accepted only by ``check_parser``, non-vacuous truth included."""
    res = SynthResult(runner, False)
    if not cases:
        res.error = "no log with known statuses: a generated parser could not be checked"
        return res
    failing, passing = truth_size(cases)
    if truth_for is None and (failing < cfg.min_truth_failing or passing < cfg.min_truth_passing):
        res.error = (f"the known statuses hold {failing} failing and {passing} passing test(s): too few to check "
                     "a generated parser (llm_parser.min_truth_failing / min_truth_passing)")
        return res
    log, truth = cases[0]
    sample = dict(list(sorted(truth.items()))[:3])
    examples = f"For this log the expected result includes: {json.dumps(sample)}" if sample else ""
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": PROMPT.format(runner=runner, log=log[-cfg.max_log_chars:], examples=examples)}]
    for rnd in range(1, cfg.rounds + 1):
        t0 = time.monotonic()
        try:
            reply = client.chat(messages, max_tokens=cfg.max_tokens, temperature=0.0).text
        except LLMError as err:
            res.error = f"LLM request failed: {err}"
            return res
        code = extract_code(reply)
        verdict = (_judge(code, cases, cfg, truth_for) if "def parse" in code
                   else Verdict(False, ["no `def parse` in the reply"]))
        res.attempts.append(SynthAttempt(rnd, code, verdict.accepted, verdict.reasons, time.monotonic() - t0))
        if verdict.accepted:
            res.accepted, res.code = True, code
            return res
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": FEEDBACK.format(reasons="\n".join(verdict.reasons), code=code)}]
    res.error = f"no candidate reproduced the known statuses in {cfg.rounds} round(s)"
    return res


def _judge(code: str, cases: list[tuple[str, dict[str, str]]], cfg: LLMParserConfig,
           truth_for: Callable[[str], list[tuple[str, dict[str, str]]]] | None) -> Verdict:
    if truth_for is None:
        return check_parser(code, cases, cfg)
    try:
        return check_parser(code, truth_for(code), cfg)
    except ParserRunError as err:  # the candidate could not even parse the log its sample comes from
        return Verdict(False, [f"parser {err.kind}: {err.message}"])


def save_parser(result: SynthResult, path: Path) -> None:
    header = (f"# LLM-generated parser for runner {result.runner!r}; accepted after {len(result.attempts)} "
              "round(s): it reproduced every log with known statuses.\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + result.code, encoding="utf-8")


def run_parser_file(path: str | Path, log: str, cfg: LLMParserConfig | None = None) -> ParseResult:
    """A saved parser as a runner (``--runner file:PATH``); it runs sandboxed like any candidate.

    Its summary detection and totals feed the same fake-pass guards as a built-in parser's."""
    cfg = cfg or LLMParserConfig()
    statuses, summary = run_parser_full(Path(path).read_text(encoding="utf-8"), log, cfg.timeout_s, cfg.memory_mb)
    res = ParseResult(f"file:{path}")
    for k, v in statuses.items():
        if v in STATUSES:
            res.add(k, v)
    res.summary_seen = summary is not None
    res.counts = summary if isinstance(summary, dict) else None
    return res


def truth_from_single_runs(sandbox, image: str, command_template: str, test_ids: list[str],
                           timeout_s: float = 120.0, patches: list[tuple[str, str]] | None = None,
                           network: str | None = None) -> SampledTruth:
    """Each test run alone (``{test}`` in the template, after ``patches``): exit 0 = passed, else failed.

    A run that timed out or did not start gives no status for its test. The result is a sample of the
    suite (``SampledTruth``): a parser is checked on these ids plus the runner's summary counts."""
    import shlex

    truth = {}
    for test_id in test_ids:
        res = sandbox.run(image, command_template.replace("{test}", shlex.quote(test_id)), patches or [], runs=1,
                          timeout_s=timeout_s, network=network)
        if res.runs and not res.runs[0].timed_out and not res.patch_failed:
            truth[test_id] = PASSED if res.runs[0].rc == 0 else FAILED
    return SampledTruth(truth)


def pick_single_tests(statuses: dict[str, str], limit: int) -> list[str]:
    """Up to ``limit`` ids to run alone: failing ones and passing ones alternately, in name order."""
    failing = sorted(t for t, s in statuses.items() if s in (FAILED, ERROR))
    passing = sorted(t for t, s in statuses.items() if s == PASSED)
    out = []
    while (failing or passing) and len(out) < limit:
        for group in (failing, passing):
            if group and len(out) < limit:
                out.append(group.pop(0))
    return out
