"""A brute-force evaluator of the analysed query tree over a few analysed texts (tests only).

It states what every engine must return for a query on a small corpus, straight from the token
stream contract: no engine involved.  Title and content are both the file's text here.
"""

from __future__ import annotations

from pathlib import Path

from indexerd.index.analysis import Analyzer
from indexerd.index.query import parse
from indexerd.index.querytree import And, Not, Or
from indexerd.index.querytokens import MatchAll, MatchNone, TokenPrefix, Tokens, analyse_query


def _has_phrase(tokens: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(tokens[i:i + n]) == phrase for i in range(len(tokens) - n + 1))


def matches(node, tokens: list[str], ids: list[str]) -> bool:
    if isinstance(node, Tokens):
        if node.field == "ids":
            return node.tokens[0] in ids
        return _has_phrase(tokens, node.tokens)
    if isinstance(node, TokenPrefix):
        pool = ids if node.field == "ids" else tokens
        return any(t.startswith(node.prefix) for t in pool)
    if isinstance(node, MatchAll):
        return True
    if isinstance(node, MatchNone):
        return False
    if isinstance(node, Or):
        return any(matches(c, tokens, ids) for c in node.children)
    if isinstance(node, And):
        return all(not matches(c.child, tokens, ids) if isinstance(c, Not) else matches(c, tokens, ids)
                   for c in node.children)
    raise TypeError(node)


def expected_hits(query: str, root: Path, analyzer: Analyzer | None = None) -> list[str]:
    """Sorted names of the files under ``root`` (``*.txt``) that ``query`` matches."""
    analyzer = analyzer or Analyzer()
    tree = analyse_query(parse(query), analyzer)
    out = []
    for p in sorted(root.glob("*.txt")):
        tokens, ids = analyzer.analyse(p.read_text(encoding="utf-8"))
        if matches(tree, tokens, ids):
            out.append(p.name)
    return out
