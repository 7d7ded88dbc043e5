"""The product's query language: text -> a small typed tree (:func:`parse`).

The tree's nodes and the field tables are :mod:`indexerd.index.querytree`; the lexer is
:mod:`indexerd.index.querylex`; this module is the grammar, the parser and typed dates.

Every engine compiles the same tree, so a query means the same thing (and a malformed query
fails with the same :class:`~indexerd.core.errors.QueryError` message) whatever the engine.
Engines compile the *analysed* tree that :func:`indexerd.index.querytokens.analyse_query`
makes from this one (words turned into index tokens by :mod:`indexerd.index.analysis`).

Grammar (EBNF; tightest binding last; ``AND``, ``OR``, ``NOT`` only in capitals)::

    query    = clauses
    clauses  = or_expr { or_expr }              (* side by side: all must match (AND) *)
    or_expr  = and_expr { "OR" and_expr }
    and_expr = unary { "AND" unary }
    unary    = ( "NOT" | "-" ) unary | primary   (* "-" right before the term: -draft *)
    primary  = "(" clauses ")" | term | FIELD ":" value
    value    = term | "(" clauses ")" | range   (* the field applies to every term inside *)
    term     = WORD | WORD "*" | '"' PHRASE '"'
    range    = ( ">" | ">=" | "<" | "<=" ) BOUND
             | [ BOUND ] ".." [ BOUND ]
             | ( "[" | "{" ) ( BOUND | "*" ) "TO" ( BOUND | "*" ) ( "]" | "}" )
             | BOUND                              (* one size, or one year/month/day/... *)

So ``python asyncio OR trio`` is ``python AND (asyncio OR trio)`` (side by side binds loosest,
as before), ``a AND b OR c`` is ``(a AND b) OR c``.  A WORD runs to white space, ``(``, ``)``
or ``"``.  ``NAME:`` is a field only when NAME is a letter-led name and the next character is
not white space, ``:`` or ``/`` (so ``std::vector``, ``http://x`` and ``12:30`` are words).

Fields (names case-insensitive):

- ``title``, ``content``: analysed text (words, phrases, ``prefix*``); a term without a field
  searches both (and, for an identifier like ``pg_hba.conf``, the whole-identifier field).
- ``source``, ``media_type``, ``date_source``, ``key`` (alias ``url``): the exact stored value
  (``media_type:text/html``); a trailing ``*`` is a prefix (``key:https://example.com/*``).
- ``dir``: a folder's absolute path (``dir:/srv/docs``, ``dir:"/home/me/My Documents"``): the
  files below it, at any depth (a prefix of their ``file:`` keys, ``/`` ended, so ``/srv/docs``
  is not ``/srv/docs-old``; ``.`` and ``..`` resolved by text, symlinks not); web pages and SQL
  rows are in no folder.
- ``size``: bytes, ``100000``, ``100k``, ``1.5MB``, ``2MiB`` (as in the config); a range.
- ``last_modified``: a UTC date ``2024``, ``2024-03``, ``2024-03-05``, ``2024-03-05T10:30``
  (``:SS``, ``Z`` or ``+02:00`` allowed); a bare date is its whole span (the year, the month,
  the day...), so ``last_modified:2024-01..2024-03`` is January 1st up to the end of March,
  ``>2024-01-01`` from January 2nd, ``<=2024-01`` up to the end of January.  ``[A TO B]`` holds
  both ends' spans, ``{A TO B}`` neither; ``*`` leaves a side open.

Ranges on ``size`` and ``last_modified`` become :class:`~indexerd.index.querytree.NumberRange`
(inclusive integer bounds) and :class:`~indexerd.index.querytree.DateRange` (half-open
``start <= t < end``, aware UTC).  Sorting (relevance or date) is a search parameter, not syntax:
:data:`~indexerd.index.querytree.SORTS`.

Not errors: a word that the analyzer drops (a stop word such as ``the``, punctuation) is left
out; a query left with nothing to search finds nothing (exit 0).  Errors (:class:`QueryError`,
``malformed query '<text>': <problem> at character N``, N counted from 1): an empty query,
unbalanced quotes or parentheses, empty parentheses, an operator without its operand, an
unknown or stored-only field, a field without a value, a field inside a field, a range on a
field that has none, a bad size or date or an empty range, a ``*`` that is not at a word's end.
"""

