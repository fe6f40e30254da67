"""``python -m swe_envs``: validate instances, parse a log, set up Docker, generate a parser.

User errors (missing inputs, no Docker daemon, bad config) print one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from core.cli import load_cli_config, user_errors
from core.errors import UserError
from swe_envs.config import SweEnvsConfig

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Dockerized SWE environments: build, run tests before/after the fix, FAIL_TO_PASS / PASS_TO_PASS.")
# Harbor terminal tasks (swe_envs/terminal): convert, validate, run, check
from swe_envs.terminal.cli import app as _terminal_app  # noqa: E402

app.add_typer(_terminal_app, name="terminal")
# environment sessions (swe_envs/sessions): tool calls inside SWE instances and Harbor tasks
from swe_envs.sessions.cli import app as _session_app  # noqa: E402

app.add_typer(_session_app, name="session")


def _engine(master: str | None, workers: int, spark_conf: list[str] | None):
    """Where the Docker work fans out: ``workers`` local threads, or one Spark task per item."""
    from core.engine import make_engine
    from core.local_engine import LocalEngineConfig
    from core.spark import SparkConfig

    return make_engine(master, LocalEngineConfig(workers=workers), SparkConfig(app_name="swe-envs"), spark_conf)




@app.command()
@user_errors(sigterm_unwinds=True)
def validate(
    instances: Path = typer.Option(..., help="SWE-bench-format instances (JSONL), e.g. from `pipelines swe-mine`"),
    repos: Path = typer.Option(..., help="directory of git clones: REPOS/owner/name (or owner__name)"),
    output: Path = typer.Option(..., help="OUT: validated.jsonl, failures.jsonl, environments.jsonl, summary.json, logs/"),
    config: Path = typer.Option(None, help="SweEnvsConfig YAML (configs/swe_envs.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set validation.runs=3"),
    overwrite: bool = typer.Option(False, help="replace this command's outputs already in OUT"),
    master: str = typer.Option(None, help="fan repo-version groups out over Spark executors, each with its own "
                                          "Docker engine: local[2], spark://HOST:PORT, yarn (default: local threads)"),
    spark_conf: list[str] = typer.Option(None, "--spark-conf", help="a Spark setting KEY=VALUE (repeat), with --master"),
) -> None:
    """Build one image per repo-version, run the tests before/after each fix, write F2P/P2P."""
    from swe_envs.envs.validate.job import validate_instances

    cfg = load_cli_config(SweEnvsConfig, config, set_)
    engine = _engine(master, cfg.validation.workers, spark_conf)
    res = validate_instances(instances, repos, output, cfg, overwrite=overwrite, log=typer.echo, engine=engine)
    typer.echo(f"validated {res.validated}, failed {res.failed} -> {output / 'validated.jsonl'}")
    for lang, d in res.summary["languages"].items():
        rate = d["build_success_rate"]
        typer.echo(f"  {lang:<11} tasks {d['tasks']:>3}  env built {d['env_built_tasks']:>3} "
                   f"({'-' if rate is None else f'{rate:.0%}'})  validated {d['validated']:>3}  "
                   f"s/env {d['seconds_per_environment']}")


@app.command()
@user_errors(sigterm_unwinds=True)
def evaluate(
    instances: Path = typer.Option(..., help="instances with FAIL_TO_PASS / PASS_TO_PASS (validate's validated.jsonl, "
                                             "or SWE-bench-format JSONL)"),
    predictions: str = typer.Option(..., help="'gold' (each instance's own patch) or a SWE-bench predictions file "
                                              "(JSONL / JSON: instance_id, model_patch, model_name_or_path)"),
    output: Path = typer.Option(..., help="OUT: report.json (resolved_ids, ...), results.jsonl, instances/<id>/"),
    repos: Path = typer.Option(None, help="git clones (REPOS/owner/name): needed unless the instances come from validate"),
    config: Path = typer.Option(None, help="SweEnvsConfig YAML (configs/swe_envs.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set validation.workers=4"),
    overwrite: bool = typer.Option(False, help="replace this command's outputs already in OUT"),
    master: str = typer.Option(None, help="fan repo-version groups out over Spark executors, each with its own "
                                          "Docker engine: local[2], spark://HOST:PORT, yarn (default: local threads)"),
    spark_conf: list[str] = typer.Option(None, "--spark-conf", help="a Spark setting KEY=VALUE (repeat), with --master"),
) -> None:
    """Apply each prediction in its environment, run FAIL_TO_PASS + PASS_TO_PASS, report resolved instances."""
    from swe_envs.envs.evaluate import evaluate as run_evaluation

    cfg = load_cli_config(SweEnvsConfig, config, set_)
    engine = _engine(master, cfg.validation.workers, spark_conf)
    rep = run_evaluation(instances, predictions, output, cfg, repos, overwrite=overwrite, log=typer.echo,
                         engine=engine)
    typer.echo(f"resolved {rep['resolved_instances']} of {rep['submitted_instances']} submitted "
               f"({rep['total_instances']} instances; {rep['unresolved_instances']} unresolved, "
               f"{rep['empty_patch_instances']} empty patch, {rep['error_instances']} error) -> {output / 'report.json'}")


@app.command()
@user_errors(sigterm_unwinds=True)
def parse(
    logfile: Path = typer.Argument(..., help="a test log (use - for stdin)"),
    runner: str = typer.Option("auto", help="pytest, unittest, jest, mocha, vitest, tap, junit-xml, surefire, gradle, "
                                            "go-test, cargo, ctest, gtest, phpunit, rspec, minitest, auto, file:PARSER.py"),
    details: bool = typer.Option(False, help="also print the runner, whether its summary line was seen, its totals"),
) -> None:
    """Print the statuses parsed from LOGFILE as JSON: {test id: passed|failed|skipped|error}."""
    import sys

    from swe_envs.envs.parsers import parse_log

    if str(logfile) == "-":
        text = sys.stdin.read()
    elif not logfile.is_file():
        raise UserError(f"log file not found: {logfile}")
    else:
        text = logfile.read_text(encoding="utf-8", errors="replace")
    res = parse_log(runner, text)
    typer.echo(json.dumps(res.to_json() if details else dict(sorted(res.statuses.items())), indent=1))


@app.command("setup-docker")
@user_errors(sigterm_unwinds=True)
def setup_docker(
    base_tag: str = typer.Option("local/debian:bookworm", help="tag of the debootstrapped base image"),
) -> None:
    """Install docker.io + debootstrap if missing, start dockerd, build the offline base image once."""
    from swe_envs.docker_setup import ensure_docker

    version = ensure_docker(base_tag, log=typer.echo)
    typer.echo(f"docker {version} ready; base image {base_tag}")


@app.command("make-parser")
@user_errors(sigterm_unwinds=True)
def make_parser(
    runner: str = typer.Option(..., help="name of the runner the logs come from"),
    log: list[Path] = typer.Option(..., help="a log of that runner (repeat for several)"),
    truth: list[Path] = typer.Option(None, help="per --log: JSON {test: status}, or a JUnit XML report of the same run"),
    image: str = typer.Option(None, help="without --truth: the environment image the log came from; its tests are "
                                         "run one at a time and their exit codes are the truth"),
    single_test_command: str = typer.Option(None, help="with --image: the command running one test, {test} standing "
                                                       "for its id, e.g. 'make check TEST={test}'"),
    test: list[str] = typer.Option(None, help="with --image: a test id of the (first) log to run alone (repeat; "
                                              "include failing and passing ones)"),
    counts: str = typer.Option(None, help="with --image: the runner's own summary counts for the (first) log, as "
                                          "JSON, e.g. '{\"passed\": 230, \"failed\": 3, \"skipped\": 1}': the "
                                          "single runs are then a sample of a suite of any size"),
    endpoint: str = typer.Option(..., help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8008/v1"),
    model: str = typer.Option("default", help="model name sent to the endpoint"),
    out: Path = typer.Option(..., help="where to write the accepted parser (.py)"),
    config: Path = typer.Option(None, help="SweEnvsConfig YAML (llm_parser section)"),
) -> None:
    """Ask an LLM for a parser of an unknown runner; keep it only if it reproduces the known statuses."""
    from core.llm import LLMClient, LLMConfig
    from swe_envs.envs.parsers import parse_log
    from swe_envs.envs.parsers.llm import save_parser, synthesize_parser, truth_from_single_runs

    full = load_cli_config(SweEnvsConfig, config, None)
    for p in log:
        if not p.is_file():
            raise UserError(f"file not found: {p}")
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in log]
    cases = []
    if truth:
        if len(log) != len(truth):
            raise UserError("give one --truth per --log")
        for text, tp in zip(logs, truth, strict=True):
            if not tp.is_file():
                raise UserError(f"file not found: {tp}")
            raw = tp.read_text(encoding="utf-8", errors="replace")
            try:
                known = json.loads(raw) if tp.suffix == ".json" else parse_log("junit-xml", raw).statuses
            except json.JSONDecodeError as err:
                raise UserError(f"{tp}: not JSON: {err}") from None
            cases.append((text, known))
    elif image and single_test_command and test:
        from swe_envs.docker_setup import docker_client
        from swe_envs.sandbox import Sandbox

        sandbox = Sandbox(docker_client(), full.sandbox)
        try:
            known = truth_from_single_runs(sandbox, image, single_test_command, list(test),
                                           full.llm_parser.single_test_timeout_s)
        finally:
            sandbox.close()
        known.counts = summary_counts(counts) if counts else None
        typer.echo(f"truth from single-test exit codes: {json.dumps(known)}"
                   + (f"; the runner's counts {known.counts}" if known.counts else ""))
        cases.append((logs[0], known))
    else:
        raise UserError("give --truth per --log, or --image with --single-test-command and --test ids")
    cfg = full.llm_parser
    client = LLMClient(cfg.llm or LLMConfig(base_url=endpoint, model=model))
    res = synthesize_parser(client, runner, cases, cfg)
    for a in res.attempts:
        typer.echo(f"round {a.round}: {'accepted' if a.accepted else 'rejected'} {'; '.join(a.reasons)[:300]}")
    if not res.accepted:
        raise UserError(f"no parser accepted: {res.error}")
    save_parser(res, out)
    typer.echo(f"parser written to {out}; use it with --runner file:{out}")


def summary_counts(text: str) -> dict[str, int]:
    """``--counts``: a JSON object of passed/failed/skipped/error totals."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"--counts: not JSON: {err}") from None
    bad = [k for k in raw if k not in ("passed", "failed", "skipped", "error")] if isinstance(raw, dict) else [raw]
    if bad or not all(isinstance(v, int) and v >= 0 for v in raw.values()):
        raise UserError(f"--counts: give passed/failed/skipped/error as counts, e.g. '{{\"passed\": 3}}' (got {text})")
    return raw


@app.command()
@user_errors(sigterm_unwinds=True)
def cleanup() -> None:
    """Remove containers left behind by killed swe_envs processes on this host."""
    from swe_envs.docker_setup import docker_client
    from swe_envs.sandbox import sweep_orphans

    typer.echo(f"removed {sweep_orphans(docker_client())} orphaned container(s)")
