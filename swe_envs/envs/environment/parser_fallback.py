"""An LLM-written parser where no built-in one reads a runner's log (GLM-5's way past the rules).

The builder's collect check runs the environment's test command. When its runner has no parser of
its own (``auto``: a repository's own runner such as a tox or make target, a configured test
command), no built-in parser reads the log and no rule explains it, the configured endpoint
(``llm_parser.llm``) is asked for one through the make-parser machinery
(``swe_envs.envs.parsers.llm``): every candidate runs only in the jail (``core/jail.py``) and is
accepted only against a non-vacuous truth from outside it, the exit codes of tests it names run one
at a time (``validation.single_test_commands[repo]``). Both the log it learns from and those single
runs have a test patch of the repo-version's instances applied: the fix's new tests fail there, so
the truth holds failing and passing tests (a run where everything passes cannot tell a parser from
``return {t: "passed"}``).

An accepted parser is the repository's: saved as ``OUT/parsers/<owner__name>.py``, the
environment's runner becomes ``file:`` that path, its code rides in the verified image's label (so
a cached environment finds it again), and the validator checks it once more on each environment's
first before-run. Without an endpoint, or without a single-test command to check against, nothing
is asked, and the environment's record (``llm_parser``) says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.llm import LLMClient
from swe_envs.config import SweEnvsConfig
from swe_envs.envs.parsers import ParseResult
from swe_envs.envs.parsers.llm import (
    pick_single_tests,
    run_parser,
    save_parser,
    synthesize_parser,
    truth_from_single_runs,
)
from swe_envs.images import slug

LABEL = "swe_envs.llm_parser"  # image label: the code of the parser the environment was verified with
OFF = "off: no LLM endpoint is configured (llm_parser.llm)"


@dataclass
class ParserFallback:
    asked: bool
    accepted: bool = False
    path: str = ""
    reason: str = ""
    truth: str = ""
    attempts: list[dict] = field(default_factory=list)

    def record(self) -> dict:
        return asdict(self)


def wanted(runner: str, parsed: ParseResult, log: str) -> bool:
    """The runner has no parser of its own and no built-in one read a test from a non-empty log."""
    return runner == "auto" and not (parsed.guard or parsed).statuses and bool(log.strip())


def parser_path(parsers_dir: Path, repo: str) -> Path:
    return parsers_dir / f"{slug(repo)}.py"


def ask(client: LLMClient | None, cfg: SweEnvsConfig, repo: str, sandbox, image: str, command: str,
        patches: list[tuple[str, str]], network: str, parsers_dir: Path) -> tuple[ParserFallback, str]:
    """(what happened, the accepted parser's code or ""): ``image`` runs ``command`` after ``patches``."""
    if client is None:
        return ParserFallback(False, reason=f"{OFF}; no built-in parser reads this runner's log"), ""
    template = cfg.validation.single_test_commands.get(repo)
    if not template:
        return ParserFallback(False, reason="not asked: nothing to check a parser against (set "
                              f"validation.single_test_commands[{repo!r}], a command running one test)"), ""
    run = sandbox.run(image, command, patches, runs=1, network=network)
    if run.error or run.patch_failed or not run.runs:
        return ParserFallback(False, reason="not asked: the run to learn from failed: "
                              f"{run.error or run.patch_failed or 'no run'}"), ""
    log, pcfg, last = run.runs[0].log, cfg.llm_parser, {}

    def truth_for(code: str) -> list[tuple[str, dict[str, str]]]:
        ids = pick_single_tests(run_parser(code, log, pcfg.timeout_s, pcfg.memory_mb), pcfg.max_single_tests)
        last["truth"] = truth_from_single_runs(sandbox, image, template, ids, pcfg.single_test_timeout_s,
                                               patches, network)
        return [(log, last["truth"])]

    res = synthesize_parser(client, command.splitlines()[0][:200], [(log, {})], pcfg, truth_for)
    truth = last.get("truth") or {}
    out = ParserFallback(True, res.accepted, reason=res.error,
                         truth=f"exit codes of {len(truth)} single-test run(s) ({template!r}"
                               f"{', the test patch applied' if patches else ''})" if truth else "",
                         attempts=[{"round": a.round, "accepted": a.accepted, "reasons": a.reasons[:5],
                                    "seconds": round(a.seconds, 1)} for a in res.attempts])
    if not res.accepted:
        return out, ""
    path = parser_path(parsers_dir, repo)
    save_parser(res, path)
    out.path = str(path)
    return out, path.read_text(encoding="utf-8")


def restore(code: str, repo: str, parsers_dir: Path) -> ParserFallback:
    """A cached environment's parser (from its image label), written where the runs read it."""
    path = parser_path(parsers_dir, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    return ParserFallback(False, True, str(path), reason="accepted earlier: found with the verified image")
