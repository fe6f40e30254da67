"""``python -m swe_envs terminal``: convert, validate, run and check Harbor terminal tasks."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from core.cli import load_cli_config, user_errors
from core.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Harbor-format terminal tasks: convert old Terminal-Bench tasks, validate, run agents, check.")


@app.command()
@user_errors
def convert(
    input: Path = typer.Option(..., help="an old-layout Terminal-Bench task dir (task.yaml), or a dir of them"),
    output: Path = typer.Option(..., help="the Harbor task dir to write (a dir of them for a dir input)"),
    overwrite: bool = typer.Option(False, help="replace existing output task dirs"),
) -> None:
    """Convert Terminal-Bench task(s) to Harbor's layout; the task files' content is kept unchanged."""
    from swe_envs.terminal.convert import convert_tree

    if not input.exists():
        raise UserError(f"input not found: {input}")
    done, failed = convert_tree(input, output, overwrite=overwrite)
    if not done and not failed:
        raise UserError(f"no Terminal-Bench task (task.yaml) under {input}")
    for rel, reason in failed:
        typer.echo(f"failed {rel}: {reason}", err=True)
    typer.echo(f"converted {len(done)}, failed {len(failed)} -> {output}")
    if failed and not done:
        raise typer.Exit(1)


@app.command()
@user_errors
def validate(
    tasks: Path = typer.Option(..., help="a Harbor task dir, or a dir of them"),
) -> None:
    """Load every task (task.toml in either shape, layout, steps) and list problems per task."""
    from swe_envs.terminal.discover import find_tasks
    from swe_envs.terminal.task import TaskFormatError, validate_task

    bad = 0
    for t in find_tasks(tasks, allow_old=False):
        try:
            problems = validate_task(t)
        except TaskFormatError as err:
            problems = [str(err)]
        bad += bool(problems)
        typer.echo(f"{'ok ' if not problems else 'BAD'} {t}" + "".join(f"\n    {p}" for p in problems))
    typer.echo(f"tasks with problems: {bad}")
    if bad:
        raise typer.Exit(1)


@app.command()
@user_errors
def needs(
    tasks: Path = typer.Option(..., help="a task dir or a dir of them (Harbor or old Terminal-Bench layout)"),
) -> None:
    """What each task fetches from outside (images, installers, registries) and whether it is provisioned offline."""
    import tempfile
    from collections import Counter

    from swe_envs.terminal.discover import find_tasks
    from swe_envs.terminal.needs import offline_capable, task_needs
    from swe_envs.terminal.trial import as_harbor

    counts: Counter = Counter()
    capable = total = 0
    with tempfile.TemporaryDirectory(prefix="terminal-needs-") as scratch:
        for p in find_tasks(tasks):
            n = task_needs(as_harbor(p, Path(scratch)))
            total += 1
            capable += offline_capable(n)
            counts.update(x["need"] + ("" if x["offline"] else "  [NOT provisioned offline]") for x in n)
    for need, c in counts.most_common():
        typer.echo(f"{c:>5}  {need}")
    typer.echo(f"offline-capable tasks: {capable}/{total}")


@app.command("harbor-validate")
@user_errors
def harbor_validate(
    tasks: Path = typer.Option(..., help="a Harbor task dir, or a dir of them"),
    output: Path = typer.Option(None, help="write one JSON row per task here (JSONL)"),
    version: str = typer.Option(None, help="the harbor package version (default: the pinned one)"),
    config: Path = typer.Option(None, help="TerminalConfig YAML (configs/terminal.yaml)"),
) -> None:
    """Load every task with the harbor package's own task model (in a container: it needs Python >= 3.12)."""
    from swe_envs.terminal.discover import find_tasks
    from swe_envs.terminal.harbor_model import HARBOR_VERSION, harbor_load
    from swe_envs.terminal.trial import Context

    ctx = Context(_runner_config(config, None), typer.echo)
    rows = harbor_load(find_tasks(tasks, allow_old=False), ctx.images, ctx.subst, version or HARBOR_VERSION)
    for r in rows:
        typer.echo(f"{'ok ' if r['ok'] else 'BAD'} {r['task']}" + ("" if r["ok"] else f"\n    {r['error']}"))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bad = sum(not r["ok"] for r in rows)
    typer.echo(f"refused by harbor {rows[0]['harbor_version'] if rows else ''}: {bad}/{len(rows)}")
    if bad:
        raise typer.Exit(1)


