"""The float-hygiene rule of tests/meta/test_float_hygiene.py as a function, for the tests that
check sources (that test, and tests/lessons/test_exercises.py's check of the learners' code).
What the rule flags and why: that test's docstring."""
from __future__ import annotations

import ast
import io
import math
import re
import tokenize

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
