"""Every way around a guard that tests/lessons/test_exercises.py knows, as a wrapper around an
exercise's direct library shortcut (`my_fn` of tests/lessons/shortcuts/NN_*.py).

`KINDS[kind](direct)` returns a function with `direct`'s arguments that reaches the same library
code another way: from a thread or a thread pool, through `__wrapped__`, through a fresh copy of
each minibert module `direct` uses (importlib.reload, spec_from_file_location, inspect.getsource
+ exec, the module's text executed under another file name), or through the library's code
objects given another file name. lessons/course.py grades each one (MINIBERT_SHORTCUTS) as if it
had been typed into the stub, and the tests assert that the clean room refuses every one, in
every exercise that has a direct shortcut.

The copies are made while the function is graded, as a learner's code would make them, except
`source_text`, whose text is read beforehand (a learner who pasted the module's text in)."""
from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import sys
import tempfile
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _is_minibert(value) -> bool:
    return isinstance(value, types.ModuleType) and (value.__name__ == "minibert" or value.__name__.startswith("minibert."))


class _Copied:
    """A minibert module seen through `make`: every attribute is read from make(module), the copy;
    a submodule is seen through `make` too."""

    def __init__(self, module, make):
        self._module, self._make = module, make

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if _is_minibert(value):
            return _Copied(value, self._make)
        return getattr(self._make(self._module), name)


def _rebound(direct, make):
    """`direct` with every minibert module and function it names (globally, or by an `import`
    inside it) taken from make(module) instead."""
    g = dict(direct.__globals__)
    for name in direct.__code__.co_names:
        value = g.get(name)
        if _is_minibert(value):
            g[name] = _Copied(value, make)
        elif (getattr(value, "__module__", None) or "").startswith("minibert") and not isinstance(value, type):
            home = sys.modules[value.__module__]
            g[name] = getattr(make(home), getattr(value, "__name__", name), value)
    real_import = builtins.__import__

    def copying_import(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        return _Copied(module, make) if _is_minibert(module) else module

    g["__builtins__"] = {**vars(builtins), "__import__": copying_import}
    return types.FunctionType(direct.__code__, g, direct.__name__, direct.__defaults__, direct.__closure__)


def _cached(copy):
    made = {}

    def make(module):
        if module.__name__ not in made:
            made[module.__name__] = copy(module)
        return made[module.__name__]

    return make


def _spec_copy(module):
    """A second module object executed from the same file (spec_from_file_location)."""
    spec = importlib.util.spec_from_file_location(module.__name__ + "__copy", module.__file__)
    copy = importlib.util.module_from_spec(spec)
    copy.__package__ = module.__package__
    spec.loader.exec_module(copy)
    return copy


def _reloaded(module):
    return importlib.reload(module)


def _from_source(module):
    """inspect.getsource, then exec under a name of our own."""
    return _exec_text(module, inspect.getsource(module))


def _exec_text(module, text):
    """The text saved as a file of one's own (outside minibert/: Numba caches next to it) and run."""
    copy = types.ModuleType(module.__name__ + "__text")
    copy.__package__ = module.__package__ or module.__name__.rpartition(".")[0]
    path = Path(tempfile.mkdtemp(prefix="pasted-")) / "copy.py"
    path.write_text(text, encoding="utf-8")
    copy.__file__ = str(path)
    sys.modules[copy.__name__] = copy  # (dataclasses look their module up)
    try:
        exec(compile(text, str(path), "exec"), vars(copy))
    finally:
        sys.modules.pop(copy.__name__, None)
    return copy


def _unwrapped(module):
    copy = types.SimpleNamespace()
    for name, value in vars(module).items():
        setattr(copy, name, getattr(value, "__wrapped__", value))
    return copy


def _renamed(module):
    """Each function of the module with its code given another file name."""
    copy = types.SimpleNamespace(**vars(module))
    for name, value in vars(module).items():
        if isinstance(value, types.FunctionType):
            setattr(copy, name, types.FunctionType(value.__code__.replace(co_filename="<mine>"), value.__globals__,
                                                   value.__name__, value.__defaults__, value.__closure__))
    return copy


def thread(direct):
    def in_a_thread(*args, **kwargs):
        out, errors = [], []

        def work():
            try:
                out.append(direct(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - raised again below, in the graded thread
                errors.append(e)

        t = threading.Thread(target=work)
        t.start()
        t.join()
        if errors:
            raise errors[0]
        return out[0]

    return in_a_thread


def pool(direct):
    def in_a_pool(*args, **kwargs):
        with ThreadPoolExecutor(max_workers=1) as executor:
            return executor.submit(direct, *args, **kwargs).result()

    return in_a_pool


def _through(copy):
    def kind(direct):
        def through_a_copy(*args, **kwargs):
            return _rebound(direct, _cached(copy))(*args, **kwargs)

        return through_a_copy

    return kind


def source_text(direct):
    """The text of every loaded minibert module read now (before grading), executed while graded."""
    texts = {name: Path(m.__file__).read_text(encoding="utf-8") for name, m in list(sys.modules.items())
             if _is_minibert(m) and getattr(m, "__file__", None)}
    return _through(lambda module: _exec_text(module, texts[module.__name__]))(direct)


KINDS = {
    "thread": thread,
    "thread_pool": pool,
    "wrapped": _through(_unwrapped),
    "reload": _through(_reloaded),
    "spec_from_file_location": _through(_spec_copy),
    "getsource_exec": _through(_from_source),
    "source_text_exec": source_text,
    "renamed_code": _through(_renamed),
}
