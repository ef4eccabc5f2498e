#!/usr/bin/env python3
"""Hoist minibert's function-level imports to the top of their files, where that is safe.

Run it from a minibert checkout (or pass the checkout's path); it edits minibert/**/*.py in place
and prints what it did:

    python tests/devtools/hoist_imports.py [ROOT]            # hoist, print the counts before and after
    python tests/devtools/hoist_imports.py [ROOT] --dry-run  # print the plan, change nothing
    python tests/devtools/hoist_imports.py [ROOT] --check    # exit 1 if a run would change a file
    python tests/devtools/hoist_imports.py [ROOT] --verbose  # also list every import kept in a function, and why

It is idempotent: a second run changes nothing, and it can be run again on a tree other people
have edited since (it reads the layer order and the commands from the tree it edits). Only the
standard library is needed.

An import inside a function moves to the file's header unless one of these holds; then it stays,
with a one-line `# lazy: <why>` comment above it (the script writes those comments and rewrites
them on every run, so a reason that no longer holds goes away with its import):

- it imports a minibert module that is not below this one in LAYERS (tests/meta/test_layering.py),
  or the package root's lazy re-exports (`from minibert import X`): at the top it could make a cycle;
- it imports a package that is not in pyproject.toml's dependencies (torch, transformers, pytest, ...),
  or one that exists only on some platforms (fcntl, resource), or it sits in a `try` that catches
  the ImportError: the function handles the package's absence;
- the name it binds is also a local name of the function, or names something else at module level;
- tests replace that name on its module (`monkeypatch.setattr(outputs, "write_output", ...)`, read
  from tests/): an import when the function runs picks the replacement up, one at the top would not;
- at the top it would put a heavy package (NumPy, Numba/llvmlite, matplotlib) into a start that does
  not load it today: `import minibert`, `python -m minibert --help`, a command's start (`__main__`
  imports each command's module only when that command runs, so a command's start, `--help`
  included, is its module's import-time closure), `from minibert import X` for a lazy export, or
  a lesson (`python lessons/NN_*.py`, with lessons/course.py).
  Measured on the 2-core machine, shared and loaded (load 3-6): `python -c 'pass'` 0.06-0.10 s,
  `import numpy` 0.31-0.32 s (one 1.8 s outlier), + numba 0.87-1.24 s, + matplotlib's Figure and
  Agg canvas 1.70-2.55 s; `import pydoc_data.topics` 0.09-0.13 s (light: hoisted). A command:
  `python -m minibert tokenize --help` 0.29-0.77 s, 2.9-3.9 s with matplotlib imported first;
  `python -m minibert train --help` (NumPy and Numba) 4.4-5.3 s (load 11-17, three runs each).

A hoisted import joins the header's block of its kind (from __future__, standard library, third
party, minibert): `from X import a` merges into an existing `from X import ...` line, in sorted
position when that block (or name list) is sorted, at its end when it is not; a new block goes
between its neighbours. An import that is already at the top (the same name from the same module)
is just removed from the function. A trailing comment (`# noqa: F401`) travels with its import,
which then stays on a line of its own. The counts are minibert's imports (`from minibert...`,
relative imports, `import minibert...`) inside functions against all of them, and all imports
inside functions against all imports, statement by statement (issue 53 counted 231 of 516 on an
earlier tree; on 901a897 this gives 227 of 506, and 276 of 1,042 for all imports). Merging into
header lines makes the totals smaller after a run.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

LINE = 120
HEAVY_OF = {"numpy": {"numpy"}, "numba": {"numpy", "numba", "llvmlite"}, "llvmlite": {"llvmlite"},
            "matplotlib": {"numpy", "matplotlib"}, "safetensors.numpy": {"numpy"}, "scipy": {"numpy", "scipy"}}
HEAVY_ORDER = ("numpy", "numba", "llvmlite", "matplotlib", "scipy")
PLATFORM = {"fcntl", "resource", "msvcrt", "termios", "tty", "pwd", "grp", "winreg", "_winapi", "posix", "nt"}
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
LAZY = "# lazy: "


# --------------------------------------------------------------------------------------------
# reading the tree

class Module:
    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        self.is_pkg = path.name == "__init__.py"
        self.load(path.read_text(encoding="utf-8"))

    def load(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.parents = {c: n for n in ast.walk(self.tree) for c in ast.iter_child_nodes(n)}

    def function_of(self, node):
        """The outermost function around node, or None at import time (module, class bodies)."""
        outer, q = None, node
        while q in self.parents:
            q = self.parents[q]
            if isinstance(q, FUNCS + (ast.Lambda,)):
                outer = q
        return outer


def module_name(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def read_layers(root: Path) -> list[str]:
    tree = ast.parse((root / "tests" / "meta" / "test_layering.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LAYERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("LAYERS not found in tests/meta/test_layering.py")


def read_required(root: Path) -> set[str]:
    """Import names of pyproject.toml's [project] dependencies (and what they bring: llvmlite)."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib:
        deps = tomllib.loads(text)["project"]["dependencies"]
    else:
        block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M).group(1)
        deps = re.findall(r"\"([^\"]+)\"", block)
    names = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].strip().lower().replace("-", "_") for d in deps}
    return names | ({"llvmlite"} if "numba" in names else set())


