"""The packages' layers (README, "The folders are the data flow"): a package of indexerd imports
only the packages below it, at the top of a module or inside a function alike, so that no two
packages need each other (the foundation, ``core``, imports nothing above it).

Read from the source text with :mod:`ast`, not by importing: a lazy import inside a function is
a dependency too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import indexerd

PACKAGE = Path(indexerd.__file__).parent

#: Bottom to top: each package may import those before it.  ``output`` (what the command line and
#: the daemon both show) sits below both; the daemon below the command line that starts it.
LAYERS = ("core", "config", "extract", "index", "pipeline", "sources", "output", "runtime", "daemon", "cli")

#: Upward imports still made, each with why; the list only shrinks.  (A source kind's table,
#: checks and secrets are its own and registered with the config: ``config/kinds.py``; the index
#: engines are registered with it too: ``config/engines.py``.)
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute ``indexerd.*`` import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, m) for line, m in found if m.startswith("indexerd.")]


def test_every_package_is_in_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(LAYERS), f"put the new package in LAYERS: {sorted(packages ^ set(LAYERS))}"


def test_no_package_imports_one_above_it() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) < 2:
            continue  # indexerd/__init__.py, __main__.py: the entry points
        here = rel.parts[0]
        for line, module in _imports(path):
            there = module.split(".")[1]
            if there not in rank or rank[there] <= rank[here]:
                continue
            if (rel.as_posix(), there) in ALLOWED_UPWARD:
                used.add((rel.as_posix(), there))
                continue
            upward.append(f"indexerd/{rel.as_posix()}:{line}: {here} imports {module}")
    assert upward == [], "a package imports one above it:\n" + "\n".join(upward)
    assert used == set(ALLOWED_UPWARD), f"no longer needed, drop from ALLOWED_UPWARD: {set(ALLOWED_UPWARD) - used}"


def test_the_check_finds_an_upward_import(tmp_path) -> None:
    """The reading itself: an import inside a function is found like one at the top."""
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from indexerd.daemon.main import run_daemon\n", encoding="utf-8")
    assert _imports(module) == [(4, "indexerd.daemon.main")]


#: The size a reader can hold (issue 32): a module of at most 450 lines, a class of at most 300.
MODULE_LINES, CLASS_LINES = 450, 300

#: Classes still over the bound, with their size when this list was written; the list only
#: shrinks (a listed class that grows past its size fails too).
CLASSES_OVER: dict[tuple[str, str], int] = {}


def test_modules_and_classes_stay_small_enough_to_read() -> None:
    big_modules, big_classes, seen = [], [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MODULE_LINES:
            big_modules.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                allowed = CLASSES_OVER.get((rel, node.name))
                if allowed is not None:
                    seen.add((rel, node.name))
                if size > (allowed or CLASS_LINES):
                    big_classes.append(f"{rel}: class {node.name}, {size} lines")
    assert not big_modules, f"modules over {MODULE_LINES} lines: {big_modules}"
    assert not big_classes, f"classes over {CLASS_LINES} lines (or past their listed size): {big_classes}"
    assert seen == set(CLASSES_OVER), f"gone, drop from CLASSES_OVER: {set(CLASSES_OVER) - seen}"


def test_every_module_is_named_in_the_readmes_module_table() -> None:
    """Issue 32: a reader finds where a thing happens from README's module table."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    rows = {line.split("`")[1] for line in readme.splitlines() if line.startswith("| `") and line.count("`") >= 2}
    modules = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")}
    assert sorted(modules - rows) == [], "modules missing from README's module table"
    stale = sorted(r for r in rows if r.endswith(".py") and "/" in r and not (PACKAGE / r).exists()
                   and not r.startswith(("tests/", "bench/", "indexerd/")))
    assert stale == [], "README's module table names modules that are gone"


#: Kind names and key prefixes still written outside their kind's package, each with why; the
#: list only shrinks.
KIND_WORDS_ALLOWED: dict[tuple[str, str], str] = {
    ("core/filekeys.py", "file://"): "the foundation's file key: the index's dir: filter (below the sources) needs it",
    ("core/store/sqlite.py", "file:"): "SQLite's URI filename (file:PATH?mode=ro), not a document key",
    ("sources/sql/conn.py", "file:"): "SQLite's URI filename, not a document key",
    ("sources/sql/table.py", "file:"): "SQLite's URI filename, not a document key",
    ("extract/htmlpage.py", "http://"): "whether a page's link is absolute (RFC 3986), not a document key",
    ("extract/htmlpage.py", "https://"): "whether a page's link is absolute (RFC 3986), not a document key",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """``id()`` of every docstring constant (a module's, a class's, a function's)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def kind_words(path: Path, words: dict[str, tuple[str, tuple[str, ...]]]) -> list[tuple[int, str, str]]:
    """``(line, literal, kind)`` of every string literal in the file (docstrings aside; a piece of
    an f-string counts) that is a kind's name or one of its key prefixes (``key.startswith("sql:")``,
    ``"file://" + path``, ``f"sql:{name}/{id}"``; a whole URL such as an XML namespace is not a
    prefix), or names its table (``sources.web``, or escaped in a pattern); ``words`` maps a
    kind's name to ``(name, key prefixes)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for kind, (name, prefixes) in words.items():
                if node.value == name or node.value in prefixes or \
                        re.search(rf"sources\\?\.{re.escape(name)}\b", node.value):
                    found.append((node.lineno, node.value, kind))
    return found


def test_kind_names_and_key_prefixes_stay_in_their_kinds_package() -> None:
    """Issue 32: a kind declares everything about itself.  Its name (``"sql"``) or a key prefix
    (``"sql:"``, ``"file://"``) written elsewhere is a rule about that kind kept outside it:
    move it to the kind (an attribute of :class:`indexerd.sources.registry.Kind`) and ask the
    registry.  The registry's own entries are where a kind is declared.  A key prefix is one of
    the kind's key schemes or its source's ``key_prefixes``."""
    from indexerd.sources import registry

    words = {k.name: (k.name, tuple({*k.key_schemes, *k.source_class().key_prefixes}))
             for k in registry.KINDS.values()}
    home = {k.name: "sources/" + k.implementation.split(":")[0].split(".")[2] + "/"
            for k in registry.KINDS.values()}
    outside, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "sources/registry.py":
            continue
        for line, literal, kind in kind_words(path, words):
            if rel.startswith(home[kind]):
                continue
            if (rel, literal) in KIND_WORDS_ALLOWED:
                used.add((rel, literal))
                continue
            outside.append(f"indexerd/{rel}:{line}: {literal!r} ({kind})")
    assert outside == [], "a kind's name or key prefix outside its package:\n" + "\n".join(outside)
    assert used == set(KIND_WORDS_ALLOWED), f"no longer needed, drop: {set(KIND_WORDS_ALLOWED) - used}"


def test_the_kind_word_guard_finds_a_prefix_in_code_not_in_a_docstring(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Keys: sql:x/1, [[sources.sql]]."""\n\ndef f(key):\n    """sql: keys."""\n'
                      '    return key.startswith("sql:") or f"sql:{key}" or kind == "sql"\n'
                      'R = r"sources\\.sql\\[\\d+\\]"\nURL = "https://example.test/sql:"\n', encoding="utf-8")
    assert sorted(kind_words(module, {"sql": ("sql", ("sql:",))})) == [
        (5, "sql", "sql"), (5, "sql:", "sql"), (5, "sql:", "sql"), (6, r"sources\.sql\[\d+\]", "sql")]
