"""API keys from the environment or .env: parsing, precedence, and never writing os.environ."""

from __future__ import annotations

import os

import pytest

from kernelbench.generation.env import (
    LOCAL_PLACEHOLDER_KEY,
    ApiKeyError,
    parse_dotenv,
    provider_of,
    read_dotenv,
    resolve_api_key,
)


def test_parse_dotenv_forms(caplog):
    text = "\n".join([
        "# a comment",
        "",
        "PLAIN=abc",
        "export EXPORTED=def",
        'DOUBLE="with spaces # not a comment"',
        "SINGLE='raw \\n kept'",
        "INLINE=value # trailing comment",
        "HASH_IN_VALUE=abc#def",
        'ESCAPED="line1\\nline2 \\"q\\""',
        "EMPTY=",
        "not a pair",
        'BROKEN="unterminated',
        "  SPACED  =  padded  ",
    ])
    env = parse_dotenv(text, where="test.env")
    assert env == {
        "PLAIN": "abc",
        "EXPORTED": "def",
        "DOUBLE": "with spaces # not a comment",
        "SINGLE": "raw \\n kept",
        "INLINE": "value",
        "HASH_IN_VALUE": "abc#def",
        "ESCAPED": 'line1\nline2 "q"',
        "EMPTY": "",
        "SPACED": "padded",
    }
    # Malformed lines are reported by line number, never by content.
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "line 11" in messages and "line 12" in messages
    assert "unterminated" in messages and '"unterminated' not in messages


def test_provider_of():
    assert provider_of("openai/gpt-5") == "openai"
    assert provider_of("together_ai/meta/llama") == "together_ai"
    assert provider_of("gpt-4o") == "openai"
    assert provider_of("claude-3-5-sonnet") == "anthropic"
    assert provider_of("mystery-model") is None


def test_environment_wins_over_dotenv(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("OPENAI_API_KEY=from-file\nANTHROPIC_API_KEY=anthropic-file\n")
    key = resolve_api_key("openai/gpt-5", env_file=env_file, environ={"OPENAI_API_KEY": "from-env"})
    assert key.secret() == "from-env" and "environment variable OPENAI_API_KEY" in key.source
    key = resolve_api_key("anthropic/claude", env_file=env_file, environ={})
    assert key.secret() == "anthropic-file" and key.source.endswith("ANTHROPIC_API_KEY")
    # The value never shows in str/repr.
    assert "anthropic-file" not in str(key) and "anthropic-file" not in repr(key)


def test_dotenv_key_does_not_enter_os_environ(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("DEEPSEEK_API_KEY=sk-dotenv-only\n")
    before = dict(os.environ)
    key = resolve_api_key("deepseek/deepseek-chat", env_file=env_file)
    assert key.secret() == "sk-dotenv-only"
    assert dict(os.environ) == before
    assert "sk-dotenv-only" not in os.environ.values()


def test_missing_key_is_a_one_line_error(tmp_path):
    with pytest.raises(ApiKeyError) as e:
        resolve_api_key("gemini/gemini-2.5-pro", env_file=tmp_path / "absent.env", environ={})
    msg = str(e.value)
    assert "\n" not in msg and "GEMINI_API_KEY" in msg and "--api-key-env" in msg


def test_local_server_never_gets_a_hosted_key(tmp_path):
    environ = {"OPENAI_API_KEY": "sk-real-openai"}
    key = resolve_api_key("openai/qwen", api_base="http://localhost:30000/v1", env_file=None, environ=environ)
    assert key.secret() == LOCAL_PLACEHOLDER_KEY
    key = resolve_api_key("openai/qwen", api_base="http://localhost:30000/v1", env_file=None,
                          environ={**environ, "SGLANG_API_KEY": "local-key"})
    assert key.secret() == "local-key"
    # ...unless asked for by name.
    key = resolve_api_key("openai/qwen", api_base="http://proxy/v1", api_key_env="OPENAI_API_KEY", env_file=None,
                          environ=environ)
    assert key.secret() == "sk-real-openai"


def test_named_variable_must_exist(tmp_path):
    with pytest.raises(ApiKeyError, match="MY_KEY"):
        resolve_api_key("openai/x", api_key_env="MY_KEY", env_file=None, environ={})


def test_unknown_provider_leaves_credentials_to_litellm():
    key = resolve_api_key("bedrock/anthropic.claude", env_file=None, environ={})
    assert key.value is None


def test_read_dotenv_absent_file_is_empty(tmp_path):
    assert read_dotenv(tmp_path / "nope") == {}