from __future__ import annotations

import posixpath
import re
from datetime import datetime, timedelta, timezone

from indexerd.core.errors import QueryError
from indexerd.index.querylex import Lexer, Token, no_value
from indexerd.index.querytree import (DATE_FIELDS, KEYWORD_FIELDS, NUMBER_FIELDS, PATH_FIELDS, And, DateRange,
                                      Keyword, Node, Not, NumberRange, Or, Phrase, Prefix, Word)

__all__ = ["parse", "date_span", "folder_key_prefix", "MAX_NESTING", "MAX_WORDS"]

UTC = timezone.utc
#: The deepest a query may nest parentheses and NOT/``-`` (each level is a recursion of the
#: parser and of every engine's compiler: 490 levels overflowed Python's stack, an HTTP 500).
MAX_NESTING = 32
#: The most words a query may name, a phrase's words counted (as Lucene's ``maxClauseCount``):
#: a 1,000-word query overflowed the stack of Whoosh's scorer (a chain of intersections) and held
#: the daemon's query worker (bench/RESULTS.md, "Long queries").
MAX_WORDS = 256


def folder_key_prefix(path: str) -> str:
    """The prefix of the ``file:`` keys of every file below the absolute folder ``path``:
    ``/srv/docs/`` as :func:`indexerd.core.filekeys.path_to_key` writes it
    (``file:///srv/docs/``; a folder with a space, ``file:///srv/My%20Docs/``).  ``.``, ``..``
    and repeated slashes are resolved by text; ``/`` gives every file's prefix."""
    from indexerd.core.filekeys import path_to_key

    folder = posixpath.normpath(path).lstrip("/")
    return path_to_key("/" + folder + ("/" if folder else ""))


def parse(text: str) -> Node:
    """Parse a query (grammar in the module docstring) into its tree.

    Returns:
        the tree; words are kept as typed (analysis comes later, per field).

    Raises:
        QueryError: the query is empty or malformed; the message quotes the query and names
            the problem and its character (counted from 1).
    """
    if not isinstance(text, str) or not text.strip():
        raise QueryError("empty query")
    return _Parser(text).run()


