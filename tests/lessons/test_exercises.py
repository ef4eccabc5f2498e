"""The lessons' exercises are real: each ships as a stub that fails its check with a readable
message, its reference solution (lessons/solutions/) passes the same check, and a wrong answer
(the solution's result moved by 50%) fails it with a message that says by how much.

The per-exercise facts come from the lesson runs of tests/lessons/lesson_runs.py (one run of each
lesson per session, shared with tests/lessons/test_lessons.py), where lessons/course.py logs every
grading."""
from __future__ import annotations

import ast
import json
import math
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hygiene import check_source
from lesson_runs import LESSONS, ROOT, run_lesson

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
    """KEYS of a solutions file: {exercise: {"shows": [expressions], "calls": [library functions],
    and optionally "numbers": [answers that are numbers, e.g. "7087872"]}}."""
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
        text = "\n".join(lesson_lines[:grades[name][0]])
        before = _squash(text)
        shown = [k for k in shows if _squash(k) in before]
        assert not shown, f"{path.name} shows {shown} (the answer to {name}) before grading it"
        # numbers, however they are written (7,087,872 or 7_087_872), as whole numbers
        digits = re.sub(r"(?<=\d)[,_](?=\d)", "", text)
        shown = [n for n in keys[name].get("numbers", []) if re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", digits)]
        assert not shown, f"{path.name} shows the number {shown} (the answer to {name}) before grading it"


def _check_names(tree: ast.Module, source: str) -> list[tuple[int, str]]:
    """(line, name) of every check a grader names: the first argument of course.close/equal/...
    when it is a string or an f-string (its literal parts)."""
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and node.func.attr in {"close", "equal", "true", "entries", "mask"}
                and getattr(node.func.value, "id", None) == "course"):
            out.append((node.lineno, ast.get_source_segment(source, node.args[0])))
    return out


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_check_names_do_not_work_the_answer_out(path: Path):
    """A check's name is printed and sits in the grader above the stub's grading: it names what is
    checked (\"50 of 100\"), never the arithmetic that answers it (\"0.5 +- 1.96 * 0.05\")."""
    source = path.read_text(encoding="utf-8")
    keys = _keys(SOLUTIONS / path.name)
    every_key = [(name, k) for name, v in keys.items() for k in v["shows"] + v.get("numbers", [])]
    for line, check_name in _check_names(ast.parse(source), source):
        plain = re.sub(r"(?<=\d)[,_](?=\d)", "", _squash(check_name))
        hits = [(name, k) for name, k in every_key if _squash(k) in plain]
        assert not hits, f"{path.name}:{line}: the check name {check_name} shows {hits}"


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


# ---------------------------------------------------------------------------------------------
# graders that refuse the library's answer (issue 47): every exercise the library answers declares
# the functions (`grade(..., refuses=...)`), and the library call pasted in is refused

SHORTCUTS = ROOT / "tests" / "lessons" / "shortcuts"
# the exercises no minibert function answers, and why (each checked by hand against the library)
NOT_ANSWERED_BY_THE_LIBRARY = {
    "my_silu_backward": "minibert has no SiLU",
    "my_gelu_max_gap": "a measurement made with layers.gelu_forward, which it needs",
    "my_rmsnorm_backward": "minibert has no RMSNorm",
    "my_masked_mean": "cross_entropy_forward's mean is over its own losses, not given values",
    "my_segment_ids": "the library builds segment ids while it packs pairs, never from a token list",
    "my_score_std": "a measurement",
    "my_mask_adder": "the library forms the adder inside attention_forward",
    "my_ffn_backward": "the library has no FFN backward of its own; composing linear_backward and gelu_backward is the exercise",
    "my_top_k": "fill_mask takes a model and a text, not logits",
    "my_head_entropy": "minibert computes no attention entropy",
    "my_first_piece_labels": "token_features needs examples and a tokenizer, not piece counts",
    "my_max_context_score": "squad._check_is_max_context returns a verdict, not the score",
    "my_best_span": "squad's span search needs a feature and n-best lists, not two logit vectors",
    "my_batch_stats": "generation_stats needs the whole feature dict and a tokenizer",
    "my_accuracy_interval": "minibert computes no interval",
}


def _shortcut_names(path: Path) -> list[str]:
    """The shortcut functions of tests/lessons/shortcuts/<lesson>: `my_fn` (the direct library call)
    and `my_fn__label` (another way around, written by hand)."""
    file = SHORTCUTS / path.name
    return _solution_functions(file) if file.exists() else []


# the ways around a guard that the walk of issue 54 found, written by hand (tests/lessons/shortcuts/),
# by kind: each must exist, and be refused like every other shortcut
HAND_WRITTEN = {
    "a bigger or sibling entry point": [
        ("01_linear_and_gelu", "my_linear_backward__sibling_classifier"),
        ("01_linear_and_gelu", "my_gelu_tanh_backward__sibling_dense_act"),
        ("03_softmax_cross_entropy", "my_cross_entropy_backward__sibling_task_loss"),
        ("05_attention", "my_softmax_backward__sibling_t5"),
        ("05_attention", "my_softmax_backward__serial_kernel"),
        ("05_attention", "my_softmax_backward__head_kernel"),
        ("06_attention_numba", "my_softmax_backward_rows__sibling_t5"),
        ("06_attention_numba", "my_dv__sibling_t5"),
        ("07_encoder_block", "my_block_param_count__sibling_model"),
        ("07_encoder_block", "my_block_param_count__sibling_albert"),
        ("07_encoder_block", "my_stack_blocks__sibling_block_states"),
        ("07_encoder_block", "my_stack_blocks__sibling_forward"),
        ("10_bert_model", "my_tied_decoder_backward__sibling_classifier"),
        ("10_bert_model", "my_tied_decoder_backward__sibling_mlm_transform"),
        ("10_bert_model", "my_gather_backward__sibling_t5"),
        ("13_finetuning_heads", "my_head_backward__sibling_dense_act"),
        ("13_finetuning_heads", "my_head_backward__loss_and_grads"),
        ("19_albert_factorisation_and_sop", "my_albert_num_parameters__sibling_param_shapes"),
        ("19_albert_factorisation_and_sop", "my_embedding_map_backward__sibling_classifier"),
        ("21_permutation_lm", "my_query_attention_backward__sibling_t5"),
        ("21_permutation_lm", "my_two_stream_core_backward__sibling_t5"),
        ("22_span_corruption_encoder_decoder", "my_span_corrupt__patched_corrupted_batch"),
        ("22_span_corruption_encoder_decoder", "my_cross_attention_backward__via_decoder"),
    ],
    "a class's base or object.__new__": [
        ("10_bert_model", "my_adam_first_step__object_new"),
        ("10_bert_model", "my_adam_first_step__base_class"),
        ("19_albert_factorisation_and_sop", "my_albert_num_parameters__object_new"),
        ("19_albert_factorisation_and_sop", "my_albert_num_parameters__base_class"),
    ],
    "a compiled function of one's own calling a compiled library one": [
        ("06_attention_numba", "my_softmax_backward_rows__compiled"),
    ],
    "inspect.getsource of a compiled kernel": [
        ("06_attention_numba", "my_softmax_backward_rows__getsource_kernel"),
    ],
    "numerical gradients as a backward's answer": [
        ("00_numerical_gradients", "my_silu_backward__numerical"),
        ("01_linear_and_gelu", "my_gelu_tanh_backward__numerical"),
        ("02_layernorm", "my_rmsnorm_backward__numerical"),
        ("07_encoder_block", "my_ffn_backward__numerical"),
    ],
    "the lesson's variables, functions and frames": [
        ("00_numerical_gradients", "my_numerical_grad__lesson_variable"),
        ("00_numerical_gradients", "my_silu_backward__grader_frame"),
        ("00_numerical_gradients", "my_silu_backward__inspect_frame"),
        ("00_numerical_gradients", "my_silu_backward__traceback_frame"),
        ("00_numerical_gradients", "my_numerical_grad__lesson_via_main"),
        ("07_encoder_block", "my_stack_blocks__lesson_variable"),
        ("10_bert_model", "my_adam_first_step__lesson_function"),
        ("10_bert_model", "my_adam_first_step__lesson_function_via_main"),
        ("13_finetuning_heads", "my_head_backward__lesson_variable"),
    ],
    # the lesson's variables reached through its module: refused or not, they answer another
    # question, because the grader draws its own inputs
    "the lesson's variables, on the grader's fresh inputs": [
        ("23_capstone_pretrain_finetune", "my_question_labels__hard_coded"),
        ("23_capstone_pretrain_finetune", "my_accuracy_interval__hard_coded"),
    ],
}
FRESH_INPUTS = "the lesson's variables, on the grader's fresh inputs"
REFUSED = re.compile(r"exercise (\d+) asks you to derive this; ")


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_every_exercise_declares_its_library_answer_or_why_there_is_none(path: Path):
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    shortcuts = _shortcut_names(path)
    for name in _solution_functions(SOLUTIONS / path.name):
        call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "grade" and len(n.args) >= 2 and getattr(n.args[1], "id", None) == name)
        refuses = [k for k in call.keywords if k.arg == "refuses"]
        if refuses:
            assert name in shortcuts, f"{path.name}: {name} refuses library functions, and shortcuts/{path.name} does not paste one in"
            assert name not in NOT_ANSWERED_BY_THE_LIBRARY, name
        else:
            assert name in NOT_ANSWERED_BY_THE_LIBRARY, \
                f"{path.name}: {name} declares no library answer (grade(..., refuses=...)) and is not listed as having none"
            assert name not in shortcuts, f"{path.name}: shortcuts/ answers {name} directly, which refuses nothing"