def _runner_config(config: Path | None, set_: list[str] | None):
    from swe_envs.terminal.config import TerminalConfig

    return load_cli_config(TerminalConfig, config, set_)


@app.command()
@user_errors(sigterm_unwinds=True)
def run(
    task: Path = typer.Option(..., help="a Harbor task dir (or an old Terminal-Bench one: converted on the fly)"),
    agent: str = typer.Option("oracle", help="oracle | nop | llm"),
    output: Path = typer.Option(..., help="OUT: OUT/result.json and OUT/<trial>/{result.json,agent/,verifier/}"),
    endpoint: str = typer.Option(None, help="llm agent: OpenAI-compatible base URL (or agent.llm in the config)"),
    model: str = typer.Option("default", help="llm agent: model name sent to the endpoint"),
    config: Path = typer.Option(None, help="TerminalConfig YAML (configs/terminal.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set agent.max_turns=20"),
) -> None:
    """Build the task's environment, run one agent, verify; prints the reward."""
    from swe_envs.terminal.trial import run_trials

    cfg = _runner_config(config, set_)
    if agent not in ("oracle", "nop", "llm"):
        raise UserError(f"unknown agent {agent!r} (oracle, nop, llm)")
    if agent == "llm" and endpoint:
        cfg.agent.llm = cfg.agent.llm.model_copy(update={"base_url": endpoint, "model": model}) \
            if cfg.agent.llm else _llm(endpoint, model)
    if agent == "llm" and cfg.agent.llm is None:
        raise UserError("the llm agent needs --endpoint (or agent.llm.base_url in the config)")
    summary = run_trials([task], [agent], output, cfg, log=typer.echo)
    typer.echo(json.dumps({k: summary[k] for k in ("n_trials", "n_errors", "mean_reward")}))
    if summary["n_errors"]:
        raise typer.Exit(1)


def _llm(endpoint: str, model: str):
    from core.llm import LLMConfig

    # generous: a CPU-served model writes a whole task per request
    return LLMConfig(base_url=endpoint, model=model, cache_dir=None, timeout_s=600, max_retries=1)


@app.command()
@user_errors(sigterm_unwinds=True)
def check(
    tasks: Path = typer.Option(..., help="dir of task dirs (Harbor or old Terminal-Bench layout)"),
    output: Path = typer.Option(..., help="OUT: results.jsonl (one row per task), summary.json, trials/"),
    workers: int = typer.Option(1, min=1, help="tasks checked at once"),
    limit: int = typer.Option(0, min=0, help="check only the first N tasks (0 = all)"),
    resume: bool = typer.Option(False, help="keep OUT/results.jsonl rows and skip those tasks"),
    config: Path = typer.Option(None, help="TerminalConfig YAML (configs/terminal.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key"),
    master: str = typer.Option(None, help="check tasks on Spark executors, each with its own Docker engine: "
                                          "local[2], spark://HOST:PORT, yarn (default: --workers local threads)"),
    spark_conf: list[str] = typer.Option(None, "--spark-conf", help="a Spark setting KEY=VALUE (repeat), with --master"),
) -> None:
    """Build each task, run oracle (must score 1) and nop (must score 0); one results row per task."""
    from core.engine import make_engine
    from core.local_engine import LocalEngineConfig
    from core.spark import SparkConfig
    from swe_envs.terminal.check import check_tasks

    cfg = _runner_config(config, set_)
    engine = make_engine(master, LocalEngineConfig(workers=workers), SparkConfig(app_name="swe-envs"), spark_conf)
    summary = check_tasks(tasks, output, cfg, workers=workers, limit=limit, log=typer.echo, resume=resume,
                          engine=engine)
    typer.echo(f"ok {summary['ok']}/{summary['tasks']}  built {summary['built']}  "
               f"oracle pass {summary['oracle_pass']}  -> {output / 'results.jsonl'}")


