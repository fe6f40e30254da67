"""LLM endpoint faults against a real HTTP server on 127.0.0.1 (tests/support/scripted_server.py):
latency spikes, 429 with Retry-After, 5xx bursts, truncated and malformed bodies, garbage on the
wire, a server that hangs or trickles. Each request gets a seeded plan of faults for its first
attempts. Properties: every request ends as its own response or a recorded failure (nothing lost,
no cross-talk), every failed attempt is counted by kind, retries stay within bounds, and a
scoring job over the faulty endpoint finishes with balanced counts."""

from __future__ import annotations

import dataclasses
import random
import threading
from collections import Counter

import pytest
from datatrove.data import Document

from core.llm import LLMClient, LLMConfig, LLMFailure, LLMResponse
from tests.reliability.ledger import LEDGER, LONG
from tests.support.scripted_server import Reply, ScriptedServer, default_completion

TIMEOUT_S = 0.5
MAX_RETRIES = 4
TRUNCATED = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
             b'{"choices": [{"index": 0, "message": {"role": "assist')
# name -> (replies for the first attempts, the failed-attempt kinds the client must count,
#          the final failure kind or None when a later attempt succeeds)
FAULTS = {
    "latency_spike": ([Reply(delay_s=0.2)], [], None),
    "429_retry_after": ([Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "1"})],
                        ["http_429"], None),
    "5xx_burst": ([Reply(status=500), Reply(status=502), Reply(status=503)],
                  ["http_500", "http_502", "http_503"], None),
    "truncated_body": ([Reply(wire=TRUNCATED)], ["truncated"], None),
    "malformed_body": ([Reply(raw=b'{"choices": [{"mess')], ["bad_response"], None),
    "wrong_shape": ([Reply(body={"choices": [{"message": "just a string"}]})], ["bad_response"], None),
    "garbage_status": ([Reply(wire=b"SSH-2.0-OpenSSH_9.2\r\n\r\n")], ["bad_response"], None),
    "hang": ([Reply(delay_s=TIMEOUT_S * 4)], ["timeout"], None),
    "trickle": ([Reply(trickle_s=TIMEOUT_S / 8)], ["timeout"], None),
    "persistent_5xx": ([Reply(status=500)] * (MAX_RETRIES + 1), ["http_500"] * (MAX_RETRIES + 1), "http_500"),
    "client_error": ([Reply(status=400, body={"error": "bad request"})], ["http_400"], "http_400"),
    "retry_after_too_long": ([Reply(status=429, headers={"Retry-After": "3600"})], ["http_429"], "http_429"),
}


class FaultyEndpoint:
    """The scripted server answering each request (keyed by its content) from its fault plan."""

    def __init__(self, plans: dict[str, list[Reply]], answer=default_completion):
        self.plans, self.answer = plans, answer
        self.attempts: Counter = Counter()
        self.served_faults = 0
        self.lock = threading.Lock()
        self.server = ScriptedServer(responder=self.respond)

    def respond(self, request: dict) -> Reply:
        key = request["messages"][-1]["content"]
        with self.lock:
            n = self.attempts[key]
            self.attempts[key] += 1
            plan = self.plans.get(key, [])
            if n < len(plan):
                if plan[n].status != 200 or plan[n].wire or plan[n].raw or plan[n].body or plan[n].trickle_s \
                        or plan[n].delay_s > TIMEOUT_S:
                    self.served_faults += 1
                    return plan[n]
                # a slow but valid answer: this endpoint's answer, late
                return dataclasses.replace(plan[n], body=self.answer(request))
        return Reply(body=self.answer(request))

    def __enter__(self) -> str:
        return self.server.start()

    def __exit__(self, *exc) -> None:
        self.server.stop()


def _client(url: str) -> LLMClient:
    return LLMClient(LLMConfig(base_url=url, model="m", timeout_s=TIMEOUT_S, max_retries=MAX_RETRIES,
                               backoff_s=0.01, backoff_max_s=0.05, concurrency=4, cache_dir=None,
                               retry_after_max_s=5))