def test_the_hand_written_ways_around_exist():
    """Every shortcut of HAND_WRITTEN is in its file, every labelled shortcut of the files is in
    HAND_WRITTEN under a kind, and the kinds the issue lists are all there."""
    listed = {(lesson, name) for cases in HAND_WRITTEN.values() for lesson, name in cases}
    files = {(p.stem, name) for p in SHORTCUTS.glob("[0-9][0-9]_*.py") for name in _solution_functions(p) if "__" in name}
    assert listed == files, (sorted(listed - files), sorted(files - listed))
    assert len(HAND_WRITTEN) >= 6 and all(HAND_WRITTEN.values())


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_the_library_answer_pasted_in_is_refused(path: Path):
    """tests/lessons/shortcuts/NN_*.py holds, for each exercise the library answers, the stub with
    the library call typed in (with the lesson's own names), and every hand-written way around
    (HAND_WRITTEN), each graded in the exam room as if typed into the stub: refused, with a message
    that names the exercise and what the room does not have. (Every other route kind, for one toy
    exercise: tests/lessons/test_room.py.) Only the lesson's variables reached through its module may
    also fail as wrong answers: the grader's inputs are its own."""
    run = run_lesson(path)
    assert run.returncode == 0, f"{path.name} failed; see tests/lessons/test_lessons.py"
    records = {r["name"]: r for r in run.grading}
    fresh = {name for lesson, name in HAND_WRITTEN[FRESH_INPUTS] if lesson == path.stem}
    for name in _shortcut_names(path):
        base, _, label = name.partition("__")
        record = records[base]
        shortcut = record.get("shortcuts", {}).get(label or "direct")
        assert shortcut is not None, f"{path.name} {base}: the shortcut {label or 'direct'!r} was not graded"
        assert not shortcut["ok"], f"{path.name} {name}: the shortcut passed: {shortcut['checks']}"
        message = shortcut["message"]
        if name in fresh:
            continue  # wrong on the grader's own inputs (or refused): either way not passed
        found = REFUSED.search(message)
        assert found and int(found.group(1)) == record["number"], f"{path.name} {name}: not refused:\n{message}"
        if not label:  # the library typed in: said to be the library's
            assert re.search(r"is the library's|importing `minibert", message), message


def test_every_exercise_allows_what_its_reference_solution_uses():
    """The reference solutions, typed in by a learner, pass in the exam room (tests/lessons/test_room.py's
    slow learner runs): so every exercise whose solution uses minibert at all allows what it uses."""
    for path in GRADED:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        solution = _load_solution(SOLUTIONS / path.name)
        for name in _solution_functions(SOLUTIONS / path.name):
            call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "grade" and len(n.args) >= 2 and getattr(n.args[1], "id", None) == name)
            allows = [k for k in call.keywords if k.arg == "allows"]
            code = getattr(solution, name).__code__
            attrs = {n for c in [code, *[k for k in code.co_consts if hasattr(k, "co_names")]] for n in c.co_names}
            used = sorted(a for a in attrs if callable(getattr(solution, a, None)) and
                          (getattr(getattr(solution, a), "__module__", "") or "").startswith("minibert"))
            used += sorted(f"layers.{a}" for a in attrs if "layers" in code.co_names and a != "layers"
                           and callable(getattr(getattr(solution, "layers", None), a, None)))
            if used:
                assert allows, f"{path.name} {name}: its solution calls {used}, and the exercise allows nothing"


def test_the_exam_room_refuses_the_library_and_holds_the_allowed_copies(course):
    """A learner's function is graded in the exam room (lessons/room.py): the library's name is
    refused there; an allowed piece is there as a copy made from its source; code that reaches for
    the library and then returns the right answer on its own passes (nothing of the library ran:
    there is none). The grader's own calls, before and after, go through."""
    from minibert import layers

    x, w, dout = np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4))
    ns = {"layers": layers, "x_lesson": 2 * x, "np": np}

    def check(fn):
        layers.linear_backward(dout, layers.LinearCache(x, w))  # the grader may call it
        got = fn(x)
        layers.linear_backward(dout, layers.LinearCache(x, w))
        return [course.close("2x", got, 2 * x)]

    def my_double(x):
        return layers.linear_backward(x, layers.LinearCache(x, x))[0] * 0 + 2 * x

    ex = course.Exercises("99_toy", namespace=ns)
    with pytest.raises(course.ExerciseFailed, match=r"exercise 1 asks you to derive this; `layers.linear_backward` "
                                                    r"is the library's answer \(minibert does not exist"):
        ex.grade(1, my_double, check, refuses=("layers.linear_backward",))
    with pytest.raises(course.ExerciseFailed, match=r"exercise 1 asks you to derive this; "
                                                    r"`layers` is the library's \(minibert does not exist"):
        ex.grade(1, my_double, check)

    def my_double_quietly(x):  # reaches for the library, fails, and answers on its own: nothing of it ran
        try:
            layers.gelu_forward(x)
        except Exception:
            pass
        return 2 * x

    assert ex.grade(1, my_double_quietly, check) is my_double_quietly

    def my_double_allowed(x):  # what the exercise allows is there, a copy made from its source
        return layers.gelu_forward(x)[0] * 0 + 2 * x

    assert ex.grade(1, my_double_allowed, check, allows=("layers.gelu_forward",)) is my_double_allowed

    def my_double_imports(x):  # an allowed piece imported inside the function, as the library names it
        from minibert.layers import gelu_forward
        return gelu_forward(x)[0] * 0 + 2 * x

    assert ex.grade(1, my_double_imports, check, allows=("layers.gelu_forward",)) is my_double_imports

    def my_double_imports_more(x):
        from minibert.layers import linear_backward
        return linear_backward(x, (x, x))[0] * 0 + 2 * x

    with pytest.raises(course.ExerciseFailed, match=r"exercise 1 asks you to derive this; `minibert.layers.linear_backward` "
                                                    r"is the library's: of the library, the exam room holds only "
                                                    r"layers.gelu_forward"):
        ex.grade(1, my_double_imports_more, check, allows=("layers.gelu_forward",))
    assert "def gelu_forward(" in "\n".join(course.library_copies(("layers.gelu_forward",)))

    def my_double_other_piece(x):  # a piece the exercise does not allow is not in the room's copy
        return layers.linear_backward(x, layers.LinearCache(x, x))[0] * 0 + 2 * x

    with pytest.raises(course.ExerciseFailed, match=r"exercise 1 asks you to derive this; `minibert.layers.linear_backward` "
                                                    r"is the library's answer: of the library, the exam room holds "
                                                    r"only layers.gelu_forward"):
        ex.grade(1, my_double_other_piece, check, allows=("layers.gelu_forward",), refuses=("layers.linear_backward",))


