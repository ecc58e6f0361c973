"""Problems: the contract, ProblemSet selection, and the directory and Hugging Face sources."""

from __future__ import annotations

import json
import subprocess

import pytest
from kbtesting import problem_source, repo_env, run_cli

import kernelbench
from kernelbench.errors import ProblemFormatError, ProblemNotFoundError, SourceError
from kernelbench.problems import (
    Problem,
    ProblemSet,
    load_builtin,
    load_directory,
    load_huggingface,
    load_problems,
    normalized_code_hash,
    parse_id_spec,
)
from kernelbench.problems.identity import kernelbench_code_hash

CODE = problem_source(shape="4, 4")


def write_tree(root, files: dict[str, str]):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_hash_ignores_comments_and_whitespace_but_not_code():
    reformatted = CODE.replace("return torch.relu(x)", "return torch.relu( x )  # the activation") + "\n\n# end\n"
    assert normalized_code_hash(reformatted) == normalized_code_hash(CODE)
    assert normalized_code_hash(CODE.replace("relu", "gelu")) != normalized_code_hash(CODE)


def test_parse_id_spec():
    assert parse_id_spec("1,3,5-7") == [1, 3, 5, 6, 7]
    with pytest.raises(ValueError, match="'x'"):
        parse_id_spec("1,x")
    with pytest.raises(ValueError, match="empty"):
        parse_id_spec("5-2")


def _set() -> ProblemSet:
    ps = [Problem(lv, i, f"{i}_P{lv}{i}", CODE) for lv in (1, 2) for i in (1, 2, 3)]
    return ProblemSet(ps, source="test")


def test_problem_set_lookup_and_selection():
    ps = _set()
    assert len(ps) == 6 and ps.levels() == [1, 2]
    assert ps.get(2, 3).name == "3_P23"
    assert [p.problem_id for p in ps.select(levels=[1], ids=[1, 3])] == [1, 3]
    assert [p.key for p in ps.select(id_range=(2, 3), levels=[2])] == ["level_2_problem_2", "level_2_problem_3"]
    assert ps.by_name("3_P13").problem_id == 3
    assert ps.by_name("P13", level=1).problem_id == 3
    assert ps.count_by_level() == {1: 3, 2: 3}


def test_problem_set_errors_name_the_thing():
    ps = _set()
    with pytest.raises(ProblemNotFoundError, match="level 4 has no problems.*levels available: 1, 2"):
        ps.get(4, 1)
    with pytest.raises(ProblemNotFoundError, match="no problem with id 9 in level 1.*ids 1-3"):
        ps.get(1, 9)
    with pytest.raises(ProblemNotFoundError, match="problem id\\(s\\) 7 not found"):
        ps.select(levels=[1], ids=[1, 7])
    with pytest.raises(ValueError, match="duplicate"):
        ProblemSet([Problem(1, 1, "1_a", CODE), Problem(1, 1, "1_b", CODE)])


def test_directory_source_reads_kernelbench_layout(tmp_path):
    root = write_tree(tmp_path / "KernelBench", {
        "level1/1_Relu.py": CODE, "level1/12_Softmax_thing_.py": CODE, "level2/3_Fused.py": CODE,
        "level1/notes.txt": "ignored", "level1/helper.py": CODE,  # no id prefix: skipped
    })
    ps = load_directory(root)
    assert [(p.level, p.problem_id, p.name) for p in ps] == [
        (1, 1, "1_Relu"), (1, 12, "12_Softmax_thing_"), (2, 3, "3_Fused")]
    assert ps.get(1, 12).filename == "12_Softmax_thing_.py"
    assert load_directory(tmp_path).source.endswith("KernelBench")  # a checkout root works too
    assert [p.level for p in load_problems("directory", root, levels=[2])] == [2]


