"""Submission schema, kernel keys, backend detection and strict JSON reading."""

from __future__ import annotations

import json

import pytest
from fixtures.leaderboard import factory as F

from kernelbench.backends import detect_backend
from leaderboard.errors import SubmissionError
from leaderboard.jsonio import parse_json_bytes, read_json_document
from leaderboard.schema import (
    KernelKey,
    Metadata,
    Submission,
    check_entry_id,
    load_submission,
    parse_kernel_key,
)


@pytest.mark.parametrize("key,expected", [
    ("level_1_problem_1_sample_0", KernelKey(1, 1, 0)),
    ("level_3_problem_50_sample_12", KernelKey(3, 50, 12)),
])
def test_parse_kernel_key(key, expected):
    assert parse_kernel_key(key) == expected
    assert str(parse_kernel_key(key)) == key


@pytest.mark.parametrize("key,fragment", [
    ("level_01_problem_1_sample_0", "write 'level_1_problem_1_sample_0'"),
    ("level_0_problem_1_sample_0", "start at 1"),
    ("level_1_problem_1", "level_<L>_problem_<P>_sample_<S>"),
    ("Level_1_Problem_1_Sample_0", "level_<L>_problem_<P>_sample_<S>"),
    ("level_1_problem_1_sample_0 ", "level_<L>_problem_<P>_sample_<S>"),
])
def test_bad_kernel_keys_explain_the_format(key, fragment):
    with pytest.raises(ValueError, match="kernel key") as e:
        parse_kernel_key(key)
    assert fragment in str(e.value)


def test_kernel_keys_sort_numerically_not_lexically():
    sub = Submission(metadata=Metadata(display_name="x"), kernels={
        "level_1_problem_10_sample_0": "a", "level_1_problem_9_sample_0": "b", "level_2_problem_1_sample_0": "c"})
    assert [str(k) for k, _ in sub.kernel_items()] == [
        "level_1_problem_9_sample_0", "level_1_problem_10_sample_0", "level_2_problem_1_sample_0"]


def test_metadata_accepts_model_string_and_keeps_unknown_fields():
    m = Metadata.model_validate({"display_name": "  Model X ", "model": "gpt-x", "extra_field": 1})
    assert m.display_name == "Model X"
    assert m.model is not None and m.model.name == "gpt-x"
    assert m.model_extra == {"extra_field": 1}


@pytest.mark.parametrize("meta", [
    {},
    {"display_name": ""},
    {"display_name": "x" * 81},
    {"display_name": "line\nbreak"},
    {"display_name": "ok", "backend": "hip"},
    {"display_name": "ok", "date": "yesterday"},
    {"display_name": "ok", "url": "javascript:alert(1)"},
])
def test_metadata_rejects_bad_values(meta):
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError
        Metadata.model_validate(meta)


def test_backend_detection():
    assert detect_backend(F.kernel("triton_relu")) == "triton"
    assert detect_backend(F.kernel("cuda_relu")) == "cuda"
    assert detect_backend("import torch\nclass ModelNew: pass\n") is None
    assert detect_backend("def (:") is None
    sub = Submission(metadata=Metadata(display_name="x"), kernels={})
    assert sub.backend_for(F.kernel("triton_relu")) == "triton"
    assert sub.backend_for("import torch") == "cuda"
    forced = Submission(metadata=Metadata(display_name="x", backend="cuda"), kernels={})
    assert forced.backend_for(F.kernel("triton_relu")) == "cuda"


def test_entry_ids():
    assert check_entry_id("gpt-5_mini.v2") == "gpt-5_mini.v2"
    for bad in ("a__b", "-x", "x y", "../etc", "x" * 81, ""):
        with pytest.raises(ValueError):
            check_entry_id(bad)


def test_sha256_is_content_not_formatting(tmp_path):
    data = F.submission_dict()
    a = F.write_submission(tmp_path / "a.json", data)
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data, indent=None, sort_keys=True))
    assert load_submission(a).sha256() == load_submission(b).sha256()
    data["kernels"]["level_1_problem_1_sample_0"] += "\n# changed\n"
    c = F.write_submission(tmp_path / "c.json", data)
    assert load_submission(c).sha256() != load_submission(a).sha256()


def test_canonical_json_roundtrips(tmp_path):
    sub = load_submission(F.write_submission(tmp_path / "s.json"))
    again = Submission.model_validate_json(sub.to_json())
    assert again == sub
    assert list(json.loads(sub.to_json())) == ["metadata", "kernels"]


def test_load_submission_errors_are_one_line(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"metadata": {"display_name": "x"}, "kernels": {"level_1_problem_1_sample_0": "a", '
                 '"level_1_problem_1_sample_0": "b"}}')
    with pytest.raises(SubmissionError, match="duplicate key 'level_1_problem_1_sample_0'"):
        load_submission(p)
    p.write_text('{"metadata": {}, "kernels": {}}')
    with pytest.raises(SubmissionError, match=r"metadata\.display_name"):
        load_submission(p)
    p.write_text('{"metadata": {"display_name": "x"}, "kernels": {"lvl1": "a"}}')
    with pytest.raises(SubmissionError, match="kernel key 'lvl1'"):
        load_submission(p)


def test_json_reader_findings(tmp_path):
    doc = parse_json_bytes(b'{"a": 1, "a": 2, "b": {"c": 1, "c": 2}}', "x.json")
    assert doc.ok and sorted(doc.duplicate_keys) == ["a", "c"]
    bad = parse_json_bytes(b'{"a": NaN}', "x.json")
    assert not bad.ok and "NaN is not valid JSON" in bad.errors[0]
    broken = parse_json_bytes(b'{"a": 1,\n "b": }', "x.json")
    assert "line 2" in broken.errors[0]
    latin = parse_json_bytes('{"a": "caf\u00e9"}'.encode("latin-1"), "x.json")
    assert "not UTF-8" in latin.errors[0] and "0xe9" in latin.errors[0]
    bom = parse_json_bytes(b'\xef\xbb\xbf{"a": 1}', "x.json")
    assert bom.ok and bom.value == {"a": 1} and "byte-order mark" in bom.warnings[0]
    deep = parse_json_bytes(b"[" * 100000 + b"]" * 100000, "x.json")
    assert not deep.ok and "nested too deeply" in deep.errors[0]


def test_json_reader_refuses_a_huge_file_without_reading_it(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MB on paper, nothing on disk
    doc = read_json_document(big, max_bytes=50 * 1024 * 1024)
    assert not doc.ok
    assert "200.0 MB" in doc.errors[0] and "50.0 MB limit" in doc.errors[0]
    assert doc.raw == b""
