"""Docker images: one toolchain image per language, one environment image per repo-version.

Both are tagged by the hash of what defines them (the rendered Dockerfile, the parent image
id, the repository tree), so an existing tag *is* the cache: a warm run builds nothing. Every
toolchain Dockerfile starts with the same prelude line, so Docker's layer cache shares it.
An environment image is tagged only after its test-collection check passed (``promote``).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import time
from dataclasses import dataclass, field

import docker
import docker.errors

from swe_envs import untrusted_network
from swe_envs.config import BuildConfig, ToolchainConfig
from swe_envs.registry import HostAccess, host_access
from swe_envs.repos import tar_with

USER_ID = 10001
PRELUDE = (
    "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8\n"
    # apt lists stay in the image: recipes (and refine rounds) may apt-get install more
    "RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates patch "
    f"&& useradd -m -u {USER_ID} -s /bin/bash swe\n"
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def suite_mirror(suite: str) -> str:
    """The Debian mirror for ``suite``: its own apt source, else the one serving the host's suite."""
    from core.errors import UserError
    from swe_envs.docker_setup import apt_mirror

    try:
        return apt_mirror(suite)
    except UserError:
        for other in ("bookworm", "trixie", "bullseye", "sid"):
            try:
                return apt_mirror(other)
            except UserError:
                continue
        raise


def sha(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower().replace("/", "__")).strip("-._")[:100] or "repo"


def toolchain_dockerfile(tc: ToolchainConfig, access: HostAccess | None = None, base_image: str | None = None) -> str:
    lines = [f"FROM {base_image or tc.base_image}", PRELUDE.rstrip("\n")]
    # the host's CA and index settings before anything that reaches a registry
    lines += access.dockerfile_lines() if access else []
    if tc.apt_packages:
        pkgs = " ".join(tc.apt_packages)
        install = f"apt-get install -y --no-install-recommends {pkgs}"
        # the prelude's package lists may be stale by the time a new toolchain is added
        lines.append(f"RUN {install} || (apt-get update && {install})")
    if tc.env:
        lines.append("ENV " + " ".join(f'{k}="{v}"' for k, v in sorted(tc.env.items())))
    lines += tc.setup
    lines += [f"RUN mkdir -p /testbed && chown {USER_ID}:{USER_ID} /testbed", "WORKDIR /testbed"]
    return "\n".join(lines) + "\n"


def env_dockerfile(toolchain_tag: str, recipe: list[str]) -> str:
    lines = [f"FROM {toolchain_tag}", f"COPY --chown={USER_ID}:{USER_ID} repo/ /testbed/", "WORKDIR /testbed"]
    lines += [f"RUN {cmd}" for cmd in recipe]
    # recipes run as root (apt-get, pip into /opt/venv); tests run as the unprivileged user
    lines.append(f"RUN chown -R {USER_ID}:{USER_ID} /testbed /home/swe")
    return "\n".join(lines) + "\n"


def instance_dockerfile(env_image: str, recipe: list[str]) -> str:
    """The repo-version's image, its tree replaced by the base commit's and its recipe run again
    (SWE-bench's instance images): what the base commit installs, nothing the diff could miss."""
    lines = [f"FROM {env_image}", "RUN find /testbed -mindepth 1 -delete",
             f"COPY --chown={USER_ID}:{USER_ID} repo/ /testbed/", "WORKDIR /testbed"]
    lines += [f"RUN {cmd}" for cmd in recipe]
    lines.append(f"RUN chown -R {USER_ID}:{USER_ID} /testbed /home/swe")
    return "\n".join(lines) + "\n"


@dataclass
class BuildResult:
    ok: bool
    tag: str
    image_id: str | None = None
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    error: str = ""
    # the network RUN steps had (untrusted_network.record); empty when nothing was built
    network: dict = field(default_factory=dict)