def test_the_exam_room_hides_the_lessons_names_and_its_source(course, tmp_path):
    """Your function sees np, math, what it imports and your own helpers: a lesson variable is
    refused by name; reading minibert's source (for inspect.getsource + exec) is refused."""
    check = _check(course)
    lesson = tmp_path / "mine" / "99_toy_lesson.py"  # (not the folder the fixture's solutions are in)
    lesson.parent.mkdir()
    lesson.write_text(
        "import numpy as np\n"
        "from minibert import layers\n"
        "answer = np.array([[2.0, -4.0], [6.0, 1.0]])\n"
        "# %%\n"
        "def _twice(x):\n"
        "    return x + x\n"
        "def my_double(x):\n"
        "    return _twice(x)\n"
        "def my_double__var(x):\n"
        "    return answer\n"
        "def my_double__source(x):\n"
        "    import inspect\n"
        "    ns = {}\n"
        "    exec(inspect.getsource(layers), ns)\n"
        "    return 2 * x\n", encoding="utf-8")
    ns = {"__name__": "__main__"}
    exec(compile(lesson.read_text(encoding="utf-8"), str(lesson), "exec"), ns)
    ex = course.Exercises("99_toy", namespace=ns)
    assert ex.grade(1, ns["my_double"], check) is ns["my_double"]  # a helper of your cell comes along
    with pytest.raises(course.ExerciseFailed, match=r"`answer` is the lesson's, not yours"):
        ex.grade(1, ns["my_double__var"], check)
    with pytest.raises(course.ExerciseFailed, match=r"`layers` is the library's \(minibert does not exist"):
        ex.grade(1, ns["my_double__source"], check)


def test_a_numerical_gradient_over_an_allowed_copy_is_graded_by_its_values(course):
    """The room grades values, never how they were reached: a backward written as a numerical
    gradient of the allowed forward's copy passes when it is close enough (what the room holds is
    the exercise's to choose: a backward exercise that must not be answered this way allows no forward)."""
    from minibert import layers

    x, dout = np.linspace(-2, 2, 60).reshape(6, 10), np.linspace(1, 2, 60).reshape(6, 10)

    def check(fn):
        return [course.close("dx", fn(dout, x), layers.gelu_backward(dout, layers.gelu_forward(x)[1]), rtol=1e-5)]

    def my_gelu_backward(dout, x):
        grad, h = np.zeros_like(x), 1e-5
        for i in np.ndindex(*x.shape):
            x1, x2 = x.copy(), x.copy()
            x1[i] += h
            x2[i] -= h
            grad[i] = np.sum((layers.gelu_forward(x1)[0] - layers.gelu_forward(x2)[0]) * dout) / (2 * h)
        return grad

    ex = course.Exercises("99_toy", namespace={"layers": layers})
    assert ex.grade(1, my_gelu_backward, check, allows=("layers.gelu_forward",)) is my_gelu_backward


# ---------------------------------------------------------------------------------------------
# graders that diagnose: a plausible wrong answer per lesson (tests/lessons/mistakes/), and the
# part of the message that names what is wrong

