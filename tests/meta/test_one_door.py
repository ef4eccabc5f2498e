"""Every file the package writes goes through one door, minibert/io/ (outputs.write_output and
its helpers, atomic.atomic_write): the rule of where a command may write (io/outputs.py's
docstring) and the atomic writer live there, so a write elsewhere escapes both.

This test walks the source of every module outside minibert/io/ (with ast, not grep: a string or
a comment that mentions `savefig` is no write) and finds the calls that write a file directly:
open() with a mode that writes, os.open with a flag that writes, .write_text / .write_bytes,
savefig (but into an io.BytesIO), np.save / np.savez*, .tofile, os.replace / os.rename /
.rename, shutil.copy* / move, .touch, links, and tempfile files left in place (mkstemp,
mkdtemp, NamedTemporaryFile). Such a call is covered when the function it sits in (a def or a
lambda) is handed to the door, e.g.

    write_output(out, lambda tmp: fig.savefig(tmp, format="png"))   # the lambda writes `tmp`
    write_output(out, write_lines)                                  # def write_lines(file): open(file, "w") ...
    write_output(out, _swag_with_labels(path, values))              # a def that returns the writer

Any other is a failure naming the file, the line and the call. ALLOWED lists the few writes that
must stay where they are, each with the reason; an entry that no longer covers a write fails too.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minibert"

DOORS = {"atomic_write", "write_output"}  # the door's functions that take a writer function

# (module, function) -> why its direct write stays (read by whoever wants to add one: prefer a door)
ALLOWED = {
    ("loop/rundir.py", "_rename"):
        "a checkpoint is a folder of six files, made whole by one rename of its hidden folder to "
        "checkpoints/step-NNNNNN (the module docstring); the files inside are written by the door, "
        "and own_entry refuses a link on the way to the run's entries",
    ("loop/rundir.py", "exchange"):
        "a run that replaces another is swapped in by exchanging the two folders' names (renameat2, "
        "or three renames where it is missing): whole folders the run wrote through the door, moved "
        "as units so that a kill leaves each one whole under one of the two names",
    ("loop/rundir.py", "_open_lock"):
        "the run's .lock is opened (O_CREAT | O_NOFOLLOW, refused unless a regular file) and flock-ed, "
        "never replaced: a rename would hand a second writer a new, unlocked file",
    ("loop/rundir.py", "append_jsonl"):
        "metrics.jsonl grows by one record per log line: appended with O_NOFOLLOW (a link is refused), "
        "a full disk named by write_error; rewriting the whole log atomically at every line would "
        "cost O(lines^2)",
    ("compile_ahead.py", "compile_claimed"):
        "a claim is an empty file created with O_CREAT | O_EXCL (never through a link, exactly one "
        "process wins), in the folder Workers made and marked (check_claims_dir refuses any other)",
}

WRITE_ATTRS = {"write_text", "write_bytes", "tofile", "touch", "symlink_to", "hardlink_to", "rename"}
MODULE_CALLS = {
    ("np", "save"), ("np", "savez"), ("np", "savez_compressed"), ("numpy", "save"), ("numpy", "savez"),
    ("numpy", "savez_compressed"), ("os", "replace"), ("os", "rename"), ("os", "renames"), ("os", "symlink"),
    ("os", "link"), ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "copytree"),
    ("shutil", "move"), ("tempfile", "mkstemp"), ("tempfile", "mkdtemp"), ("tempfile", "NamedTemporaryFile"),
}
OS_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _mode(call: ast.Call, position: int):
    for k in call.keywords:
        if k.arg == "mode":
            return k.value.value if isinstance(k.value, ast.Constant) else "?"
    if len(call.args) > position:
        arg = call.args[position]
        return arg.value if isinstance(arg, ast.Constant) else "?"
    return "r"


def _writes_mode(mode) -> bool:
    return not isinstance(mode, str) or bool(set(mode) & set("wax+")) or mode == "?"


def _in_memory(call: ast.Call, scope: ast.AST) -> bool:
    """savefig(buf, ...) where buf = io.BytesIO() in the same function: no file."""
    if not call.args or not isinstance(call.args[0], ast.Name):
        return False
    name = call.args[0].id
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            v = node.value
            if isinstance(v, ast.Call) and ast.unparse(v.func) in ("io.BytesIO", "BytesIO", "io.StringIO"):
                return True
    return False


def direct_write(call: ast.Call, scope: ast.AST) -> str | None:
    """The call's text if it writes a file directly, else None."""
    f = call.func
    text = ast.unparse(f)
    if isinstance(f, ast.Name) and f.id == "open":
        return text if _writes_mode(_mode(call, 1)) else None
    if not isinstance(f, ast.Attribute):
        return None
    base = ast.unparse(f.value)
    if (base, f.attr) in MODULE_CALLS:
        if f.attr == "NamedTemporaryFile":
            delete = next((k.value for k in call.keywords if k.arg == "delete"), None)
            return text if isinstance(delete, ast.Constant) and delete.value is False else None
        return text
    if f.attr == "open":
        if base == "os":
            flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None)
                     for a in call.args[1:2] for n in ast.walk(a)}
            return text if flags & OS_WRITE_FLAGS else None
        position = 1 if base in ("io", "gzip", "bz2", "lzma", "codecs") else 0
        return text if _writes_mode(_mode(call, position)) else None
    if f.attr == "savefig":
        return None if _in_memory(call, scope) else text
    if f.attr in WRITE_ATTRS:
        return text
    return None


