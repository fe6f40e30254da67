"""Harbor's two verifier modes, and scoring a step in either.

``shared`` (the default): the step's tests run in the agent's own container, uploaded to ``/tests``
only now. ``separate`` (``[verifier] environment_mode = "separate"``, or a ``[verifier.environment]``
table; per step by ``[steps.verifier]``): after the agent's phase the ``[[verifier.collect]]`` hooks
run, the artifacts are copied out of the agent's containers (``/logs/artifacts`` and the task's and
the step's ``artifacts`` entries) and the tests run in a fresh container with the artifacts put back
at their paths: the grader sees what the task declared and nothing the agent did to the tools.

The separate container, resolved as Harbor does (``resolve_verifier_environment_definition``): a
``docker_image`` of the step's then the task's ``[verifier.environment]`` (the image owns
``/tests``), else a ``Dockerfile`` or ``docker-compose.yaml`` in the step's then the task's
``tests/`` (built from that folder, which the image bundles: nothing is uploaded), else a fresh
copy of the task's own environment (tests uploaded). Its limits and env are
``[verifier.environment]``'s where given, else the task's ``[environment]``. It is built like the
agent's (substitutes, the warm layer serving test-time installs offline) and runs under the same
isolation and network decision.

Each collected artifact is kept in the trial's ``artifacts/`` (``destination``, else its source
path). Extraction uses tarfile's ``data`` filter: no device files, no links out of the tree, no
setuid bits; ``exclude`` patterns drop members; a missing source is skipped and listed, as Harbor
does; beyond ``runner.artifacts_max_mb`` in all, the step's verification is an error of the trial.
"""

from __future__ import annotations

import fnmatch
import io
import json
import math
import posixpath
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker.errors

from swe_envs.terminal.isolation import INFRA_USER
from swe_envs.terminal.task import HarborTask, Step
from swe_envs.terminal.task_config import (
    ArtifactEntry,
    EnvironmentSection,
    TaskFormatError,
    TaskSection,
    verifier_mode,
)

CONVENTION = "/logs/artifacts"  # Harbor's agent publish folder, always collected


@dataclass(frozen=True)
class SeparateVerifier:
    config: EnvironmentSection  # limits, env, image of the verifier's container
    directory: Path  # what it is built from: tests/ (bundled) or environment/
    bundled: bool  # the image owns /tests: nothing is uploaded
    image_first: bool  # a [verifier.environment].docker_image, over a Dockerfile in directory


def separate_verifier(task: HarborTask, step: Step) -> SeparateVerifier | None:
    """The container a step's verifier runs in, or None in shared mode."""
    cfg, own = task.config, step.verifier
    if verifier_mode(cfg, own) != "separate":
        return None
    env = own.environment if own is not None and own.environment is not None else cfg.verifier.environment
    config = (env or cfg.environment).model_copy(deep=True)
    candidates = [(own.environment if own is not None else None, task.path / "steps" / step.name / "tests")] \
        if task.multi_step else []
    candidates.append((cfg.verifier.environment, task.path / "tests"))
    for declared, directory in candidates:
        if declared is not None and declared.docker_image:
            return SeparateVerifier(config.model_copy(update={"docker_image": declared.docker_image}), directory,
                                    True, True)
        if any((directory / n).is_file() for n in ("Dockerfile", "docker-compose.yaml")):
            return SeparateVerifier(config.model_copy(update={"docker_image": None}), directory, True, False)
    return SeparateVerifier(config.model_copy(update={"docker_image": cfg.environment.docker_image}),
                            task.path / "environment", False, False)


def verifier_task(task: HarborTask, step: Step, sv: SeparateVerifier) -> HarborTask:
    """The verifier's environment as a task the builder and ``Environment`` take. A copy of the task's
    own environment keeps its name, so its images are the agent's (built once)."""
    name = task.name if not sv.bundled else f"{task.name}-verifier" + (f"-{step.name}" if task.multi_step else "")
    cfg = task.config.model_copy(update={"environment": sv.config, "task": TaskSection(name=name)})
    return HarborTask(task.path, cfg, task.instruction, [step], env_dir=sv.directory, image_first=sv.image_first)


class RewardError(Exception):
    pass


