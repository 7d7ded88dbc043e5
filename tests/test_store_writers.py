"""Every store write goes through the writer thread, except the ones the store lists with why they
are safe (issue 11: "one writer thread" must hold, or say exactly where it does not)."""

import ast
from pathlib import Path

from indexerd.core.store import WRITES_OUTSIDE_THE_WRITER, Store

PACKAGE = Path(__file__).resolve().parent.parent / "indexerd"
WRITE_METHODS = {"write_batch", "set_stat_baseline", "crawl_write", "crawl_drop_spilled", "crawl_forget_unasked", "crawl_due_now",
                 "crawl_drop_requisites", "crawl_trust_requisite_references", "crawl_requisites_checked",
                 "forget_source", "reset_stats", "pass_started", "record_run"}


def _calls(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            yield node.func.attr, node.lineno


def test_the_write_methods_listed_are_the_stores_own():
    assert WRITE_METHODS >= set(WRITES_OUTSIDE_THE_WRITER)
    assert all(callable(getattr(Store, m)) for m in WRITE_METHODS)


def test_no_module_writes_the_store_outside_the_writer_unless_listed():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("core/store/") or rel in ("pipeline/writer.py", "pipeline/writerthread.py"):
            continue
        for method, line in _calls(path):
            allowed = WRITES_OUTSIDE_THE_WRITER.get(method, ((), ""))[0]
            if not any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in allowed):
                offenders.append(f"{rel}:{line}: {method}")
    assert offenders == [], "store writes outside the writer thread, not in WRITES_OUTSIDE_THE_WRITER"
