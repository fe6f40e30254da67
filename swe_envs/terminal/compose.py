"""A task's services, as Harbor composes them: its base ``main`` service merged with ``environment/docker-compose.yaml``.

Harbor runs ``docker compose`` over its own base file first and the task's compose file after it:
the base declares ``main`` built from ``environment/`` (its ``Dockerfile``) or, with
``[environment].docker_image``, that prebuilt image, running ``sleep infinity``. A task's compose
file therefore usually adds sidecars and *overrides* ``main`` (``depends_on``, ``environment``)
without repeating ``build``/``image``, or does not mention ``main`` at all. Here the same merge is
done on the parsed files: the task's ``main`` keys win, its ``build``/``image`` (when given) replace
the base's. Terminal-Bench's main service was ``client``; a compose file without ``main`` whose
task has no Dockerfile nor image keeps the older reading (``client``, or the only service).

The subset of service keys the runner maps onto the Docker SDK is ``COMPOSE_KEYS``; any other key
is an error naming it (never silently dropped).

Values are interpolated as ``docker compose`` does (``$VAR``, ``${VAR}``, ``${VAR:-default}``,
``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}``, ``${VAR:+alt}``, ``${VAR+alt}``, nesting, ``$$``), over
the variables Harbor sets when it runs compose (``harbor_variables``: ``CONTEXT_DIR``, ``MAIN_IMAGE_NAME``, the
log paths, ``CPUS``, ``MEMORY``). Not the host's own environment, which Harbor also passes: a task is untrusted,
and its containers must not receive the host's variables (credentials) by naming them. An unset variable is
empty, as in compose, and logged.
"""

from __future__ import annotations

import logging
import re

import yaml

from swe_envs.terminal.task import HarborTask, TaskFormatError

COMPOSE_KEYS = {"build", "image", "command", "entrypoint", "environment", "working_dir", "depends_on",
                "healthcheck", "deploy", "container_name", "volumes", "ports", "expose", "restart", "pull_policy",
                "init", "tty", "stdin_open"}
# keys read but without effect here: names and mounts are ours to choose; nothing is published;
# images are never pulled; every container gets an init and no terminal
COMPOSE_IGNORED = {"container_name", "volumes", "ports", "expose", "restart", "pull_policy", "init", "tty",
                   "stdin_open"}


# what Harbor names the image it builds for main; a service with this image gets main's own build or image
MAIN_IMAGE = "harbor-main-image"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", re.S)
log = logging.getLogger(__name__)


def harbor_variables(task: HarborTask) -> dict[str, str]:
    """The variables Harbor's docker environment sets for compose (its log paths are the in-container ones:
    this runner mounts nothing from the host)."""
    env = task.config.environment
    logs = {f"{side}_{kind}_PATH": f"/logs/{d}" for side in ("HOST", "ENV")
            for kind, d in (("VERIFIER_LOGS", "verifier"), ("AGENT_LOGS", "agent"), ("ARTIFACTS", "artifacts"))}
    cpus = int(env.cpus) if float(env.cpus).is_integer() else env.cpus
    return {"MAIN_IMAGE_NAME": MAIN_IMAGE, "CONTEXT_DIR": str(task.environment_dir.resolve()),
            "PREBUILT_IMAGE_NAME": env.docker_image or "", "CPUS": str(cpus),
            "MEMORY": f"{env.memory_limit_mb()}M", **logs}