def _fed_to_doors(tree: ast.AST) -> set[ast.AST]:
    """The functions (defs and lambdas) of a module handed to a door: an argument that is a
    lambda, the name of a def, or a call of a def (which returns the writer)."""
    defs: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, []).append(node)
    fed: set[ast.AST] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in DOORS:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, ast.Lambda):
                fed.add(arg)
            elif isinstance(arg, ast.Name):
                fed.update(defs.get(arg.id, ()))
            elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):
                fed.update(defs.get(arg.func.id, ()))
    return fed


def scan(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, call, names of the enclosing functions) of every uncovered direct write in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    fed = _fed_to_doors(tree)
    found = []

    def visit(node: ast.AST, stack: tuple[ast.AST, ...]) -> None:
        if isinstance(node, ast.Call):
            scope = stack[-1] if stack else tree
            text = direct_write(node, scope)
            if text is not None and not any(s in fed for s in stack):
                found.append((node.lineno, text, tuple(getattr(s, "name", "<lambda>") for s in stack)))
        inner = (*stack, node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else stack
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, ())
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "io" not in p.relative_to(PACKAGE).parts[:1])


def test_every_write_outside_io_goes_through_the_door():
    bad, used = [], set()
    for path in modules():
        rel = path.relative_to(PACKAGE).as_posix()
        for line, text, functions in scan(path):
            allowed = [(rel, f) for f in functions if (rel, f) in ALLOWED]
            if allowed:
                used.update(allowed)
            else:
                bad.append(f"minibert/{rel}:{line}: {text}(...) in {'.'.join(functions) or 'the module'}")
    assert not bad, ("writes that bypass minibert/io/outputs (write through write_output / save_figure / "
                     "save_arrays / make_dir, or hand the writer to atomic_write):\n" + "\n".join(bad))
    assert not set(ALLOWED) - used, f"ALLOWED entries that cover no write any more: {sorted(set(ALLOWED) - used)}"


def test_the_walk_finds_each_kind_of_write(tmp_path):
    """The scanner itself: each kind of direct write is found, and the covered forms are not."""
    src = tmp_path / "m.py"
    src.write_text('''
import io, os, shutil, tempfile
import numpy as np
def f(p, fig, arrays):
    open(p, "w"); open(p, mode="ab"); p.open("x"); p.write_text("t"); p.write_bytes(b"")
    fig.savefig(p); np.save(p, arrays); np.savez(p, **arrays); os.replace(p, p); os.rename(p, p)
    shutil.copyfile(p, p); shutil.move(p, p); tempfile.mkstemp(); p.touch()
    os.open(p, os.O_WRONLY | os.O_CREAT); tempfile.NamedTemporaryFile(delete=False)
def g(p, fig):
    open(p); open(p, "rb"); os.open(p, os.O_RDONLY); "a".replace("a", "b")
    buf = io.BytesIO(); fig.savefig(buf); tempfile.NamedTemporaryFile()
    atomic_write(p, lambda tmp: fig.savefig(tmp))
    write_output(p, writer)
    write_output(p, make_writer())
def writer(tmp):
    open(tmp, "w")
def make_writer():
    def w(tmp):
        np.savez(tmp)
    return w
''', encoding="utf-8")
    found = scan(src)
    assert [t for _, t, _ in found] == [
        "open", "open", "p.open", "p.write_text", "p.write_bytes", "fig.savefig", "np.save", "np.savez", "os.replace",
        "os.rename", "shutil.copyfile", "shutil.move", "tempfile.mkstemp", "p.touch", "os.open",
        "tempfile.NamedTemporaryFile"]
    assert {fs for _, _, fs in found} == {("f",)}