def parse_reward(json_text: str | None, txt: str | None) -> tuple[float, dict]:
    """(reward, all numeric fields); raises RewardError when there is no usable reward."""
    if json_text is not None and json_text.strip():
        try:
            data = json.loads(json_text)
        except json.JSONDecodeError as err:
            raise RewardError(f"reward.json is not JSON: {err.msg}") from None
        if isinstance(data, int | float) and not isinstance(data, bool):
            data = {"reward": data}
        if not isinstance(data, dict):
            raise RewardError("reward.json must be an object of numeric fields")
        nums = {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        if not nums:
            raise RewardError("reward.json has no numeric field")
        value = nums.get("reward", sum(nums.values()) / len(nums))
        if not math.isfinite(value):
            raise RewardError(f"reward is not finite: {value}")
        return value, nums
    if txt is None:
        raise RewardError("the verifier wrote no /logs/verifier/reward.txt or reward.json")
    if not txt.strip():
        raise RewardError("reward.txt is empty")
    try:
        value = float(txt.strip().split()[0])
    except ValueError:
        raise RewardError(f"reward.txt is not a number: {txt.strip()[:50]!r}") from None
    if not math.isfinite(value):
        raise RewardError(f"reward is not finite: {value}")
    return value, {"reward": value}


def verify_step(env, step: Step, task: HarborTask, cfg, vdir: Path,
                upload_tests: bool = True) -> tuple[float | None, dict, str]:
    """Run one step's verifier in ``env`` (its tests uploaded fresh unless the image owns them): (reward,
    the reward file's fields, why there is none)."""
    v = task.config.verifier
    timeout = min((step.timeout_sec or v.timeout_sec) * cfg.runner.timeout_multiplier, cfg.runner.verifier_timeout_max_s)
    fresh = "rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier" if upload_tests else \
        "rm -rf /logs/verifier && mkdir -p /logs/verifier"
    env.exec(f"{fresh} && chmod 1777 /logs/verifier", timeout_s=60, user=INFRA_USER)
    if upload_tests:
        for d in step.tests_dirs:  # the task's shared tests/, then the step's own over them (Harbor's order)
            env.upload(d, "/tests")
    # the verifier runs as the task says, else as the image's user (never as a runner.agent_user)
    user = (step.verifier.user if step.verifier is not None and step.verifier.user else None) or v.user or ""
    extra = step.verifier.env if step.verifier is not None else {}
    res = env.exec("bash /tests/test.sh", timeout_s=timeout, env={"TEST_DIR": "/tests", **v.env, **extra}, user=user)
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "test-stdout.txt").write_text(res.output, encoding="utf-8")
    rj, rt = env.read("/logs/verifier/reward.json"), env.read("/logs/verifier/reward.txt")
    for name, text in (("reward.json", rj), ("reward.txt", rt)):
        if text is not None:
            (vdir / name).write_text(text, encoding="utf-8")
    try:
        value, fields = parse_reward(rj, rt)
    except RewardError as err:
        return None, {}, f"{err} (test.sh exit {res.rc}{', timed out' if res.timed_out else ''})"
    return value, fields, ""


def score_step(ctx, env, step: Step, task: HarborTask, vdir: Path, artifacts_dir: Path) -> tuple[float | None, dict, str, dict]:
    """A step verified in the mode its task says: (reward, fields, why there is none, what was done)."""
    sv = separate_verifier(task, step)
    if sv is None:
        return *verify_step(env, step, task, ctx.cfg, vdir), {"mode": "shared"}
    from swe_envs.terminal.environment import Environment

    info: dict = {"mode": "separate", "bundled_tests": sv.bundled, "from": str(sv.directory.relative_to(task.path))}
    hooks = [*task.config.verifier.collect, *(step.verifier.collect if step.verifier is not None else [])]
    for h in hooks:
        res = env.exec(h.command, timeout_s=h.timeout_sec, user=h.user or "", service=h.service)
        info.setdefault("collect", []).append({"service": h.service, "rc": res.rc})
    kept = collect_artifacts(env, [*task.config.artifacts, *step.artifacts], artifacts_dir,
                             ctx.cfg.runner.artifacts_max_mb * 2**20)
    info["artifacts"] = [{"source": a.source, "kept": str(p.relative_to(artifacts_dir)) if p else None, "refused": r}
                         for a, p, r in kept]
    vtask = verifier_task(task, step, sv)
    built = ctx.build(vtask)
    info["images"], info["substitutions"] = built.images, built.substitutions
    if not built.ok:
        return None, {}, f"verifier environment did not build: {built.error}", info
    venv = Environment(ctx.client, vtask, built, ctx.cfg.runner)
    try:
        restore_artifacts(venv, kept)
        return *verify_step(venv, step, vtask, ctx.cfg, vdir, upload_tests=not sv.bundled), info
    finally:
        venv.close()


