"""Environment build for one repo-version, with an LLM refine loop.

Round 1 is the deterministic recipe from the repository's files (``languages.recipe``).
A round fails at ``build`` (docker build error) or at ``collect`` (the built image runs the
test command and no test is parsed: missing modules, compile errors, wrong layout). The next
recipe comes from a rule when one applies (``swe_envs.envs.rules``: a missing module, a compiler,
setuptools-scm, build isolation, unsatisfiable era pins; a removed stdlib name switches to an
older interpreter, i.e. another toolchain image), otherwise, with an endpoint configured,
from the LLM, which sees the failure log and the Dockerfile; up to ``refine_rounds`` rounds in
all, rules alone included. Every attempt is kept (recipe, stage, error, seconds, full log on
disk). The toolchain version and its evidence (``swe_envs.envs.rules.era``), the era cut-off, the
registry access handed in and the resolved dependency set are recorded in the environment
spec. An image is tagged under its final name only after the collect check passed, so a tag
that exists is a verified environment.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker

from core.llm import LLMClient, LLMError
from swe_envs.config import SweEnvsConfig
from swe_envs.envs import languages
from swe_envs.envs.environment import llm_recipe, own_runners, parser_fallback
from swe_envs.envs.environment.network_needs import network_needed
from swe_envs.envs.languages import python as python_lang
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.rules import RULES_VERSION, era, rule_fix
from swe_envs.envs.rules import python as rules_python
from swe_envs.envs.rules.system_tools import missing_tools
from swe_envs.images import Images, env_dockerfile, instance_dockerfile, sha, slug
from swe_envs.paths import is_test_path
from swe_envs.repos import Snapshot
from swe_envs.sandbox import Sandbox

LEFT_OUT_LABEL = "swe_envs.left_out"  # image label: the test modules the verified suite command leaves out


@dataclass
class Attempt:
    round: int
    source: str  # template | rule | llm
    recipe: list[str]
    stage: str  # toolchain | build | collect | llm | ok
    ok: bool
    error: str = ""
    seconds: float = 0.0
    log_path: str | None = None
    rule: str = ""  # the rule that produced this recipe (source "rule")


@dataclass
class Environment:
    repo: str
    commit: str
    language: str | None
    ok: bool
    image: str = ""
    image_id: str = ""
    test_command: str = ""
    runner: str = ""
    custom_command: bool = False  # configured per repository, not derived from the language
    # the repository's own test runner (swe_envs.envs.environment.own_runners kind) where pytest collected nothing
    own_runner: str = ""
    # Python 2 test modules the suite's command leaves out (``--ignore``): they stopped pytest's collection
    left_out: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    reason: str = ""
    # the collect log's words when the suite cannot run offline (a failed connection, a service's
    # credential it demands): the environment needs network at test time (spec network "bridge")
    needs_network: str = ""
    seconds: float = 0.0
    cached: bool = False
    image_bytes: int = 0  # the whole image, toolchain layers included
    env_layer_bytes: int = 0  # what this repo-version adds on top of its (shared) toolchain image
    # the spec: toolchain version + evidence, era cut-off, network at test time, registry access,
    # resolved dependency set
    toolchain: dict = field(default_factory=dict)
    exclude_newer: str | None = None
    # the dataset harness's environment applied (config.AppliedProfile.record), {} where none
    profile: dict = field(default_factory=dict)
    network: str = "none"
    registry: dict = field(default_factory=dict)
    resolved: list[str] = field(default_factory=list)
    # no built-in parser read the collect log: the LLM-written one asked for (parser_fallback), or why none
    llm_parser: dict = field(default_factory=dict)

    def record(self) -> dict:
        return asdict(self)


def _labelled(candidate: str) -> str:
    """The candidate image with its LLM-written parser's code as a label."""
    return candidate.removesuffix("-candidate") + "-parser-candidate"


