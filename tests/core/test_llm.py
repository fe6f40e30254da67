import pickle
import socket
import threading

import pytest

from core.llm import LLMClient, LLMConfig, LLMError, LLMFailure
from tests.support.scripted_server import Reply


def client(url, tmp_path=None, **kw):
    cfg = dict(base_url=url, model="m", timeout_s=2.0, max_retries=3, backoff_s=0.01, backoff_max_s=0.05,
               cache_dir=str(tmp_path / "cache") if tmp_path else None)
    cfg.update(kw)
    return LLMClient(LLMConfig(**cfg))


def msg(text):
    return [{"role": "user", "content": text}]


def test_retries_transient_failures_then_succeeds(scripted_server):
    s, url = scripted_server
    s.script.extend([Reply(status=500), Reply(status=429), Reply(raw=b"<html>oops"), Reply(body={"nope": 1})])
    c = client(url, max_retries=4)
    res = c.chat(msg("hi"))
    assert res.text == "echo: hi" and not res.cached
    assert len(s.received) == 5 and c.stats["retries"] == 4 and not c.failures
    assert s.received[0]["model"] == "m" and s.received[0]["messages"] == msg("hi")


def test_timeout_is_retried(scripted_server):
    s, url = scripted_server
    s.script.append(Reply(delay_s=1.0))
    c = client(url, timeout_s=0.3)
    assert c.chat(msg("slow")).text == "echo: slow"
    assert c.stats["retries"] == 1


def test_client_errors_are_not_retried_and_are_recorded(scripted_server):
    s, url = scripted_server
    s.script.append(Reply(status=400, body={"error": {"message": "bad prompt"}}))
    c = client(url)
    with pytest.raises(LLMError, match=r"/v1/chat/completions: http_400 after 1 attempt\(s\): .*bad prompt"):
        c.chat(msg("x"))
    assert len(s.received) == 1 and len(c.failures) == 1 and c.failures[0].kind == "http_400"


def test_exhausted_retries_name_the_url(scripted_server):
    s, url = scripted_server
    s.script.extend([Reply(status=503)] * 4)
    c = client(url)
    res = c.request("chat/completions", {"messages": msg("x")})
    assert isinstance(res, LLMFailure) and res.attempts == 4 and res.kind == "http_503"
    assert res.url == f"{url}/chat/completions"


def test_unreachable_endpoint(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    c = client(f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(LLMError, match=rf"127.0.0.1:{port}/v1/completions: connection after 2 attempt"):
        c.complete("hello")


def test_cache_hit_skips_the_server(scripted_server, tmp_path):
    s, url = scripted_server
    c = client(url, tmp_path)
    first = c.chat(msg("same"), temperature=0)
    again = c.chat(msg("same"), temperature=0)
    other = c.chat(msg("same"), temperature=0.5)
    assert not first.cached and again.cached and not other.cached
    assert again.text == first.text and len(s.received) == 2 and c.stats["cache_hits"] == 1
    fresh = client(url, tmp_path)  # another process/worker sees the same cache on disk
    assert fresh.chat(msg("same"), temperature=0).cached


def test_map_keeps_order_limits_concurrency_and_isolates_failures(scripted_server):
    s, url = scripted_server
    s.responder = lambda body: Reply(status=400) if "bad" in body["messages"][0]["content"] else Reply(delay_s=0.1)
    c = client(url, concurrency=3)
    payloads = [{"messages": msg(f"bad {i}" if i == 4 else f"q{i}")} for i in range(12)]
    out = c.map("chat/completions", payloads)
    assert [r.text for i, r in enumerate(out) if i != 4] == [f"echo: q{i}" for i in range(12) if i != 4]
    assert isinstance(out[4], LLMFailure)
    assert s.max_in_flight == 3


def test_client_pickles_for_workers(scripted_server):
    s, url = scripted_server
    c = client(url)
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.chat(msg("p")).text == "echo: p"
    t = threading.Thread(target=lambda: c2.chat(msg("t")))
    t.start()
    t.join()
