"""The litellm client against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pytest
from llm_server import LLMServer, Reply, error_body

from kernelbench.generation.client import GenerationConfig, LLMClient, parse_retry_after

KEY = "sk-test-client-0123456789"


@pytest.fixture
def server():
    with LLMServer() as srv:
        yield srv


class SleepRecorder:
    """The client's replaceable sleep: records the waits instead of spending them."""

    def __init__(self):
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client_for(srv: LLMServer, sleep=None, **overrides) -> LLMClient:
    cfg = dict(model="openai/kb-test-model", api_base=srv.base_url, backoff_base_s=0.01, max_retries=3)
    cfg.update(overrides)
    return LLMClient(GenerationConfig(**cfg), api_key=KEY, **({"sleep": sleep} if sleep else {}))


def test_success_sends_the_prompt_and_options(server):
    server.push(Reply(content="hello back", prompt_tokens=12, completion_tokens=7))
    c = client_for(server, temperature=0.7, max_tokens=123).complete("the prompt text")
    assert c.ok and c.text == "hello back" and c.attempts == 1
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (12, 7, 19)
    assert c.latency_s > 0 and c.finish_reason == "stop"
    (req,) = server.chat_requests()
    assert req.body["model"] == "kb-test-model"
    assert req.body["messages"] == [{"role": "user", "content": "the prompt text"}]
    assert req.body["temperature"] == 0.7 and req.body["max_tokens"] == 123
    assert req.headers["authorization"] == f"Bearer {KEY}"
    # litellm's own retries are off: our policy is the only one.
    assert req.headers.get("x-stainless-retry-count", "0") == "0"


def test_503_then_success_is_retried(server):
    server.push(Reply(status=503), Reply(content="ok"))
    sleep = SleepRecorder()
    c = client_for(server, sleep=sleep).complete("p")
    assert c.ok and c.text == "ok" and c.attempts == 2
    assert len(server.chat_requests()) == 2 and len(sleep.waits) == 1


def test_429_honours_retry_after_seconds(server):
    server.push(Reply(status=429, headers={"Retry-After": "7"}), Reply(content="ok"))
    sleep = SleepRecorder()
    c = client_for(server, sleep=sleep).complete("p")
    assert c.ok and c.attempts == 2
    assert sleep.waits == [7.0]


def test_429_retry_after_really_waits(server):
    server.push(Reply(status=429, headers={"Retry-After": "1"}), Reply(content="ok"))
    c = client_for(server).complete("p")
    first, second = server.chat_requests()
    assert c.ok and second.received_at - first.received_at >= 0.95


def test_retry_after_is_capped(server):
    server.push(Reply(status=429, headers={"Retry-After": "3600"}), Reply(content="ok"))
    sleep = SleepRecorder()
    client_for(server, sleep=sleep, max_retry_after_s=5).complete("p")
    assert sleep.waits == [5.0]


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": future}) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None


def test_timeout_is_a_recorded_failure(server):
    server.push(Reply(content="late", delay_s=4.0), Reply(content="late", delay_s=4.0))
    sleep = SleepRecorder()
    t0 = time.monotonic()
    c = client_for(server, sleep=sleep, timeout_s=0.3, max_retries=1).complete("p")
    assert not c.ok and c.error_type == "timeout" and c.attempts == 2 and c.text is None
    # Gave up on each request at the timeout: waiting for even one reply would take 4 s. (Two 0.3 s
    # timeouts took 2.0 s in all on a loaded two-core CI machine, so the bound leaves room for that.)
    assert time.monotonic() - t0 < 3.5


def test_retries_exhausted_on_5xx(server):
    server.push(*[Reply(status=500) for _ in range(3)])
    c = client_for(server, sleep=SleepRecorder(), max_retries=2).complete("p")
    assert not c.ok and c.error_type == "server_error" and c.attempts == 3
    assert len(server.chat_requests()) == 3


def test_auth_error_is_not_retried_and_the_key_is_redacted(server):
    server.responder = lambda req: Reply(status=401, body=error_body(401, f"bad key {req.headers['authorization']}"))
    c = client_for(server, sleep=SleepRecorder()).complete("p")
    assert not c.ok and c.error_type == "auth" and c.attempts == 1
    assert KEY not in (c.error or "") and KEY not in c.model_dump_json()


def test_bad_request_is_not_retried(server):
    server.push(Reply(status=400))
    c = client_for(server, sleep=SleepRecorder()).complete("p")
    assert c.error_type == "bad_request" and c.attempts == 1


def test_cost_from_a_registered_price(server):
    import litellm

    litellm.register_model({"openai/kb-priced-model": {
        "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "litellm_provider": "openai",
        "mode": "chat", "max_tokens": 8192}})
    server.push(Reply(content="x", prompt_tokens=1000, completion_tokens=500))
    c = client_for(server, model="openai/kb-priced-model").complete("p")
    assert c.usage.cost_usd == pytest.approx(1000 * 1e-6 + 500 * 2e-6)


def test_unpriced_model_has_no_cost_and_explicit_prices_win(server):
    server.push(Reply(content="x", prompt_tokens=1000, completion_tokens=500), Reply(content="y"))
    assert client_for(server, model="openai/kb-unknown-model-xyz").complete("p").usage.cost_usd is None
    c = client_for(server, model="openai/kb-unknown-model-xyz", input_cost_per_mtok=3.0,
                   output_cost_per_mtok=15.0).complete("p")
    assert c.usage.cost_usd == pytest.approx((100 * 3.0 + 50 * 15.0) / 1e6)


def test_separate_reasoning_content_is_kept(server):
    server.push(Reply(content="answer", reasoning_content="step by step"))
    c = client_for(server).complete("p")
    assert c.text == "answer" and c.reasoning == "step by step"


def test_system_prompt_and_repr(server):
    server.push(Reply(content="x"))
    client = client_for(server, system_prompt="be brief")
    client.complete("p")
    assert server.chat_requests()[0].body["messages"][0] == {"role": "system", "content": "be brief"}
    assert KEY not in repr(client)
