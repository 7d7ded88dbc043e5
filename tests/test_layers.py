"""The packages' layers (README, "The folders are the data flow"): a package of indexerd imports
only the packages below it, at the top of a module or inside a function alike, so that no two
packages need each other (the foundation, ``core``, imports nothing above it).

Read from the source text with :mod:`ast`, not by importing: a lazy import inside a function is
a dependency too.
"""

from __future__ import annotations

import ast
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
