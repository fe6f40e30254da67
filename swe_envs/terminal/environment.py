"""A running task environment: the task's image(s) built, the main container started, exec and file copy.

Single-container tasks build ``environment/Dockerfile`` (or use ``[environment].docker_image``).
Multi-service tasks (``environment/docker-compose.yaml``) are run by the Docker SDK directly:
``docker compose`` is a CLI plugin that Debian's docker.io does not ship. The services are
Harbor's (``compose.py``: its base ``main`` built from ``environment/`` or ``docker_image``, merged
with the task's file) on one private network, reachable by name. ``main`` runs ``sleep infinity``
and the agent and verifier exec into it; its image gets the warm layer (``warm.py``,
``pywarm.py``) when the tests would fetch something offline.

Containers run with the task's CPU/memory limits (capped by the runner config), a pids limit, no
host mounts, every capability dropped and ``no-new-privileges`` (``isolation.py``: who runs the
commands, and why), offline unless the runner follows the task's network mode;
they carry the sandbox's owner label, so ``python -m swe_envs cleanup`` sweeps ones left behind.
Commands get a time limit inside the container (``timeout``) and a host-side one.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from swe_envs import untrusted_network
from swe_envs.disk_guard import DiskGuard, fsize_ulimit
from swe_envs.images import Images, sha, slug
from swe_envs.repos import tar_with
from swe_envs.sandbox import LABEL, owner
from swe_envs.terminal import pywarm
from swe_envs.terminal.compose import env_dict, main_service, start_order, task_services
from swe_envs.terminal.config import RunnerConfig
from swe_envs.terminal.isolation import INFRA_USER, agent_user, security_options
from swe_envs.terminal.substitute import CURL_SHIM, Substituter, from_images
from swe_envs.terminal.task import HarborTask, TaskFormatError
from swe_envs.terminal.warm import test_scripts, warm_context, warm_dockerfile, warmings


@dataclass
class ExecResult:
    rc: int
    output: str
    timed_out: bool
    seconds: float


@dataclass
class Built:
    ok: bool
    images: dict[str, str] = field(default_factory=dict)  # service -> image tag
    log: str = ""
    error: str = ""
    seconds: float = 0.0
    substitutions: list[dict] = field(default_factory=list)
    # the network the task's RUN steps get (untrusted_network.record): a fallback that reaches the host shows
    network: dict = field(default_factory=dict)


def tar_dir(root: Path, prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(root.rglob("*")):
            arc = prefix + p.relative_to(root).as_posix()
            info = tar.gettarinfo(str(p), arcname=arc)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if p.is_file() and not p.is_symlink():
                with open(p, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buf.getvalue()


def _tree_digest(root: Path) -> str:
    parts = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            parts.append(f"{p.relative_to(root).as_posix()}:{oct(p.stat().st_mode & 0o777)}:{sha(p.read_bytes().decode('latin-1'))}")
    return sha(*parts)


def build_task_images(task: HarborTask, images: Images, subst: Substituter) -> Built:
    """Build every image the task needs (substituting upstream FROM images); cached by content."""
    t0 = time.monotonic()
    out = Built(ok=True, network=untrusted_network.record(images.client))
    env_dir = task.environment_dir
    specs = {}
    # Harbor's base main (environment/Dockerfile or docker_image) merged with the task's compose file
    for name, svc in task_services(task).items():
        b = svc.get("build")
        if b is not None:
            b = {"context": b} if isinstance(b, str) else dict(b)
            specs[name] = (env_dir / b.get("context", "."), b.get("dockerfile", "Dockerfile"))
        elif svc.get("image"):
            specs[name] = svc["image"]
        else:
            return Built(False, error=f"services.{name}: neither build nor image")
    logs = []
    main = main_service(specs)
    for name, spec in specs.items():
        if isinstance(spec, str):  # a prebuilt image: substitute it if absent
            s = subst.ensure(spec)
            out.substitutions.append({"upstream": spec, "local": s.local, "real": s.real, "error": s.error})
            if s.local is None:
                return Built(False, out.images, "".join(logs), s.error, time.monotonic() - t0, out.substitutions, out.network)
            tag, ctx = spec, env_dir
        else:
            ctx, dfile = spec
            if not (ctx / dfile).is_file():
                return Built(False, error=f"{ctx / dfile} not found")
            dockerfile = (ctx / dfile).read_text(encoding="utf-8")
            parent_ids = []
            for ref in from_images(dockerfile):
                s = subst.ensure(ref)
                out.substitutions.append({"upstream": ref, "local": s.local, "real": s.real, "error": s.error})
                if s.local is None:
                    logs.append(s.built.log if s.built else "")
                    return Built(False, out.images, "".join(logs), s.error, time.monotonic() - t0, out.substitutions, out.network)
                parent_ids.append(images.image_id(ref) or "")
            tag = f"terminal/{slug(task.name)}-{slug(name)}:{sha(dockerfile, _tree_digest(ctx), *parent_ids)[:16]}"
            ctx_tar = tar_dir(ctx)
            if dfile != "Dockerfile":
                ctx_tar = tar_with(ctx_tar, {"Dockerfile": dockerfile.encode()})
            if images.image_id(tag) is None:
                images.log(f"building {tag}")
            res = images.build(tag, dockerfile, ctx_tar, labels={"swe_envs.terminal.task": task.name[:200]})
            logs.append(res.log)
            if not res.ok:
                return Built(False, out.images, "".join(logs), f"build failed: {res.error}", time.monotonic() - t0,
                             out.substitutions, out.network)
        if name == main:  # the tests run in the main container: their test-time fetches are warmed there
            tag, error = _warm_main(task, tag, ctx, images, subst, out, logs)
            if error:
                return Built(False, out.images, "".join(logs), error, time.monotonic() - t0, out.substitutions, out.network)
        elif isinstance(spec, str):
            tag = spec
        out.images[name] = tag
    out.log, out.seconds = "".join(logs), time.monotonic() - t0
    return out


def _warm_main(task: HarborTask, tag: str, ctx: Path, images: Images, subst: Substituter, out: Built,
               logs: list[str]) -> tuple[str, str]:
    """(image, error): ``tag`` with a layer serving what the tests would fetch offline (warm.py's
    rules and the tests' Python installs, pywarm.py), each recorded as a substitution; ``tag``
    itself when nothing needs warming."""
    tests_dirs = [d for s in task.steps for d in s.tests_dirs]
    tests = test_scripts(tests_dirs)
    rules = warmings(ctx, tests)
    lines = warm_dockerfile(tag, rules, ctx, tests).splitlines()
    context = warm_context(rules)
    subs = [{"upstream": w.upstream, "local": w.local, "real": False, "error": ""} for w in rules]

    def python_layer(extra: list[str]) -> str:  # an interpreter for an image without python3
        ptag = f"{tag.rpartition(':')[0]}-python:{sha(tag, *extra)[:16]}"
        res = images.build(ptag, "\n".join([f"FROM {tag}", *extra]) + "\n", b"")
        logs.append(res.log)
        if not res.ok:
            raise pywarm.WarmError(f"installing python3 failed: {res.error}")
        return ptag

    try:
        py = pywarm.plan(images.client, tag, tests_dirs, CURL_SHIM, subst.cfg.wheel_extras, build_python=python_layer,
                         uv_pinned=subst.cfg.uv_pinned)
    except (pywarm.WarmError, docker.errors.DockerException) as err:
        out.substitutions.append({"upstream": "test-time Python installs", "local": None, "real": False,
                                  "error": str(err)})
        return tag, f"warm layer failed: {err}"
    if py is not None:
        lines += py.lines
        context.update(py.context)
        subs += py.substitutions
        logs.append(py.log)
    if len(lines) == 1:  # only FROM: nothing to warm
        return tag, ""
    wdf = "\n".join(lines) + "\n"
    wtag = f"{tag.rpartition(':')[0]}-warm:{sha(tag, wdf, *(f'{k}:{hashlib.sha256(v).hexdigest()}' for k, v in sorted(context.items())))[:16]}"
    if images.image_id(wtag) is None:
        images.log(f"building {wtag} ({', '.join([w.rule for w in rules] + (['python-installs'] if py else []))})")
    wres = images.build(wtag, wdf, tar_with(b"", context), labels={"swe_envs.terminal.task": task.name[:200]})
    logs.append(wres.log)
    out.substitutions += [{**s, "local": s["local"] if wres.ok else None, "error": "" if wres.ok else wres.error}
                          for s in subs]
    return (wtag, "") if wres.ok else (tag, f"warm layer failed: {wres.error}")


def network_decision(task: HarborTask, cfg: RunnerConfig) -> dict:
    """What network a trial of ``task`` gets and why; written into every result, so a task that asks
    for the internet (``allow_internet = true``, ``network_mode = "public"``, or Harbor's default) and
    ran offline says so."""
    env = task.config.environment
    asked = env.network()
    declared = ("network_mode" if env.network_mode else "allow_internet" if env.allow_internet is not None
                else "default (Harbor: public)")
    phases = {k: v for k in ("agent", "verifier")
              if isinstance(v := (getattr(task.config, k).model_extra or {}).get("network_mode"), str)}
    if cfg.network == "none":
        run = "offline"
        why = ("runner.network = none (the offline default): no container gets a network; test-time installs "
               "are served by the warm layer" if asked != "no-network" else "the task asks for no network")
    elif asked == "public":
        run, why = "public", "runner.network = task and the task asks for a public network"
    elif asked == "allowlist":
        run, why = "offline", f"an allowlist ({', '.join(env.allowlist) or 'empty'}) is not enforced here: run offline"
    else:
        run, why = "offline", "the task asks for no network"
    return {"asked": asked, "declared_by": declared, "phases": phases, "run": run, "reason": why}


class Environment:
    """The started containers of one trial; ``close`` removes them (and their network)."""

    def __init__(self, client: docker.DockerClient, task: HarborTask, built: Built, cfg: RunnerConfig):
        self.client, self.task, self.cfg = client, task, cfg
        self.containers: dict[str, docker.models.containers.Container] = {}
        self.network = None
        self.run_id = uuid.uuid4().hex[:12]
        self.disk = DiskGuard(client.api, cfg.disk_mb)
        self.network_decision = network_decision(task, cfg)
        self.offline = self.network_decision["run"] == "offline"
        self.agent_user = agent_user(task.config.agent.user, cfg)
        try:
            self._start(built)
        except BaseException:  # a service that never became healthy: the ones already started go too
            self.close()
            raise

    def _limits(self) -> dict:
        env = self.task.config.environment
        mem = min(env.memory_limit_mb(self.cfg.memory_mb_default), self.cfg.memory_mb_max)
        return {"nano_cpus": int(min(env.cpus, self.cfg.cpus_max) * 1e9), "mem_limit": f"{mem}m",
                "memswap_limit": f"{mem}m", "pids_limit": self.cfg.pids, **security_options(self.cfg),
                "ulimits": [fsize_ulimit(self.cfg.disk_mb)],
                "labels": {LABEL: owner(), "swe_envs.run": self.run_id}}

    def _start(self, built: Built) -> None:
        services = task_services(self.task)
        main = main_service(services)
        net_mode = None
        if len(services) > 1:
            # one private network; internal=True keeps it offline while services reach each other by name
            self.network = self.client.networks.create(f"terminal-{self.run_id}", internal=self.offline,
                                                       labels={LABEL: owner()})
        elif self.offline:
            net_mode = "none"
        else:  # online: the registries and the internet, never the host's own services
            net_mode = untrusted_network.network(self.client)
        order = start_order(services)
        for name in order:
            svc = services[name]
            env = dict(self.task.config.environment.env) if name == main else {}
            env.update(env_dict(svc.get("environment")))
            kwargs = self._limits()
            if name == main:
                kwargs["command"] = ["sh", "-c", "sleep infinity"]
            elif svc.get("command") is not None:
                kwargs["command"] = svc["command"]
            if svc.get("entrypoint") is not None:
                kwargs["entrypoint"] = svc["entrypoint"]
            if svc.get("working_dir"):
                kwargs["working_dir"] = svc["working_dir"]
            hc = svc.get("healthcheck")
            if hc and hc.get("test"):
                kwargs["healthcheck"] = {"test": hc["test"], "interval": int(1e9), "retries": int(hc.get("retries", 30))}
            if self.network is not None:
                kwargs["network"] = self.network.name  # never the default bridge (it has the internet)
            else:
                kwargs["network_mode"] = net_mode
            c = self.client.containers.create(built.images[name], detach=True, environment=env, init=True,
                                              name=f"terminal-{self.run_id}-{slug(name)}", **kwargs)
            self.containers[name] = c
            self.disk.watch(c.id)
            if self.network is not None:  # re-attach with the service name as its DNS alias
                self.network.disconnect(c)
                self.network.connect(c, aliases=[name])
            c.start()
            if hc and hc.get("test"):
                self._wait_healthy(c, name)
        self.main = self.containers[main]
        # writable by whichever user the agent and the verifier run as
        self.exec("mkdir -p /logs/agent /logs/verifier /logs/artifacts /tests /solution && "
                  "chmod 1777 /logs/agent /logs/verifier /logs/artifacts", timeout_s=60, user=INFRA_USER)
        if self.task.config.environment.healthcheck:
            hc = self.task.config.environment.healthcheck
            for _ in range(hc.retries + 1):
                if self.exec(hc.command, timeout_s=hc.timeout_sec, user="").rc == 0:
                    break
                time.sleep(hc.interval_sec)
            else:
                raise RuntimeError(f"healthcheck never passed: {hc.command}")

    def _wait_healthy(self, c, name: str, limit_s: float = 120.0) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            c.reload()
            status = (c.attrs.get("State", {}).get("Health") or {}).get("Status")
            if status == "healthy":
                return
            time.sleep(1)
        raise RuntimeError(f"service {name} did not become healthy in {limit_s:.0f}s")

    def offline_env(self) -> dict[str, str]:
        """Tell package tools there is no network, so they use what the image provisions."""
        if not self.offline:
            return {}
        # pip and uv find what the substitute's wheelhouse provisions (pytest and its dependencies)
        return {"UV_OFFLINE": "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/opt/provision/wheels",
                "UV_FIND_LINKS": "/opt/provision/wheels", "UV_PYTHON_DOWNLOADS": "never",
                "CARGO_NET_OFFLINE": "true", "GOPROXY": "off",
                "GOFLAGS": "-mod=mod", "npm_config_offline": "true"}

    def exec(self, command: str, timeout_s: float, env: dict[str, str] | None = None, user: str | None = None,
             workdir: str | None = None, service: str | None = None) -> ExecResult:
        """Run ``command`` with bash (sh if absent) under ``timeout``; output is stdout+stderr. ``user``:
        None = the agent's user (``isolation.agent_user``), '' = the image's user. ``service``: a compose
        service's container instead of main's."""
        user = self.agent_user if user is None else user
        container = self.container(service)
        t0 = time.monotonic()
        limit = max(1, int(timeout_s + 0.999))
        script = (f"if command -v bash >/dev/null 2>&1; then exec timeout -k 5 {limit} bash -c {shlex.quote(command)}; "
                  f"else exec timeout -k 5 {limit} sh -c {shlex.quote(command)}; fi")
        box: dict = {}

        def target():
            try:
                box["res"] = container.exec_run(["sh", "-c", script], environment={**self.offline_env(), **(env or {})},
                                                user=user, workdir=workdir, demux=False)
            except Exception as err:  # the container died under us
                box["err"] = err

        th = threading.Thread(target=target, daemon=True)
        th.start()
        th.join(timeout_s + self.cfg.exec_margin_s)
        if th.is_alive():  # `timeout` did not end it (a stuck exec): stop the container
            self.close()
            return ExecResult(124, "host: command exceeded its limit; environment stopped", True, time.monotonic() - t0)
        if self.disk.exceeded:  # the guard stopped the containers under this command
            return ExecResult(-1, f"host: {self.disk.exceeded}", False, time.monotonic() - t0)
        if "err" in box:
            return ExecResult(-1, f"exec failed: {box['err']}", False, time.monotonic() - t0)
        res = box["res"]
        out = (res.output or b"").decode("utf-8", "replace")
        rc = int(res.exit_code if res.exit_code is not None else -1)
        return ExecResult(rc, out, rc in (124, 137), time.monotonic() - t0)

    def container(self, service: str | None = None):
        """main's container, or the named service's ("main" is main's whatever the compose file calls it)."""
        if service in (None, "main"):
            return self.main
        if service not in self.containers:
            raise TaskFormatError(f"{service!r} is not a service of the task ({', '.join(self.containers)})")
        return self.containers[service]

    def upload(self, src: Path, dest: str) -> None:
        self.exec(f"mkdir -p {shlex.quote(dest)}", timeout_s=60, user=INFRA_USER)
        self.main.put_archive(dest, tar_dir(src))

    def read(self, path: str, limit: int = 1_000_000) -> str | None:
        try:
            stream, _ = self.main.get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            m = next((m for m in tar.getmembers() if m.isfile()), None)
            return tar.extractfile(m).read(limit).decode("utf-8", "replace") if m else None

    def close(self) -> None:
        self.disk.stop()
        for c in list(self.containers.values()):
            try:
                c.remove(force=True)
            except docker.errors.DockerException:
                pass
        self.containers.clear()
        if self.network is not None:
            try:
                self.network.remove()
            except docker.errors.DockerException:
                pass
            self.network = None