def _synth_setup(config: Path | None, set_: list[str] | None, endpoint: str | None, model: str, rounds: int | None):
    cfg = _runner_config(config, set_)
    if endpoint:
        cfg.synth.llm = _llm(endpoint, model)
    if rounds:
        cfg.synth.rounds = rounds
    if cfg.synth.llm is None:
        raise UserError("synthesis needs --endpoint (or synth.llm.base_url in the config)")
    return cfg


@app.command()
@user_errors(sigterm_unwinds=True)
def synthesize(
    seeds: Path = typer.Option(..., help="dir of seed task dirs (Harbor or old Terminal-Bench layout)"),
    n: int = typer.Option(..., "--n", min=1, help="candidate lineages (one seed each)"),
    output: Path = typer.Option(..., help="OUT: tasks/ (accepted), attempts.jsonl, metrics.json, candidates/, trials/"),
    endpoint: str = typer.Option(None, help="OpenAI-compatible base URL of the proposer (and judge)"),
    model: str = typer.Option("default", help="model name sent to the endpoint"),
    rounds: int = typer.Option(None, min=1, help="refine rounds per lineage (synth.rounds)"),
    config: Path = typer.Option(None, help="TerminalConfig YAML (configs/terminal.yaml)"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key"),
) -> None:
    """Propose new tasks from seeds; gate each (build, oracle 1, nop 0, rubric) and refine failures."""
    import tempfile

    from swe_envs.terminal.discover import find_tasks
    from swe_envs.terminal.synthesize import seed_prompts
    from swe_envs.terminal.synthesize import synthesize as run_synth
    from swe_envs.terminal.trial import Context, as_harbor

    cfg = _synth_setup(config, set_, endpoint, model, rounds)
    with tempfile.TemporaryDirectory(prefix="terminal-seeds-") as scratch:
        tasks = [as_harbor(p, Path(scratch)) for p in find_tasks(seeds)]
        prompts = seed_prompts(tasks, n, cfg.synth)
    m = run_synth(Context(cfg, typer.echo), cfg.synth, output, prompts, stub_check=False, log=typer.echo)
    typer.echo(json.dumps(m))


@app.command("synthesize-docs")
@user_errors(sigterm_unwinds=True)
def synthesize_docs(
    corpus: Path = typer.Option(..., help="documents: a dir of HTML pages or JSONL {id, text, title?}"),
    n: int = typer.Option(..., "--n", min=1, help="candidate lineages (one document each)"),
    output: Path = typer.Option(..., help="OUT: tasks/, attempts.jsonl, metrics.json"),
    endpoint: str = typer.Option(None, help="OpenAI-compatible base URL of the proposer (and judge)"),
    model: str = typer.Option("default"),
    rounds: int = typer.Option(None, min=1),
    config: Path = typer.Option(None, help="TerminalConfig YAML"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key"),
) -> None:
    """Closed loop from documents: the solution passes, the untouched and the stubbed environments fail."""
    from swe_envs.terminal.synthesize import doc_prompts
    from swe_envs.terminal.synthesize import synthesize as run_synth
    from swe_envs.terminal.trial import Context
    from synth.search.corpus import load_corpus

    cfg = _synth_setup(config, set_, endpoint, model, rounds)
    docs = load_corpus(corpus)
    items = [(d.id, d.title, d.text) for d in docs.docs.values() if len(d.text) >= 500]
    if not items:
        raise UserError(f"{corpus}: no document of at least 500 characters")
    prompts = doc_prompts(items, n, cfg.synth)
    m = run_synth(Context(cfg, typer.echo), cfg.synth, output, prompts, stub_check=True, log=typer.echo)
    typer.echo(json.dumps(m))
