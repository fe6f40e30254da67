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
"""

from __future__ import annotations

import yaml

from swe_envs.terminal.task import HarborTask, TaskFormatError

COMPOSE_KEYS = {"build", "image", "command", "entrypoint", "environment", "working_dir", "depends_on",
                "healthcheck", "deploy", "container_name", "volumes", "ports", "expose", "restart", "pull_policy",
                "init", "tty", "stdin_open"}
# keys read but without effect here: names and mounts are ours to choose; nothing is published;
# images are never pulled; every container gets an init and no terminal
COMPOSE_IGNORED = {"container_name", "volumes", "ports", "expose", "restart", "pull_policy", "init", "tty",
                   "stdin_open"}


def compose_services(task: HarborTask) -> dict[str, dict]:
    """The compose file's services as written (keys checked)."""
    try:
        data = yaml.safe_load(task.compose_file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise TaskFormatError(f"{task.compose_file}: invalid YAML: {err}") from None
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
    if base is not None and "build" not in main and "image" not in main:
        main.update(base)
    if "build" not in main and "image" not in main:
        raise TaskFormatError(f"{task.compose_file}: services.main has neither build nor image, and the task has "
                              "no environment/Dockerfile nor [environment].docker_image to build it from "
                              "(Harbor's base main service)")
    return {"main": main, **services}


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
