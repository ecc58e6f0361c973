"""API keys from the environment or a ``.env`` file, without ever putting them into the environment.

A key read from ``.env`` is handed to litellm as ``api_key=`` and nowhere else: writing it into
``os.environ`` would let every process started later (candidate workers included) inherit it.
Log lines and errors name the variable a key came from, never its value.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from kernelbench.errors import KernelBenchError

log = logging.getLogger(__name__)

DEFAULT_ENV_FILE = ".env"

#: Variables litellm itself reads for each provider prefix, in the order we try them.
PROVIDER_KEY_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY"),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "hosted_vllm": ("HOSTED_VLLM_API_KEY", "VLLM_API_KEY"),
}

#: Keys for a self-hosted OpenAI-compatible server (``--api-base``). A hosted provider's key is
#: deliberately not among them: it would be sent to whatever server ``--api-base`` names.
LOCAL_SERVER_KEY_VARS: tuple[str, ...] = ("KERNELBENCH_LOCAL_API_KEY", "SGLANG_API_KEY", "VLLM_API_KEY")
#: OpenAI-compatible servers started without ``--api-key`` accept any string, but the client needs one.
LOCAL_PLACEHOLDER_KEY = "EMPTY"

_BARE_MODEL_PROVIDERS = (
    (re.compile(r"^(gpt-|o\d|chatgpt-|text-|davinci)"), "openai"),
    (re.compile(r"^claude"), "anthropic"),
    (re.compile(r"^gemini"), "gemini"),
    (re.compile(r"^deepseek"), "deepseek"),
)
_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class ApiKeyError(KernelBenchError):
    """No key where one is needed, or a malformed key source."""


def parse_dotenv(text: str, where: str = ".env") -> dict[str, str]:
    """Parse ``KEY=VALUE`` lines: ``export`` prefixes, single/double quotes, ``#`` comments.

    A malformed line is skipped with a warning naming its line number, never its content (it may
    hold a secret).
    """
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export"):].strip()
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _KEY_NAME.match(key):
            log.warning("%s line %d: not a KEY=VALUE line; skipped", where, lineno)
            continue
        value = _parse_value(rest.strip())
        if value is None:
            log.warning("%s line %d: unterminated quote in the value of %s; skipped", where, lineno, key)
            continue
        out[key] = value
    return out


def _parse_value(rest: str) -> str | None:
    if rest[:1] == '"':
        chars: list[str] = []
        i = 1
        escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
        while i < len(rest):
            c = rest[i]
            if c == "\\" and i + 1 < len(rest):
                chars.append(escapes.get(rest[i + 1], "\\" + rest[i + 1]))
                i += 2
                continue
            if c == '"':
                return "".join(chars)
            chars.append(c)
            i += 1
        return None
    if rest[:1] == "'":
        end = rest.find("'", 1)
        return None if end < 0 else rest[1:end]
    # Unquoted: a '#' starts a comment only after whitespace, so 'abc#def' stays whole.
    m = re.search(r"\s#", rest)
    return (rest[: m.start()] if m else rest).strip()


def read_dotenv(path: str | Path) -> dict[str, str]:
    """The variables of a ``.env`` file; an absent file is an empty mapping, an unreadable one an error."""
    p = Path(path).expanduser()
    if not p.exists():
        return {}
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ApiKeyError(f"cannot read env file {p}: {e}") from None
    return parse_dotenv(text, where=str(p))


def provider_of(model: str) -> str | None:
    """The litellm provider of a model string: its prefix, or a guess for bare OpenAI/Anthropic names."""
    if "/" in model:
        return model.split("/", 1)[0].lower()
    for pattern, provider in _BARE_MODEL_PROVIDERS:
        if pattern.match(model.lower()):
            return provider
    return None


@dataclass(frozen=True)
class ResolvedKey:
    """A key and where it came from; ``repr`` and ``str`` never show the value."""

    value: SecretStr | None
    #: e.g. "environment variable OPENAI_API_KEY", ".env file: OPENAI_API_KEY", "placeholder"
    source: str
    names_tried: tuple[str, ...] = field(default=())

    def secret(self) -> str | None:
        return self.value.get_secret_value() if self.value is not None else None

    def __str__(self) -> str:
        return f"API key from {self.source}" if self.value is not None else "no API key"


def resolve_api_key(
    model: str,
    api_base: str | None = None,
    api_key_env: str | None = None,
    env_file: str | Path | None = DEFAULT_ENV_FILE,
    environ: Mapping[str, str] | None = None,
) -> ResolvedKey:
    """Find the key for ``model``: the environment first, then the ``.env`` file.

    ``api_key_env`` names the variable explicitly (needed for a proxy that wants a provider key).
    With ``api_base`` and an OpenAI-style model, only the local-server variables are tried and a
    placeholder is used when none is set. An unknown provider returns no key and leaves litellm to
    its own credentials (Bedrock, Vertex, Azure...). A known provider without a key is an error.
    """
    env = os.environ if environ is None else environ
    dotenv = read_dotenv(env_file) if env_file else {}
    provider = provider_of(model)

    def lookup(names: tuple[str, ...]) -> ResolvedKey | None:
        for name in names:
            if env.get(name):
                return ResolvedKey(SecretStr(env[name]), f"environment variable {name}", names)
            if dotenv.get(name):
                return ResolvedKey(SecretStr(dotenv[name]), f"{env_file}: {name}", names)
        return None

    if api_key_env:
        found = lookup((api_key_env,))
        if found is None:
            raise ApiKeyError(f"--api-key-env {api_key_env}: no such variable in the environment or in {env_file}")
        return found

    local = api_base is not None and provider in (None, "openai", "hosted_vllm", "custom_openai")
    if local:
        found = lookup(LOCAL_SERVER_KEY_VARS)
        return found or ResolvedKey(SecretStr(LOCAL_PLACEHOLDER_KEY), "placeholder (local server)",
                                    LOCAL_SERVER_KEY_VARS)
    if provider is None or provider not in PROVIDER_KEY_VARS:
        log.info("no known key variable for model %s; litellm will look for credentials itself", model)
        return ResolvedKey(None, "litellm's own credential lookup")
    names = PROVIDER_KEY_VARS[provider]
    found = lookup(names)
    if found is None:
        where = f" or in {env_file}" if env_file else ""
        raise ApiKeyError(
            f"no API key for {provider} (model {model}): set {' or '.join(names)} in the environment{where}, "
            f"or name another variable with --api-key-env"
        )
    return found
