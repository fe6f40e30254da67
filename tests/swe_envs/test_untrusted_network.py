"""The untrusted network (swe_envs/untrusted_network.py): online containers and builds reach the outside,
never the host's own services."""

from __future__ import annotations

import pytest

from swe_envs import untrusted_network
from tests.reliability.test_containment import Listener, _host_ips

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_engine():
    from swe_envs.docker_setup import BASE_TAG, docker_client, ensure_docker

    ensure_docker()
    return docker_client(), BASE_TAG


def _probe(client, image: str, network: str, port: int) -> str:
    cmd = "; ".join(f"(exec 3<>/dev/tcp/{ip}/{port}) 2>/dev/null && echo REACHED-{ip}" for ip in _host_ips())
    out = client.containers.run(image, ["bash", "-c", f"timeout 20 bash -c '{cmd}'; true"], network=network,
                                remove=True)
    return out.decode()


def test_the_default_bridge_reaches_the_host_and_the_untrusted_network_does_not(docker_engine):
    client, image = docker_engine
    assert untrusted_network.unavailable(client) == ""
    name = untrusted_network.network(client)
    assert name == untrusted_network.NAME
    listener = Listener()
    try:
        # the control: on Docker's default bridge a container talks to services the host listens on
        assert "REACHED-" in _probe(client, image, "bridge", listener.port) and listener.hits >= 1
        hits = listener.hits
        assert "REACHED-" not in _probe(client, image, name, listener.port)
        assert listener.hits == hits
    finally:
        listener.close()


def test_a_build_without_the_hosts_rule_says_it_ran_on_the_default_bridge(docker_engine, monkeypatch):
    """No iptables (or no root): builds fall back to Docker's default bridge, which reaches the host's
    services; the build result and its log say so instead of passing silently."""
    import uuid

    from swe_envs.config import BuildConfig
    from swe_envs.images import Images

    client, image = docker_engine
    monkeypatch.setattr(untrusted_network, "_state", {})  # decided again, then forgotten after the test
    monkeypatch.setattr(untrusted_network, "_ensure_rules", lambda: "iptables is not installed")
    images = Images(client, BuildConfig(timeout_s=300), access=None)
    tag = f"local/fallback-probe:{uuid.uuid4().hex[:12]}"
    try:
        res = images.build(tag, f"FROM {image}\nRUN echo {tag}\n", b"")
    finally:
        images.remove(tag)
    assert res.ok, res.log[-1000:]
    assert res.network == {"network": "bridge", "host_reachable": True, "why": "iptables is not installed"}
    assert "WARNING: RUN steps run on Docker's default bridge" in res.log