@pytest.mark.area("LLM endpoint faults")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", range(4 if LONG else 1))
def test_every_request_ends_as_its_response_or_a_recorded_failure(seed):
    rng = random.Random(seed)
    names = sorted(FAULTS) * (3 if LONG else 1) + ["none"] * (12 if LONG else 4)
    rng.shuffle(names)
    plans = {f"doc-{i}": FAULTS[name][0] for i, name in enumerate(names) if name != "none"}
    endpoint = FaultyEndpoint(plans)
    with endpoint as url:
        client = _client(url)
        results = client.map("chat/completions", [{"messages": [{"role": "user", "content": f"doc-{i}"}]}
                                                  for i in range(len(names))])
    expected_attempt_kinds: Counter = Counter()
    for i, (name, res) in enumerate(zip(names, results, strict=True)):
        kinds, final = FAULTS[name][1:] if name != "none" else ([], None)
        expected_attempt_kinds.update(kinds)
        if final is None:
            assert isinstance(res, LLMResponse), (name, res)
            assert res.text == f"echo: doc-{i}"  # its own answer, not another request's
        else:
            assert isinstance(res, LLMFailure) and res.kind == final, (name, res)
            assert res.attempts <= MAX_RETRIES + 1
    failed_attempts = Counter({k[len("attempt_"):]: v for k, v in client.stats.items() if k.startswith("attempt_")})
    assert failed_attempts == expected_attempt_kinds  # every failed attempt recorded, by kind
    assert len(client.failures) == client.stats["failures"] == sum(1 for n in names if n != "none" and FAULTS[n][2])
    lost = len(names) - sum(isinstance(r, (LLMResponse, LLMFailure)) for r in results)
    LEDGER.add("LLM endpoint faults", tried=len(names), faults=endpoint.served_faults, lost=lost)
    assert lost == 0


@pytest.mark.area("LLM endpoint faults")
@pytest.mark.timeout(600)
def test_retry_after_is_honoured():
    endpoint = FaultyEndpoint({"doc-0": [Reply(status=429, headers={"Retry-After": "1"})]})
    times = []
    answer = endpoint.respond

    def timed(request):
        times.append(__import__("time").monotonic())
        return answer(request)

    endpoint.server.responder = timed
    with endpoint as url:
        res = _client(url).chat([{"role": "user", "content": "doc-0"}])
    assert res.text == "echo: doc-0"
    assert times[1] - times[0] >= 0.9  # the client's own backoff here is at most 0.05 s
    LEDGER.add("LLM endpoint faults", tried=1, faults=1)


@pytest.mark.area("LLM endpoint faults")
@pytest.mark.timeout(600)
def test_a_scoring_job_over_a_faulty_endpoint_finishes_with_counts():
    """EduScore (LLM scoring) in the step chain: transient faults are retried away, persistent ones
    make `edu_unscored` rejects; in = kept + rejected and nothing is lost."""
    from filters.edu import EduConfig, EduScore
    from pipelines.chain import StepChain, check_balanced

    rng = random.Random(7)
    n_docs = 40 if LONG else 12
    texts = {i: f"Document {i} explains how photosynthesis turns light into sugar." for i in range(n_docs)}
    plans, doomed = {}, set()
    cfg = EduConfig(mode="text", route="chat", batch_docs=4)
    from filters.edu import build_request

    for i, text in texts.items():
        name = rng.choice(sorted(FAULTS))
        content = build_request(text, cfg)[1]["messages"][-1]["content"]
        plans[content] = FAULTS[name][0]
        if FAULTS[name][2]:
            doomed.add(f"d{i}")

    def answer(request):
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Educational score: 3"}}]}

    endpoint = FaultyEndpoint(plans, answer)
    with endpoint as url:
        cfg = cfg.model_copy(update={"llm": _client(url).cfg})
        chain = StepChain([EduScore(cfg)])
        out = list(chain.process([Document(text=t, id=f"d{i}") for i, t in texts.items()]))
    check_balanced(chain.counts, chain.stages)
    unscored = {d.id for d in out if d.metadata.get("__reject__")}
    assert unscored == doomed, {d.id: d.metadata.get("reject_detail") for d in out if d.id in unscored ^ doomed}
    assert all(d.metadata["edu_score"] == 3.0 for d in out if d.id not in unscored)
    assert chain.counts["edu_score"].reasons == ({"edu_unscored": len(doomed)} if doomed else {})
    LEDGER.add("LLM endpoint faults", tried=n_docs, faults=endpoint.served_faults, lost=n_docs - len(out))
