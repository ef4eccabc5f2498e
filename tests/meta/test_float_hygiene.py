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

from pathlib import Path

import pytest
from corpora import REPO
from hygiene import check_source

ROOT = REPO
FILES = sorted([*ROOT.glob("lessons/*.py"), *ROOT.glob("tests/**/*.py")])


def test_files_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert "lessons/00_numerical_gradients.py" in names and "tests/meta/test_float_hygiene.py" in names


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
