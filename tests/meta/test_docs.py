"""The repository stands alone: every section that code, lessons and tests cite from
docs/bert-notes.md exists there, and nothing points at documents outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

from corpora import REPO

ROOT = REPO
NOTES = ROOT / "docs" / "bert-notes.md"
SOURCES = sorted([*ROOT.glob("minibert/**/*.py"), *ROOT.glob("lessons/*.py"), *ROOT.glob("tests/**/*.py"),
                  *ROOT.glob("examples/*.py"), *ROOT.glob("**/*.md")])
SOURCES = [p for p in SOURCES if ".venv" not in p.parts and "runs" not in p.parts]
CITATION = re.compile(r"bert-notes\.md (§[\d.]*\d(?:[-–]§?[\d.]*\d)?)")


def _headings() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", NOTES.read_text(encoding="utf-8"), re.M)}


def test_every_cited_section_exists():
    headings = _headings()
    assert {"3.5", "6.3", "7.4.6"} <= headings  # the parser finds nested headings
    missing = []
    for path in SOURCES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for cite in CITATION.findall(line):
                for number in re.findall(r"\d+(?:\.\d+)*", cite):
                    if number not in headings:
                        missing.append(f"{path.relative_to(ROOT)}:{n} cites §{number}")
    assert not missing, "\n".join(missing)


def test_nothing_points_outside_the_repository():
    outside = re.compile(r"\.\./shared|bert-spec\.md|style\.md|style guide §|\bspec §")
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in SOURCES if p != Path(__file__)
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1) if outside.search(line)]
    assert not hits, "\n".join(hits)


def test_the_architecture_page_lists_every_module_once_in_the_layer_order():
    """docs/architecture.md is the one map of the package: its module table is the import order of
    tests/meta/test_layering.py, module for module, so it cannot drift from the code."""
    from test_layering import LAYERS, PACKAGE

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([\w/]+)\.py` \|", text, re.M)
    assert len(listed) == len(set(listed)), [m for m in listed if listed.count(m) > 1]
    modules = [m.replace(".", "/") for m in LAYERS if m and not (PACKAGE / m.replace(".", "/")).is_dir()]
    assert listed == modules, (sorted(set(modules) - set(listed)), sorted(set(listed) - set(modules)))
    folders = [f for f in re.findall(r"^(\w+)/ ", text.split("```")[1], re.M) if f != "minibert"]  # the picture
    order = list(dict.fromkeys(m.split(".")[0] for m in LAYERS if "." in m))  # the subfolders, bottom up
    assert folders[::-1] == order


FOLDERS = ("loop", "train", "finetune", "family", "io", "tools", "native")
MODULE_PATH = re.compile(r"(?<![\w/.])((?:minibert/|tests/)?(?:" + "|".join(FOLDERS) + r")/[a-z_0-9]+\.py)\b")
DOTTED = re.compile(r"\bminibert((?:\.\w+)+)|`((?:" + "|".join(FOLDERS) + r")(?:\.\w+)+)`")


def _module_exists(dotted: str) -> bool:
    """minibert.a.b(.name...): the longest prefix that is a module or package must exist, and
    what follows it must be a name defined in that module (one level: a function or a class)."""
    parts = dotted.strip(".").split(".")
    if parts[-1] in ("tsv", "txt", "json", "jsonl", "csv", "conll", "png", "md"):
        return True  # a file name (train.tsv), not a module
    for k in range(len(parts), -1, -1):  # k = 0: the package's own __init__
        base = ROOT / "minibert" / Path(*parts[:k])
        path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if path.is_file():
            rest, text = parts[k:], path.read_text(encoding="utf-8")
            return not rest or re.search(rf"^(?:def|class|async def) {rest[0]}\b|^{rest[0]}\b.*=|\"{rest[0]}\": ",
                                         text, re.M) is not None  # the last: the package's lazy re-exports
    return False


def test_every_module_a_doc_or_docstring_names_exists():
    """A path like loop/engine.py or a name like minibert.loop.engine.run in the docs, the README
    and the package's own text names a file (and a definition) that exists."""
    assert _module_exists("loop.engine.run") and not _module_exists("loop.HeldoutEvaluator")  # the check bites
    texts = [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("minibert/**/*.py")]
    missing = []
    for path in texts:
        text = path.read_text(encoding="utf-8")
        for m in set(MODULE_PATH.findall(text)):
            where = ROOT / m if m.startswith(("minibert/", "tests/")) else ROOT / "minibert" / m
            if not where.exists():
                missing.append(f"{path.relative_to(ROOT)}: {m}")
        for plain, folder_dotted in set(DOTTED.findall(text)):
            if not _module_exists(plain or folder_dotted):
                missing.append(f"{path.relative_to(ROOT)}: {plain and 'minibert'}{plain or folder_dotted}")
    assert not missing, "\n".join(sorted(missing))