DIAGNOSES = {
    ("00_numerical_gradients", "my_numerical_grad", "one_sided"):
        "it equals what this mistake gives: the one-sided difference (L(x + h e_i) - L(x)) / h, off by about h",
    ("00_numerical_gradients", "my_silu_backward", "no_dout"):
        "it equals what this mistake gives: dout forgotten (you return d out / dx; the chain rule multiplies it by dout)",
    ("00_numerical_gradients", "my_silu_backward", "no_x_slope"):
        "it misses the product rule's term with sigmoid(x) held constant (the slope of the x factor)",
    ("00_numerical_gradients", "my_silu_backward", "sigmoid_constant"):
        "it misses the product rule's term through sigmoid(x) (x held constant, times ds/dx)",
    ("00_numerical_gradients", "my_silu_backward", "sigmoid_slope_only"):
        "it equals what this mistake gives: the derivative of sigmoid(x) alone: SiLU is the product x * sigmoid(x)",
    ("00_numerical_gradients", "my_rel_error", "notes_denominator"):
        "dividing by the larger size, max(|a|, |n|) (CS231n's notes), not by the sum |a| + |n|",
    ("01_linear_and_gelu", "my_linear_backward", "dw_transposed"): "it is the expected answer transposed (the last two axes swapped)",
    ("01_linear_and_gelu", "my_gelu_tanh_backward", "one_path"): "it misses the path through tanh(u(x))",
    ("01_linear_and_gelu", "my_gelu_tanh_backward", "no_cubic_in_du"):
        "it equals what this mistake gives: du/dx without the derivative of u's cubic term 0.044715 x^3",
    ("02_layernorm", "my_layernorm_backward", "no_mean_term"): "it misses the mean term (the path from x through the mean)",
    ("02_layernorm", "my_layernorm_backward", "no_variance_term"):
        "it misses the variance term (the path from x through the variance)",
    ("02_layernorm", "my_layernorm_backward", "variance_term_sign"):
        "the variance term (the path from x through the variance) has the wrong sign",
    ("03_softmax_cross_entropy", "my_cross_entropy_backward", "sum_not_mean"): "a factor 1/n is missing",
    ("03_softmax_cross_entropy", "my_cross_entropy_backward", "no_target_term"):
        "it misses the term from -z_t (the target's own logit: -1 at the target)",
    ("03_softmax_cross_entropy", "my_cross_entropy_backward", "no_weight"):
        "it equals what this mistake gives: the weights left out: each row's gradient is scaled by its weight",
    ("03_softmax_cross_entropy", "my_cross_entropy_backward", "no_dloss"):
        "your answer is the expected answer divided by dloss: a factor dloss is missing",
    ("04_embedding_sum", "my_embedding_backward", "fancy_add"):
        "it equals what this mistake gives: each row read more than once holds one use's gradient",
    ("04_embedding_sum", "my_embedding_backward", "loop_assign"):
        "it equals what this mistake gives: each row read more than once holds one use's gradient",
    ("04_embedding_sum", "my_embedding_backward", "averaged"):
        "it equals what this mistake gives: the gradients of a row's uses averaged, not added",
    ("05_attention", "my_softmax_backward", "elementwise"): "it misses the term through the softmax's sum",
    ("05_attention", "my_softmax_backward", "unweighted_sum"):
        "the sum's term with datt summed as it is: the sum runs over datt[j] * att[j], weighted by att",
    ("05_attention", "my_mask_adder", "inverted"):
        "the mask read the other way round: MASK_VALUE on the real keys (1 in attn_mask) and 0 on the padding",
    ("05_attention", "my_score_std", "constant"): "the same number for every draw: a constant, not a measurement",
    ("05_attention", "my_score_std", "divided_by_hs"):
        "it is about 1/sqrt(HS): scaled twice (divided by HS where sqrt(HS) belongs), or the std of the products",
    ("05_attention", "my_score_std", "no_sum"): "it is about 1/sqrt(HS): scaled twice",
    ("05_attention", "my_score_std", "few_pairs"): "this spreads far more: a smaller sample than 10000 pairs?",
    ("05_attention", "my_score_std", "tiny_noise"): "a number with a little noise added is not a measurement",
    ("06_attention_numba", "my_softmax_backward_rows", "no_reduction"):
        "it misses the row's reduction (every att row sums to 1, whatever the scores are)",
    ("06_attention_numba", "my_softmax_backward_rows", "plain_numpy"):
        "compiled by @numba.njit: a plain function; this exercise is a Numba kernel",
    ("06_attention_numba", "my_dv", "plain_numpy"): "compiled by @numba.njit: a plain function; this exercise is a Numba kernel",
    ("06_attention_numba", "my_dv", "one_expression"): "one NumPy expression inside @njit passes the numbers",
    ("06_attention_numba", "my_softmax_backward_rows", "no_rescale"): "a factor 1/(1 - p) is missing",
    ("06_attention_numba", "my_dv", "not_transposed"): "it equals what this mistake gives: att @ dout, not att^T @ dout",
    ("07_encoder_block", "my_block_param_count", "no_biases"): "exactly the linear layers' biases (56), left out",
    ("08_wordpiece", "my_wordpiece", "shortest_first"): "the first difference at index",
    ("09_mlm_nsp_data", "my_num_predictions", "floor"): "exercise 1, my_num_predictions",
    ("10_bert_model", "my_tied_decoder_backward", "dtok_transposed"): "it is the expected answer transposed (the last two axes swapped)",
    ("11_pretrain_tiny", "my_clip", "per_array"): "the same factor for every array",
    ("12_looking_inside", "my_top_k", "logits_not_probabilities"): "exercise 1, my_top_k",
    ("13_finetuning_heads", "my_head_backward", "dW_transposed"): "it is the expected answer transposed (the last two axes swapped)",
    ("13_finetuning_heads", "my_head_backward", "w_pool_not_transposed"):
        "it equals what this mistake gives: w_pool where its transpose belongs",
    ("13_finetuning_heads", "my_head_backward", "cls_for_pooled"):
        "it equals what this mistake gives: cls where pooled belongs: W multiplies pooled, the classifier's input",
    ("13_finetuning_heads", "my_head_backward", "mean_again"):
        "your answer is 1/B times the expected answer: an extra factor 1/B (dlogits is the gradient of the mean loss",
    ("13_finetuning_heads", "my_head_backward", "db_not_summed"):
        "summed over its leading axes (4,) it is the expected answer: the sum over its uses",
    ("13_finetuning_heads", "my_head_backward", "no_tanh"):
        "tanh's derivative forgotten: the gradient passed through the tanh as if it were the identity",
    ("13_finetuning_heads", "my_head_backward", "tanh_twice"):
        "tanh's derivative taken at pooled: pooled is already tanh of the pre-activation, so that applies tanh twice",
    ("14_squad_windows", "my_best_span", "no_length_limit"): "exercise 2, my_best_span",
    ("15_pretrained_vs_scratch", "my_encoder_into_head", "everything"): "extra ['mlm.",
    ("16_feature_based_vs_finetuning", "my_concat_layers", "sum"): "shape",
    ("17_causal_vs_bidirectional", "my_causal_adder", "upper_triangle"): "which keys each query sees",
    ("18_roberta_recipe", "my_full_sentences", "no_separator"):
        "it equals what this mistake gives: no [SEP] where a new document starts inside a sequence",
    ("18_roberta_recipe", "my_full_sentences", "no_cut"):
        "it equals what this mistake gives: a sentence longer than max_tokens kept whole",
    ("18_roberta_recipe", "my_batch_stats", "padding_share"):
        "it equals what this mistake gives: the share of padding, not of real tokens",
    ("19_albert_factorisation_and_sop", "my_albert_num_parameters", "no_map"): "exactly the E -> C map (72), left out",
    ("19_albert_factorisation_and_sop", "my_embedding_map_backward", "dW_transposed"):
        "it is the expected answer transposed (the last two axes swapped)",
    ("19_albert_factorisation_and_sop", "my_albert_num_parameters", "bert_mlm_head"):
        "it equals what this mistake gives: BERT's MLM head: dense C -> C and a LayerNorm of width C",
    ("19_albert_factorisation_and_sop", "my_embedding_map_backward", "db_wrong_axis"):
        "it equals what this mistake gives: db summed over the batch and the features (axes 0 and 2)",
    ("20_replaced_token_detection", "my_bce_backward", "sum_not_mean"): "a factor 1/n (n real tokens) is missing",
    ("21_permutation_lm", "my_query_attention_backward", "no_scale"): "a factor scale is missing",
    ("21_permutation_lm", "my_query_attention_backward", "dv_not_transposed"):
        "it equals what this mistake gives: att @ dout, not att^T @ dout",
    ("21_permutation_lm", "my_query_attention_backward", "elementwise"):
        "it misses the term through the softmax's sum (each score also moves its row's normaliser)",
    ("21_permutation_lm", "my_query_attention_backward", "dk_not_transposed"):
        "it equals what this mistake gives: dscores @ q where dscores^T @ q belongs",
    ("21_permutation_lm", "my_two_stream_core_backward", "dv_not_transposed"):
        "it equals what this mistake gives: att @ dout, not att^T @ dout",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "no_sqrt"): "a factor 1/sqrt(HS) is missing",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "wk_wv_swapped"):
        "it equals what this mistake gives: w_k and w_v swapped",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "elementwise"):
        "it misses the term through the softmax's sum (each score also moves its row's normaliser)",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "not_through_w"):
        "it equals what this mistake gives: the gradient at the keys k, not at enc_out",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "no_mask"):
        "it equals what this mistake gives: the encoder mask left out: the padded token takes attention",
    ("23_capstone_pretrain_finetune", "my_accuracy_interval", "no_clip"):
        "it equals what this mistake gives: not clipped: an accuracy's interval stays inside [0, 1]",
    ("23_capstone_pretrain_finetune", "my_accuracy_interval", "z_ignored"):
        "it equals what this mistake gives: z ignored: 1.96 whatever z is given",
    ("23_capstone_pretrain_finetune", "my_accuracy_interval", "n_outside_sqrt"):
        "it equals what this mistake gives: sqrt(p (1 - p)) / n: the 1/n belongs under the square root",
    ("23_capstone_pretrain_finetune", "my_accuracy_interval", "variance"):
        "it equals what this mistake gives: the variance p (1 - p) / n where the standard error, its square root, belongs",
    # the rest of the walkthrough: one common mistake for every other exercise
    ("00_numerical_gradients", "my_rel_error", "no_floor"): "0 vs 0: 0, not nan: 1 entries are nan or inf",
    ("01_linear_and_gelu", "my_gelu_max_gap", "coarse_grid"): "Smaller than the largest gap: your grid steps over its peak",
    ("00_numerical_gradients", "my_numerical_grad", "no_dout"): "dout forgotten: the differences of sum(f(x)) alone",
    ("03_softmax_cross_entropy", "my_masked_mean", "over_all"): "divided by all N entries: the mean is over the valid",
    ("02_layernorm", "my_dx_without_mean_term", "no_variance_term"): "the variance's term left out too",
    ("22_span_corruption_encoder_decoder", "my_cross_attention_backward", "no_mask"):
        "it equals what this mistake gives: the encoder mask left out",
    ("01_linear_and_gelu", "my_gelu_max_gap", "signed"): "without the absolute value: the gap is |exact - tanh|",
    ("01_linear_and_gelu", "my_gelu_max_gap", "typed_in"): "The same number for every interval: a constant, not a measurement",
    ("02_layernorm", "my_rmsnorm_backward", "no_second_term"):
        "it misses the term through r (r = 1 / sqrt(mean(x^2) + eps) depends on x)",
    ("02_layernorm", "my_rmsnorm_backward", "sum_not_mean"):
        "the term through r (r = 1 / sqrt(mean(x^2) + eps) depends on x) is there, 8 times what it should be: "
        "an extra factor C (a sum over the features where their mean belongs) on it",
    ("02_layernorm", "my_rmsnorm_backward", "no_w"):
        "it equals what this mistake gives: w left out of dx: the gradient reaching the normalized x is dout * w",
    ("02_layernorm", "my_layernorm_backward", "no_w"):
        "it equals what this mistake gives: w left out of dx: the gradient reaching the normalized x is dout * w",
    ("02_layernorm", "my_layernorm_backward", "dw_not_summed"):
        "summed over its leading axes (2, 3) it is the expected answer: the sum over its uses (every example and "
        "position it served) is missing",
    ("02_layernorm", "my_dx_without_mean_term", "full_formula"):
        "exercise 1's dx unchanged (with the mean a constant, its term goes)",
    ("03_softmax_cross_entropy", "my_tempered_ce_backward", "no_inner_factor"): "a factor 1/tau is missing",
    ("03_softmax_cross_entropy", "my_masked_mean", "nan_when_empty"): "no valid entries gives 0.0: 1 entries are nan or inf. 0/0 when no entry is valid",
    ("04_embedding_sum", "my_onehot_backward", "transposed_product"): "it is the expected answer transposed (the last two axes swapped)",
    ("04_embedding_sum", "my_segment_ids", "last_sep"): "the first difference at index 4 (after [0, 0, 0]): got 0, expected 1",
    ("05_attention", "my_score_std", "unscaled"): "without the 1/sqrt(HS) scale it would be",
    ("05_attention", "my_mask_adder", "wrong_shape"): "a random (3, 7) mask: shape (3, 7), expected (3, 1, 1, 7)",
    ("07_encoder_block", "my_ffn_backward", "wrong_cache_order"):
        "the GELU's backward skipped: the gradient reaches linear_in's backward as if GELU were the identity",
    ("07_encoder_block", "my_ffn_backward", "in_out_swapped"):
        "the expected dw_out in dw_in's place: the gradients are returned out of order",
    ("07_encoder_block", "my_block_backward", "no_residual"):
        "it equals what this mistake gives: the residual path's gradient left out: x1 feeds the FFN",
    ("07_encoder_block", "my_block_backward", "softmax_no_row_sum"):
        "it equals what this mistake gives: softmax's backward without its row-sum term",
    ("07_encoder_block", "my_stack_blocks", "one_layer_twice"):
        "it equals what this mistake gives: layer 0's parameters (h0.*) in every block",
    ("07_encoder_block", "my_stack_blocks", "same_input"):
        "it equals what this mistake gives: each block run on the input x, not on the block before's output",
    ("07_encoder_block", "my_stack_blocks", "off_by_one"):
        "it equals what this mistake gives: one block only (layer 0's): the stack runs n_layers of them",
    ("08_wordpiece", "my_merge", "keeps_hashes"): "got '##u##g', expected '##ug'",
    ("08_wordpiece", "my_best_pair", "by_frequency"): "the first difference at index 0",
    ("09_mlm_nsp_data", "my_truncate_pair", "a_on_ties"): "the first difference at index (0, 0): got 'a3', expected 'a2'",
    ("09_mlm_nsp_data", "my_mask_choice", "one_draw"): "u1 = 0.95, u2 = 0.2 -> the original",
    ("10_bert_model", "my_gather_backward", "fancy_add"):
        "it equals what this mistake gives: each row read more than once holds one use's gradient",
    ("10_bert_model", "my_gather_backward", "b_t_swapped"):
        "it equals what this mistake gives: B and T swapped: the (B*T, C) rows reshaped to (T, B, C)",
    ("10_bert_model", "my_bert_backward", "no_cls"): "it equals what this mistake gives: [CLS]'s gradient from the "
        "pooler not added: seq[:, 0] feeds the pooler too, so dseq[:, 0] gets dcls added to what the MLM head gives. "
        "dseq is the first wrong gradient",
    ("10_bert_model", "my_bert_backward", "tanh_from_pre"): "it equals what this mistake gives: tanh's derivative taken "
        "at its input: 1 - pool_pre^2, where it is 1 - tanh(pool_pre)^2 = 1 - pooled^2. dpool_pre is the first wrong",
    ("10_bert_model", "my_bert_backward", "blocks_first_to_last"): "it equals what this mistake gives: the blocks' "
        "backward run first to last (block 0 first): backward runs the last block first",
    ("10_bert_model", "my_bert_backward", "pos_not_summed"):
        "it equals what this mistake gives: pos_emb's gradient not summed over the batch",
    ("10_bert_model", "my_bert_backward", "pos_t_rows"):
        "it equals what this mistake gives: pos_emb's gradient for the T positions read only, shape (T, C)",
    ("10_bert_model", "my_bert_backward", "tok_fancy_add"): "it equals what this mistake gives: each row read more "
        "than once holds one use's gradient (a write per use, the last one kept), not the sum over its uses: every use "
        "adds its gradient to the row. dtok_input is the first wrong gradient",
    ("10_bert_model", "my_bert_backward", "decoder_only"):
        "it equals what this mistake gives: the lookup's side of the tie left out",
    ("10_bert_model", "my_bert_backward", "input_only"):
        "it equals what this mistake gives: the decoder's side of the tie left out",
    ("10_bert_model", "my_bert_backward", "unused_not_ignored"):
        "it equals what this mistake gives: the unused slots (weight 0, target -100) not ignored",
    ("10_bert_model", "my_bert_backward", "gather_assigned"): "it equals what this mistake gives: each row read more "
        "than once holds one use's gradient (a write per use, the last one kept), not the sum over its uses: every use "
        "adds its gradient to the row. dseq_mlm is the first wrong gradient",
    ("10_bert_model", "my_adam_first_step", "only_m_corrected"):
        "it equals what this mistake gives: the bias correction on m alone",
    ("10_bert_model", "my_adam_first_step", "no_sqrt"):
        "it equals what this mistake gives: v used where its square root belongs",
    ("10_bert_model", "my_adam_first_step", "eps_in_sqrt"):
        "it equals what this mistake gives: eps inside the square root",
    ("10_bert_model", "my_adam_first_step", "no_bias_correction"): "it equals what this mistake gives: Adam without bias "
        "correction: the step-1 moments m, v used as they are, not divided by 1 - b1^1 and 1 - b2^1",
    ("10_bert_model", "my_adam_first_step", "sign"):
        "eps left out (as if it were 0): it matters where |g| is near eps = 1e-8",
    ("11_pretrain_tiny", "my_update_size", "corrected"):
        "it equals what this mistake gives: 1 at every step: that is Adam with bias correction",
    ("11_pretrain_tiny", "my_update_size", "no_sqrt"):
        "it equals what this mistake gives: m / v: the square root of v left out",
    ("11_pretrain_tiny", "my_update_size", "no_one_minus_b"):
        "it equals what this mistake gives: m and v as the sums of the b^k alone",
    ("11_pretrain_tiny", "my_lr", "decay_after_warmup"): "at index (3,): got 0.001, expected 0.0008",
    ("12_looking_inside", "my_encode_with_masks", "no_special_tokens"): "got 'train', expected '[CLS]'",
    ("12_looking_inside", "my_head_entropy", "log2"):
        "your answer is 1/ln 2 times the expected answer: an extra factor 1/ln 2 (a logarithm to base 2: bits, where "
        "the entropy here is in nats, ln)",
    ("12_looking_inside", "my_head_entropy", "rows_summed"):
        "your answer is T = 8 times the expected answer: an extra factor T = 8 (the rows' entropies summed, not "
        "averaged over the T rows)",
    ("13_finetuning_heads", "my_first_piece_labels", "every_piece"): "got 0, expected -100",
    ("14_squad_windows", "my_max_context_score", "no_length_term"):
        "it equals what this mistake gives: the 0.01 x length term left out",
    ("14_squad_windows", "my_max_context_score", "right_with_self"):
        "it equals what this mistake gives: the right context counted one too many",
    ("14_squad_windows", "my_max_context_score", "max_not_min"):
        "expected 0. it equals what this mistake gives: the larger of the two contexts where the smaller belongs",
    ("15_pretrained_vs_scratch", "my_control_params", "fresh_head_too"):
        "it equals what this mistake gives: a new head drawn, as the constructor draws one: the control keeps "
        "task_params' head",
    ("15_pretrained_vs_scratch", "my_control_params", "seed_ignored"):
        "it equals what this mistake gives: seed 0's init: the seed given is not the one used",
    ("16_feature_based_vs_finetuning", "my_head_grads", "mean_over_all"): "an extra factor (tagged / all positions)",
    ("16_feature_based_vs_finetuning", "my_head_grads", "sum_not_mean"):
        "an extra factor n = 45 (the tagged positions: a sum where the loss takes their mean)",
    ("16_feature_based_vs_finetuning", "my_head_grads", "no_onehot"):
        "it misses the term from -z_t (the tag's own logit: -1 at the tag, the one-hot)",
    ("16_feature_based_vs_finetuning", "my_head_grads", "db_not_summed"):
        "summed over its leading axes (64,) it is the expected answer",
    ("17_causal_vs_bidirectional", "my_next_token_targets", "padding_predicted"): "only if both are real",
    ("18_roberta_recipe", "my_batch_stats", "per_sequence"):
        "it equals what this mistake gives: per sequence, not per batch of batch_size sequences",
    ("20_replaced_token_detection", "my_rtd_labels", "every_sampled_position"): "section 4: one right sample, one wrong",
    ("21_permutation_lm", "my_two_stream_masks", "order_as_rank"): "content stream: i reads j only if step[j] <= step[i]",
    ("21_permutation_lm", "my_two_stream_core_backward", "dk_from_content_only"):
        "dk, the query stream's share alone: max_abs",
    ("22_span_corruption_encoder_decoder", "my_span_corrupt", "sentinel_per_token"): "a drawn example: input",
    ("23_capstone_pretrain_finetune", "my_question_labels", "first_paragraph_only"): "questions per article",
}


