"""The query language's typed tree, and the fields a query may name.

:func:`indexerd.index.query.parse` builds the tree; :func:`indexerd.index.querytokens.analyse_query`
turns its words into index tokens; every engine compiles the result.  Nodes are frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "TEXT_FIELDS", "KEYWORD_FIELDS", "NUMBER_FIELDS", "DATE_FIELDS", "PATH_FIELDS", "FIELD_ALIASES",
    "STORED_ONLY_FIELDS", "SEARCHABLE_FIELDS", "SORTS", "Word", "Phrase", "Prefix", "Keyword",
    "NumberRange", "DateRange", "And", "Or", "Not", "Node",
]

TEXT_FIELDS = ("title", "content")
"""Analysed text fields; a term without a field searches both."""
KEYWORD_FIELDS = ("source", "media_type", "date_source", "key")
"""Fields matched on their exact stored value (or a prefix of it with a trailing ``*``)."""
NUMBER_FIELDS = ("size",)
DATE_FIELDS = ("last_modified",)
PATH_FIELDS = ("dir",)
"""A folder given as an absolute path: the files below it (a prefix of their ``file:`` keys)."""
FIELD_ALIASES = {"url": "key"}
STORED_ONLY_FIELDS = ("path",)
"""Names the index stores but does not search: named as such in the error."""
SEARCHABLE_FIELDS = tuple(sorted(TEXT_FIELDS + KEYWORD_FIELDS + NUMBER_FIELDS + DATE_FIELDS + PATH_FIELDS))
SORTS = ("relevance", "date")
"""Result orders a search accepts: best match first, or newest ``last_modified`` first."""



@dataclass(frozen=True)
class Word:
    """One word as typed (not yet analysed).  ``field`` is ``title``, ``content`` or None (both)."""

    text: str
    field: str | None = None


@dataclass(frozen=True)
class Phrase:
    """Words that must appear in this order, next to each other (stop words left out)."""

    text: str
    field: str | None = None


@dataclass(frozen=True)
class Prefix:
    """Words starting with ``text`` (typed ``text*``; ``text`` has no ``*``)."""

    text: str
    field: str | None = None


@dataclass(frozen=True)
class Keyword:
    """The exact stored value of a keyword field, or values starting with it (``prefix``)."""

    field: str
    value: str
    prefix: bool = False


@dataclass(frozen=True)
class NumberRange:
    """``low <= value <= high`` (bytes for ``size``); None is open on that side."""

    field: str
    low: int | None
    high: int | None


@dataclass(frozen=True)
class DateRange:
    """``start <= value < end``, aware UTC; None is open on that side."""

    field: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class And:
    """Every child must match (a :class:`Not` child: must not)."""

    children: tuple


@dataclass(frozen=True)
class Or:
    """At least one child must match."""

    children: tuple


@dataclass(frozen=True)
class Not:
    """Documents the child does not match."""

    child: object


Node = Word | Phrase | Prefix | Keyword | NumberRange | DateRange | And | Or | Not
