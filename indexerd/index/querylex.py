"""The query language's lexer: query text -> tokens (words, phrases, fields, ranges, operators).

``NAME:`` is a field only when NAME is a letter-led name and the next character is not white
space, ``:`` or ``/`` (so ``std::vector``, ``http://x`` and ``12:30`` are words), except a path
field (``dir:/srv/docs``: :data:`indexerd.index.querytree.PATH_FIELDS`), whose value starts with
``/``; the field name is checked here against :data:`indexerd.index.querytree.SEARCHABLE_FIELDS`.
A field's name with nothing after its ``:`` (``title:``, ``dir: /srv``, ``(title:)``) is an error,
not a word (``Note:``, no field's name, is a word).  A ``-`` with nothing after it but white
space before the query's or its group's end (``-``, ``a -``, ``(a -)``) is an error too, the
operator without its term; a ``-`` between words (``a - b``) is punctuation, which the analyzer
leaves out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexerd.core.errors import QueryError
from indexerd.index.querytree import FIELD_ALIASES, PATH_FIELDS, SEARCHABLE_FIELDS, STORED_ONLY_FIELDS

__all__ = ["Token", "Lexer"]


@dataclass(frozen=True)
class Token:
    """One token: its kind, its text, where it starts."""

    kind: str  # "(" ")" AND OR NOT - FIELD WORD PHRASE RANGE END
    text: str
    at: int  # 0-based offset in the query


_FIELD = re.compile(r"([A-Za-z_]\w*):(?=[^\s:/])")
_PATH_FIELD = re.compile(r"(" + "|".join(PATH_FIELDS) + r"):(?=/)", re.IGNORECASE)
_WORD_END = re.compile(r'[\s()"]')
#: ``NAME:`` at the query's end or before white space or ``)``: a field without its value when
#: NAME is a field (``title: foo``, ``dir:``), else a word (``Note:``)
_BARE_FIELD = re.compile(r"([A-Za-z_]\w*):(?=[\s)]|$)")
#: ``-`` with only white space after it before the query's or its group's end: the operator
#: without its term (``-``, ``a -``, ``(a -)``), not a dash between words (``a - b``)
_LONE_DASH = re.compile(r"-\s*(?:\)|$)")


#: characters of a query quoted in a message at most (a message, a log line, a page stay small)
QUOTED_QUERY_CHARS = 100


def quoted_query(text: str) -> str:
    """``text`` quoted for a message (``repr``), cut to :data:`QUOTED_QUERY_CHARS` characters
    with the full length said (an 89 KB query was echoed whole in its timeout message)."""
    if len(text) <= QUOTED_QUERY_CHARS:
        return repr(text)
    return f"{text[:QUOTED_QUERY_CHARS]!r}... ({len(text)} characters)"


def no_value(name: str) -> str:
    """The problem of field ``name`` written with nothing after its ``:``."""
    value = "/a/folder" if name.lower() in PATH_FIELDS else "WORD"
    return (f"field {name!r} has no value (write {name}:{value}, with no space after ':'; to search "
            f"for the text itself, quote it)")


class Lexer:
    """Cuts a query into :class:`Token` s (grammar in :mod:`indexerd.index.query`).

    Raises (from :meth:`tokens`): QueryError for an unclosed quote or range, a field without a
    value, a lone ``-``, or an unknown or stored-only field name.
    """

    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, problem: str, at: int) -> QueryError:
        """The error for ``problem`` at 0-based offset ``at``: quotes the query (a long one cut,
        :func:`quoted_query`), counts from 1."""
        return QueryError(f"malformed query {quoted_query(self.text)}: {problem} at character {at + 1}")

    def tokens(self) -> list[Token]:
        """Every token of the query, then one ``END``."""
        text, i = self.text, 0
        out: list[Token] = []
        after_field = False
        while i < len(text):
            c = text[i]
            if c.isspace():
                if after_field:
                    raise self.fail(no_value(out[-1].text), out[-1].at)
                i += 1
                continue
            if c in "()":
                out.append(Token(c, c, i))
                i += 1
            elif c == '"':
                end = text.find('"', i + 1)
                if end < 0:
                    raise self.fail("unbalanced double quote: this '\"' is never closed", i)
                out.append(Token("PHRASE", text[i + 1:end], i))
                i = end + 1
            elif after_field and c in "[{":
                end = min((j for j in (text.find("]", i), text.find("}", i)) if j >= 0), default=-1)
                if end < 0:
                    raise self.fail(f"unclosed range: this {c!r} has no ']' or '}}'", i)
                out.append(Token("RANGE", text[i:end + 1], i))
                i = end + 1
            elif c == "-" and not after_field and i + 1 < len(text) and text[i + 1] not in ' \t\r\n)':
                out.append(Token("-", c, i))
                i += 1
                continue  # the term follows
            elif c == "-" and not after_field and _LONE_DASH.match(text, i):
                raise self.fail("'-' needs a term after it (write -WORD to leave out documents with WORD; "
                                "to search for '-' itself, quote it)", i)
            else:
                m = None if after_field else (_FIELD.match(text, i) or _PATH_FIELD.match(text, i))
                bare = None if m or after_field else _BARE_FIELD.match(text, i)
                if bare and self._is_field(bare.group(1)):
                    raise self.fail(no_value(bare.group(1)), i)
                if m:
                    out.append(Token("FIELD", self._field_name(m.group(1), i), i))
                    i = m.end()
                    after_field = True
                    continue
                word_end = _WORD_END.search(text, i)
                end = len(text) if word_end is None else word_end.start()
                word = text[i:end]
                kind = word if word in ("AND", "OR", "NOT") and not after_field else "WORD"
                out.append(Token(kind, word, i))
                i = end
            after_field = False
        if after_field:
            raise self.fail(no_value(out[-1].text), out[-1].at)
        out.append(Token("END", "", len(text)))
        return out

    @staticmethod
    def _is_field(name: str) -> bool:
        """Whether ``name`` names a searchable field (or an alias of one), in any case."""
        lower = name.lower()
        return FIELD_ALIASES.get(lower, lower) in SEARCHABLE_FIELDS

    def _field_name(self, name: str, at: int) -> str:
        lower = name.lower()
        lower = FIELD_ALIASES.get(lower, lower)
        if lower in SEARCHABLE_FIELDS:
            return lower
        searchable = ", ".join(SEARCHABLE_FIELDS)
        if lower in STORED_ONLY_FIELDS:
            raise self.fail(f"field {name!r} is stored but not searchable (searchable: {searchable})", at)
        raise self.fail(f"no field {name!r} (searchable: {searchable}); to search for the text "
                        f"itself, quote it: '\"{name}:...\"'", at)