class Images:
    def __init__(self, client: docker.DockerClient, cfg: BuildConfig, access: HostAccess | None = None,
                 log=None):
        # by default every image trusts the host's CA and gets its index settings
        self.client, self.cfg = client, cfg
        self.access = access if access is not None else host_access(cfg.ca_bundle, cfg.host_index_settings)
        self.log = log or (lambda _msg: None)

    def image_id(self, ref: str) -> str | None:
        try:
            return self.client.images.get(ref).id
        except docker.errors.ImageNotFound:
            return None

    def find_verified(self, version: str) -> tuple[str, str, str] | None:
        """(tag, id, recipe JSON) of an environment image verified for this repo-version, if any."""
        for img in self.client.images.list(filters={"label": f"swe_envs.version={version}"}):
            tags = [t for t in img.tags if not t.endswith("-candidate")]
            if tags:
                return tags[0], img.id, img.labels.get("swe_envs.recipe", "[]")
        return None

    def read_file(self, image: str, path: str, limit: int = 2_000_000) -> str | None:
        """A file's text from an image, read from a container that is never started."""
        container = None
        try:
            container = self.client.containers.create(image, ["true"], network_mode="none")
            stream, _ = container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                return tar.extractfile(member).read(limit).decode("utf-8", "replace") if member else None
        except docker.errors.DockerException:
            return None
        finally:
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.DockerException:
                    pass

    def size(self, ref: str) -> int:
        return int(self.client.images.get(ref).attrs.get("Size") or 0)

    def ensure_base(self, tag: str) -> str | None:
        """The base image's id; a missing ``local/debian:<suite>`` is made once with debootstrap."""
        found = self.image_id(tag)
        m = re.fullmatch(r"local/debian:([a-z]+)", tag)
        if found or not m:
            return found
        import fcntl

        from swe_envs import docker_setup

        with open(docker_setup.LOCK_PATH, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one debootstrap per tag, across processes
            if self.image_id(tag) is None:
                docker_setup.build_base_image(tag, suite_mirror(m.group(1)), self.log, suite=m.group(1))
        return self.image_id(tag)

    def toolchain(self, language: str, tc: ToolchainConfig, base_image: str | None = None) -> BuildResult:
        base_image = base_image or tc.base_image
        try:
            base_id = self.ensure_base(base_image)
        except Exception as err:  # debootstrap/import failures: this toolchain fails, recorded
            return BuildResult(False, "", error=f"base image {base_image} could not be made: {err}")
        if base_id is None:
            return BuildResult(False, "", error=f"base image {base_image} is missing (nothing can be pulled; "
                               "run python -m swe_envs setup-docker, or build/load it)")
        dockerfile = toolchain_dockerfile(tc, self.access, base_image)
        context = self.access.context()
        parts = [base_id, dockerfile, *map(_digest, context.values())]
        if self.cfg.cache_namespace:  # without one, tags stay what they always were
            parts.append(self.cfg.cache_namespace)
        tag = f"swe-envs/toolchain-{language}:{sha(*parts)[:16]}"
        return self.build(tag, dockerfile, tar_with(b"", context) if context else b"")

    def env_tag(self, repo: str, toolchain_id: str, dockerfile: str, tree: str, *more: str) -> str:
        return f"swe-envs/env-{slug(repo)}:{sha(toolchain_id, dockerfile, tree, *more)[:16]}"

    def build(self, tag: str, dockerfile: str, context_tar: bytes, labels: dict | None = None) -> BuildResult:
        """Build unless ``tag`` exists; the log is kept whole (it feeds the refine loop)."""
        existing = self.image_id(tag)
        if existing:
            return BuildResult(True, tag, existing, cached=True)
        t0 = time.monotonic()
        ctx = tar_with(context_tar, {"Dockerfile": dockerfile.encode()})
        lines, error, image_id = [], "", None
        net = untrusted_network.record(self.client)
        if net["host_reachable"]:  # never silent: this build's RUN steps could reach the host's services
            lines.append(f"WARNING: RUN steps run on Docker's default bridge, which reaches this host's services: "
                         f"{net['why']}\n")
        # its own client of the same engine (a session host's URL, else DOCKER_HOST's): the read timeout
        # bounds a build that prints nothing for that long
        where = {"base_url": self.client.engine_url} if getattr(self.client, "engine_url", "") else \
            docker.utils.kwargs_from_env()
        api = docker.APIClient(**where, version="auto", timeout=self.cfg.timeout_s)
        try:
            stream = api.build(fileobj=io.BytesIO(ctx), custom_context=True, tag=tag, rm=True, forcerm=True,
                               pull=False, decode=True, labels=labels or {}, nocache=self.cfg.no_cache,
                               container_limits={"memory": self.cfg.memory_mb * 2**20},
                               # RUN steps reach the registries, never the host's services
                               network_mode=net["network"])
            for chunk in stream:
                if "stream" in chunk:
                    lines.append(chunk["stream"])
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                if "error" in chunk:
                    error = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    lines.append(f"ERROR: {error}\n")
                if time.monotonic() - t0 > self.cfg.timeout_s:
                    error = f"build exceeded {self.cfg.timeout_s:.0f}s"
                    lines.append(f"ERROR: {error}\n")
                    break  # closing the connection makes the daemon cancel the build
        except (docker.errors.APIError, docker.errors.BuildError, OSError) as err:
            error = error or f"{type(err).__name__}: {err}"
            lines.append(f"ERROR: {error}\n")
        except Exception as err:  # requests' ReadTimeout: no output for timeout_s
            error = error or f"build stalled: {type(err).__name__}: {err}"
            lines.append(f"ERROR: {error}\n")
        finally:
            api.close()
        log = "".join(lines)
        ok = not error and image_id is not None and self.image_id(tag) is not None
        if not ok and not error:
            error = "build produced no image"
        return BuildResult(ok, tag, self.image_id(tag) if ok else None, log, time.monotonic() - t0, error=error,
                           network=net)

    def tag(self, image_id: str, tag: str) -> None:
        repo, _, version = tag.rpartition(":")
        self.client.images.get(image_id).tag(repo, version)

    def remove(self, ref: str) -> None:
        try:
            self.client.images.remove(ref, force=True, noprune=False)
        except docker.errors.APIError:
            pass
