"""One LLM client for every provider, over litellm.

Any model string litellm knows (``openai/...``, ``anthropic/...``, ``deepseek/...``, ``gemini/...``,
``together_ai/...``) works, and so does a local OpenAI-compatible server (sglang, vLLM) through
``api_base``. Retries are ours, not litellm's: litellm and the OpenAI SDK are told to try once, so
a 429's ``Retry-After`` is honoured, every attempt is counted, and tests see exactly the requests
made. A call never raises for an API failure: it returns a :class:`Completion` whose ``error``
says what went wrong.

litellm fetches a model price map from the network when imported unless
``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set *before* the import. The library does not write the
environment; the ``kernelbench`` CLI sets it (keeping a value the user set) before anything
imports litellm. Library users offline should set it themselves.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, computed_field, field_validator

log = logging.getLogger(__name__)

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
REASONING_EFFORTS: tuple[str, ...] = ("minimal", "low", "medium", "high")
OFFLINE_PRICE_MAP_VAR = "LITELLM_LOCAL_MODEL_COST_MAP"

_import_lock = threading.Lock()
_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, quietly: no debug banners on stdout, its loggers at WARNING."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            try:
                import litellm
            except ImportError:
                from kernelbench.errors import KernelBenchError

                raise KernelBenchError(
                    "generation needs litellm, which is not installed: pip install 'kernelbench[llm]'"
                ) from None
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
                logger = logging.getLogger(name)
                if logger.level == logging.NOTSET or logger.level < logging.WARNING:
                    logger.setLevel(logging.WARNING)
            _litellm = litellm
    return _litellm


class GenerationConfig(BaseModel):
    """How to call the model. Recorded in ``run.json``; it never holds a key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="litellm model string, e.g. 'openai/gpt-5' or 'openai/<served-name>'.")
    api_base: str | None = Field(default=None, description="OpenAI-compatible server, e.g. http://localhost:30000/v1")
    temperature: float | None = 0.0
    max_tokens: int | None = Field(default=None, description="None: the provider's default.")
    reasoning_effort: ReasoningEffort | None = None
    timeout_s: float = Field(default=600.0, gt=0)
    #: Attempts after the first, on rate limits (429), server errors (5xx), timeouts and dropped connections.
    max_retries: int = Field(default=5, ge=0)
    backoff_base_s: float = Field(default=2.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    #: Longest ``Retry-After`` honoured; a server asking for more gets this instead.
    max_retry_after_s: float = Field(default=300.0, ge=0)
    system_prompt: str | None = None
    #: Explicit prices in USD per million tokens; they override litellm's price map.
    input_cost_per_mtok: float | None = Field(default=None, ge=0)
    output_cost_per_mtok: float | None = Field(default=None, ge=0)

    @field_validator("model")
    @classmethod
    def _model_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("model must not be empty")
        return v.strip()

    def public_dict(self) -> dict:
        return self.model_dump(exclude_none=True)


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = None
    cost_usd: float | None = Field(default=None, description="None when no price is known for the model.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Completion(BaseModel):
    """One model call's outcome: the reply, or the failure, with what it cost."""

    model: str
    text: str | None = None
    reasoning: str | None = Field(default=None, description="Separate reasoning content, when the API returns it.")
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = Field(default=0.0, description="Duration of the last attempt.")
    elapsed_s: float = Field(default=0.0, description="All attempts and back-off waits.")
    attempts: int = 0
    error: str | None = None
    error_type: str | None = Field(
        default=None, description="rate_limit, server_error, timeout, connection, auth, bad_request, spend_cap, error")

    @property
    def ok(self) -> bool:
        return self.error is None


class _Failure:
    """A classified API error: whether to retry and how long the server asked us to wait."""

    def __init__(self, kind: str, message: str, retryable: bool, retry_after_s: float | None):
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.retry_after_s = retry_after_s


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (delta seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        get = headers.get
    except AttributeError:
        return None
    ms = get("retry-after-ms") or get("Retry-After-Ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after") or get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _classify(exc: BaseException) -> _Failure:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    retry_after = parse_retry_after(headers)
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if "Timeout" in name or status == 408:
        return _Failure("timeout", message, True, retry_after)
    if status == 429 or "RateLimit" in name:
        return _Failure("rate_limit", message, True, retry_after)
    if isinstance(status, int) and status >= 500:
        kind = "connection" if "Connection" in name else "server_error"
        return _Failure(kind, message, True, retry_after)
    if "Connection" in name:
        return _Failure("connection", message, True, retry_after)
    if status in (401, 403) or "Authentication" in name or "PermissionDenied" in name:
        return _Failure("auth", message, False, None)
    if isinstance(status, int) and 400 <= status < 500:
        return _Failure("bad_request", message, False, None)
    return _Failure("error", f"{name}: {message}", False, None)


class LLMClient:
    """Blocking, thread-safe completion calls with our retry policy.

    ``sleep`` and ``clock`` are parameters so tests can run the back-off on a fake clock; the
    defaults are the real ones.
    """

    def __init__(self, config: GenerationConfig, api_key: SecretStr | str | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None):
        self.config = config
        self._key = api_key if isinstance(api_key, SecretStr) or api_key is None else SecretStr(api_key)
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, api_base={self.config.api_base!r})"

    # ---- helpers ----
    def _redact(self, text: str | None) -> str | None:
        """Remove the key from any text we keep (error messages may echo request details)."""
        if text is None or self._key is None:
            return text
        secret = self._key.get_secret_value()
        return text.replace(secret, "***") if secret and len(secret) >= 4 else text

    def backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Wait before retry ``attempt`` (1-based): the server's Retry-After, else exponential with jitter."""
        cfg = self.config
        if retry_after_s is not None:
            return min(retry_after_s, cfg.max_retry_after_s)
        base = min(cfg.backoff_max_s, cfg.backoff_base_s * (2 ** (attempt - 1)))
        return base * (0.5 + self._rng.random() / 2)

    def _kwargs(self, messages: Sequence[dict]) -> dict:
        cfg = self.config
        kw: dict[str, Any] = {
            "model": cfg.model, "messages": list(messages), "timeout": cfg.timeout_s,
            "num_retries": 0, "max_retries": 0, "drop_params": True,
        }
        if cfg.api_base:
            kw["api_base"] = cfg.api_base
        if self._key is not None:
            kw["api_key"] = self._key.get_secret_value()
        if cfg.temperature is not None:
            kw["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            kw["max_tokens"] = cfg.max_tokens
        if cfg.reasoning_effort is not None:
            kw["reasoning_effort"] = cfg.reasoning_effort
        return kw

    def messages_for(self, prompt: str) -> list[dict]:
        msgs = []
        if self.config.system_prompt:
            msgs.append({"role": "system", "content": self.config.system_prompt})
        msgs.append({"role": "user", "content": prompt})
        return msgs

    def _cost(self, litellm: Any, response: Any, usage: Usage) -> float | None:
        cfg = self.config
        if cfg.input_cost_per_mtok is not None or cfg.output_cost_per_mtok is not None:
            return (usage.prompt_tokens * (cfg.input_cost_per_mtok or 0.0)
                    + usage.completion_tokens * (cfg.output_cost_per_mtok or 0.0)) / 1e6
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=response)
            except Exception:  # litellm raises for models it has no price for
                cost = None
        return float(cost) if cost is not None else None

    # ---- the call ----
    def complete(self, prompt: str | None = None, messages: Sequence[dict] | None = None) -> Completion:
        """Send one prompt (or a message list); retry transient failures; never raise for API errors."""
        if (prompt is None) == (messages is None):
            raise ValueError("pass exactly one of prompt or messages")
        litellm = import_litellm()
        kwargs = self._kwargs(messages if messages is not None else self.messages_for(prompt or ""))
        start = self._clock()
        attempt = 0
        while True:
            attempt += 1
            t0 = self._clock()
            try:
                response = litellm.completion(**kwargs)
            except Exception as exc:
                latency = self._clock() - t0
                failure = _classify(exc)
                if failure.retryable and attempt <= self.config.max_retries:
                    wait = self.backoff_s(attempt, failure.retry_after_s)
                    log.info("%s: %s (attempt %d); retrying in %.1fs", self.config.model, failure.kind, attempt, wait)
                    self._sleep(wait)
                    continue
                return Completion(model=self.config.model, latency_s=latency, elapsed_s=self._clock() - start,
                                  attempts=attempt, error=self._redact(failure.message), error_type=failure.kind)
            latency = self._clock() - t0
            return self._completion_from(litellm, response, attempt, latency, self._clock() - start)

    def _completion_from(self, litellm: Any, response: Any, attempts: int, latency: float,
                         elapsed: float) -> Completion:
        try:
            choice = response.choices[0]
            message = choice.message
            text = message.content
            reasoning = getattr(message, "reasoning_content", None)
            finish = getattr(choice, "finish_reason", None)
        except (AttributeError, IndexError, TypeError):
            return Completion(model=self.config.model, latency_s=latency, elapsed_s=elapsed, attempts=attempts,
                              error="response has no choices", error_type="bad_response")
        u = getattr(response, "usage", None)
        details = getattr(u, "completion_tokens_details", None)
        usage = Usage(
            prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(u, "completion_tokens", 0) or 0),
            reasoning_tokens=getattr(details, "reasoning_tokens", None) if details is not None else None,
        )
        usage = usage.model_copy(update={"cost_usd": self._cost(litellm, response, usage)})
        return Completion(model=self.config.model, text=self._redact(text), reasoning=self._redact(reasoning),
                          finish_reason=finish, usage=usage, latency_s=latency, elapsed_s=elapsed,
                          attempts=attempts)
