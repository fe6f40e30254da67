"""The Docker engines sessions run on: several hosts' engines, each with its own bound, least-loaded first.

An engine is a ``DOCKER_HOST`` URL (``unix:///var/run/docker.sock``, ``tcp://10.0.0.5:2375``,
``ssh://user@host``); ``""`` is this process's default engine (``DOCKER_HOST`` or the local socket).
``--engine URL=N`` bounds it at N sessions (the pool's ``max_sessions`` otherwise). A session opens on
the engine with the lowest share of its bound in use (ties: the order given) and stays there: its
container, its environment's images (built there on demand, cached there) and its verifier
containers all live on that engine. Each engine gets its own state per kind of session (the SWE
harness, warm images, verifiers; the Harbor runner's context), made on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.errors import UserError


def engine_client(url: str, timeout: float = 600.0):
    """A docker SDK client of the engine at ``url`` (``""``: the default engine); a UserError when it does not answer."""
    if not url:
        from swe_envs.docker_setup import docker_client

        return docker_client(timeout=timeout)
    import docker

    try:
        client = docker.DockerClient(base_url=url, timeout=int(timeout))
        client.ping()
    except Exception as err:
        raise UserError(f"Docker engine {url} does not answer: {str(err).splitlines()[0][:200]}") from None
    client.engine_url = url  # what opens a second connection to it (an image build's own) reads
    return client


class Host:
    def __init__(self, url: str, max_sessions: int):
        if max_sessions < 1:
            raise UserError(f"engine {url or 'default'}: at least 1 session, not {max_sessions}")
        self.url, self.max_sessions = url, max_sessions
        self.open = 0  # sessions placed here (warm ones included): the bound counts containers
        self._client = None
        self._state: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.url or "default"

    def client(self):
        with self._lock:
            if self._client is None:
                self._client = engine_client(self.url)
            return self._client

    def state(self, key: str, make: Callable[[Host], Any]) -> Any:
        """What sessions of one kind share on this engine, made once (outside the lock: a build may take long)."""
        with self._lock:
            lock = self._state.setdefault(f"lock:{key}", threading.Lock())
        with lock:
            if key not in self._state:
                self._state[key] = make(self)
            return self._state[key]

    def shutdown(self) -> None:
        for key, value in list(self._state.items()):
            if not key.startswith("lock:") and hasattr(value, "shutdown"):
                value.shutdown()


class Hosts:
    def __init__(self, hosts: list[Host]):
        if not hosts:
            raise UserError("no Docker engine to place sessions on")
        self.hosts = hosts
        self._lock = threading.Lock()

    @classmethod
    def from_specs(cls, specs: list[str] | None, max_sessions: int) -> Hosts:
        """``URL`` or ``URL=N`` each; none: the default engine alone, bounded at ``max_sessions``."""
        hosts = []
        for spec in specs or [""]:
            url, eq, n = spec.rpartition("=")
            if eq and n.isdigit():
                hosts.append(Host(url, int(n)))
            else:
                hosts.append(Host(spec, max_sessions))
        if len({h.url for h in hosts}) != len(hosts):
            raise UserError(f"an engine is named twice: {[h.name for h in hosts]}")
        return cls(hosts)

    @property
    def max_sessions(self) -> int:
        return sum(h.max_sessions for h in self.hosts)

    def acquire(self) -> Host | None:
        """The least-loaded engine with room, its count taken; None when every one is full."""
        with self._lock:
            room = [h for h in self.hosts if h.open < h.max_sessions]
            if not room:
                return None
            best = min(room, key=lambda h: h.open / h.max_sessions)  # min keeps the first of equals
            best.open += 1
            return best

    def release(self, host: Host) -> None:
        with self._lock:
            host.open = max(0, host.open - 1)

    def sweep(self) -> int:
        """Containers of killed processes of this host, removed from every engine (owner label)."""
        from swe_envs.sandbox import sweep_orphans

        return sum(sweep_orphans(h.client()) for h in self.hosts)

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"engine": h.name, "open": h.open, "max_sessions": h.max_sessions} for h in self.hosts]

    def shutdown(self) -> None:
        for h in self.hosts:
            h.shutdown()