def _entries(declared: list[ArtifactEntry]) -> list[ArtifactEntry]:
    """The convention folder first unless an entry declares it for main (with its own exclude)."""
    main = [a for a in declared if a.service in (None, "main")]
    if any(a.source.rstrip("/") == CONVENTION for a in main):
        return list(declared)
    return [ArtifactEntry(source=CONVENTION), *declared]


def _absolute(container, source: str) -> str:
    """The source as a normalized absolute path (a relative one is in the container's working directory,
    which the task's image sets: normalized, so no ``..`` can lead the host copy out of the trial)."""
    if not source.startswith("/"):
        source = f"{(container.attrs.get('Config') or {}).get('WorkingDir') or '/'}/{source}"
    return posixpath.normpath("/" + source.lstrip("/"))


def collect_artifacts(env, declared: list[ArtifactEntry], dest: Path,
                      max_bytes: int) -> list[tuple[ArtifactEntry, Path | None, list[str]]]:
    """Copy each artifact out of its container into ``dest`` (sanitized); (entry with its absolute
    source, where it is kept or None when the source does not exist, the members the filter refused)."""
    kept, total = [], 0
    for a in _entries(declared):
        container = env.container(a.service)
        try:  # a container that is gone (stopped by a guard) is an error of the trial, not missing artifacts
            container.reload()
        except docker.errors.NotFound:
            raise RuntimeError(f"service {a.service or 'main'}'s container is gone: its artifacts cannot be "
                               "collected") from None
        source = _absolute(container, a.source)
        entry = a.model_copy(update={"source": source})
        try:
            stream, _ = container.get_archive(source)
        except docker.errors.NotFound:
            kept.append((entry, None, []))
            continue
        data = bytearray()
        for chunk in stream:
            data += chunk
            if total + len(data) > max_bytes:
                raise TaskFormatError(f"artifacts exceed runner.artifacts_max_mb ({max_bytes >> 20} MB) at {source}")
        total += len(data)
        target = dest / PurePosixPath(a.destination or source.lstrip("/") or "root")
        kept.append((entry, *_extract(bytes(data), target, a.exclude)))
    return kept


def _extract(data: bytes, target: Path, exclude: list[str]) -> tuple[Path | None, list[str]]:
    """The archive's single top entry extracted at ``target`` through tarfile's ``data`` filter: (where, or
    None when nothing is left; each member the filter refused, such as a link out of the tree or a device,
    with its reason). ``exclude`` is matched against each member's path below the top and its name, as
    ``tar --exclude`` (asked for: not counted)."""
    refused: list[str] = []

    def safe(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        below = member.name.split("/", 1)[1] if "/" in member.name else ""
        if below and any(fnmatch.fnmatch(below, p) or fnmatch.fnmatch(PurePosixPath(below).name, p) for p in exclude):
            return None
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError as err:
            refused.append(f"{member.name}: {type(err).__name__}")
            return None

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp, tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        tar.extractall(tmp, filter=safe)
        top = Path(tmp) / names[0].split("/", 1)[0] if names else None
        if top is None or not (top.exists() or top.is_symlink()):
            return None, refused
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        shutil.move(str(top), target)
    return target, refused


def restore_artifacts(venv, kept: list[tuple[ArtifactEntry, Path | None, list[str]]]) -> None:
    """Each kept artifact put back at its source path in the verifier's main container (the convention
    folder at the verifier's own)."""
    from swe_envs.terminal.environment import tar_dir

    for entry, path, _ in kept:
        if path is None:
            continue
        target = PurePosixPath(entry.source)
        parent, name = str(target.parent), target.name
        venv.exec(f"mkdir -p {shlex.quote(parent)}" + (f" && rm -rf {shlex.quote(str(target))}" if str(target) != "/" else ""),
                  timeout_s=60, user=INFRA_USER)
        if path.is_dir():
            venv.exec(f"mkdir -p {shlex.quote(str(target))}", timeout_s=60, user=INFRA_USER)
            venv.container().put_archive(str(target), tar_dir(path))
        else:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                info = tar.gettarinfo(str(path), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            venv.container().put_archive(parent, buf.getvalue())
        if str(target) == CONVENTION:
            venv.exec(f"chmod 1777 {CONVENTION}", timeout_s=60, user=INFRA_USER)
