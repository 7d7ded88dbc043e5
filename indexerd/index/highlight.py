"""Find a query's matched words in a document's raw stored text, for snippets (engine-neutral).

The index holds analysed tokens (case-folded, accents folded, stemmed, identifiers cut into
parts, CJK bigrams); the stored text is as the document wrote it, composed or decomposed.
:func:`words_regex` turns the tokens back into one regex over raw text:

- a letter matches its upper/lower case and its accented forms, precomposed or followed by
  combining accents (``cafe`` finds ``Café`` and ``Cafe\\u0301``);
- a stem or prefix matches at the start of a word and runs to the word's end (``run`` shows
  ``running``); a word starts after anything but a letter or digit, so an identifier's parts
  are found inside it (``hba`` in ``pg_hba.conf``);
- a CJK token (bigram or single character) matches where it stands, inside a run.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from indexerd.index.analysis import fold_diacritics, is_cjk

_MARKS = "[\u0300-\u036f]*"
_variants: dict[str, str] | None = None


def _letter_variants() -> dict[str, str]:
    """ASCII letter -> every precomposed Latin/Greek-range letter that folds to it."""
    global _variants
    if _variants is None:
        found: dict[str, set[str]] = {}
        for cp in range(0xC0, 0x250):
            c = chr(cp)
            if not c.isalpha():
                continue
            base = fold_diacritics(unicodedata.normalize("NFC", c.casefold()))
            if len(base) == 1 and base.isascii() and base != c:
                found.setdefault(base, set()).update({c, c.upper()})
        _variants = {b: "".join(sorted(vs)) for b, vs in found.items()}
    return _variants


def _char(c: str) -> str:
    v = _letter_variants().get(c)
    if v is None:
        return re.escape(c) + (_MARKS if c.isalpha() else "")
    return f"[{re.escape(c)}{re.escape(v)}]{_MARKS}"


#: what Python's ``re.IGNORECASE`` matches for an ASCII letter beyond its two cases and the
#: accented letters of :func:`_letter_variants` (``re._casefix``'s extra cases; the Angstrom sign,
#: whose lower case is å); tests/test_query.py checks this against ``re`` over the BMP
_CASE_EXTRA = {"a": "\u212b", "i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}


def _ascii_char(c: str) -> str:
    """An ASCII character of a token as a case-exact class: both cases, what ``re.IGNORECASE``
    adds, the accented letters that fold to it; combining accents may follow a letter."""
    if not c.isalpha():
        return re.escape(c)
    chars = {c, c.upper(), *_CASE_EXTRA.get(c, ""), *_letter_variants().get(c, "")}
    return "[" + "".join(re.escape(x) for x in sorted(chars)) + "]"


def _word(token: str) -> str:
    """One token as a regex over raw text (module docstring).

    An ASCII token is spelled out case by case and starts with its first character, then
    checks the character before it: a pattern that starts with a character class lets ``re``
    skip ahead to where that class matches, about 5x faster over a long document than a
    leading lookbehind under ``re.IGNORECASE``.  Other tokens keep ``(?i:...)``."""
    if token.isascii():
        first, rest = token[0], token[1:]
        return (_ascii_char(first) + r"(?<![^\W_].)" + (_MARKS if first.isalpha() else "")
                + "".join(_ascii_char(c) + (_MARKS if c.isalpha() else "") for c in rest)
                + r"[\w\u0300-\u036f]*")
    if any(is_cjk(c) for c in token):
        return f"(?i:{re.escape(token)})"
    return r"(?i:(?<![^\W_])" + "".join(_char(c) for c in token) + r"[\w\u0300-\u036f]*)"


def words_regex(tokens: Iterable[str], prefixes: Iterable[str] = ()) -> re.Pattern | None:
    """One case-insensitive regex finding the analysed ``tokens`` and ``prefixes`` (module
    docstring) in raw text; None when there is nothing to find.  The last
    :data:`REGEX_CACHE_SIZE` are kept (spelling a pattern out took about 1 ms of each search)."""
    alts = frozenset(w.strip("*?") for w in (*tokens, *prefixes) if w and w.strip("*?"))
    return _compiled(alts) if alts else None


#: word regexes kept (:func:`words_regex`), by the set of words they find
REGEX_CACHE_SIZE = 256


@functools.lru_cache(maxsize=REGEX_CACHE_SIZE)
def _compiled(alts: frozenset[str]) -> re.Pattern:
    """The regex of :func:`words_regex` for the words ``alts`` (stripped of ``*?``, not empty).
    Thread safe (a compiled pattern is read-only)."""
    body = "|".join(_word(w) for w in sorted(alts, key=lambda w: (-len(w), w)))
    return re.compile(f"(?:{body})")