def interpolate(text: str, variables: dict[str, str], unset: set[str]) -> str:
    """``text`` with compose's variable syntax expanded; a malformed one or a required one missing is an error."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
        elif text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            end, depth, j = -1, 1, i + 2
            while j < len(text):
                if text.startswith("${", j):
                    depth, j = depth + 1, j + 2
                    continue
                if text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        end = j
                        break
                j += 1
            if end < 0:
                raise TaskFormatError(f"invalid interpolation format (no closing brace) in {text!r}")
            out.append(_expand(text[i + 2:end], text, variables, unset))
            i = end + 1
        elif m := _NAME.match(text, i + 1):
            out.append(_value(m[0], variables, unset))
            i = m.end()
        else:
            raise TaskFormatError(f"invalid interpolation format in {text!r}: a '$' neither $$ nor a variable")
    return "".join(out)


def _value(name: str, variables: dict[str, str], unset: set[str]) -> str:
    if name not in variables:
        unset.add(name)
    return variables.get(name, "")


def _expand(body: str, text: str, variables: dict[str, str], unset: set[str]) -> str:
    m = _BRACED.fullmatch(body)
    if not m:
        raise TaskFormatError(f"invalid interpolation format in {text!r}: ${{{body}}}")
    name, op, arg = m[1], m[2], m[3] or ""
    value = variables.get(name)
    missing = value is None or (op is not None and op.startswith(":") and value == "")
    if op is None:
        return _value(name, variables, unset)
    if op.endswith("-"):
        return interpolate(arg, variables, unset) if missing else value
    if op.endswith("?"):
        if missing:
            raise TaskFormatError(f"required variable {name} is missing a value: {interpolate(arg, variables, unset)}")
        return value
    return "" if missing else interpolate(arg, variables, unset)  # "+": the alternative when set


def _interpolated(node, variables: dict[str, str], unset: set[str]):
    """Every string value of the parsed file (not the keys) interpolated, as compose does."""
    if isinstance(node, str):
        return interpolate(node, variables, unset)
    if isinstance(node, dict):
        return {k: _interpolated(v, variables, unset) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolated(v, variables, unset) for v in node]
    return node


def compose_services(task: HarborTask) -> dict[str, dict]:
    """The compose file's services, interpolated (keys checked)."""
    try:
        data = yaml.safe_load(task.compose_file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise TaskFormatError(f"{task.compose_file}: invalid YAML: {err}") from None
    unset: set[str] = set()
    try:
        data = _interpolated(data, harbor_variables(task), unset)
    except TaskFormatError as err:
        raise TaskFormatError(f"{task.compose_file}: {err}") from None
    if unset:
        log.warning("%s: variables not set, empty as in compose: %s", task.compose_file, ", ".join(sorted(unset)))
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        raise TaskFormatError(f"{task.compose_file}: no services")
    for name, svc in services.items():
        if svc is not None and not isinstance(svc, dict):
            raise TaskFormatError(f"{task.compose_file}: services.{name} is not a mapping")
        for key in (svc or {}):
            if key not in COMPOSE_KEYS:
                raise TaskFormatError(f"{task.compose_file}: services.{name}.{key} is not supported by the runner")
    return {str(n): dict(s or {}) for n, s in services.items()}


def base_main(task: HarborTask) -> dict | None:
    """Harbor's base ``main``: built from environment/ (a Dockerfile there) or the task's docker_image."""
    if task.dockerfile is not None:
        return {"build": {"context": "."}}
    if task.config.environment.docker_image:
        return {"image": task.config.environment.docker_image}
    return None


def task_services(task: HarborTask) -> dict[str, dict]:
    """Every service of the task, ``main`` first; a task without a compose file has only ``main``."""
    base = base_main(task)
    if task.compose_file is None:
        if base is None:
            raise TaskFormatError(f"{task.path}: environment/ has no Dockerfile and [environment].docker_image "
                                  "is not set")
        return {"main": base}
    services = compose_services(task)
    if "main" not in services and base is None:
        return services  # the older reading: main_service picks client or the only service
    main = dict(services.pop("main", {}))
    if main.get("image") == MAIN_IMAGE:  # Harbor's name for what it builds for main: the base, or main's build
        del main["image"]
    if base is not None and "build" not in main and "image" not in main:
        main.update(base)
    if "build" not in main and "image" not in main:
        raise TaskFormatError(f"{task.compose_file}: services.main has neither build nor image, and the task has "
                              "no environment/Dockerfile nor [environment].docker_image to build it from "
                              "(Harbor's base main service)")
    own = {"build": main["build"]} if "build" in main else {"image": main["image"]}
    for svc in services.values():  # a sidecar on main's image
        if svc.get("image") == MAIN_IMAGE and "build" not in svc:
            del svc["image"]
            svc.update(own)
    return _contexts_inside({"main": main, **services}, task)


def _contexts_inside(services: dict[str, dict], task: HarborTask) -> dict[str, dict]:
    """A build context is sent to the engine whole: one outside the task's folder (``/``, ``../..``, an
    absolute path) would hand the host's files to an untrusted build."""
    root = task.path.resolve()
    for name, svc in services.items():
        b = svc.get("build")
        ctx = b if isinstance(b, str) else (b or {}).get("context", ".") if isinstance(b, dict) else None
        if ctx is not None and not (task.environment_dir / str(ctx)).resolve().is_relative_to(root):
            raise TaskFormatError(f"services.{name}.build.context {ctx!r} is outside the task's folder")
    return services


def main_service(services: dict[str, dict]) -> str:
    for n in ("main", "client"):
        if n in services:
            return n
    if len(services) == 1:
        return next(iter(services))
    raise TaskFormatError(f"compose file has no 'main' (or 'client') service among {sorted(services)}")


def env_dict(raw) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): "" if v is None else str(v) for k, v in raw.items()}
    out = {}
    for item in raw or []:
        k, _, v = str(item).partition("=")
        out[k] = v
    return out


def start_order(services: dict[str, dict]) -> list[str]:
    """depends_on first (compose's order); a cycle is an error."""
    order: list[str] = []

    def visit(n: str, stack: tuple[str, ...]) -> None:
        if n in order:
            return
        if n in stack:
            raise TaskFormatError(f"compose depends_on cycle: {' -> '.join(stack + (n,))}")
        deps = services[n].get("depends_on") or []
        for d in (deps if isinstance(deps, list) else list(deps)):
            if d not in services:
                raise TaskFormatError(f"services.{n}.depends_on names unknown service {d!r}")
            visit(d, stack + (n,))
        order.append(n)

    for n in services:
        visit(n, ())
    return order
