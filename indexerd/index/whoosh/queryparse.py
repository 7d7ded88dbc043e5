"""Today's query parsing on Whoosh: Whoosh's ``MultifieldParser`` over title and content, with
the checks that turn what it would silently misread into a :class:`QueryError`.

Stands in until the product's query language (:mod:`indexerd.index.query`) is compiled to
Whoosh queries (``indexerd/index/whoosh/compile.py``).
"""

from __future__ import annotations

import re

from indexerd.core.errors import QueryError
from indexerd.index.snippets import words_regex


def parse(text: str, schema):
    """The Whoosh query for ``text`` (words ANDed; phrases, ``AND``/``OR``/``NOT``,
    ``title:word`` and ``prefix*``).

    Raises:
        QueryError: the query is malformed (unbalanced quotes or parentheses, a field we do not
            have, nothing searchable left).
    """
    from whoosh.qparser import MultifieldParser

    _check_balanced(text)
    parser = MultifieldParser(["title", "content"], schema)
    text = _check_field_prefixes(text, schema)
    try:
        q = parser.parse(text)
    except Exception as e:
        raise QueryError(f"malformed query {text!r}: {e}") from None
    _check_parsed(q, text, schema)
    return q


def snippet_regex(q) -> re.Pattern | None:
    """A regex finding the query's title and content terms (stems used as word prefixes)."""
    words = []
    for fieldname, text in q.iter_all_terms() if hasattr(q, "iter_all_terms") else ():
        if fieldname in ("content", "title") and isinstance(text, (str, bytes)):
            words.append(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
    return words_regex(words)


def _check_balanced(query: str) -> None:
    if query.count('"') % 2:
        raise QueryError(f"malformed query {query!r}: unbalanced double quote")
    depth = 0
    in_quote = False
    for ch in query:
        if ch == '"':
            in_quote = not in_quote
        elif not in_quote and ch == "(":
            depth += 1
        elif not in_quote and ch == ")":
            depth -= 1
            if depth < 0:
                break
    if depth != 0:
        raise QueryError(f"malformed query {query!r}: unbalanced parentheses")
    if not query.strip():
        raise QueryError("empty query")


def _searchable_fields(schema) -> list[str]:
    return sorted(name for name, field in schema.items()
                  if getattr(field, "format", None) is not None and not name.endswith("_z"))


_FIELD_PREFIX = r"(?<![\w:])([A-Za-z_]\w*):(?=[^\s:/])"
"""``name:`` right before a term: not ``std::vector``, ``http://``, ``12:30`` or a trailing colon."""


def _check_field_prefixes(text: str, schema) -> str:
    """Check the ``field:`` prefixes of a query outside phrases and return the query with field
    names in lower case (``Title:x`` -> ``title:x``).

    Whoosh reads an unknown prefix as two words, so ``Title:falcon`` or a typo silently found
    nothing.

    Raises:
        QueryError: a prefix names a stored-only field (``path:tmp``) or no field at all; the
            message lists the searchable fields (and says how to search the text itself).
    """
    searchable = _searchable_fields(schema)
    pieces = re.split(r'("[^"]*")', text)  # odd pieces are phrases: their words are not fields
    for i in range(0, len(pieces), 2):
        def field(m: re.Match) -> str:
            name = m.group(1)
            lower = name.lower()
            if lower in searchable:
                return lower + ":"
            if lower in schema:
                raise QueryError(f"malformed query {text!r}: field {name!r} is stored but not "
                                 f"searchable (searchable: {', '.join(searchable)})")
            raise QueryError(f"malformed query {text!r}: no field {name!r} (searchable: "
                             f"{', '.join(searchable)}); to search for the text itself, quote it: "
                             f"'\"{name}:...\"'")
        pieces[i] = re.sub(_FIELD_PREFIX, field, pieces[i])
    return "".join(pieces)


def _check_parsed(q, text: str, schema) -> None:
    from whoosh import query as wq

    if q is wq.NullQuery or isinstance(q, type(wq.NullQuery)):
        raise QueryError(f"malformed query {text!r}: nothing to search for (only stop words or operators?)")
    for fieldname, _ in q.iter_all_terms() if hasattr(q, "iter_all_terms") else ():
        if fieldname not in schema:
            raise QueryError(f"malformed query {text!r}: unknown field {fieldname!r} "
                             f"(fields: title, content)")
    searchable = _searchable_fields(schema)
    for sub in q.leaves() if hasattr(q, "leaves") else ():
        fn = getattr(sub, "fieldname", None)
        if fn and fn not in schema:
            raise QueryError(f"malformed query {text!r}: unknown field {fn!r} (fields: title, content)")
        if fn and fn not in searchable:
            raise QueryError(f"malformed query {text!r}: field {fn!r} is stored but not searchable "
                             f"(searchable: {', '.join(searchable)})")
