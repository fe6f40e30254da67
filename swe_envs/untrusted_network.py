"""The Docker network for untrusted code that needs the internet: the package registries, not the host.

Docker's default bridge lets a container reach every service the host listens on (its bridge gateway
and its other addresses are the host itself): a task's Dockerfile, a repository's ``setup.py`` during
an environment build, or an online task's agent could talk to a developer's database or a model
server on 0.0.0.0. Builds and online containers therefore run on one user-defined bridge whose
traffic *to the host* is rejected by an ``INPUT`` rule on its interface (traffic through the host to
the outside, the registries, is forwarded as on any bridge; the engine's DNS answers from inside the
container's namespace). Creating the rule needs root and iptables; without them the default bridge
is used, ``unavailable`` says why, and ``record`` is what builds (``images.BuildResult.network``,
a WARNING line in the build log) and terminal results (``build_network``) carry, so a run that
could reach the host says so.
"""

from __future__ import annotations

import shutil
import subprocess

import docker
import docker.errors

NAME = "swe-envs-untrusted"
BRIDGE = "swe-untrust0"  # the host-side interface: what the INPUT rule names


def _rule(tool: str, check: bool) -> list[str]:
    return [tool, "-C" if check else "-I", "INPUT", "-i", BRIDGE, "-j", "REJECT"]


def _ensure_rules() -> str:
    """'' once the host rejects traffic from the bridge (IPv4, and IPv6 where ip6tables exists)."""
    tools = [t for t in ("iptables", "ip6tables") if shutil.which(t)]
    if "iptables" not in tools:
        return "iptables is not installed"
    for tool in tools:
        if subprocess.run(_rule(tool, True), capture_output=True).returncode == 0:
            continue
        res = subprocess.run(_rule(tool, False), capture_output=True, text=True)
        if res.returncode != 0 and tool == "iptables":
            return f"iptables refused the rule: {res.stderr.strip()[:200]}"
    return ""


_state: dict[str, tuple[str, str]] = {}  # engine -> (network name or "", why not): checked once per process


def _ensure(client: docker.DockerClient) -> tuple[str, str]:
    key = str(client.api.base_url)
    if key in _state:
        return _state[key]
    try:
        if not client.networks.list(names=[NAME]):
            client.networks.create(NAME, driver="bridge", options={"com.docker.network.bridge.name": BRIDGE},
                                   labels={"swe_envs.untrusted": "1"})
    except docker.errors.APIError as err:
        if "already exists" not in str(err):
            _state[key] = ("", f"could not create the network {NAME}: {err}")
            return _state[key]
    why = _ensure_rules()
    _state[key] = ("", why) if why else (NAME, "")
    return _state[key]


def network(client: docker.DockerClient) -> str:
    """The untrusted network's name, created on first use; "bridge" where the host cannot be closed off."""
    return _ensure(client)[0] or "bridge"


def unavailable(client: docker.DockerClient) -> str:
    """Why online containers can reach the host here ('' when they cannot)."""
    return _ensure(client)[1]


def record(client: docker.DockerClient) -> dict:
    """The network untrusted code got, for its result: name, whether the host's services were
    reachable from it, and why."""
    name, why = _ensure(client)
    return {"network": name or "bridge", "host_reachable": bool(why), "why": why}