def read_starts(modules: dict[str, Module]) -> dict[str, list[str]]:
    """module -> the starts it is the entry of: the package, the command line, each command's
    module (from __main__.COMMANDS) and each lazy export's module (from __init__._EXPORTS)."""
    starts = defaultdict(list, {"": ["`import minibert`"], "__main__": ["`python -m minibert --help`"]})
    for name, var in (("__main__", "COMMANDS"), ("", "_EXPORTS")):
        if name not in modules:
            continue
        for node in modules[name].tree.body:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
            if any(isinstance(t, ast.Name) and t.id == var for t in targets) and node.value is not None:
                table = ast.literal_eval(node.value)
                for key, value in table.items():
                    if var == "COMMANDS":
                        mod = value[0].split(":")[0].removeprefix("minibert").lstrip(".")
                        start = f"`python -m minibert {key}`"
                    else:
                        mod = value.split(":")[0]
                        start = f"`from minibert import {key}`"
                    if mod in modules and start not in starts[mod]:
                        starts[mod].append(start)
    return starts


def targets_of(mod: Module, node, modules) -> tuple[list[str], list[str]]:
    """(minibert modules, external module names) an import statement loads."""
    internal, external = [], []
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.name.split(".")[0] == "minibert":
                internal.append(a.name.removeprefix("minibert").lstrip("."))
            else:
                external.append(a.name)
        return internal, external
    if node.level:
        package = mod.name.split(".") if mod.name else []
        if not mod.is_pkg:
            package = package[:-1]
        package = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join([*package, *([node.module] if node.module else [])])
    elif (node.module or "").split(".")[0] == "minibert":
        base = node.module.removeprefix("minibert").lstrip(".")
    else:
        if node.module != "__future__":
            external.append(node.module)
        return internal, external
    for a in node.names:
        sub = f"{base}.{a.name}".lstrip(".")
        internal.append(sub if sub in modules else base)
    return internal, external


def with_parents(name: str) -> list[str]:
    parts = name.split(".") if name else []
    return ["", *(".".join(parts[:k]) for k in range(1, len(parts) + 1))]


def is_internal(node) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "minibert"
    return any(a.name.split(".")[0] == "minibert" for a in node.names)


def count(modules: dict[str, Module]) -> dict[str, int]:
    c = dict.fromkeys(("internal", "internal_in_functions", "all", "all_in_functions"), 0)
    for mod in modules.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                inside = mod.function_of(node) is not None
                c["all"] += 1
                c["all_in_functions"] += inside
                if is_internal(node):
                    c["internal"] += 1
                    c["internal_in_functions"] += inside
    return c


