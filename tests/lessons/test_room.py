"""The exam room (lessons/room.py) by its property, not by a list of routes: while a learner's
function is graded, the process it runs in has no `minibert`, `lessons` or `course` module loaded,
and importing them or reading their files is refused there. Then every route kind of
tests/lessons/shortcuts/room_routes.py fails, and a correct answer written in any natural style
passes (a constant, lru_cache, partial, a NumPy warning, a class, a closure, einsum, @njit)."""
from __future__ import annotations

import ast
import builtins
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from lesson_runs import LESSONS, ROOT

ROUTES = ROOT / "tests" / "lessons" / "shortcuts" / "room_routes.py"
FORBIDDEN = ("minibert", "lessons", "course", "solutions", "room")


@pytest.fixture(scope="module")
def course():
    sys.path.insert(0, str(ROOT / "lessons"))
    try:
        import course as mod
    finally:
        sys.path.remove(str(ROOT / "lessons"))
    return mod


def _gelu_grad(dout, x):
    """Exact GELU's derivative times dout, written here (not the library's)."""
    erf = np.vectorize(math.erf)
    return dout * (0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


def _check(course):
    def check(fn):
        r = np.random.default_rng(60)
        x, dout = r.standard_normal((3, 4)), r.standard_normal((3, 4))
        return [course.close("dx", fn(dout, x.copy()), _gelu_grad(dout, x))]
    return check


def _cells_namespace(tmp_path: Path, text: str, **names) -> dict:
    """A lesson file made of `text` (cells marked `# %%`), executed as the lesson would be."""
    path = tmp_path / "99_room_toy.py"
    path.write_text(text, encoding="utf-8")
    ns = {"__name__": "__main__", "np": np, **names}
    exec(compile(text, str(path), "exec"), ns)
    return ns


def test_the_room_has_no_library_and_refuses_it(course, tmp_path):
    probe = (
        "import numpy as np\n"
        "# %%\n"
        "def my_probe(x):\n"
        "    import sys, os, json\n"
        "    loaded = sorted(m for m in sys.modules if m.split('.')[0] in %r)\n"
        "    refused = []\n"
        "    try:\n"
        "        import minibert\n"
        "    except ImportError as e:\n"
        "        refused.append('import minibert: ' + str(e))\n"
        "    try:\n"
        "        __import__('lessons.course')\n"
        "    except ImportError as e:\n"
        "        refused.append('import lessons: ' + str(e))\n"
        "    for folder in json.loads(os.environ['MINIBERT_ROOM_FORBIDDEN']):\n"
        "        if not os.path.isdir(folder):\n"
        "            continue\n"
        "        for name in sorted(os.listdir(folder))[:50]:\n"
        "            path = os.path.join(folder, name)\n"
        "            if os.path.isfile(path):\n"
        "                try:\n"
        "                    open(path, 'rb').read(1)\n"
        "                    refused.append('READ ' + path)\n"
        "                except PermissionError:\n"
        "                    pass\n"
        "    return [loaded, refused, os.getpid(), x]\n") % (FORBIDDEN,)
    ns = _cells_namespace(tmp_path, probe)
    seen = {}

    def check(fn):
        seen["out"] = fn(np.arange(3.0))
        return [course.true("ran", True)]

    course.Exercises("99_room_toy", namespace=ns).grade(1, ns["my_probe"], check)
    loaded, refused, pid, x = seen["out"]
    assert loaded == [], f"the room has loaded {loaded}"
    assert pid != os.getpid(), "the learner's function ran in the lesson's own process"
    assert np.array_equal(x, np.arange(3.0)), "an array did not cross as itself"
    assert any(r.startswith("import minibert: importing `minibert` is refused") for r in refused), refused
    assert any(r.startswith("import lessons: importing `lessons.course` is refused") for r in refused), refused
    assert not [r for r in refused if r.startswith("READ ")], refused


def _routes() -> list[str]:
    tree = ast.parse(ROUTES.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
            and n.name.startswith("my_gelu_backward__")]


def test_the_routes_file_holds_every_kind_the_issue_lists():
    kinds = {"closure_cell", "staticmethod", "metaclass", "decorator_class", "thread_before", "code_copy", "os_link",
             "ctypes_libc", "loader_get_code", "njit_library", "subclasses_walk", "default_argument", "generator",
             "vectorize", "builtins_stash", "sys_modules", "importlib", "pickle", "traceback_frame",
             "library_subclass", "subprocess", "spec_from_file", "lesson_variable", "thread_pool", "wrapped",
             "reload", "getsource_exec"}
    have = {name.split("__", 1)[1] for name in _routes()}
    assert kinds <= have, f"missing route kinds: {sorted(kinds - have)}"


@pytest.fixture(scope="module")
def routes_namespace(tmp_path_factory):
    from minibert import layers

    builtins._minibert_layers = layers  # the stash made before grading, in the lesson's process
    ns = {}
    try:
        text = ROUTES.read_text(encoding="utf-8")
        right = _gelu_grad(np.ones((3, 4)), np.ones((3, 4)))
        ns = _cells_namespace(tmp_path_factory.mktemp("routes"), text, ANSWER=right)
        yield ns
    finally:
        del builtins._minibert_layers
        for path in [*ns.get("_COPIES", []), os.path.join(tempfile.gettempdir(), "minibert_route_port")]:
            Path(path).unlink(missing_ok=True)  # the copies the routes made in this process


@pytest.mark.parametrize("name", _routes())
def test_every_route_around_the_grader_fails_in_the_room(course, routes_namespace, name):
    ex = course.Exercises("99_room_toy", namespace=routes_namespace)
    with pytest.raises(course.ExerciseFailed) as failure:
        ex.grade(1, routes_namespace[name], _check(course))
    assert "exercise 1, " in str(failure.value) and "checks failed" in str(failure.value)


# ---------------------------------------------------------------------------------------------
# natural correct answers pass

ANSWER_BODY = ("    cdf = 0.5 * (1.0 + _erf(x / SQRT2))\n"
               "    return dout * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))\n")
NATURAL = {
    "constant": "import math\nSQRT2 = math.sqrt(2.0)\n_erf = np.vectorize(math.erf)\n"
                "def my_gelu_backward(dout, x):\n" + ANSWER_BODY,
    "lru_cache": "import functools, math\n@functools.lru_cache(maxsize=None)\ndef _sqrt2():\n    return math.sqrt(2.0)\n"
                 "_erf = np.vectorize(math.erf)\n"
                 "def my_gelu_backward(dout, x):\n    SQRT2 = _sqrt2()\n" + ANSWER_BODY,
    "partial": "import functools, math\ndef _scaled_erf(v, s):\n    return np.vectorize(math.erf)(v / s)\n"
               "_erf2 = functools.partial(_scaled_erf, s=math.sqrt(2.0))\n"
               "def my_gelu_backward(dout, x):\n    _erf, SQRT2 = _erf2, 1.0\n" + ANSWER_BODY,
    "numpy_warning": "import math\nSQRT2 = math.sqrt(2.0)\n_erf = np.vectorize(math.erf)\n"
                     "def my_gelu_backward(dout, x):\n    ratio = np.zeros(2) / np.zeros(2)  # 0/0: a RuntimeWarning\n"
                     "    ratio[np.isnan(ratio)] = 0.0\n" + ANSWER_BODY,
    "class": "import math\nclass Gelu:\n    SQRT2 = math.sqrt(2.0)\n    def grad(self, dout, x):\n"
             "        cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / self.SQRT2))\n"
             "        return dout * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))\n"
             "def my_gelu_backward(dout, x):\n    return Gelu().grad(dout, x)\n",
    "closure": "import math\ndef _make(s):\n    def erf(v):\n        return np.vectorize(math.erf)(v / s)\n    return erf\n"
               "_erf, SQRT2 = _make(1.0), math.sqrt(2.0)\ndef my_gelu_backward(dout, x):\n" + ANSWER_BODY,
    "einsum": "import math\nSQRT2 = math.sqrt(2.0)\n_erf = np.vectorize(math.erf)\n"
              "def my_gelu_backward(dout, x):\n    cdf = 0.5 * (1.0 + _erf(x / SQRT2))\n"
              "    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)\n"
              "    return np.einsum('ij,ij->ij', dout, cdf + x * pdf)\n",
    "njit": "import math\nimport numba\n@numba.njit\ndef _grad(dout, x):\n    out = np.empty_like(x)\n"
            "    for i in range(x.shape[0]):\n        for j in range(x.shape[1]):\n            v = x[i, j]\n"
            "            out[i, j] = dout[i, j] * (0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) + v * math.exp(-0.5 * v * v)"
            " / math.sqrt(2 * math.pi))\n    return out\n"
            "def my_gelu_backward(dout, x):\n    return _grad(dout, x)\n",
}


@pytest.mark.parametrize("variant", sorted(NATURAL))
def test_a_correct_answer_passes_whatever_its_style(course, tmp_path, variant):
    ns = _cells_namespace(tmp_path, "import numpy as np\n# %%\n" + NATURAL[variant])
    fn = ns["my_gelu_backward"]
    assert course.Exercises("99_room_toy", namespace=ns).grade(1, fn, _check(course)) is fn


def test_a_crash_in_the_room_names_its_line(course, tmp_path):
    ns = _cells_namespace(tmp_path, "import numpy as np\n# %%\ndef my_gelu_backward(dout, x):\n"
                                    "    return x.reshape(7)\n")
    with pytest.raises(course.ExerciseFailed, match=r"runs without an error: ValueError: .*\(line 4: return x.reshape"):
        course.Exercises("99_room_toy", namespace=ns).grade(1, ns["my_gelu_backward"], _check(course))


# ---------------------------------------------------------------------------------------------
# every exercise of every lesson, answered as a learner would (slow: each lesson runs again)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learner import VARIANTS, learner_lesson  # noqa: E402

# (a Numba kernel exercise stays as written in every style: its grader looks at how it was compiled)
STYLES = {"constant, lru_cache, warning, einsum, njit, partial":
          ("constant", "lru_cache", "warning", "einsum", "njit", "partial"), "class": ("class",),
          "closure": ("closure",)}
assert {v for s in STYLES.values() for v in s} == set(VARIANTS)


@pytest.mark.slow
@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("path", LESSONS, ids=[p.name[:2] for p in LESSONS])
def test_every_exercise_passes_answered_as_a_learner_would(path, style, tmp_path):
    """Each stub replaced by its answer in the exercise's own cell (tests/lessons/learner.py),
    written in `style`: the lesson runs to its end and says every exercise passed."""
    text = learner_lesson(path, ROOT / "lessons" / "solutions" / path.name, STYLES[style])
    mine = tmp_path / path.name  # outside lessons/ (which the repository's own checks read): course found by PYTHONPATH
    mine.write_text(text, encoding="utf-8")
    env = {**os.environ, "MINIBERT_FAST": "1", "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT / "lessons")}
    for k in ("MINIBERT_SOLUTIONS", "MINIBERT_GRADING_LOG", "MINIBERT_SHORTCUTS", "MINIBERT_MISTAKES"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, str(mine)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "not written yet" not in proc.stdout
    assert "passed (" in proc.stdout


def test_a_later_exercise_may_call_your_earlier_answer(course, tmp_path):
    """Your answer to exercise 1 comes along into the room when exercise 2's cell calls it (as lesson
    10's whole backward may call the tied decoder's), with the helpers of its own cell; the lesson's
    other cells do not."""
    ns = _cells_namespace(tmp_path, "import numpy as np\n"
                                    "# %%\n"
                                    "SCALE = 2.0\n"
                                    "def _twice(x):\n    return SCALE * x\n"
                                    "def my_double(x):\n    return _twice(x)\n"
                                    "# %%\n"
                                    "def my_quadruple(x):\n    return my_double(my_double(x))\n"
                                    "# %%\n"
                                    "def my_octuple(x):\n    return my_quadruple(my_double(x))\n")
    ex = course.Exercises("99_room_toy", namespace=ns)
    x = np.array([1.0, -2.5])

    def check(k):
        return lambda fn: [course.close(f"{k}x", fn(x), k * x)]

    with pytest.raises(course.ExerciseFailed, match=r"`my_double` is the lesson's, not yours"):
        ex.grade(2, ns["my_quadruple"], check(4))  # exercise 1 not graded yet: not there
    assert ex.grade(1, ns["my_double"], check(2)) is ns["my_double"]
    assert ex.grade(2, ns["my_quadruple"], check(4)) is ns["my_quadruple"]
    assert ex.grade(3, ns["my_octuple"], check(8)) is ns["my_octuple"]


def test_with_allowed_pieces_the_room_holds_copies_of_those_alone(course, tmp_path):
    """An exercise that allows `layers.gelu_forward`: while your function runs, `minibert.layers` in
    the room is a copy made from the source of that function and what it needs, nothing else
    of the library (not the backward, not another module), and the real package is never loaded."""
    probe = ("import numpy as np\n# %%\n"
             "def my_probe(x):\n"
             "    import sys\n"
             "    from minibert.layers import gelu_forward\n"
             "    seen = {n: [getattr(m, '__allowed_copy__', False), getattr(m, '__file__', None), sorted(vars(m))]\n"
             "            for n, m in sys.modules.items() if n.split('.')[0] == 'minibert'}\n"
             "    return [seen, gelu_forward(x)[0]]\n")
    ns = _cells_namespace(tmp_path, probe)
    seen = {}

    def check(fn):
        seen["out"] = fn(np.linspace(-1, 1, 5))
        return [course.true("ran", True)]

    course.Exercises("99_room_toy", namespace=ns).grade(1, ns["my_probe"], check, allows=("layers.gelu_forward",))
    modules, _ = seen["out"]
    assert set(modules) == {"minibert", "minibert.layers"}, modules
    copy, file, names = modules["minibert.layers"]
    assert copy and file is None and "gelu_forward" in names, modules
    assert not {"gelu_backward", "linear_forward", "attention_backward"} & set(names), names
    assert modules["minibert"][2] == sorted(["__doc__", "__loader__", "__name__", "__package__", "__spec__", "layers"])


def test_a_function_relabelled_as_the_solutions_code_is_refused(course, tmp_path, monkeypatch):
    """A cell whose top-level code (run in the lesson's process) gives its function the code object
    of... its own, relabelled with the solutions file's name: the cell's text would be that file.
    The room never takes the library's or the solutions' text as a cell (an attacker's route)."""
    import types

    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "99_room_toy.py").write_text("import math\nimport numpy as np\n\n\ndef my_gelu_backward(dout, x):\n"
                                              "    erf = np.vectorize(math.erf)\n    return dout * (0.5 * (1 + erf(x / "
                                              "math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))\n",
                                              encoding="utf-8")
    ns = _cells_namespace(tmp_path, "import numpy as np\n# %%\ndef my_gelu_backward(dout, x):\n    return None\n")
    fn = ns["my_gelu_backward"]
    fake = types.FunctionType(fn.__code__.replace(co_filename=str(solutions / "99_room_toy.py")), ns, fn.__name__)
    monkeypatch.setattr(course, "SOLUTIONS", solutions)
    monkeypatch.setattr(course, "ROOT", tmp_path)
    with pytest.raises(course.ExerciseFailed, match=r"exercise 1 asks you to derive this; your function says its "
                                                    r"source is .*solutions.*, which is not yours"):
        course.Exercises("99_room_toy", namespace=ns).grade(1, fake, _check(course))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_on_linux_no_program_can_start_in_the_room():
    """The room's seccomp filter: after it, execve fails whatever asks for it (a new process that
    ran a program would have no audit hook)."""
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the filter knows x86-64 and arm64")
    script = ("import sys, subprocess\nsys.path.insert(0, sys.argv[1])\nimport room\nprint(room._no_programs())\n"
              "try:\n    subprocess.run(['/bin/true'])\n    print('ran')\nexcept PermissionError:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", script, str(ROOT / "lessons")], capture_output=True, text=True,
                         timeout=60).stdout.split()
    assert out == ["True", "refused"], out