TEST_OR_LESSON_PATH = re.compile(r"(?<![\w/.\-])((?:tests|lessons)/[\w./\-]*)(?![\w*<{\[])")


def _paths_named(text: str) -> set[str]:
    """tests/... and lessons/... paths in a text; not patterns (tests/<folder>/, lessons/NN_*.py)
    and not what the lessons write (lessons/out/)."""
    found = {m.rstrip(".") for m in TEST_OR_LESSON_PATH.findall(text)}
    return {p for p in found if p.rstrip("/") not in ("tests", "lessons") and not (p + "/").startswith("lessons/out/")}


def test_every_test_and_lesson_path_the_docs_and_the_code_name_exists():
    """A file under tests/ or lessons/ named in the docs, the READMEs or the code's own text
    (docstrings and comments of the package, the lessons, their solutions, the tests, the
    examples) exists: a renamed test or lesson leaves no pointer behind."""
    assert _paths_named("see tests/loop/test_faults.py, tests/<folder>/test_<module>.py and lessons/NN_*.py.") == \
        {"tests/loop/test_faults.py"}  # the pattern finds paths, not placeholders
    texts = [*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "lessons" / "README.md",
             *ROOT.glob("minibert/**/*.py"), *ROOT.glob("lessons/**/*.py"), *ROOT.glob("tests/**/*.py"),
             *ROOT.glob("examples/*.py")]
    missing = sorted(f"{path.relative_to(ROOT)}: {name}" for path in texts
                     for name in _paths_named(path.read_text(encoding="utf-8")) if not (ROOT / name).exists())
    assert not missing, "\n".join(missing)


def test_the_tests_are_laid_out_like_the_package():
    """docs/architecture.md: a folder's tests are in tests/<folder>/, the root's in tests/ itself,
    besides the four folders of tests that are not one module's (e2e, meta, lessons, interop)."""
    folders = {p.name for p in (ROOT / "minibert").iterdir() if (p / "__init__.py").is_file()}
    test_dirs = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert test_dirs - {"e2e", "meta", "lessons", "interop"} <= folders, sorted(test_dirs - folders)
    root_modules = {p.stem for p in (ROOT / "minibert").glob("*.py")}
    misplaced = [p.name for p in (ROOT / "tests").glob("test_*.py") if p.stem.removeprefix("test_") not in root_modules]
    assert not misplaced, misplaced  # a root test file is named for a root module


def test_the_readme_starts_a_newcomer_and_leads_to_every_page_of_docs():
    """The README is where a newcomer starts: its first section is the commands to run (Makefile
    targets that exist), and every page of docs/, where the details live, is reached from it by
    following links."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", readme, re.M)
    assert sections and sections[0].startswith("Start here"), sections
    first = readme.split("\n## ")[1]
    commands = re.findall(r"^(\S+) (\S+)", first.split("```")[1], re.M)
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))
    assert commands and all(tool == "make" and target in targets for tool, target in commands), commands
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        for link in re.findall(r"\]\(((?:docs/)?[\w-]+\.md)", page.read_text(encoding="utf-8")):
            target = (ROOT / link) if link.startswith("docs/") else page.parent / link
            if target.parent == ROOT / "docs" and target.is_file() and target not in reached:
                reached.add(target)
                todo.append(target)
    unreached = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p not in reached)
    assert not unreached, f"no link from README.md leads to {unreached}"