def read_patched(root: Path, modules) -> set[tuple[str, str]]:
    """(minibert module, name) pairs the tests replace: `monkeypatch.setattr(mod, "name", ...)`
    with `mod` a minibert module the test imported, or `monkeypatch.setattr("minibert.mod.name", ...)`,
    `mock.patch("minibert.mod.name")`. A function that imports such a name when it runs sees the
    replacement; imported at the top, the name would be bound before the test replaces it."""
    patched = set()
    for path in sorted((root / "tests").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        alias = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "minibert" and not n.level:
                base = n.module.removeprefix("minibert").lstrip(".")
                for a in n.names:
                    sub = f"{base}.{a.name}".lstrip(".")
                    if sub in modules:
                        alias[a.asname or a.name] = sub
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.split(".")[0] == "minibert" and a.asname:
                        alias[a.asname] = a.name.removeprefix("minibert").lstrip(".")
        for n in ast.walk(tree):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("setattr", "patch")
                    and n.args):
                continue
            first = n.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("minibert."):
                where, _, name = first.value.removeprefix("minibert.").rpartition(".")
                patched.add((where, name))
            elif isinstance(first, ast.Name) and first.id in alias and len(n.args) > 1 and \
                    isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                patched.add((alias[first.id], n.args[1].value))
    return patched


# --------------------------------------------------------------------------------------------
# names

def binding(mod: Module, node, alias) -> tuple[str, tuple]:
    """(the name an import alias binds, what it binds it to)."""
    if isinstance(node, ast.Import):
        if alias.asname:
            return alias.asname, ("module", alias.name)
        return alias.name.split(".")[0], ("package", alias.name.split(".")[0])
    if node.level:  # resolve to the absolute module so relative and absolute spellings compare equal
        package = mod.name.split(".") if mod.name else []
        if not mod.is_pkg:
            package = package[:-1]
        package = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        where = ".".join(["minibert", *package, *([node.module] if node.module else [])])
    else:
        where = node.module
    return alias.asname or alias.name, ("from", where, alias.name)