def test_every_lesson_has_a_planted_mistake():
    lessons = {lesson for lesson, _, _ in DIAGNOSES}
    assert lessons == {p.stem for p in GRADED}, sorted({p.stem for p in GRADED} - lessons)
    files = {(p.stem, name.split("__")[0], name.split("__")[1]) for p in (ROOT / "tests" / "lessons" / "mistakes").glob("*.py")
             for name in _solution_functions(p)}
    assert files == set(DIAGNOSES), (sorted(files - set(DIAGNOSES)), sorted(set(DIAGNOSES) - files))


@pytest.mark.parametrize("lesson", sorted({k[0] for k in DIAGNOSES}))
def test_a_planted_mistake_fails_with_a_message_that_names_the_part(lesson: str):
    """Each wrong answer of tests/lessons/mistakes/ fails its grader, and the message says what is
    wrong: the missing mean term, the missing 1/sqrt(HS), the transposed gradient, the first
    element where a list differs, the rule a mask breaks."""
    run = run_lesson(ROOT / "lessons" / f"{lesson}.py")
    assert run.returncode == 0, f"{lesson} failed; see tests/lessons/test_lessons.py"
    records = {r["name"]: r for r in run.grading}
    for (where, name, label), fragment in DIAGNOSES.items():
        if where != lesson:
            continue
        graded = records[name].get("mistakes", {}).get(label)
        assert graded is not None, f"{lesson} {name}__{label} was not graded"
        assert not graded["ok"], f"{lesson} {name}__{label} passed its grader: {graded['checks']}"
        assert fragment in graded["message"], f"{lesson} {name}__{label}: {fragment!r} not in\n{graded['message']}"


