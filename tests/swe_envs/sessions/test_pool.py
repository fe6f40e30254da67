"""The session pool's rules without containers: placement over engines (least loaded, per-engine
bounds), warm sessions (opened ahead, claimed, evicted for room, reaped unclaimed), reaping."""

from __future__ import annotations

import time

import pytest

from core.errors import UserError
from swe_envs.sessions.hosts import Host, Hosts
from swe_envs.sessions.pool import SessionPool
from swe_envs.sessions.session import Session


class Counted(Session):
    """A session whose "container" is a counter per engine: what the pool's rules act on."""

    live: dict[str, int] = {}

    def __init__(self, name: str, host: Host):
        super().__init__()
        self.name, self.engine = name, host.name
        Counted.live[self.engine] = Counted.live.get(self.engine, 0) + 1

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            Counted.live[self.engine] -= 1


def _pool(hosts: Hosts, warm: int = 0, **kw) -> SessionPool:
    Counted.live = {}
    return SessionPool({n: (lambda host, n=n: Counted(n, host)) for n in ("a", "b")}, hosts=hosts, warm=warm,
                       log=lambda m: None, **kw)


def _wait(cond, timeout_s: float = 5.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout_s, "timed out"
        time.sleep(0.01)


def test_engine_specs_parse_with_bounds_and_refuse_duplicates():
    hosts = Hosts.from_specs(["unix:///var/run/docker.sock=3", "tcp://10.0.0.5:2375"], max_sessions=2)
    assert [(h.url, h.max_sessions) for h in hosts.hosts] == [("unix:///var/run/docker.sock", 3),
                                                              ("tcp://10.0.0.5:2375", 2)]
    assert hosts.max_sessions == 5 and Hosts.from_specs(None, 4).hosts[0].url == ""
    with pytest.raises(UserError):
        Hosts.from_specs(["tcp://a:1", "tcp://a:1=2"], 1)
    with pytest.raises(UserError):
        Hosts.from_specs(["tcp://a:1=0"], 1)


def test_sessions_go_to_the_least_loaded_engine_within_its_bound():
    pool = _pool(Hosts([Host("e1", 2), Host("e2", 1)]))
    try:
        first = pool.open("a")
        assert first.host.name == "e1"  # ties: the order given
        assert pool.open("a").host.name == "e2"  # e1 is 1/2 used, e2 0/1
        assert pool.open("b").host.name == "e1"
        with pytest.raises(OverflowError):  # 2/2 and 1/1
            pool.open("a")
        pool.close(first.id)
        assert Counted.live == {"e1": 1, "e2": 1} and pool.open("b").host.name == "e1"
    finally:
        pool.shutdown()
    assert Counted.live == {"e1": 0, "e2": 0} and [h.open for h in pool.hosts.hosts] == [0, 0]


def test_warm_sessions_are_claimed_evicted_for_room_and_reaped_unclaimed():
    pool = _pool(Hosts([Host("e1", 3)]), warm=1, idle_timeout_s=60)
    try:
        a = pool.open("a")
        _wait(lambda: len(pool.ready.get("a", [])) == 1)  # opened ahead of the next "a"
        warm = pool.ready["a"][0]
        a2 = pool.open("a")
        assert a2 is warm and pool.warm_hits == 1 and a2.id in pool.sessions
        _wait(lambda: len(pool.ready.get("a", [])) == 1)  # refilled: 3/3 containers now
        assert Counted.live == {"e1": 3}
        b = pool.open("b")  # every slot taken: the unclaimed warm "a" makes room
        assert b.host.name == "e1" and pool.ready["a"] == [] and Counted.live == {"e1": 3}
        for s in (a, a2):
            pool.close(s.id)
        assert pool.ready.get("b") in (None, [])  # its refill found no room then
        pool.open("b")
        _wait(lambda: len(pool.ready.get("b", [])) == 1)
        assert pool.reap(now=time.monotonic() + 120) == 2  # both b idle; the warm "b" goes unclaimed
        assert pool.ready["b"] == [] and Counted.live == {"e1": 0} and pool.sessions == {}
    finally:
        pool.shutdown()


def test_a_failing_opener_gives_its_slot_back():
    hosts = Hosts([Host("e1", 1)])

    def broken(host):
        raise RuntimeError("image build failed")

    pool = SessionPool({"x": broken}, hosts=hosts, log=lambda m: None)
    try:
        for _ in range(3):
            with pytest.raises(RuntimeError):
                pool.open("x")
        assert hosts.hosts[0].open == 0
    finally:
        pool.shutdown()


def test_shutdown_waits_for_a_warm_open_in_flight_and_closes_what_it_opened():
    """A warm session still opening when the pool shuts down is closed before ``shutdown`` returns:
    its thread is a daemon, so a process exiting right after would otherwise leave its container."""
    import threading

    gate, opened = threading.Event(), []

    class Slow(Counted):
        def __init__(self, name: str, host: Host):
            opened.append(name)
            if len(opened) > 1:  # the warm open that follows the first blocks in its opener
                gate.wait(5)
            super().__init__(name, host)

    Counted.live = {}
    pool = SessionPool({"a": lambda host: Slow("a", host)}, hosts=Hosts([Host("e1", 3)]), warm=1, log=lambda m: None)
    pool.open("a")
    _wait(lambda: len(opened) == 2)
    assert pool.filling == {"a": 1}
    threading.Timer(0.3, gate.set).start()  # it finishes only once shutdown has begun
    pool.shutdown()
    assert pool.filling == {"a": 0} and not pool.ready and Counted.live == {"e1": 0}
    assert [h.open for h in pool.hosts.hosts] == [0]