def module_bindings(mod: Module) -> dict[str, list]:
    """name -> what binds it at module level (imports as ("from"/"module"/"package", ...), anything else as "other")."""
    found = defaultdict(list)

    def visit(stmts):
        for s in stmts:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    name, what = binding(mod, s, a)
                    found[name].append(what)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found[s.name].append("other")
            else:
                for n in ast.walk(s):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                        found[n.id].append("other")
                    elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        break
                for field in ("body", "orelse", "finalbody"):
                    if isinstance(s, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and hasattr(s, field):
                        visit(getattr(s, field))
                for h in getattr(s, "handlers", []):
                    visit(h.body)
    visit(mod.tree.body)
    for n in ast.walk(mod.tree):  # `global x` in a function binds x at module level
        if isinstance(n, ast.Global):
            for name in n.names:
                found[name].append("other")
    return found


def function_locals(fn, skip) -> set[str]:
    """Names bound in fn (and functions nested in it) other than by the import statement skip."""
    names = set()
    for n in ast.walk(fn):
        if n is skip:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            names.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names |= set(n.names)
        elif isinstance(n, ast.MatchAs) and n.name:
            names.add(n.name)
    return names


def catches_import_error(mod: Module, node) -> bool:
    q = node
    while q in mod.parents and not isinstance(q, FUNCS):
        parent = mod.parents[q]
        if isinstance(parent, ast.Try) and q in parent.body:
            for h in parent.handlers:
                caught = [] if h.type is None else (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])
                if any(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError") for t in caught):
                    return True
        q = parent
    return False


# --------------------------------------------------------------------------------------------
# the plan

def heavy_of_external(name: str) -> set[str]:
    for key in (name, name.split(".")[0]):
        if key in HEAVY_OF:
            return HEAVY_OF[key]
    return set()


def plan(modules: dict[str, Module], layers: list[str], required: set[str]):
    rank = {m: i for i, m in enumerate(layers)}
    stdlib = set(sys.stdlib_module_names)
    starts = read_starts(modules)

    # the import-time graph: module -> minibert modules and heavy packages its top level loads
    edges, heavy = defaultdict(set), defaultdict(set)
    candidates = []  # (module, import node)
    for mod in modules.values():
        for node in ast.walk(mod.tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if mod.function_of(node) is None:
                internal, external = targets_of(mod, node, modules)
                for t in internal:
                    edges[mod.name] |= set(with_parents(t)) - {mod.name}
                for e in external:
                    heavy[mod.name] |= heavy_of_external(e)
            else:
                candidates.append((mod, node))
    for name in modules:  # importing a.b runs a's __init__ first
        edges[name] |= set(with_parents(name)[:-1])

    def closure_heavy(start) -> set[str]:
        seen, stack, found = {start}, [start], set()
        while stack:
            m = stack.pop()
            found |= heavy[m]
            for t in edges[m]:
                if t not in seen and t in modules:
                    seen.add(t)
                    stack.append(t)
        return found

    # the lessons are starts too: `python lessons/NN_*.py` (with lessons/course.py, which they import)
    lessons = modules[""].path.parent.parent / "lessons"
    course = lessons / "course.py"
    for path in sorted(lessons.glob("[0-9]*.py")):
        start = f"lessons/{path.name}"
        starts[start] = [f"`python lessons/{path.name}`"]
        for file in (path, course) if course.is_file() else (path,):
            tree = ast.parse(file.read_text(encoding="utf-8"))
            fake = Module.__new__(Module)
            fake.name, fake.is_pkg = "", False
            for node in tree.body:  # module-level statements (the lessons import after some code: E402)
                for n in ast.walk(node):
                    if isinstance(n, (ast.Import, ast.ImportFrom)) and not (isinstance(n, ast.ImportFrom) and n.level):
                        internal, external = targets_of(fake, n, modules)
                        for t in internal:
                            edges[start] |= set(with_parents(t))
                        for e in external:
                            heavy[start] |= heavy_of_external(e)
                    elif isinstance(n, FUNCS):
                        break

    start_heavy = {s: closure_heavy(s) for s in starts}
    patched = read_patched(modules[""].path.parent.parent, modules)
    bound = {name: module_bindings(mod) for name, mod in modules.items()}
    planned = defaultdict(dict)  # module -> name -> binding of hoists so far
    decisions = []  # (module, node, reason or None)

    for mod, node in sorted(candidates, key=lambda c: (str(c[0].path), c[1].lineno)):
        internal, external = targets_of(mod, node, modules)
        fn = mod.function_of(node)
        reason = None
        names = [binding(mod, node, a) for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "__future__":
            reason = "from __future__ applies to whole files"
        for e in external:
            root = e.split(".")[0]
            if reason:
                break
            if root in PLATFORM:
                reason = f"{root} exists only on some platforms"
            elif root not in stdlib and root not in required and root != "minibert":
                reason = f"{root} is optional (not in pyproject.toml's dependencies)"
        if not reason and isinstance(node, ast.ImportFrom) and internal:
            for a, t in zip(node.names, internal):
                if (t, a.name) in patched:
                    reason = f"tests replace minibert.{t}.{a.name}, which an import at call time sees"
                    break
        if not reason and catches_import_error(mod, node):
            reason = "the function handles this import failing"
        for t in internal:
            if not reason and (t not in rank or rank[t] >= rank.get(mod.name, -1)):
                reason = f"minibert.{t} is not below this module in LAYERS (tests/meta/test_layering.py)" if t else \
                    "the package root's names load lazily (minibert/__init__.py)"
        if not reason:
            local = function_locals(fn, node)
            for name, what in names:
                if name in local:
                    reason = f"`{name}` is also a local name in this function"
                    break
                existing = bound[mod.name].get(name, []) + ([planned[mod.name][name]] if name in planned[mod.name] else [])
                if any(w != what for w in existing):
                    reason = f"`{name}` names something else at this module's top"
                    break
        if not reason:
            added = set()
            for e in external:
                added |= heavy_of_external(e)
            new_edges = set()
            for t in internal:
                new_edges |= set(with_parents(t)) - {mod.name}
            old_heavy, old_edges = set(heavy[mod.name]), set(edges[mod.name])
            heavy[mod.name] |= added
            edges[mod.name] |= new_edges
            grown = []
            for s, before in start_heavy.items():
                after = closure_heavy(s)
                if after - before:
                    grown.append((s, after - before))
            if grown:
                heavy[mod.name], edges[mod.name] = old_heavy, old_edges
                reason = ("heavy", added, new_edges)
        if not reason:
            for name, what in names:
                planned[mod.name][name] = what
        decisions.append([mod, node, reason])

    # the words for what stays to keep a start light, from the final graph (so a re-run writes the same)
    for d in decisions:
        if isinstance(d[2], tuple):
            mod, (_, added, new_edges) = d[0], d[2]
            old_heavy, old_edges = set(heavy[mod.name]), set(edges[mod.name])
            heavy[mod.name] |= added
            edges[mod.name] |= new_edges
            grown = [(s, closure_heavy(s) - before) for s, before in start_heavy.items()]
            grown = [(s, g) for s, g in grown if g]
            heavy[mod.name], edges[mod.name] = old_heavy, old_edges
            what = sorted(set().union(*(g for _, g in grown)), key=HEAVY_ORDER.index)
            what = [{"numpy": "NumPy", "numba": "Numba"}.get(w, w) for w in what if not (w == "llvmlite" and "numba" in what)]
            first = sorted((x for s, _ in grown for x in starts[s]), key=lambda x: ("from minibert" in x, x))
            more = f" and {len(first) - 1} more" if len(first) > 1 else ""
            d[2] = f"keeps {' and '.join(what)} out of the start of {first[0]}{more}"
    return decisions


# --------------------------------------------------------------------------------------------
# writing

def section_of(node, stdlib) -> int:
    if isinstance(node, ast.ImportFrom):
        if node.module == "__future__" and not node.level:
            return 0
        if node.level or (node.module or "").split(".")[0] == "minibert":
            return 3
        root = node.module.split(".")[0]
    else:
        root = node.names[0].name.split(".")[0]
        if root == "minibert":
            return 3
    return 1 if root in stdlib else 2


def sort_key(node) -> tuple:
    if isinstance(node, ast.ImportFrom):
        return (1, ("." * node.level + (node.module or "")).lower())
    return (0, node.names[0].name.lower())


def name_key(name: str) -> tuple:
    base = name.split(" as ")[0]
    return (0 if base.isupper() and len(base) > 1 else 1 if base[:1].isupper() else 2, base)


def alias_text(a) -> str:
    return f"{a.name} as {a.asname}" if a.asname else a.name


def format_from(module: str, names: list[str], comment: str = "") -> str:
    head = f"from {module} import "
    one = head + ", ".join(names)
    if len(one) + len(comment) <= LINE:
        return one + comment + "\n"
    lines, cur = [], head + "("
    for i, n in enumerate(names):
        piece = n + (", " if i < len(names) - 1 else ")")
        if len(cur) + len(piece.rstrip()) > LINE and cur.strip() not in (head.strip() + " (", ""):
            lines.append(cur.rstrip())
            cur = " " * len(head + "(")
        cur += piece
    lines.append(cur + comment)
    return "\n".join(lines) + "\n"


def statement_text(node, comment: str) -> str:
    if isinstance(node, ast.ImportFrom):
        return format_from("." * node.level + (node.module or ""), [alias_text(a) for a in node.names], comment)
    return "import " + ", ".join(alias_text(a) for a in node.names) + comment + "\n"


def trailing_comment(mod: Module, node) -> str:
    line = mod.lines[node.end_lineno - 1]
    code_end = node.end_col_offset
    rest = line[code_end:].strip()
    return "  " + rest if rest.startswith("#") else ""


def strip_lazy_comments(mod: Module) -> bool:
    """Remove the comments an earlier run wrote (they are written again for what stays)."""
    kept = [ln for ln in mod.lines if not ln.strip().startswith(LAZY)]
    if len(kept) == len(mod.lines):
        return False
    mod.load("".join(kept))
    return True


def apply(mod: Module, hoist: list, keep: list, stdlib) -> str:
    lines = list(mod.lines)
    edits = []  # (first line index, last line index exclusive, replacement lines)
    kept = dict(keep)
    for node, reason in keep:
        # one comment for a run of imports kept for the same reason (once the hoisted ones are gone)
        parent = mod.parents[node]
        body = next(b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if b and node in b)
        before = [s for s in body[:body.index(node)] if s not in hoist]
        if before and kept.get(before[-1]) == reason:
            continue
        indent = lines[node.lineno - 1][:node.col_offset]
        edits.append((node.lineno - 1, node.lineno - 1, [f"{indent}{LAZY}{reason}\n"]))
    for node in hoist:
        first, last = node.lineno - 1, node.end_lineno
        parent = mod.parents[node]
        body = next(b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if b and node in b)
        others = [s for s in body if s not in hoist]
        replacement = []
        if not others:
            replacement = [lines[first][:node.col_offset] + "pass\n"]
        elif all(s in hoist for s in body[:body.index(node)]) or \
                (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                 and all(s in hoist for s in body[1:body.index(node)])):
            # the imports at a block's start (after its docstring): drop the blank line after each
            nxt = body[body.index(node) + 1] if body.index(node) + 1 < len(body) else None
            if nxt is not None and last < len(lines) and not lines[last].strip():
                last += 1
        edits.append((first, last, replacement))
    for first, last, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[first:last] = new
    header_lines = insert_header(mod, hoist, lines, stdlib)
    return "".join(header_lines)


def insert_header(mod: Module, hoist: list, lines: list[str], stdlib) -> list[str]:
    """Add the hoisted imports to the module's header (the imports after its docstring)."""
    if not hoist:
        return lines
    body = mod.tree.body
    i = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else 0
    header = []
    while i < len(body) and isinstance(body[i], (ast.Import, ast.ImportFrom)):
        header.append(body[i])
        i += 1
    after_doc = body[0].end_lineno if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
    existing = {}  # (section, module) -> [header from-statement, names] for merging
    for h in header:
        if isinstance(h, ast.ImportFrom) and not trailing_comment(mod, h):
            existing[("." * h.level + (h.module or ""))] = h
    merged = defaultdict(list)   # header node -> extra alias texts
    new = defaultdict(list)      # section -> [(sort key, text)]
    seen_text = set()
    for node in hoist:
        comment = trailing_comment(mod, node)
        if isinstance(node, ast.ImportFrom) and not comment:
            key = "." * node.level + (node.module or "")
            target = existing.get(key)
            if target is not None:
                have = {alias_text(a) for a in target.names} | set(merged[target])
                merged[target] += [t for t in (alias_text(a) for a in node.names) if t not in have]
                continue
            pending = next((n for n in new[section_of(node, stdlib)] if n[2] == key), None)
            if pending is not None:
                pending[3].extend(t for t in (alias_text(a) for a in node.names) if t not in pending[3])
                continue
            new[section_of(node, stdlib)].append([sort_key(node), None, key, [alias_text(a) for a in node.names], ""])
        else:
            text = statement_text(node, comment)
            if text in seen_text:
                continue
            seen_text.add(text)
            new[section_of(node, stdlib)].append([sort_key(node), text, None, None, comment])

    out = list(lines)
    # merges first (they replace lines in place), bottom up
    for target in sorted(merged, key=lambda n: n.lineno, reverse=True):
        if not merged[target]:
            continue
        names = [alias_text(a) for a in target.names]
        if names == sorted(names, key=name_key):
            names = sorted(names + merged[target], key=name_key)
        elif names == sorted(names, key=str.lower):
            names = sorted(names + merged[target], key=str.lower)
        else:
            names += merged[target]
        out[target.lineno - 1:target.end_lineno] = [format_from("." * target.level + (target.module or ""), names)]
        shift = 1 - (target.end_lineno - target.lineno + 1)
        for h in header:  # later header statements moved
            if h.lineno > target.lineno:
                h.lineno += shift
                h.end_lineno += shift
        target.end_lineno = target.lineno

    def text_of(entry):
        if entry[1] is not None:
            return entry[1]
        names = entry[3]
        return format_from(entry[2], sorted(names, key=name_key) if len(names) > 1 else names, entry[4])

    by_section = defaultdict(list)
    for h in header:
        by_section[section_of(h, stdlib)].append(h)
    inserts = []  # (line index to insert before, text)
    for section in sorted(new):
        entries = sorted(new[section], key=lambda e: e[0])
        present = by_section.get(section)
        if present:
            is_sorted = [sort_key(h) for h in present] == sorted(sort_key(h) for h in present)
            for entry in entries:
                if is_sorted:
                    before = next((h for h in present if sort_key(h) > entry[0]), None)
                    at = before.lineno - 1 if before else present[-1].end_lineno
                else:
                    at = present[-1].end_lineno
                inserts.append((at, len(inserts), text_of(entry)))
        else:
            later = [h for s in sorted(by_section) if s > section for h in by_section[s]]
            earlier = [h for s in sorted(by_section) if s < section for h in by_section[s]]
            block = "".join(text_of(e) for e in entries)
            if later:
                at = later[0].lineno - 1
                inserts.append((at, len(inserts), block + "\n"))
            elif earlier:
                at = earlier[-1].end_lineno
                inserts.append((at, len(inserts), "\n" + block))
            else:
                at = after_doc
                follow = "" if at < len(out) and not out[at].strip() else "\n"
                inserts.append((at, len(inserts), block + follow))
    for at, _, text in sorted(inserts, key=lambda x: (x[0], x[1]), reverse=True):
        out[at:at] = [text]
    return "".join(out).splitlines(keepends=True)


# --------------------------------------------------------------------------------------------

def load(root: Path) -> dict[str, Module]:
    package = root / "minibert"
    return {module_name(package, p): Module(module_name(package, p), p) for p in sorted(package.rglob("*.py"))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=".", help="the minibert checkout (default: .)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--check", action="store_true", help="exit 1 if a run would change a file")
    parser.add_argument("--verbose", action="store_true", help="list every import kept in a function")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if not (root / "minibert" / "__init__.py").is_file():
        raise SystemExit(f"{root} is not a minibert checkout (no minibert/__init__.py)")
    modules = load(root)
    before = count(modules)
    originals = {name: mod.text for name, mod in modules.items()}
    for mod in modules.values():
        strip_lazy_comments(mod)
    decisions = plan(modules, read_layers(root), read_required(root))
    stdlib = set(sys.stdlib_module_names)
    per_module = defaultdict(lambda: ([], []))
    for mod, node, reason in decisions:
        if reason:
            per_module[mod.name][1].append((node, reason))
        else:
            per_module[mod.name][0].append(node)
    changed = []
    for name, mod in modules.items():
        hoist, keep = per_module[name] if name in per_module else ([], [])
        text = apply(mod, hoist, keep, stdlib) if (hoist or keep) else mod.text
        compile(text, str(mod.path), "exec")  # never write a file that does not parse
        if text != originals[name]:
            changed.append(mod.path.relative_to(root))
            if not (args.dry_run or args.check):
                mod.path.write_text(text, encoding="utf-8")
        mod.load(text)
    after = count(modules)
    hoisted = sum(reason is None for _, _, reason in decisions)
    reasons = defaultdict(int)
    for _, _, reason in decisions:
        if reason:
            reasons[re.sub(r" and \d+ more", "", re.sub(r"`[^`]*`|minibert\.[\w.]+", "…", reason))] += 1
    print(f"function-level imports: {before['all_in_functions']} of {before['all']} before, "
          f"{after['all_in_functions']} of {after['all']} after ({hoisted} hoisted)")
    print(f"minibert's own imports inside functions: {before['internal_in_functions']} of {before['internal']} "
          f"before, {after['internal_in_functions']} of {after['internal']} after")
    for reason, n in sorted(reasons.items(), key=lambda r: -r[1]):
        print(f"  kept {n:3d}: {reason}")
    if args.verbose:
        for mod, node, reason in decisions:
            if reason:
                print(f"  {mod.path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}  <- {reason}")
    verb = "would change" if (args.dry_run or args.check) else "changed"
    print(f"{verb} {len(changed)} files" + (": " + ", ".join(map(str, changed)) if changed and len(changed) <= 12 else ""))
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