MISLEADING = {"1 times the expected": "a near miss called a constant factor of 1",
              "an extra factor dloss": "dloss = 1 called a factor",
              "transposed?": "a shape guess, said without looking at the values"}


@pytest.mark.parametrize("path", GRADED, ids=[p.name for p in GRADED])
def test_no_message_says_what_is_not_so(path: Path):
    """The words a grader says about a wrong answer are checked against the answer: no message of a
    planted mistake or of the perturbed wrong answer says a factor of 1 is a mistake, or guesses
    "transposed?" from the shape alone."""
    run = run_lesson(path)
    assert run.returncode == 0, f"{path.name} failed; see tests/lessons/test_lessons.py"
    for r in run.grading:
        messages = [r["wrong"]["message"]] + [m["message"] for m in r.get("mistakes", {}).values()]
        for message in messages:
            said = [why for words, why in MISLEADING.items() if words in message]
            assert not said, f"{path.name} {r['name']}: {said}\n{message}"


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


def test_a_notebook_cell_is_graded_in_the_exam_room_too(tmp_path):
    """In a notebook (cells compiled as `<cell N>`, no file behind them) your function and the
    helpers of its cell come along into the exam room, and the lesson's variables do not."""
    import os
    import subprocess

    source = (ROOT / "lessons" / "00_numerical_gradients.py").read_text(encoding="utf-8")
    silu = ('    raise NotImplementedError("exercise 3: write SiLU\'s backward")  # your code here\n')
    assert silu in source
    mine = source.replace(silu, "    return dout * _silu_slope(x)\n\n\ndef _silu_slope(x):\n"
                                "    s = 1 / (1 + np.exp(-x))\n    return s + x * s * (1 - s)\n")
    shortcut = mine.replace('    raise NotImplementedError("exercise 1: write the centered difference")  # your code here\n',
                            "    return dx_fused\n")
    script = (
        "import json, sys\n"
        "from minibert.tools import notebooks\n"
        "for text in json.loads(sys.stdin.read()):\n"
        "    nb, ok = notebooks.execute(notebooks.to_notebook(text))\n"
        "    out = ''.join(str(o.get('text', '')) + str(o.get('evalue', '')) for c in nb['cells'] if c['cell_type'] == 'code'\n"
        "                  for o in c.get('outputs', []))\n"
        "    print(json.dumps({'ok': ok, 'out': out}))\n")
    env = {**os.environ, "MINIBERT_FAST": "1", "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    env.pop("MINIBERT_SOLUTIONS", None)
    env.pop("MINIBERT_GRADING_LOG", None)
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps([mine, shortcut]), capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    correct, refused = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert correct["ok"] and "exercise 3, my_silu_backward: passed" in correct["out"], correct["out"][-2000:]
    assert not refused["ok"] and "exercise 1 asks you to derive this; `dx_fused` is the lesson's" in refused["out"], \
        refused["out"][-2000:]


def test_a_compiled_helper_of_yours_compiles_in_the_exam_room(course, tmp_path):
    """A Numba function you wrote next to the exercise compiles while graded (Numba reads its
    lines from the lesson's file), and one that calls a compiled minibert kernel is refused. An
    attribute (`x.shape`) is not the lesson's variable of the same name (lesson 06 has a `shape`)."""
    lesson = tmp_path / "mine" / "99_toy_numba.py"  # (not the folder the fixture's solutions are in)
    lesson.parent.mkdir()
    lesson.write_text(
        "import numba\n"
        "import numpy as np\n"
        "from minibert import kernels\n"
        "shape = (2, 3)  # a lesson variable named like the attribute the kernel reads\n"
        "# %%\n"
        "@numba.njit\n"
        "def _twice_kernel(x):\n"
        "    out = np.empty_like(x)\n"
        "    for i in range(x.shape[0]):\n"
        "        out[i] = 2.0 * x[i]\n"
        "    return out\n"
        "def my_double(x):\n"
        "    return _twice_kernel(x.ravel()).reshape(x.shape)\n"
        "@numba.njit\n"
        "def _with_library(a):\n"
        "    d = np.ones_like(a)\n"
        "    kernels.softmax_backward_head(d, a, np.zeros((1, 1, 1, 1)), 0, 0, False, 1.0)\n"
        "    return d\n"
        "def my_double__library(x):\n"
        "    _with_library(np.eye(2))\n"
        "    return 2 * x\n", encoding="utf-8")
    ns = {"__name__": "__main__"}
    exec(compile(lesson.read_text(encoding="utf-8"), str(lesson), "exec"), ns)
    ex = course.Exercises("99_toy", namespace=ns)
    assert ex.grade(1, ns["my_double"], _check(course)) is ns["my_double"]
    with pytest.raises(course.ExerciseFailed, match=r"`kernels` is the library.s \(minibert does not exist"):
        ex.grade(1, ns["my_double__library"], _check(course))


def test_close_names_a_known_mistake_whatever_its_shape(course):
    want = np.arange(6.0).reshape(2, 3) + 1  # (2, 3)
    other = np.arange(12.0).reshape(3, 4)  # (3, 4) another gradient of the same backward
    r = course.close("dw", other, want, wrongs=course.out_of_order(("dw", "dv"), (want, other), "dw"))
    assert not r.ok and "the expected dv in dw's place: the gradients are returned out of order" in r.detail
    r = course.close("dw", 2 * want + 1, want, wrongs={"the bias counted twice": 2 * want + 1})
    assert not r.ok and r.detail.endswith("it equals what this mistake gives: the bias counted twice")


def test_close_says_transposed_only_when_the_values_are(course):
    want = np.arange(6.0).reshape(2, 3) + 1  # (2, 3)
    assert "it is the expected answer transposed" in course.close("dw", want.T, want).detail
    detail = course.close("dw", want.T + 1, want).detail
    assert "it is the expected answer transposed" not in detail and "not the expected answer transposed" in detail


def test_close_calls_a_near_miss_a_near_miss_not_a_factor_of_one(course):
    want = np.linspace(1, 2, 8)  # (8,)
    detail = course.close("dx", want * (1 + 3e-5), want, factors={"dloss": 1.0}).detail
    assert "within ten times the tolerance" in detail and "times the expected" not in detail
    assert "a factor dloss is missing" in course.close("dx", want / 2.5, want, factors={"dloss": 2.5}).detail


def test_close_calls_a_constant_factor_only_what_is_one(course):
    """Shares that differ entry by entry are not "1.005 times the expected one" (a fresh reader's
    walk of lesson 09 found it); a true constant factor still is; a list of one is "1 element"."""
    want, got = np.array([0.8, 0.1, 0.1]), np.array([0.8, 0.18, 0.019])
    assert "constant factor" not in course.close("shares", got, want, rtol=0.05, atol=0.01).detail
    assert "3.5 times the expected one: off by a constant factor" in course.close("x", 3.5 * want, want).detail
    detail = course.equal("ids", [[1, 2]], [[1, 3]]).detail
    assert detail.startswith("1 element; ") and "1 elements" not in detail


def test_close_names_a_sum_left_out_a_scaled_term_and_a_named_factor_of_one_number(course):
    want = np.arange(1.0, 5.0)  # (4,) a parameter's gradient
    per_position = np.stack([want / 2, want / 2]).reshape(1, 2, 4)  # (1, 2, 4) its two uses, not summed
    detail = course.close("dw", per_position, want).detail
    assert "summed over its leading axes (1, 2) it is the expected answer" in detail
    assert "summed over its leading axes" not in course.close("dw", per_position + 1, want).detail
    term = np.array([0.5, -1.0, 2.0, 0.25])
    detail = course.close("dx", want + 7 * term, want, terms={"the variance term": term}, factors={"C": 8}).detail
    assert "the variance term is there, 8 times what it should be: an extra factor C on it" in detail
    one = course.close("entropy", 3.0, 3.0 * math.log(2), factors={"1/ln 2 (bits, not nats)": 1 / math.log(2)}).detail
    assert "your answer is 1/ln 2 times the expected answer: an extra factor 1/ln 2 (bits, not nats)" in one
    assert "times" not in course.close("entropy", 3.0, 2.5).detail  # one number: no constant factor guessed


def test_block_backward_reference_matches_numerical_gradients_of_every_intermediate():
    """Lesson 07's exercise 2 grades the whole block's backward against its reference solution,
    name by name: so every named gradient of the reference is checked here against the numerical
    gradient of a forward written on its own (the library's layers, the attention by hand), each
    intermediate replaceable by a value the difference quotient moves. Float64, random params,
    a padded key, a random upstream gradient."""
    from collections import namedtuple

    from minibert import layers
    from minibert.analysis import gradcheck
    from minibert.model import BertConfig, init_params

    solution = _load_solution(SOLUTIONS / "07_encoder_block.py")
    cfg = BertConfig(vocab_size=11, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=8)
    rng = np.random.default_rng(2024)
    p = {n[3:]: v + 0.1 * rng.standard_normal(v.shape) for n, v in init_params(cfg, seed=3, dtype=np.float64).items()
         if n.startswith("h0.")}
    Bn, Tn, C, NH = 2, 4, 8, 2
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]])  # (B, T) one padded key
    x, dx2 = rng.standard_normal((Bn, Tn, C)), rng.standard_normal((Bn, Tn, C))  # (B, T, C) each
    eps = cfg.layer_norm_eps
    Cache = namedtuple("Cache", "qkv attn out ln1 ffn_in gelu ffn_out ln2")

    def forward(over):
        """The block; each named intermediate is replaced by over[name] when given (and recorded)."""
        seen = {}

        def at(name, value):
            seen[name] = value
            return over.get(name, value)

        qkv = at("dqkv", x @ p["attn.qkv.w"] + p["attn.qkv.b"])  # (B, T, 3C)
        q, k, v = (at(n, t.reshape(Bn, Tn, NH, C // NH).transpose(0, 2, 1, 3))
                   for n, t in zip(("dq", "dk", "dv"), np.split(qkv, 3, axis=-1)))  # (B, NH, T, HS) each
        scores = at("dscores", q @ k.swapaxes(-1, -2) / np.sqrt(C // NH)
                    + (1.0 - mask)[:, None, None, :] * layers.MASK_VALUE)  # (B, NH, T, T)
        e = np.exp(scores - scores.max(-1, keepdims=True))  # (B, NH, T, T)
        probs = at("dprobs", e / e.sum(-1, keepdims=True))  # (B, NH, T, T)
        ctx = at("dcontext", (probs @ v).transpose(0, 2, 1, 3).reshape(Bn, Tn, C))  # (B, T, C)
        a = at("dattn_out", ctx @ p["attn.out.w"] + p["attn.out.b"])  # (B, T, C)
        x1 = at("dx1", layers.layernorm_forward(at("dln1_in", a + x), p["ln1.w"], p["ln1.b"], eps)[0])  # (B, T, C)
        g_in = at("dgelu_in", x1 @ p["ffn.in.w"] + p["ffn.in.b"])  # (B, T, FF)
        g_out = at("dgelu_out", layers.gelu_forward(g_in)[0])  # (B, T, FF)
        h = at("dffn_out", g_out @ p["ffn.out.w"] + p["ffn.out.b"])  # (B, T, C)
        x2 = layers.layernorm_forward(at("dln2_in", h + x1), p["ln2.w"], p["ln2.b"], eps)[0]  # (B, T, C)
        return x2, seen

    # the cache the lesson's block_forward builds, from the library's forward functions
    qkv, c_qkv = layers.linear_forward(x, p["attn.qkv.w"], p["attn.qkv.b"])
    q, k, v = (layers.split_heads(t, NH) for t in np.split(qkv, 3, axis=-1))
    a, c_att = layers.attention_forward(q, k, v, mask)
    a, c_out = layers.linear_forward(layers.merge_heads(a), p["attn.out.w"], p["attn.out.b"])
    x1, c_ln1 = layers.layernorm_forward(a + x, p["ln1.w"], p["ln1.b"], eps)
    h, c_in = layers.linear_forward(x1, p["ffn.in.w"], p["ffn.in.b"])
    h, c_gelu = layers.gelu_forward(h)
    h, c_fo = layers.linear_forward(h, p["ffn.out.w"], p["ffn.out.b"])
    x2, c_ln2 = layers.layernorm_forward(h + x1, p["ln2.w"], p["ln2.b"], eps)
    assert np.allclose(x2, forward({})[0], rtol=1e-12, atol=1e-12)
    grads = solution.my_block_backward(dx2, Cache(c_qkv, c_att, c_out, c_ln1, c_in, c_gelu, c_fo, c_ln2))

    _, seen = forward({})
    names = [n for n in grads if n.startswith("d")] + ["dx"]
    assert set(names) - {"dx"} == set(seen), (sorted(names), sorted(seen))
    for name in names:
        if name == "dx":
            num = gradcheck.numerical_grad(lambda: forward({})[0], x, dx2)
        else:
            over = {name: seen[name].copy()}
            num = gradcheck.numerical_grad(lambda: forward(over)[0], over[name], dx2)
        assert gradcheck.compare(name, grads[name], num, rtol=1e-5, atol=1e-8, verbose=False).ok, name
    for name in (n for n in grads if not n.startswith("d")):
        num = gradcheck.numerical_grad(lambda: forward({})[0], p[name], dx2)
        assert gradcheck.compare(name, grads[name], num, rtol=1e-5, atol=1e-8, verbose=False).ok, name


def test_bert_backward_reference_matches_numerical_gradients_of_every_intermediate():
    """Lesson 10's exercise 3 grades the whole model's backward against its reference solution,
    name by name: so every named gradient of the reference is checked here against the numerical
    gradient of a forward written on its own, each intermediate replaceable by a value the
    difference quotient moves (tok_emb's two reads, seq's two heads and [CLS] each on their own),
    and every parameter gradient against the numerical gradient of the loss. Float64, random
    params, a padded sequence, a prediction at [CLS], an unused slot that repeats a used position."""
    from collections import namedtuple

    from minibert import layers, model
    from minibert.analysis import gradcheck
    from minibert.model import BertConfig, init_params

    solution = _load_solution(SOLUTIONS / "10_bert_model.py")
    cfg = BertConfig(vocab_size=13, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=9)
    rng = np.random.default_rng(2025)
    p = {n: v + 0.1 * rng.standard_normal(v.shape) for n, v in init_params(cfg, seed=5, dtype=np.float64).items()}
    Bn, Tn, C, eps = 2, 6, 8, cfg.layer_norm_eps
    ids = rng.integers(0, 13, size=(Bn, Tn))  # (B, T) tokens repeat (13 of them)
    segs = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]])  # (B, T)
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])  # (B, T) two padded tokens
    positions = np.array([[2, 4, 2], [0, 3, 1]])  # (B, P) a prediction at [CLS]; slot (0, 2) repeats (0, 0)
    used = np.array([[1, 1, 0], [1, 1, 1]]) > 0  # (B, P) slot (0, 2) unused
    targets = np.where(used, rng.integers(0, 13, size=(Bn, 3)), -100).reshape(-1)  # (B*P,)
    labels = np.array([0, 1])  # (B,) NSP
    flat_pos = (np.arange(Bn)[:, None] * Tn + positions).reshape(-1)  # (B*P,)

    def forward(over, cache=None):
        """The loss; each named intermediate is replaced by over[name] when given (and recorded)."""
        seen = {}

        def at(name, value):
            seen[name] = value
            return over.get(name, value)

        tok_in, tok_dec = at("dtok_input", p["tok_emb"]), at("dtok_decoder", p["tok_emb"])  # (V, C) each read
        emb = at("demb", tok_in[ids] + p["seg_emb"][segs] + p["pos_emb"][:Tn])  # (B, T, C)
        x, c_eln = layers.layernorm_forward(emb, p["emb_ln.w"], p["emb_ln.b"], eps)  # (B, T, C)
        blocks = []
        for l in range(cfg.num_hidden_layers):
            x, c_block = model.block_forward(p, cfg, l, at(f"dblock{l}_in", x), mask, None, layers)  # (B, T, C)
            blocks.append(c_block)
        seq = at("dseq", x)  # (B, T, C)
        pre, c_pool = layers.linear_forward(at("dcls", seq[:, 0]), p["pool.w"], p["pool.b"])  # (B, C)
        pre = at("dpool_pre", pre)
        pooled = at("dpooled", np.tanh(pre))  # (B, C)
        nsp_logits, c_nsp = layers.linear_forward(pooled, p["nsp.w"], p["nsp.b"])  # (B, 2)
        nsp_loss, c_nsp_ce = layers.cross_entropy_forward(at("dnsp_logits", nsp_logits), labels)
        h = at("dh", at("dseq_mlm", seq).reshape(Bn * Tn, C)[flat_pos])  # (B*P, C)
        g_in, c_dense = layers.linear_forward(h, p["mlm.dense.w"], p["mlm.dense.b"])  # (B*P, C)
        g_out, c_gelu = layers.gelu_forward(at("dmlm_gelu_in", g_in))  # (B*P, C)
        t, c_ln = layers.layernorm_forward(at("dmlm_gelu_out", g_out), p["mlm.ln.w"], p["mlm.ln.b"], eps)
        t = at("dt", t)  # (B*P, C)
        logits = at("dmlm_logits", t @ tok_dec.T + p["mlm.bias"])  # (B*P, V)
        mlm_loss, c_mlm_ce = layers.cross_entropy_forward(logits, targets)
        if cache is not None:  # the BertCache lesson 10's forward returns, field by field
            cache.update(ids=ids, segs=segs, pos_rows=cfg.max_position_embeddings, seg_rows=cfg.type_vocab_size,
                         emb_ln=c_eln, layers=blocks, pool=c_pool, pool_pre=pre, pooled=pooled, nsp=c_nsp,
                         nsp_ce=c_nsp_ce, flat_pos=flat_pos, mlm_dense=c_dense, mlm_gelu=c_gelu, mlm_ln=c_ln, t=t,
                         tok_emb=p["tok_emb"], mlm_ce=c_mlm_ce)
        return float(mlm_loss + nsp_loss), seen

    fields = {}
    forward({}, fields)
    lesson = ROOT / "lessons" / "10_bert_model.py"
    order = re.search(r"class BertCache\(NamedTuple\):\n((?:    \w+: .*\n)+)", lesson.read_text(encoding="utf-8"))
    names = re.findall(r"^    (\w+):", order.group(1), re.M)
    assert sorted(names) == sorted(fields), (names, sorted(fields))  # the same fields as the lesson's cache
    c = namedtuple("BertCache", names)(**fields)

    def block_backward(dx, l):
        grads = {}
        return model.block_backward(dx, c.layers[l], cfg, l, grads, layers), grads

    got = solution.my_bert_backward(c, block_backward)
    _, seen = forward({})
    intermediates = [n for n in got if n.startswith("d")]
    assert set(intermediates) == set(seen), (sorted(intermediates), sorted(seen))
    assert [n for n in got if not n.startswith("d")] and set(got) - set(intermediates) == set(p)
    for name in intermediates:
        over = {name: np.array(seen[name], dtype=np.float64)}
        num = gradcheck.numerical_grad_scalar(lambda: forward(over)[0], over[name])
        assert gradcheck.compare(name, got[name], num, rtol=1e-5, atol=1e-8, verbose=False).ok, name
    for name, value in p.items():
        num = gradcheck.numerical_grad_scalar(lambda: forward({})[0], value)
        assert gradcheck.compare(name, got[name], num, rtol=1e-5, atol=1e-8, verbose=False).ok, name