class _Parser:
    def __init__(self, text: str) -> None:
        self.lexer = Lexer(text)
        self.toks = self.lexer.tokens()
        self.i = 0
        self.depth = 0  # parentheses and NOT/- open around the current token
        words = 0
        for t in self.toks:
            words += len(t.text.split()) if t.kind == "PHRASE" else t.kind in ("WORD", "RANGE")
            if words > MAX_WORDS:
                raise self.fail(f"more than {MAX_WORDS} words (a phrase's words counted): narrow it", t.at)

    def nest(self, t: Token) -> None:
        """One more level around ``t``: refused past :data:`MAX_NESTING`."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"nested more than {MAX_NESTING} levels deep (parentheses, NOT and -)", t.at)

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def fail(self, problem: str, at: int) -> QueryError:
        return self.lexer.fail(problem, at)

    def run(self) -> Node:
        node = self.clauses(None)
        t = self.tok
        if t.kind == ")":
            raise self.fail("unbalanced parentheses: this ')' has no '('", t.at)
        assert t.kind == "END", t
        return node

    def clauses(self, field: str | None) -> Node:
        items = []
        while self.tok.kind not in ("END", ")"):
            if self.tok.kind in ("AND", "OR"):
                raise self.fail(f"{self.tok.kind!r} needs a term before it", self.tok.at)
            items.append(self.or_expr(field))
        return items[0] if len(items) == 1 else And(tuple(items))

    def or_expr(self, field: str | None) -> Node:
        items = [self.and_expr(field)]
        while self.tok.kind == "OR":
            op = self.take()
            items.append(self.operand(op, field, self.and_expr))
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self, field: str | None) -> Node:
        items = [self.unary(field)]
        while self.tok.kind == "AND":
            op = self.take()
            items.append(self.operand(op, field, self.unary))
        return items[0] if len(items) == 1 else And(tuple(items))

    def operand(self, op: Token, field: str | None, rule) -> Node:
        if self.tok.kind in ("END", ")", "AND", "OR"):
            raise self.fail(f"{op.text!r} needs a term after it", op.at)
        return rule(field)

    def unary(self, field: str | None) -> Node:
        if self.tok.kind in ("NOT", "-"):
            op = self.take()
            name = "NOT" if op.kind == "NOT" else "-"
            if self.tok.kind in ("END", ")", "AND", "OR"):
                raise self.fail(f"{name!r} needs a term after it", op.at)
            self.nest(op)
            node = Not(self.unary(field))
            self.depth -= 1
            return node
        return self.primary(field)

    def primary(self, field: str | None) -> Node:
        t = self.take()
        if t.kind == "(":
            if self.tok.kind == ")":
                raise self.fail("empty parentheses", t.at)
            self.nest(t)
            node = self.clauses(field)
            if self.tok.kind != ")":
                raise self.fail("unbalanced parentheses: this '(' is never closed", t.at)
            self.take()
            self.depth -= 1
            return node
        if t.kind == "FIELD":
            if field is not None:
                raise self.fail(f"field {t.text!r} inside field {field!r}", t.at)
            if self.tok.kind not in ("WORD", "PHRASE", "RANGE", "("):
                raise self.fail(no_value(t.text), t.at)
            return self.primary(t.text)
        if t.kind == "WORD":
            return self.word(t, field)
        if t.kind == "PHRASE":
            return self.phrase(t, field)
        if t.kind == "RANGE":
            return self.bracket_range(t, field)
        raise AssertionError(t)  # ")" "END" and the operators are refused by the callers

    def word(self, t: Token, field: str | None) -> Node:
        if field in NUMBER_FIELDS or field in DATE_FIELDS:
            return self.range(t, field)
        text = t.text
        star = text.find("*")
        if star >= 0 and star != len(text) - 1:
            raise self.fail("'*' is only allowed at the end of a word (prefix search)", t.at + star)
        if text == "*":
            raise self.fail("a '*' alone matches nothing: give a prefix before it", t.at)
        if field in PATH_FIELDS:
            return self.folder(text, t.at)
        if field in KEYWORD_FIELDS:
            return Keyword(field, text.rstrip("*"), prefix=star >= 0)
        return Prefix(text[:-1], field) if star >= 0 else Word(text, field)

    def phrase(self, t: Token, field: str | None) -> Node:
        if field in PATH_FIELDS:
            return self.folder(t.text, t.at + 1)
        if field in KEYWORD_FIELDS:
            return Keyword(field, t.text)
        if field in NUMBER_FIELDS or field in DATE_FIELDS:
            raise self.fail(f"field {field!r} takes a value or a range, not a phrase", t.at)
        return Phrase(t.text, field)

    def folder(self, path: str, at: int) -> Node:
        """``dir:PATH``: the ``file:`` keys below the folder ``PATH`` (:func:`folder_key_prefix`)."""
        if not path.startswith("/"):
            raise self.fail(f"dir: takes a folder's absolute path (dir:/srv/docs), got {path!r}", at)
        if "*" in path:
            raise self.fail("dir: takes a folder, not a pattern: it finds every file below it", at + path.find("*"))
        return Keyword("key", folder_key_prefix(path), prefix=True)

    # -- ranges --

    def range(self, t: Token, field: str) -> Node:
        text, at = t.text, t.at
        m = re.fullmatch(r"(>=|<=|>|<)(.+)", text)
        if m:
            op, bound = m.groups()
            lo, hi = self.bound(bound, field, at + len(op))
            if op == ">":
                return self.make(field, hi, None, at, low_open=True)
            if op == ">=":
                return self.make(field, lo, None, at)
            if op == "<":
                return self.make(field, None, lo, at, high_open=True)
            return self.make(field, None, hi, at)
        if ".." in text:
            left, right = text.split("..", 1)
            if not left and not right:
                raise self.fail(f"'..' gives no bound for {field!r}", at)
            lo = self.bound(left, field, at)[0] if left else None
            hi = self.bound(right, field, at + len(left) + 2)[1] if right else None
            return self.make(field, lo, hi, at)
        lo, hi = self.bound(text, field, at)
        return self.make(field, lo, hi, at)

    def bracket_range(self, t: Token, field: str | None) -> Node:
        if field not in NUMBER_FIELDS and field not in DATE_FIELDS:
            raise self.fail(f"field {field!r} takes no range (ranges: size, last_modified)"
                            if field else "a range needs a field: size:[...] or last_modified:[...]",
                            t.at)
        inner = t.text[1:-1]
        m = re.fullmatch(r"\s*(\S+)\s+TO\s+(\S+)\s*", inner)
        if not m:
            raise self.fail(f"a range is written [A TO B] (or {{A TO B}}, * for an open end), "
                            f"not {t.text!r}", t.at)
        a, b = m.groups()
        low_open, high_open = t.text[0] == "{", t.text[-1] == "}"
        lo = hi = None
        if a != "*":
            lo_span = self.bound(a, field, t.at + 1 + m.start(1))
            lo = lo_span[1] if low_open else lo_span[0]
        if b != "*":
            hi_span = self.bound(b, field, t.at + 1 + m.start(2))
            hi = hi_span[0] if high_open else hi_span[1]
        return self.make(field, lo, hi, t.at, low_open=low_open and field in NUMBER_FIELDS,
                         high_open=high_open and field in NUMBER_FIELDS)

    def bound(self, text: str, field: str, at: int) -> tuple:
        """The span one bound covers: (n, n) for a size, (start, end) for a date."""
        if field in NUMBER_FIELDS:
            from indexerd.config import parse_size

            try:
                n = parse_size(text)
            except ValueError:
                raise self.fail(f"{text!r} is not a size for {field!r} (bytes, or like 100k, "
                                f"1.5MB, 2MiB)", at) from None
            return n, n
        try:
            return date_span(text)
        except (ValueError, OverflowError):
            raise self.fail(f"{text!r} is not a date for {field!r} (YYYY, YYYY-MM, YYYY-MM-DD "
                            f"or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM], UTC unless given)", at) from None

    def make(self, field: str, lo, hi, at: int, *, low_open: bool = False,
             high_open: bool = False) -> Node:
        if field in NUMBER_FIELDS:
            # a size's span is one number: > n is >= n+1, < n is <= n-1 (bounds are inclusive)
            lo = None if lo is None else lo + (1 if low_open else 0)
            hi = None if hi is None else hi - (1 if high_open else 0)
            if lo is not None and hi is not None and lo > hi:
                raise self.fail(f"the range of {field!r} is empty ({lo} > {hi})", at)
            return NumberRange(field, lo, hi)
        # dates: the callers already chose each bound's span side; the range is half-open
        if lo is not None and hi is not None and lo >= hi:
            raise self.fail(f"the range of {field!r} is empty (it ends before it starts)", at)
        return DateRange(field, lo, hi)


_DATE = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?"
                   r"(Z|z|[+-]\d{2}:?\d{2})?)?)?)?")


def date_span(text: str) -> tuple[datetime, datetime]:
    """The UTC span ``[start, end)`` a typed date covers: a year, month, day, minute or second.

    ``2024`` -> 2024-01-01 .. 2025-01-01; ``2024-03-05T10:30+02:00`` -> 08:30Z .. 08:31Z.

    Raises:
        ValueError: not one of the forms above, or not a real date.
        OverflowError: the span ends past year 9999.
    """
    m = _DATE.fullmatch(text)
    if not m:
        raise ValueError(text)
    y, mo, d, hh, mi, ss, zone = m.groups()
    tz = UTC
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    start = datetime(int(y), int(mo or 1), int(d or 1), int(hh or 0), int(mi or 0), int(ss or 0),
                     tzinfo=tz)
    if ss is not None:
        end = start + timedelta(seconds=1)
    elif mi is not None:
        end = start + timedelta(minutes=1)
    elif d is not None:
        end = start + timedelta(days=1)
    elif mo is not None:
        end = start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
    else:
        end = start.replace(year=start.year + 1)
    return start.astimezone(UTC), end.astimezone(UTC)