def test_directory_source_errors(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        load_directory(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no level<N>/ folders"):
        load_directory(tmp_path / "empty")
    root = write_tree(tmp_path / "bad", {"level1/1_Broken.py": "import torch\nclass Model: pass\n"})
    with pytest.raises(ProblemFormatError, match="1_Broken.py.*get_inputs, get_init_inputs"):
        load_directory(root)
    root = write_tree(tmp_path / "syntax", {"level1/1_Syntax.py": "def oops(:\n"})
    with pytest.raises(ProblemFormatError, match="not valid Python"):
        load_directory(root)


def _rows(level: int, n: int) -> list[dict]:
    return [{"code": CODE, "level": level, "name": f"{i}_Problem_{level}_{i}", "problem_id": i} for i in range(1, n + 1)]


def test_huggingface_source_from_save_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict({f"level_{lv}": datasets.Dataset.from_list(_rows(lv, 3)) for lv in (1, 2)})
    dd.save_to_disk(str(tmp_path / "kb"))
    ps = load_huggingface(tmp_path / "kb")
    assert ps.count_by_level() == {1: 3, 2: 3}
    assert ps.get(2, 2).name == "2_Problem_2_2" and ps.source.startswith("huggingface:")
    assert load_huggingface(tmp_path / "kb", levels=[2]).levels() == [2]


def test_huggingface_source_from_a_parquet_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    (tmp_path / "kb" / "data").mkdir(parents=True)
    for lv in (1, 3):
        datasets.Dataset.from_list(_rows(lv, 2)).to_parquet(str(tmp_path / "kb" / "data" / f"level_{lv}-00000.parquet"))
    ps = load_problems("huggingface", tmp_path / "kb")
    assert ps.count_by_level() == {1: 2, 3: 2}


def test_huggingface_errors(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match="offline.*--source builtin.*--source directory"):
        load_huggingface()
    with pytest.raises(SourceError, match="does not exist"):
        load_huggingface(tmp_path / "nope")
    (tmp_path / "notadataset").mkdir()
    (tmp_path / "notadataset" / "x.txt").write_text("hi")
    with pytest.raises(SourceError, match="not a dataset folder"):
        load_huggingface(tmp_path / "notadataset")


def test_builtin_suite_loads():
    ps = load_builtin()
    assert len(ps) >= 36 and ps.levels() == [1, 2, 3, 4]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return run_cli(*args, env=repo_env(env), timeout=120)


def test_problems_cli_list_show_and_errors(tmp_path):
    out = _cli("problems", "list", "--source", "builtin")
    assert out.returncode == 0, out.stderr
    assert "problems from builtin" in out.stdout and "level 4" in out.stdout
    assert f"problem set builtin@{kernelbench.__version__}" in out.stdout
    listed = json.loads(_cli("problems", "list", "--level", "2", "--json").stdout)
    assert listed and all(p["level"] == 2 for p in listed)
    assert all(p["kernelbench_hash"] == kernelbench_code_hash(load_builtin().get(2, p["problem_id"]).code)
               for p in listed)
    show = _cli("problems", "show", "--level", "1", "--problem-id", "8")
    assert show.returncode == 0 and "class Model" in show.stdout
    bad_level = _cli("problems", "list", "--level", "7")
    assert bad_level.returncode == 2 and "unknown level 7" in bad_level.stderr
    bad_id = _cli("problems", "show", "--level", "1", "--problem-id", "999")
    assert bad_id.returncode == 2 and "no problem with id 999" in bad_id.stderr
    assert len(bad_id.stderr.strip().splitlines()) == 1
    bad_path = _cli("problems", "list", "--source", "directory", "--path", str(tmp_path / "nope"))
    assert bad_path.returncode == 2 and "does not exist" in bad_path.stderr
    write_tree(tmp_path / "bad", {"level1/1_X.py": "x = 1\n"})
    malformed = _cli("problems", "list", "--source", "directory", "--path", str(tmp_path / "bad"))
    assert malformed.returncode == 2 and "1_X.py" in malformed.stderr
