"""No computed float is looked up or compared by value in lessons/ and tests/.

NumPy's exp/log/pow differ in the last bits between CPUs (AVX2 vs AVX-512): on AVX-512
`np.logspace(-1, -10, 10)[4]` is 9.999999999999999e-06, so `list(hs).index(1e-5)` crashed
lesson 00 there. This test parses every lesson and test and fails on the patterns that break
that way:

- `.index(x)`, `.count(x)`, `.remove(x)` with a float-valued constant `x` (`1e-5`, `-0.1`, `1/3`);
- `==`, `!=`, `in`, `not in` against such a constant, or a list/tuple/set holding one;
- `np.array_equal`, `assert_array_equal`, `assert_equal`, `np.isin` with such a constant;
- a dict display keyed by such a constant, or a subscript `d[1e-5]`.

"Such a constant" is a float literal (or arithmetic on literals, `math.pi`, `np.e`, ...) that
is not a simple binary value: integers up to 2**24 and multiples of 1/1024 below that (0.0,
1.0, -2.0, 0.5, 0.125) are allowed, since comparisons with them are usually exact by
construction (exp(-inf) is 0.0, LayerNorm weights start at 1.0, a mean over nothing is 0.0).
Those exact comparisons still need judging when written; this test cannot tell them apart.

Opt out on the line itself with a comment `# exact: <reason>` (the reason is required), e.g.
a config value that went through JSON and back (repr and float() round-trip exactly).
"""
from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("lessons/*.py"), *ROOT.glob("tests/**/*.py")])
OPT_OUT = re.compile(r"#.*\bexact:\s*\S")
LOOKUP_METHODS = {"index", "count", "remove"}
EQUAL_FUNCS = {"array_equal", "assert_array_equal", "assert_equal", "isin", "in1d"}
CONSTANT_NAMES = {"pi", "e", "tau"}  # math.pi, np.e, ...: irrational, so never simple
CONSTANT_MODULES = {"math", "np", "numpy"}


def _const_value(node: ast.AST) -> float | int | None:
    """The number a constant expression evaluates to (literals, + - * / ** on them, math.pi)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if (isinstance(node, ast.Attribute) and node.attr in CONSTANT_NAMES
            and getattr(node.value, "id", None) in CONSTANT_MODULES):
        return getattr(math, node.attr)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _const_value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _const_value(node.left), _const_value(node.right)
        if a is None or b is None:
            return None
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b, ast.Pow: lambda: a ** b if abs(b) <= 64 else None}
        try:
            return ops[type(node.op)]() if type(node.op) in ops else None
        except (ZeroDivisionError, OverflowError):
            return None
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "float" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            try:
                return float(arg.value)
            except ValueError:
                return None
        v = _const_value(arg)
        return None if v is None else float(v)
    return None


def is_simple(v: float) -> bool:
    """Exact in float32 and float64, and what exact computations tend to give: 0.0, 1.0, 0.5."""
    return math.isfinite(v) and abs(v) <= 2**24 and (v * 1024).is_integer()


def risky_constant(node: ast.AST) -> bool:
    """A float-valued constant that is not simple (1e-5, 0.1, 1/3, math.pi), or a container
    literal holding one."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(risky_constant(e) for e in node.elts)
    v = _const_value(node)
    return isinstance(v, float) and not is_simple(v)


def _findings(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and (
                        risky_constant(left) or risky_constant(right)):
                    out.append((node, f"`{type(op).__name__}` against a float constant"))
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in LOOKUP_METHODS and isinstance(node.func, ast.Attribute) and any(
                    risky_constant(a) for a in node.args):
                out.append((node, f"`.{name}()` of a float constant"))
            elif name in EQUAL_FUNCS and any(risky_constant(a) for a in node.args):
                out.append((node, f"`{name}` with a float constant"))
        elif isinstance(node, ast.Dict) and any(k is not None and risky_constant(k) for k in node.keys):
            out.append((node, "a dict keyed by a float constant"))
        elif isinstance(node, ast.Subscript) and risky_constant(node.slice):
            out.append((node, "a lookup by a float constant"))
    return out


def _opted_out_lines(source: str) -> set[int]:
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and OPT_OUT.match(tok.string):
            lines.add(tok.start[0])
    return lines


def check_source(source: str) -> list[str]:
    """'line N: <what>: <source line>' for every risky pattern not opted out."""
    lines = source.splitlines()
    opted = _opted_out_lines(source)
    problems = []
    for node, what in _findings(ast.parse(source)):
        span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        text = lines[node.lineno - 1].strip()
        if opted.intersection(span):
            continue
        problems.append(f"line {node.lineno}: {what}: {text}")
    return sorted(set(problems), key=lambda p: int(p.split(":")[0].split()[1]))


def test_files_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert "lessons/00_numerical_gradients.py" in names and "tests/test_float_hygiene.py" in names


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_no_float_looked_up_or_compared_by_value(path: Path):
    rel = path.relative_to(ROOT).as_posix()
    problems = check_source(path.read_text(encoding="utf-8"))
    assert not problems, (
        f"{rel}: a float compared or looked up by value; NumPy's exp/log/pow differ in the last "
        "bits between CPUs, so use a tolerance (np.isclose, pytest.approx), an integer index "
        "known by construction, or add `# exact: <why>` on the line if it is exact on every "
        "CPU:\n" + "\n".join(problems))


# the rule itself: each snippet is flagged (True) or not (False)
CASES = [
    ("i5 = list(hs).index(1e-5)", True),  # lesson 00 before the fix
    ("i = xs.index(-0.1)", True),
    ("n = xs.count(1 / 3)", True),
    ("assert x == 0.1", True),
    ("assert 1e-12 != x", True),
    ("assert lr in (1e-4, 3e-4)", True),
    ("assert x == 10 ** -5", True),
    ("assert x == math.pi", True),
    ("assert x == float('1e-5')", True),
    ("ok = np.array_equal(a, 0.3)", True),
    ("np.testing.assert_array_equal(a, [0.0, 0.1])", True),
    ("table = {0.1: 'a', 0.2: 'b'}", True),
    ("v = table[1e-3]", True),
    ("assert x == 1e-12  # exact: the literal round-trips through JSON", False),
    ("assert x == 1e-12  # exact:", True),  # a reason is required
    ("i5 = exponents.index(-5)", False),
    ("assert np.all(att[..., 3:] == 0.0)", False),
    ("assert np.all(w == 1.0) and y != -2.0 and z == 0.5 and t == 2 ** -3", False),
    ("assert lrs[0] == 0.0", False),
    ("assert np.isclose(x, 0.1) and x == pytest.approx(1e-5)", False),
    ("assert x < 1e-9 and name == 'a'", False),
    ("assert toks.index('[SEP]') == 3", False),
    ("assert x in (0.0, 1.0)", False),
]


@pytest.mark.parametrize("snippet,flagged", CASES, ids=[c[0] for c in CASES])
def test_the_rule(snippet, flagged):
    assert bool(check_source(snippet + "\n")) is flagged
