"""Sessions pooled over Docker engines: bounded per engine, placed least-loaded, kept warm, reaped.

- **Bounds and placement** (``swe_envs.sessions.hosts``): each engine holds at most its
  ``max_sessions`` containers of sessions (warm ones included); a session opens on the engine with
  the lowest share of its bound in use. Past every bound, ``open`` raises ``OverflowError`` (the HTTP
  service's 429; the RL backend waits for a slot).
- **Warm sessions**: with ``warm: N``, after an instance or task is opened, up to N more sessions of
  it are opened in the background, so the next ``open`` of it returns a started container (RL opens
  the same instances again and again: ``group_size`` episodes each). A warm session is a fresh
  session nobody has stepped; it holds a slot, so a request that finds every engine full closes a
  warm one of another name to make room, and one left unclaimed for ``idle_timeout_s`` is closed.
- **Reaping**: a reaper thread closes sessions idle past ``idle_timeout_s`` or older than
  ``max_lifetime_s`` and removes their containers; ``shutdown`` closes everything. Containers carry
  the owner label, so those of a killed process are swept by the next service (``Hosts.sweep``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from swe_envs.sessions.background import Background
from swe_envs.sessions.hosts import Host, Hosts
from swe_envs.sessions.session import Session


class SessionPool:
    def __init__(self, openers: dict[str, Callable[[Host], Session]], max_sessions: int = 8,
                 idle_timeout_s: float = 900.0, max_lifetime_s: float = 7200.0, hosts: Hosts | None = None,
                 warm: int = 0, log: Callable[[str], None] = print):
        self.openers, self.warm, self.log = openers, warm, log
        self.hosts = hosts or Hosts([Host("", max_sessions)])
        self.idle_timeout_s, self.max_lifetime_s = idle_timeout_s, max_lifetime_s
        self.sessions: dict[str, Session] = {}
        self.ready: dict[str, list[Session]] = {}  # warm: opened ahead of need, not handed out yet
        self.filling: dict[str, int] = {}
        self._fills = Background()  # warm opens in flight: ``shutdown`` waits for them
        self.reaped = 0
        self.warm_hits = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, daemon=True, name="session-reaper")
        self._reaper.start()

    @property
    def max_sessions(self) -> int:
        return self.hosts.max_sessions

    def open(self, name: str) -> Session:
        if name not in self.openers:
            raise KeyError(name)
        with self._lock:
            ready = self.ready.get(name)
            session = ready.pop(0) if ready else None
        if session is not None:
            self.warm_hits += 1
            session.opened = session.last_used = time.monotonic()  # its lifetime starts when handed out
        else:
            host = self._acquire()
            if host is None:
                raise OverflowError(f"{self.max_sessions} sessions are open on {len(self.hosts.hosts)} engine(s) "
                                    "(max_sessions)")
            session = self._open_on(name, host)
        with self._lock:
            self.sessions[session.id] = session
        if self.warm:
            self._refill(name)
        return session

    def _open_on(self, name: str, host: Host) -> Session:
        try:
            session = self.openers[name](host)
        except BaseException:
            self.hosts.release(host)
            raise
        session.host = host
        return session

    def _acquire(self) -> Host | None:
        """A slot on the least-loaded engine; when all are full, a warm session's slot (it is closed)."""
        host = self.hosts.acquire()
        while host is None:
            with self._lock:
                spare = next((lst.pop(0) for lst in self.ready.values() if lst), None)
            if spare is None:
                return None
            self._close_session(spare)
            host = self.hosts.acquire()
        return host

    def _refill(self, name: str) -> None:
        with self._lock:
            want = self.warm - len(self.ready.get(name, [])) - self.filling.get(name, 0)
            if want <= 0 or self._stop.is_set():
                return
            self.filling[name] = self.filling.get(name, 0) + want

        def fill() -> None:
            for _ in range(want):
                host = None if self._stop.is_set() else self.hosts.acquire()  # never evicts for a warm one
                try:
                    session = self._open_on(name, host) if host is not None else None
                except Exception as err:  # a warm session that failed to open: the next open will say why
                    self.log(f"warm session of {name}: {type(err).__name__}: {err}")
                    session = None
                with self._lock:
                    self.filling[name] -= 1
                    keep = session is not None and not self._stop.is_set()
                    if keep:
                        self.ready.setdefault(name, []).append(session)
                if session is not None and not keep:
                    self._close_session(session)

        self._fills.spawn(fill, f"session-warm-{name}")

    def get(self, sid: str) -> Session:
        with self._lock:
            return self.sessions[sid]

    def close(self, sid: str) -> bool:
        with self._lock:
            session = self.sessions.pop(sid, None)
        if session is not None:
            self._close_session(session)
        return session is not None

    def _close_session(self, session: Session) -> None:
        try:
            session.close()
        finally:
            host = getattr(session, "host", None)
            if host is not None:
                self.hosts.release(host)

    def reap(self, now: float | None = None) -> int:
        """Close idle and over-age sessions, and warm ones nobody claimed; how many were closed."""
        now = time.monotonic() if now is None else now
        with self._lock:
            old = [sid for sid, s in self.sessions.items()
                   if now - s.last_used > self.idle_timeout_s or now - s.opened > self.max_lifetime_s]
            unclaimed = [s for lst in self.ready.values() for s in lst if now - s.opened > self.idle_timeout_s]
            for lst in self.ready.values():
                lst[:] = [s for s in lst if s not in unclaimed]
        for sid in old:
            self.close(sid)
        for s in unclaimed:
            self._close_session(s)
        self.reaped += len(old)
        return len(old)

    def _reap_loop(self) -> None:
        while not self._stop.wait(min(30.0, self.idle_timeout_s / 4)):
            self.reap()

    def describe(self) -> dict:
        with self._lock:
            ready = sum(len(v) for v in self.ready.values())
        return {"engines": self.hosts.describe(), "ready": ready, "warm_hits": self.warm_hits, "reaped": self.reaped}

    def shutdown(self, timeout_s: float = 120.0) -> None:
        """Close every session, then wait for the warm opens in flight (each closes what it opened once
        it sees the stop: a daemon thread dies with the process and its container would outlive it);
        past ``timeout_s`` (an environment still building) the next service's sweep removes the rest."""
        self._stop.set()
        for sid in list(self.sessions):
            self.close(sid)
        with self._lock:
            left = [s for lst in self.ready.values() for s in lst]
            self.ready.clear()
        for s in left:
            self._close_session(s)
        pending = self._fills.wait(timeout_s)
        if pending:
            self.log(f"session pool: {pending} warm open(s) still in flight after {timeout_s:.0f}s")
        self.hosts.shutdown()
