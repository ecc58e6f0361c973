"""Pull the candidate module out of a model's reply.

Replies are messy: thinking sections (``<think>...</think>``, sometimes only the closing tag),
several fenced blocks (a draft, the answer, a usage example), fences with no language tag or a
non-Python one, a reply truncated inside its last block, or no code at all. The rules, in order:

1. Thinking sections are dropped; code inside them is a draft, not the answer.
2. Among fenced blocks, those that define ``ModelNew`` win; the last of them is the answer
   (models revise as they go). Python-tagged or untagged blocks are preferred to others.
3. Failing that, the longest Python-tagged or untagged block is returned with a warning.
4. With no fences, the reply itself is used if it is a Python module that defines ``ModelNew``.
5. Otherwise there is no code: a recorded failure with the reason, never an exception.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_THINK_TAGS = ("think", "thinking", "reasoning", "thought")
_TAGS = "|".join(_THINK_TAGS)
_THINK_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(rf"</({_TAGS})>", re.IGNORECASE)
_THINK_OPEN = re.compile(rf"<({_TAGS})>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*$", re.MULTILINE)
_DEFINES_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_PYTHON_TAGS = {"", "python", "python3", "py", "py3", "pytorch", "torch", "triton"}
_CODE_START = re.compile(r"^(import |from \w[\w.]* import |class |def |@)", re.MULTILINE)


@dataclass(frozen=True)
class CodeBlock:
    language: str
    code: str
    closed: bool = True

    @property
    def is_python(self) -> bool:
        return self.language.lower() in _PYTHON_TAGS

    @property
    def defines_modelnew(self) -> bool:
        return bool(_DEFINES_MODELNEW.search(self.code))


@dataclass(frozen=True)
class Extraction:
    """The chosen code, or why there is none; ``warnings`` note doubtful choices."""

    code: str | None
    error: str | None = None
    blocks_found: int = 0
    had_thinking: bool = False
    warnings: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.code is not None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "error": self.error, "blocks_found": self.blocks_found,
                "had_thinking": self.had_thinking, "warnings": list(self.warnings)}


def strip_thinking(text: str) -> tuple[str, bool]:
    """Drop thinking sections; an orphan closing tag means everything before it was thinking."""
    had = False
    stripped = _THINK_BLOCK.sub("", text)
    if stripped != text:
        had = True
    closes = list(_THINK_CLOSE.finditer(stripped))
    if closes:
        had = True
        stripped = stripped[closes[-1].end():]
    # An opening tag never closed (reply cut off while thinking): nothing after it is an answer.
    m = _THINK_OPEN.search(stripped)
    if m:
        had = True
        stripped = stripped[: m.start()]
    return stripped, had


def find_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks in order; a block left open at the end (truncated reply) runs to the end."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if not m:
            break
        fence, lang = m.group(1), m.group(2)
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence)}{re.escape(fence[0])}*[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        if c is None:
            blocks.append(CodeBlock(lang, text[body_start:].rstrip() + "\n", closed=False))
            break
        blocks.append(CodeBlock(lang, text[body_start:c.start()].rstrip() + "\n", closed=True))
        pos = c.end()
    return [b for b in blocks if b.code.strip()]


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def extract_code(text: str | None, reasoning: str | None = None) -> Extraction:
    """Choose the candidate module from a reply (see the module docstring for the rules).

    ``reasoning`` is thinking the API returned apart from the reply (litellm moves ``<think>``
    sections there); it is never searched for code, only noted.
    """
    separate_thinking = bool(reasoning and reasoning.strip())
    if text is None or not text.strip():
        if separate_thinking:
            return Extraction(None, "no code in response (only a thinking section; the reply may have run out "
                                    "of tokens)", had_thinking=True)
        return Extraction(None, "empty response")
    body, had_thinking = strip_thinking(text)
    had_thinking = had_thinking or separate_thinking
    blocks = find_blocks(body)
    warnings: list[str] = []

    if blocks:
        with_model = [b for b in blocks if b.defines_modelnew]
        if with_model:
            preferred = [b for b in with_model if b.is_python] or with_model
            chosen = preferred[-1]
            if len(with_model) > 1:
                warnings.append(f"{len(with_model)} code blocks define ModelNew; the last one was taken")
        else:
            python = [b for b in blocks if b.is_python]
            if not python:
                langs = ", ".join(sorted({b.language or "untagged" for b in blocks}))
                return Extraction(None, f"no Python code block (found {len(blocks)} block(s): {langs})",
                                  len(blocks), had_thinking)
            chosen = max(python, key=lambda b: len(b.code))
            warnings.append("no code block defines ModelNew; the longest Python block was taken")
        if not chosen.closed:
            warnings.append("the chosen code block is not closed (reply truncated?)")
        return Extraction(chosen.code, None, len(blocks), had_thinking, tuple(warnings))

    # No fences at all: accept a bare module if that is what the reply is.
    if _DEFINES_MODELNEW.search(body):
        start = _CODE_START.search(body)
        candidate = body[start.start():] if start else body
        candidate = candidate.strip() + "\n"
        if _parses(candidate):
            warnings.append("no fenced code block; the reply was taken as code")
            return Extraction(candidate, None, 0, had_thinking, tuple(warnings))
        return Extraction(None, "the reply mentions ModelNew but holds no fenced code block and is not valid Python",
                          0, had_thinking)
    reason = "no code in response"
    if had_thinking and not body.strip():
        reason = "no code in response (only a thinking section; the reply may have run out of tokens)"
    return Extraction(None, reason, 0, had_thinking)
