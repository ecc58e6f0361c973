"""Code extraction from messy replies: thinking, several blocks, missing tags, no code."""

from __future__ import annotations

from kernelbench.generation.extract import extract_code, find_blocks, strip_thinking

FINAL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
DRAFT = "class ModelNew:\n    pass  # draft\n"
USAGE = "m = ModelNew()\nprint(m(1))\n"


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```"


def test_single_python_block():
    ex = extract_code(f"Here you go:\n{fence(FINAL)}\nDone.")
    assert ex.ok and ex.code == FINAL and ex.blocks_found == 1 and not ex.warnings


def test_thinking_section_and_two_blocks_take_the_answer_not_the_draft():
    reply = (f"<think>\nLet me try a draft first:\n{fence(DRAFT)}\nhmm, better idea.\n</think>\n"
             f"Usage example:\n{fence(USAGE)}\n"
             f"The kernel:\n{fence(FINAL)}\n")
    ex = extract_code(reply)
    assert ex.ok and ex.had_thinking
    assert ex.code == FINAL
    assert "draft" not in ex.code
    assert ex.blocks_found == 2  # the draft inside <think> is not counted


def test_last_of_several_modelnew_blocks_wins():
    second = FINAL.replace("x * 2", "x * 3")
    ex = extract_code(f"{fence(FINAL)}\nActually, revised:\n{fence(second)}")
    assert ex.code == second
    assert any("2 code blocks define ModelNew" in w for w in ex.warnings)


def test_orphan_closing_think_tag():
    # Some servers put <think> in the chat template, so the reply starts inside the thinking.
    reply = f"reasoning with {fence(DRAFT)}\n</think>\n\n{fence(FINAL)}"
    ex = extract_code(reply)
    assert ex.code == FINAL and ex.had_thinking


def test_missing_language_tag_and_tilde_fences():
    assert extract_code(f"```\n{FINAL}```").code == FINAL
    assert extract_code(f"~~~py\n{FINAL}~~~").code == FINAL


def test_non_python_block_next_to_python_block():
    cuda = "__global__ void k() {}\n"
    ex = extract_code(f"{fence(cuda, 'cuda')}\n{fence(FINAL)}")
    assert ex.code == FINAL


def test_only_non_python_blocks_is_a_failure():
    ex = extract_code(fence("__global__ void k() {}\n", "cpp"))
    assert not ex.ok and "no Python code block" in (ex.error or "") and "cpp" in (ex.error or "")


def test_no_code_at_all_is_a_recorded_failure():
    ex = extract_code("I cannot help with that.")
    assert not ex.ok and ex.code is None and ex.error == "no code in response"
    assert not extract_code("").ok and extract_code(None).error == "empty response"


def test_only_thinking_reports_truncation():
    ex = extract_code("<think>\nstill thinking about tiling...")
    assert not ex.ok and "thinking" in (ex.error or "")


def test_bare_module_without_fences():
    ex = extract_code("Sure.\n" + FINAL)
    assert ex.ok and ex.code.startswith("import torch") and "class ModelNew" in ex.code
    assert any("no fenced code block" in w for w in ex.warnings)


def test_truncated_block_is_taken_with_a_warning():
    ex = extract_code("```python\n" + FINAL)
    assert ex.code == FINAL and any("not closed" in w for w in ex.warnings)


def test_block_without_modelnew_falls_back_to_longest_python():
    short, long = "x = 1\n", "import torch\n\ndef helper(a):\n    return a + 1\n"
    ex = extract_code(f"{fence(short)}\n{fence(long)}")
    assert ex.code == long and any("no code block defines ModelNew" in w for w in ex.warnings)


def test_longer_fence_may_contain_triple_backticks():
    inner = 'doc = """\n```\nnot a fence end\n```\n"""\n' + FINAL
    ex = extract_code(f"````python\n{inner}````")
    assert ex.code == inner


def test_helpers():
    text, had = strip_thinking("<thinking>x</thinking>answer")
    assert text == "answer" and had
    a, b = fence("a = 1\n", "py"), fence("b = 2\n", "")
    assert [blk.language for blk in find_blocks(a + "\n" + b)] == ["py", ""]


def test_separate_reasoning_is_noted_but_never_searched():
    ex = extract_code(fence(FINAL), reasoning=f"thinking\n{fence(DRAFT)}")
    assert ex.code == FINAL and ex.had_thinking
    empty = extract_code("", reasoning=f"thinking\n{fence(DRAFT)}")
    assert not empty.ok and "run out of tokens" in (empty.error or "")
