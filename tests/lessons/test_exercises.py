"""The lessons' exercises are real: each ships as a stub that fails its check with a readable
message, its reference solution (lessons/solutions/) passes the same check, and a wrong answer
(the solution's result moved by 50%) fails it with a message that says by how much.

The per-exercise facts come from the lesson runs of tests/lessons/test_lessons.py (run_lesson is cached,
so each lesson runs once per session), where lessons/course.py logs every grading."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hygiene import check_source
from test_lessons import LESSONS, ROOT, run_lesson

SOLUTIONS = ROOT / "lessons" / "solutions"
# lessons whose exercises are graded (every lesson with a backward or an algorithm to write)
GRADED = [p for p in LESSONS if (SOLUTIONS / p.name).exists()]


def _solution_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def test_every_lesson_has_exercises_with_solutions():
    numbers = sorted(int(p.name[:2]) for p in GRADED)
    lessons = sorted(int(p.name[:2]) for p in LESSONS)
    assert len(lessons) >= 15 and numbers == lessons, f"lessons with lessons/solutions/NN_*.py: {numbers} of {lessons}"
    assert sorted(p.name for p in SOLUTIONS.glob("*.py")) == sorted(p.name for p in GRADED), \
        "a solutions file without its lesson"


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_lesson_ships_stubs_not_answers(path: Path):
    """Each exercise function is defined in the lesson, and its body is only a docstring and a
    `raise NotImplementedError(...)`: the answer lives in lessons/solutions/ alone."""
    names = _solution_functions(SOLUTIONS / path.name)
    assert len(names) >= 2, f"{path.name}: only {names} in its solutions file"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in names:
        assert name in defs, f"{path.name} has no stub `{name}` (lessons/solutions/{path.name} has it)"
        body = [s for s in defs[name].body
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]  # minus the docstring
        assert len(body) == 1 and isinstance(body[0], ast.Raise), f"{path.name}: `{name}` is not a stub"
        exc = body[0].exc
        called = exc.func if isinstance(exc, ast.Call) else exc
        assert getattr(called, "id", None) == "NotImplementedError", f"{path.name}: `{name}` must raise NotImplementedError"
        message = exc.args[0].value if isinstance(exc, ast.Call) and exc.args else ""
        assert message.startswith("exercise "), f"{path.name}: `{name}`'s message should say which exercise"
    source = path.read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from|import)\s+solutions\b", source, re.M), f"{path.name} imports its solutions"


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_every_exercise_stub_fails_and_solution_passes(path: Path):
    run = run_lesson(path)
    assert run.returncode == 0, f"{path.name} failed; see tests/lessons/test_lessons.py"
    records = {r["name"]: r for r in run.grading}
    names = _solution_functions(SOLUTIONS / path.name)
    assert sorted(records) == sorted(names), f"{path.name}: graded {sorted(records)}, solutions define {sorted(names)}"
    assert sorted(r["number"] for r in run.grading) == list(range(1, len(names) + 1))
    for name, r in records.items():
        # the shipped stub: not passed, and the message names the exercise and says it is not written
        assert r["mine"]["ok"] is False and r["mine"]["stub"] is True, (name, r["mine"])
        assert f"exercise {r['number']}, {name}: not written yet" in r["mine"]["message"]
        # the reference solution passes every check
        failed = [c for c in r["solution"]["checks"] if not c[1]]
        assert r["solution"]["ok"] and not failed, f"{path.name} {name}: the solution fails {failed}"
        assert r["solution"]["checks"], f"{path.name} {name}: the check checked nothing"


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_every_check_catches_a_wrong_answer_and_says_by_how_much(path: Path):
    run = run_lesson(path)
    assert run.returncode == 0, f"{path.name} failed; see tests/lessons/test_lessons.py"
    for r in run.grading:
        wrong = r["wrong"]
        assert wrong["ok"] is False, f"{path.name} {r['name']}: a wrong answer (result * 1.5 + 0.1) passed its check"
        failed = [c for c in wrong["checks"] if not c[1]]
        message = wrong["message"]
        assert all(c[0] in message for c in failed), message
        # numbers or values: max_abs / got ... expected / a measured value or the error raised
        assert re.search(r"max_abs \d|got .*expected|expected|\d|Error", message), message


# ---------------------------------------------------------------------------------------------
# derivation exercises: nothing on screen gives an answer away before it is graded, and a grader
# never calls the library function that computes the answer (issue 39)


def _load_solution(path: Path):
    """A solutions file as a module of its own (registered only while it runs)."""
    spec = importlib.util.spec_from_file_location(f"_solution_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def _keys(path: Path) -> dict:
    """KEYS of a solutions file: {exercise: {"shows": [expressions], "calls": [library functions]}}."""
    return _load_solution(path).KEYS


def _squash(text: str) -> str:
    """Source text without whitespace and comment marks: `a * (b - c)` and `#   a *(b-c)` compare equal."""
    return re.sub(r"\s+|#", "", text)


def _grade_calls(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """{exercise function: (line of its `ex.grade(...)` call, name of its check function)}."""
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "grade"
                and len(node.args) >= 3 and isinstance(node.args[1], ast.Name) and isinstance(node.args[2], ast.Name)):
            found[node.args[1].id] = (node.lineno, node.args[2].id)
    return found


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_lesson_text_before_grading_does_not_show_the_answer(path: Path):
    """For every exercise, the lesson up to the line that grades it (its text, the stub and its
    docstring, the grader's source) contains none of the solution's key expressions. The first key
    is checked to be in the solution's own lines, so that a renamed variable cannot make this pass."""
    solution_path = SOLUTIONS / path.name
    keys, names = _keys(solution_path), _solution_functions(solution_path)
    assert sorted(keys) == sorted(names), f"{solution_path.name}: KEYS for {sorted(keys)}, exercises {sorted(names)}"
    solution_tree = ast.parse(solution_path.read_text(encoding="utf-8"))
    solution_src = {n.name: ast.get_source_segment(solution_path.read_text(encoding="utf-8"), n)
                    for n in solution_tree.body if isinstance(n, ast.FunctionDef)}
    lesson_lines = path.read_text(encoding="utf-8").splitlines()
    grades = _grade_calls(ast.parse(path.read_text(encoding="utf-8")))
    for name in names:
        shows = keys[name]["shows"]
        assert shows, f"{solution_path.name}: no key expression for {name}"
        assert _squash(shows[0]) in _squash(solution_src[name]), \
            f"{solution_path.name}: the key {shows[0]!r} is not a line of {name}"
        assert name in grades, f"{path.name} does not grade {name}"
        before = _squash("\n".join(lesson_lines[:grades[name][0]]))
        shown = [k for k in shows if _squash(k) in before]
        assert not shown, f"{path.name} shows {shown} (the answer to {name}) before grading it"


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_graders_do_not_call_the_library_function_that_is_the_answer(path: Path):
    """Graders compare with numbers (numerical gradients, known answers), never with the output of
    the library function the exercise rebuilds. Checked on the check function's source and on the
    lesson's own helper functions it calls."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    keys = _keys(SOLUTIONS / path.name)
    for name, (_, check_name) in _grade_calls(tree).items():
        check = functions[check_name]
        called = {c.func.id for c in ast.walk(check) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        code = "\n".join(ast.get_source_segment(source, functions[f]) for f in {check_name, *called} if f in functions)
        code = re.sub(r"#.*", "", code)  # comments may name what they avoid
        for forbidden in keys[name]["calls"]:  # a call of it: the name (maybe after a dot), then "("
            assert not re.search(rf"(?<![\w]){re.escape(forbidden)}\s*\(", code), \
                f"{path.name}: the grader of {name} ({check_name}) calls {forbidden}, which computes the answer"


MULTI_PATH = {"01_linear_and_gelu": ["my_linear_backward"], "02_layernorm": ["my_layernorm_backward"],
              "07_encoder_block": ["my_ffn_backward"], "10_bert_model": ["my_tied_decoder_backward"],
              "13_finetuning_heads": ["my_head_backward"], "16_feature_based_vs_finetuning": ["my_head_grads"],
              "19_albert_factorisation_and_sop": ["my_embedding_map_backward"],
              "21_permutation_lm": ["my_query_attention_backward", "my_two_stream_core_backward"],
              "22_span_corruption_encoder_decoder": ["my_cross_attention_backward"]}


@pytest.mark.parametrize("lesson", sorted(MULTI_PATH))
def test_a_wrong_path_fails_its_own_checks_and_only_those(lesson: str):
    """Each backward that returns one gradient per path (dq, dk, dv; the score and the value path;
    each stream) is graded path by path: the grading log makes one returned gradient wrong at a
    time, and exactly the checks named after that gradient fail."""
    run = run_lesson(ROOT / "lessons" / f"{lesson}.py")
    assert run.returncode == 0, f"{lesson} failed; see tests/lessons/test_lessons.py"
    records = {r["name"]: r for r in run.grading}
    for name in MULTI_PATH[lesson]:
        record = records[name]
        paths = record["paths"]
        assert paths and len(paths) >= 2, f"{lesson} {name}: grade(..., paths=...) is missing"
        for path, result in record["wrong_paths"].items():
            owners = {c: c.split()[0].rstrip(",:") for c in result["checks"]}
            own = [c for c in result["checks"] if owners[c] == path]
            assert own, f"{lesson} {name}: no check is named after {path!r}: {result['checks']}"
            assert result["failed"], f"{lesson} {name}: {path} made wrong, yet every check passed"
            others = [c for c in result["failed"] if owners[c] != path]
            assert not others, f"{lesson} {name}: {path} made wrong, and checks of other paths failed too: {others}"


# ---------------------------------------------------------------------------------------------
# the grader itself (lessons/course.py), on a toy exercise


@pytest.fixture
def course(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "lessons"))
    try:
        import course as mod
    finally:
        sys.path.remove(str(ROOT / "lessons"))
    (tmp_path / "99_toy.py").write_text("def my_double(x):\n    return 2 * x\n", encoding="utf-8")
    monkeypatch.setattr(mod, "SOLUTIONS", tmp_path)
    monkeypatch.setattr(mod, "ROOT", tmp_path.parent)
    monkeypatch.delenv("MINIBERT_SOLUTIONS", raising=False)
    monkeypatch.delenv("MINIBERT_GRADING_LOG", raising=False)
    return mod


def _check(course):
    x = np.array([[1.0, -2.0], [3.0, 0.5]])
    return lambda fn: [course.close("my_double(x) = 2x", fn(x), 2 * x)]


def test_grader_uses_a_correct_answer(course, capsys):
    def my_double(x):
        return x + x

    assert course.Exercises("99_toy").grade(1, my_double, _check(course)) is my_double
    assert "exercise 1, my_double: passed" in capsys.readouterr().out


def test_grader_stops_at_a_wrong_answer_and_says_where_and_by_how_much(course, capsys):
    def my_double(x):
        return 2 * x + np.array([[0.0, 0.0], [0.0, 0.25]])  # one entry off

    with pytest.raises(course.ExerciseFailed) as failure:
        course.Exercises("99_toy").grade(1, my_double, _check(course))
    message = str(failure.value)
    assert "exercise 1, my_double: 1 of 1 checks failed" in message
    assert "max_abs 2.5e-01" in message and "1 of 4 entries off at index (1, 1)" in message
    assert "got 1.25, expected 1" in message
    assert "FAIL" in capsys.readouterr().out


def test_grader_names_a_crash_and_its_line(course):
    def my_double(x):
        return x.reshape(3)  # ValueError

    with pytest.raises(course.ExerciseFailed, match=r"runs without an error: ValueError: .*line \d+"):
        course.Exercises("99_toy").grade(1, my_double, _check(course))


def test_grader_falls_back_to_the_solution_for_a_stub_and_says_so(course, capsys):
    def my_double(x):
        raise NotImplementedError("exercise 1: double it")

    used = course.Exercises("99_toy").grade(1, my_double, _check(course))
    assert used is not my_double and used(np.array(2.0)) == 4.0
    out = capsys.readouterr().out
    assert "exercise 1, my_double: not written yet (exercise 1: double it)" in out
    assert "reference solution from" in out and "99_toy.py" in out


def test_minibert_solutions_grades_the_solution_even_over_your_code(course, capsys, monkeypatch):
    monkeypatch.setenv("MINIBERT_SOLUTIONS", "1")

    def my_double(x):
        return 3 * x  # wrong, but not used

    used = course.Exercises("99_toy").grade(1, my_double, _check(course))
    assert used is not my_double
    assert "MINIBERT_SOLUTIONS=1, the reference solution" in capsys.readouterr().out


def test_shape_mismatch_is_a_readable_failure(course):
    r = course.close("x", np.zeros(3), np.zeros((2, 2)))
    assert not r.ok and r.detail == "shape (3,), expected (2, 2)"
    assert not course.equal("ids", [1, 2], [1, 3]).ok


def test_solutions_and_course_keep_floats_out_of_lookups():
    """The float-lookup-by-value pattern (lesson 00's crash on AVX-512) stays out of the files
    tests/meta/test_float_hygiene.py does not scan."""
    problems = {p.name: check_source(p.read_text(encoding="utf-8")) for p in sorted(SOLUTIONS.glob("*.py"))}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_solution_modules_load_on_their_own():
    """A learner can open and run a solutions file; it needs nothing from its lesson."""
    for path in sorted(SOLUTIONS.glob("*.py")):
        module = _load_solution(path)
        for name in _solution_functions(path):
            assert callable(getattr(module, name)), (path.name, name)


def test_mask_check_names_the_first_wrong_entry_and_its_rule(course):
    want = np.tril(np.ones((3, 3), dtype=bool))  # query i sees key j when j <= i
    got = want.copy()
    got[0, 2] = True  # one future key visible
    r = course.mask("causal mask", got, want, lambda idx: f"key {idx[1]} is after query {idx[0]}")
    assert not r.ok
    assert r.detail == "1 of 9 entries wrong; the first at (0, 2): got True, expected False, because key 2 is after query 0"
    assert course.mask("causal mask", want.astype(int), want, str).ok  # 1/0 read as True/False
    assert "entries other than True/False" in course.mask("m", want * 2, want, str).detail


def test_close_judges_float32_answers_as_float32_and_says_ok(course):
    want = np.array([1.0, 2e-9, -3.0])  # a gradient with an entry far below float32 resolution
    got = want * (1 + 3e-6) + np.array([0.0, 4e-8, 0.0])  # float32 rounding: the tiny entry is off by 20x
    r = course.close("dw", got, want, rtol=1e-4, atol=1e-6, float32=True)
    assert r.ok and r.detail.endswith(": ok at float32 precision (rtol 0.0001, atol 1e-06)")
    assert "max_rel 1.5e-06" in r.detail  # the relative error of the entries judged by it, not of the tiny one
    assert not course.close("dw", got * 1.01, want, rtol=1e-4, atol=1e-6, float32=True).ok