def test_gradient_table_diagnoses_the_first_wrong_gradient_only(course):
    """A whole backward's table: a row per named gradient in the expected order, exact / close /
    the largest difference; the first wrong one named with its mistake's words and its hint, the
    rows below it numbers only; a missing name, an unknown name and a non-dict are said so."""
    rng = np.random.default_rng(5)
    want = {"da": rng.standard_normal((2, 3)), "db": rng.standard_normal(3), "dc": rng.standard_normal((3, 2))}
    got = {"da": want["da"].copy(), "db": want["db"] - 1.0, "dc": 2 * want["dc"]}
    rows = course.gradient_table(got, want, lambda: {"db": {"one subtracted": want["db"] - 1.0}},
                                 hints={"db": "is the bias summed?", "dc": "never said"})
    assert [r.ok for r in rows] == [True, False, False]
    assert rows[0].name.split() == ["da", "exact:", "True", "close:", "True"]
    assert "it equals what this mistake gives: one subtracted" in rows[1].detail
    assert "db is the first wrong gradient: is the bias summed?" in rows[1].detail
    assert "never said" not in rows[2].detail and "factor" not in rows[2].detail and "max_abs" in rows[2].detail
    near = {**want, "da": want["da"] * (1 + 1e-9)}  # close, not bit for bit
    assert course.gradient_table(near, want)[0].name.split()[1:] == ["exact:", "False", "close:", "True"]
    rows = course.gradient_table({"da": want["da"], "dz": 0.0}, want)
    assert [r.ok for r in rows] == [True, False, False, False]
    assert "missing" in rows[1].name and "dz" in rows[-1].detail
    assert not course.gradient_table((1, 2), want)[0].ok