class EnvBuilder:
    def __init__(self, cfg: SweEnvsConfig, images: Images, sandbox: Sandbox, llm: LLMClient | None = None,
                 log_dir: Path | None = None, parser_llm: LLMClient | None = None, parsers_dir: Path | None = None):
        self.cfg, self.images, self.sandbox, self.llm, self.log_dir = cfg, images, sandbox, llm, log_dir
        # where no built-in parser reads a runner's log (parser_fallback): the endpoint, and where accepted
        # parsers are kept per repository
        self.parser_llm, self.parsers_dir = parser_llm, parsers_dir or Path("parsers")

    def _save_log(self, env: Environment, name: str, text: str) -> str | None:
        if self.log_dir is None:
            return None
        path = self.log_dir / slug(f"{env.repo}@{env.commit[:12]}") / f"{name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)

    def build(self, repo: str, path: Path, commit: str, language: str | None = None,
              test_command: str | None = None, runner: str | None = None, created_at: list[str] | None = None,
              version: str | None = None, network: str | None = None,
              collect_files: list[str] | None = None, truth_patch: str = "") -> Environment:
        """Build (or find) the environment of one repo-version.

        created_at / version: of the instances sharing it (era and setuptools-scm version);
        collect_files: test files the collect check runs (the instances' touched tests), else all;
        truth_patch: an instance's test patch, which makes its new tests fail (an LLM parser's truth)."""
        t0 = time.monotonic()
        env = Environment(repo, commit, None, False, network=network or self.cfg.sandbox.network)
        env.registry = self.images.access.record()
        try:
            self._build(env, Snapshot(path, commit), language, test_command, runner, created_at or [], version,
                        collect_files or [], truth_patch)
        finally:
            env.seconds = time.monotonic() - t0
        return env

    def instance_image(self, env: Environment, path: Path, base_commit: str,
                       instance_id: str) -> tuple[str, str, dict]:
        """(image, error, refine record): ``env``'s image set up again at ``base_commit`` (built once,
        tagged by content). The base commit's files may want what the environment's did not (an
        older setup.py, other pins): a failed build gets the environment's own rule-based refine,
        up to ``refine_rounds`` builds; the record says which rules ran and the recipe that built."""
        snap = Snapshot(path, base_commit)
        recipe, rules, log = list(env.recipe), [], ""
        for rnd in range(1, self.cfg.build.refine_rounds + 1):
            dockerfile = instance_dockerfile(env.image, recipe)
            tag = f"swe-envs/inst-{slug(env.repo)}:{sha(env.image_id, dockerfile, snap.tree)[:16]}"
            built = self.images.build(tag, dockerfile, snap.archive(),
                                      labels={"swe_envs.repo": env.repo, "swe_envs.instance": instance_id})
            if built.ok:
                return tag, "", {"recipe": recipe, "rules": rules, "rounds": rnd}
            log = self._save_log(env, f"instance-{slug(instance_id)}-round{rnd}", dockerfile + "\n" + built.log)
            fixed = rule_fix(env.language, recipe, built.log, snap, (env.toolchain or {}).get("version"),
                             env.exclude_newer)
            if fixed is None or fixed[0] == recipe:
                break
            recipe, rule = fixed
            rules.append(rule)
        return "", (f"setting up {base_commit[:12]} on the environment image failed: {built.error}"
                    + (f" (after rules: {', '.join(rules)})" if rules else "") + f" (log: {log})"), \
            {"recipe": recipe, "rules": rules}

    def _toolchain(self, env: Environment, choice: era.Choice, template: list[str]) -> tuple[object, str] | None:
        tc = self.images.toolchain(env.language, self.cfg.toolchain(env.language), choice.base_image)
        env.toolchain = choice.record() | {"image": tc.tag}
        if not tc.ok:
            path = self._save_log(env, f"toolchain-{choice.version or 'default'}", tc.log)
            rnd = env.attempts[-1].round if env.attempts else 0
            env.attempts.append(Attempt(rnd, "template", [], "toolchain", False, tc.error, tc.seconds, path))
            env.reason = f"toolchain image for {env.language} {choice.version or ''} failed: {tc.error}"
            return None
        # a repo-version verified before, whatever recipe its refinement took from the same template
        # (a changed template is a new environment: the cache verified one built from the old template;
        # changed rules or parsers too: RULES_VERSION)
        return tc, sha(env.repo, env.commit, tc.image_id, env.test_command, json.dumps(template), RULES_VERSION)[:24]

    def _cached(self, env: Environment, tc, version: str, snap: Snapshot) -> bool:
        found = self.images.find_verified(version)
        if not found:
            return False
        env.ok, env.cached, env.image, env.image_id = True, True, found[0], found[1]
        env.recipe = json.loads(found[2])
        labels = self.images.client.images.get(found[1]).labels or {}
        kind = labels.get(own_runners.LABEL, "")
        if kind and not env.custom_command:  # verified with the repository's own runner
            self._use_own_runner(env, snap, kind)
        left_out = json.loads(labels.get(LEFT_OUT_LABEL) or "[]")
        if left_out and not env.custom_command and not kind:
            env.left_out, env.test_command = left_out, python_lang.leave_out(env.test_command, left_out)
        if labels.get(parser_fallback.LABEL):  # verified with an LLM-written parser
            env.llm_parser = parser_fallback.restore(labels[parser_fallback.LABEL], env.repo, self.parsers_dir).record()
            env.runner = f"file:{env.llm_parser['path']}"
        env.attempts.append(Attempt(0, "cache", env.recipe, "ok", True, "cached"))
        return True

    def _build(self, env: Environment, snap: Snapshot, language: str | None, test_command: str | None,
               runner: str | None, created_at: list[str], task_version: str | None,
               collect_files: list[str], truth_patch: str) -> None:
        env.language = language or languages.detect_language(snap)
        if env.language is None:
            env.reason = "cannot detect the repository's language"
            return
        tc_cfg = self.cfg.toolchain(env.language)
        choice = era.choose(env.language, snap, tc_cfg.versions, tc_cfg.base_image, created_at)
        env.exclude_newer = choice.era_date if self.cfg.build.exclude_newer else None
        # a dataset harness's environment for this repo-version (config.EnvProfile): its date, extras, pins
        profile = self.cfg.build.profile(env.repo, task_version)
        env.profile = profile.record()
        if profile.resolve_at and self.cfg.build.exclude_newer:
            env.exclude_newer = profile.resolve_at
        plan = languages.test_plan(env.language, snap)
        env.test_command = test_command or plan.command
        env.runner = runner or (plan.runner if not test_command else "auto")
        env.custom_command = bool(test_command)
        collect = [f for f in collect_files if snap.has(f) and is_test_path(f)]
        collect_command = (languages.test_plan(env.language, snap, collect).command
                           if collect and not test_command else env.test_command)
        recipe, source, rule = languages.recipe(env.language, snap, languages.RecipeOptions(
            env.exclude_newer, task_version, profile.extras, profile.requirements)), "template", ""
        template = recipe
        got = self._toolchain(env, choice, template)
        if got is None:
            return
        tc, version = got
        excluded: set[str] = set()
        failure, stage = "", ""
        rounds, rnd = self.cfg.build.refine_rounds, 0
        while not env.ok and rnd < rounds:
            if self._cached(env, tc, version, snap):
                break
            rnd += 1
            env.recipe = recipe
            dockerfile = env_dockerfile(tc.tag, recipe)
            tag = self.images.env_tag(env.repo, tc.image_id, dockerfile + env.test_command, snap.tree, RULES_VERSION)
            if self.images.image_id(tag):  # only verified images carry the final tag
                env.ok, env.cached, env.image, env.image_id = True, True, tag, self.images.image_id(tag)
                env.attempts.append(Attempt(rnd, source, recipe, "ok", True, "cached", rule=rule))
                break
            failure, stage = self._round(env, snap, tc, version, rnd, source, rule, recipe, dockerfile, tag,
                                         collect_command, truth_patch)
            if env.ok or stage == "parser" or rnd == rounds:
                break
            if stage == "race":  # the same recipe again: nothing in it failed
                continue
            # a removed stdlib name: an older interpreter (another toolchain), same recipe
            removed = era.older_wanted(failure) if choice.version else None
            newer = {v for v in tc_cfg.versions if choice.version and era.vkey(v) >= era.vkey(choice.version)}
            if removed and set(tc_cfg.versions) - excluded - newer:
                excluded |= newer
                choice = era.choose(env.language, snap, tc_cfg.versions, tc_cfg.base_image, created_at, excluded)
                choice.evidence["refined"] = f"{removed!r} in the {stage} log: an older interpreter"
                got = self._toolchain(env, choice, template)
                if got is None:
                    return
                tc, version = got
                source, rule = "rule", "older interpreter"
                continue
            fixed = rule_fix(env.language, recipe, failure, snap, choice.version, env.exclude_newer)
            if fixed is not None:
                (recipe, rule), source = fixed, "rule"
                continue
            # Python 2 test modules stopped the collection: the rest of the suite, same recipe
            left_out = rules_python.py2_test_modules(failure) if stage == "collect" and env.language == "python" \
                and env.runner.startswith("pytest") and not env.custom_command and not env.own_runner else []
            if left_out and not set(left_out) & set(env.left_out):
                env.left_out += left_out
                env.test_command = python_lang.leave_out(env.test_command, left_out)
                collect_command = python_lang.leave_out(collect_command, left_out)
                source, rule = "rule", "Python 2 test modules left out"
                continue
            # no rule fixes what pytest could not collect: the repository's own runner, same recipe
            kind = own_runners.find(snap) if stage == "collect" and env.runner.startswith("pytest") and \
                not env.custom_command and not env.own_runner else None
            if kind:
                collect_command = self._use_own_runner(env, snap, kind, collect)
                source, rule = "rule", f"own test runner ({kind})"
                continue
            proposal = self._propose(env, snap, dockerfile, stage, failure) if self.llm is not None else None
            if proposal is None:
                break
            recipe, source, rule = proposal, "llm", ""
        if env.ok:
            env.image_bytes = self.images.size(env.image)
            env.env_layer_bytes = max(env.image_bytes - self.images.size(tc.tag), 0)
            resolved = self.images.read_file(env.image, "/opt/swe-resolved.txt")
            env.resolved = [line for line in (resolved or "").splitlines() if line.strip()]
        elif not env.reason:
            last = next((a for a in reversed(env.attempts) if a.stage in ("build", "collect")), None)
            detail = f"{last.stage}: {last.error}" if last else "no attempt"
            env.reason = f"environment did not build after {sum(a.stage in ('build', 'collect') for a in env.attempts)} round(s); last {detail}"
            # a build's own network errors are the registries'; the collect run is the sandbox's, offline
            needs = network_needed([failure]) if stage == "collect" and env.network == "none" else None
            if needs:
                env.needs_network = needs
                env.reason = f"needs network ({needs!r} in the collect log); {env.reason}"

    def _use_own_runner(self, env: Environment, snap: Snapshot, kind: str, collect: list[str] | None = None) -> str:
        """Switch ``env`` to the repository's own runner; the collect command for ``collect`` files."""
        plan = own_runners.plan(kind, snap)
        env.own_runner, env.test_command, env.runner = kind, plan.command, plan.runner
        return own_runners.plan(kind, snap, collect).command if collect else plan.command

    def _round(self, env: Environment, snap: Snapshot, tc, version: str, rnd: int, source: str, rule: str,
               recipe: list[str], dockerfile: str, tag: str, collect_command: str,
               truth_patch: str = "") -> tuple[str, str]:
        """One build + collect check; (failure log, stage) — stage "ok" when the image is verified."""
        candidate = tag + "-candidate"
        built = self.images.build(candidate, dockerfile, snap.archive(),
                                  labels={"swe_envs.repo": env.repo, "swe_envs.commit": env.commit,
                                          "swe_envs.version": version, "swe_envs.recipe": json.dumps(recipe),
                                          own_runners.LABEL: env.own_runner,
                                          LEFT_OUT_LABEL: json.dumps(env.left_out) if env.left_out else ""})
        if not built.ok:
            path = self._save_log(env, f"round{rnd}-build", dockerfile + "\n" + built.log)
            env.attempts.append(Attempt(rnd, source, recipe, "build", False, built.error, built.seconds, path, rule))
            return built.log, "build"
        t1 = time.monotonic()
        run = self.sandbox.run(candidate, collect_command, [], runs=1, network=env.network)
        log = run.runs[0].log if run.runs else run.error
        path = self._save_log(env, f"round{rnd}-collect", log)
        try:
            parsed = parse_log(env.runner, log)
        except Exception as err:  # a broken parser is this environment's failure, recorded
            env.attempts.append(Attempt(rnd, source, recipe, "collect", False,
                                        f"log parser {env.runner} failed: {type(err).__name__}: {err}",
                                        time.monotonic() - t1, path, rule))
            self.images.remove(candidate)
            return log, "parser"
        if parser_fallback.wanted(env.runner, parsed, log) and not env.llm_parser and \
                rule_fix(env.language, recipe, log, snap, (env.toolchain or {}).get("version"), env.exclude_newer) is None:
            built, parsed = self._ask_parser(env, candidate, built, collect_command, truth_patch, log)
        # tests skipped for want of a program a rule installs: the run is no verdict yet
        tools = missing_tools(log, recipe) if (parsed.guard or parsed).statuses else []
        # the full parse decides (an id convention may count a collection error as a test)
        if (parsed.guard or parsed).statuses and not tools:
            try:
                self.images.tag(built.image_id, tag)
            except docker.errors.ImageNotFound:
                # another process built the same environment (same candidate tag) and removed the
                # candidate: its verified tag, if it got there first; else this round failed
                if not self.images.image_id(tag):
                    env.attempts.append(Attempt(rnd, source, recipe, "collect", False, "the candidate image was "
                                                "removed by another build of the same environment",
                                                time.monotonic() - t1, path, rule))
                    return log, "race"
            self.images.remove(candidate)
            self.images.remove(_labelled(candidate))
            env.ok, env.image, env.image_id = True, tag, self.images.image_id(tag) or built.image_id
            env.attempts.append(Attempt(rnd, source, recipe, "ok", True, "", built.seconds + time.monotonic() - t1,
                                        path, rule))
            return "", "ok"
        self.images.remove(candidate)
        self.images.remove(_labelled(candidate))
        why = run.error or ("test run timed out" if run.runs and run.runs[0].timed_out
                            else f"tests skipped for want of system tools ({', '.join(tools)})" if tools
                            else f"no test collected (exit code {run.runs[0].rc if run.runs else '?'})")
        env.attempts.append(Attempt(rnd, source, recipe, "collect", False, why, time.monotonic() - t1, path, rule))
        return log, "collect"

    def _ask_parser(self, env: Environment, candidate: str, built, command: str, truth_patch: str, log: str):
        """No parser reads the collect log: (image, parse) with one the LLM wrote and the truth accepted
        (parser_fallback), the image labelled with its code; else as they were, the reason recorded."""
        fb, code = parser_fallback.ask(self.parser_llm, self.cfg, env.repo, self.sandbox, candidate, command,
                                       [("test", truth_patch)] if truth_patch else [], env.network, self.parsers_dir)
        env.llm_parser = fb.record()
        # a "-candidate" tag until the collect check passes: only verified images carry another
        labelled = self.images.build(_labelled(candidate), f"FROM {candidate}\n", b"",
                                     labels={parser_fallback.LABEL: code}) if code else None
        if labelled is None or not labelled.ok:  # (the labelling build reuses every layer: seconds)
            return built, parse_log(env.runner, log)
        env.runner = f"file:{fb.path}"
        return labelled, parse_log(env.runner, log)

    def _propose(self, env: Environment, snap: Snapshot, dockerfile: str, stage: str, log: str) -> list[str] | None:
        bcfg = self.cfg.build
        prompt = llm_recipe.prompt(env, snap, stage, log, bcfg)
        rnd = env.attempts[-1].round + 1
        t0 = time.monotonic()
        try:
            reply = self.llm.chat([{"role": "system", "content": llm_recipe.SYSTEM}, {"role": "user", "content": prompt}],
                                  max_tokens=bcfg.llm_max_tokens, temperature=0.0).text
        except LLMError as err:
            env.attempts.append(Attempt(rnd, "llm", [], "llm", False, f"LLM request failed: {err}", time.monotonic() - t0))
            return None
        path = self._save_log(env, f"round{rnd}-llm", prompt + "\n\n=== reply ===\n" + reply)
        recipe = llm_recipe.extract_recipe(reply, bcfg.max_recipe_lines)
        if recipe == env.recipe:
            env.attempts.append(Attempt(rnd, "llm", recipe, "llm", False, "the LLM proposed the same recipe",
                                        time.monotonic() - t0, path))
            return None
        return recipe
