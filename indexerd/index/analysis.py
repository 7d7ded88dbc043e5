"""Text analysis shared by every engine: a text -> the tokens the index holds.

Pure Python, no engine library: every engine indexes the tokens it gives, at their positions
in the list (one inside its posting format, another as the list joined by spaces and split again
by a whitespace tokenizer).  Query words go through the same analyzer (:mod:`indexerd.index.querytokens`),
so a word matches however it was written.

The token stream (the contract every engine implements):

1. Normalise: a text that is not pure ASCII is put in NFC (so a word typed decomposed, NFD, as
   macOS file names are, matches its composed form) and case-folded (``str.casefold``: ``Straße``
   -> ``strasse``); pure ASCII is only lower-cased (the same result, much cheaper).
2. Cut into *words*: runs of letters, digits, ``_`` and combining marks, joined by single dots
   (``[\\w\\p{M}]+(\\.[\\w\\p{M}]+)*``), except that a run of CJK characters (Han, Hiragana,
   Katakana, Hangul) is always a word of its own, apart from the letters around it.
3. Each word gives tokens, in order, at consecutive positions:

   - a CJK run: its overlapping bigrams (``東京都`` -> ``東京``, ``京都``), as Lucene's
     ``CJKBigramFilter`` and Recoll do; a lone CJK character is one token (a unigram).  So a
     word inside running text is found, and a phrase query of bigrams matches in order;
   - an *identifier*, a word holding ``.`` or ``_`` (``pg_hba.conf``, ``www.example.com``,
     ``snake_case``, ``v1.2.3``, ``3.14``): its *parts* split at ``.`` and ``_`` (``pg``,
     ``hba``, ``conf``), every part kept (no stop-word or length filter), each stemmed; the
     whole identifier (normalised, diacritics folded, not stemmed) goes to the separate ``ids``
     list, which has no positions;
   - any other word: dropped if shorter than 2 characters or a stop word (:data:`STOP_WORDS`,
     the list the index always used), else its stem.

   Diacritic folding (on by default; :class:`Analyzer` ``fold_diacritics``): before stemming,
   a non-ASCII word loses its Latin/Greek/Cyrillic combining accents (U+0300..U+036F) and a few
   letters map to their base (``ø`` -> ``o``, ``ł`` -> ``l``, ``æ`` -> ``ae``...), as Recoll's
   unac does: ``cafe`` finds ``café`` and the reverse.  Other scripts' marks (the Japanese
   voicing marks, Indic vowel signs) are kept: they change the word.
   Stemming: the Porter algorithm (PyStemmer's C ``porter``) on every non-CJK token.

Positions count tokens kept, so dropped stop words do not break a phrase (``"event of loop"``
is the phrase ``event loop``), as before.  :attr:`Analyzer.version` names this contract: an index
built under another version must be rebuilt.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any, NamedTuple

import Stemmer

from indexerd.index.base import ANALYSIS_VERSION  # the token stream's version (see there)

STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "have", "if", "in",
    "is", "it", "may", "not", "of", "on", "or", "tbd", "that", "the", "this", "to", "us", "we",
    "when", "will", "with", "yet", "you", "your"))
"""Dropped words (the list the index has always used)."""


PREFIX_COMPLETIONS = ("", "e", "s", "es", "d", "ed", "g", "ng", "ing", "n", "on", "ion", "ions", "y", "ly",
                      "r", "er", "ers", "al", "ally", "ment", "ments", "ness", "ity", "ive", "ize", "ise",
                      "ation", "ations", "able", "ible", "ful", "ism", "ist", "ists")
"""English endings a typed prefix is completed with to find the stems of the words it begins
(:meth:`Analyzer.prefix_stems`): inflections and the commonest derivations."""

_CACHE_MAX = 50_000
"""Distinct words whose result is kept per analyzer (cleared when full).  Words are
Zipf-distributed, so 50,000 keeps nearly every hit."""
_CACHE_WORD_MAX = 40
"""Longer words (mostly long CJK runs) are analysed without caching."""

_CJK_BMP = ("\u1100-\u11ff\u3005-\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff"
            "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff"
            "\uff66-\uff9f")
_CJK_RANGES = _CJK_BMP + "\U00020000-\U0003134f"
"""Han (with extensions A-H and compatibility ideographs), Hiragana, Katakana (with the
half-width forms), Hangul syllables and jamo, and the iteration marks."""
_CJK_CHAR = re.compile(f"[{_CJK_RANGES}]")
_ASCII_WORDS = re.compile(r"\w+(?:\.\w+)*", re.ASCII)
_ID_SPLIT = re.compile(r"[._]")
_LATIN_MARKS = re.compile("[\u0300-\u036f]+")
_BASE_LETTERS = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ħ": "h", "ı": "i", "ŀ": "l",
                               "æ": "ae", "œ": "oe", "þ": "th", "ð": "d", "ŧ": "t"})
# Character classes are kept inside the BMP where speed matters: re tests a BMP-only class with
# one table lookup, a class reaching past U+FFFF range by range (several times slower).
_LETTER = f"[^\\W{_CJK_BMP}]"
_WORDS = re.compile(f"[{_CJK_RANGES}]+|{_LETTER}+(?:\\.{_LETTER}+)*")
_patterns_with_marks: tuple[re.Pattern, re.Pattern] | None = None


def _combining_marks() -> str:
    """The combining marks of the BMP (categories Mn, Mc, Me) as a character-class body."""
    marks = [cp for cp in range(0x300, 0x10000) if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me")]
    ranges: list[tuple[int, int]] = []
    start = prev = marks[0]
    for cp in marks[1:]:
        if cp != prev + 1:
            ranges.append((start, prev))
            start = cp
        prev = cp
    ranges.append((start, prev))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in ranges)


def _words_pattern(text: str) -> re.Pattern:
    """The word pattern for a normalised non-ASCII text: with combining marks inside words
    (Indic vowel signs, Hebrew and Arabic points, the dot ``İ`` folds to) only if it has any."""
    global _patterns_with_marks
    if _patterns_with_marks is None:
        marks = _combining_marks()
        part = f"(?:{_LETTER}|[{marks}])+"
        _patterns_with_marks = (re.compile(f"[{marks}]"),
                                re.compile(f"[{_CJK_RANGES}]+|{part}(?:\\.{part})*"))
    has_mark, words = _patterns_with_marks
    return words if has_mark.search(text) else _WORDS


def normalise(text: str) -> str:
    """NFC and case folding (``lower()`` for pure ASCII): step 1 of the token stream."""
    if text.isascii():
        return text.lower()
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.casefold()


def fold_diacritics(word: str) -> str:
    """``café`` -> ``cafe``, ``Łódź`` (folded case) -> ``lodz``; ASCII and other scripts unchanged."""
    if word.isascii():
        return word
    stripped = _LATIN_MARKS.sub("", unicodedata.normalize("NFD", word)).translate(_BASE_LETTERS)
    return unicodedata.normalize("NFC", stripped)


def is_cjk(char: str) -> bool:
    """True for a Han, Hiragana, Katakana or Hangul character (one character)."""
    return _CJK_CHAR.match(char) is not None


class Analysed(NamedTuple):
    """A text's tokens in position order and the whole identifiers found in it (no positions)."""

    tokens: list[str]
    ids: list[str]


class Unit(NamedTuple):
    """What one word of a text gives: its tokens, and the whole identifier if it is one."""

    tokens: tuple[str, ...]
    whole: str | None


class _Compound(tuple):
    """The stemmed parts of an identifier, with the whole identifier as ``whole``."""

    whole: str


class Analyzer:
    """The analyzer (module docstring).  One instance per setting; thread-safe (the word cache
    is a dict, a lost race only repeats work; the stemmer, which must not run concurrently, is
    behind a lock).

    Args:
        fold_diacritics: fold Latin/Greek/Cyrillic accents (``cafe`` finds ``café``).
    """

    def __init__(self, *, fold_diacritics: bool = True) -> None:
        self.fold_diacritics = fold_diacritics
        self._cache: dict[str, Any] = {}
        self._stemmer = Stemmer.Stemmer("porter")
        self._stem_lock = threading.Lock()

    @property
    def version(self) -> str:
        """``"<ANALYSIS_VERSION>"`` plus ``"-nofold"`` without folding: what an index records."""
        return f"{ANALYSIS_VERSION}{'' if self.fold_diacritics else '-nofold'}"

    def analyse(self, text: str) -> Analysed:
        """The token stream of ``text`` (module docstring): ``tokens[i]`` is at position ``i``."""
        tokens: list[str] = []
        ids: list[str] = []
        if not text:
            return Analysed(tokens, ids)
        if text.isascii():
            words = _ASCII_WORDS.findall(text.lower())
        else:
            text = normalise(text)
            words = _words_pattern(text).findall(text)
        cache = self._cache
        if len(cache) > _CACHE_MAX:
            cache.clear()
        get, append, extend, word_result = cache.get, tokens.append, tokens.extend, self._word
        for w in words:
            r = get(w)
            if r is None:
                r = word_result(w)
                if len(w) <= _CACHE_WORD_MAX:
                    cache[w] = r
            if r.__class__ is str:
                if r:
                    append(r)
            else:
                extend(r)
                if r.__class__ is _Compound:
                    ids.append(r.whole)
        return Analysed(tokens, ids)

    def tokens(self, text: str) -> list[str]:
        """Only the positional tokens of :meth:`analyse`."""
        return self.analyse(text).tokens

    def units(self, text: str) -> list[Unit]:
        """Word by word, what :meth:`analyse` makes of ``text`` (for queries: slow path)."""
        if text.isascii():
            words = _ASCII_WORDS.findall(text.lower())
        else:
            text = normalise(text)
            words = _words_pattern(text).findall(text)
        out = []
        for w in words:
            r = self._word(w)
            if r.__class__ is str:
                out.append(Unit((r,) if r else (), None))
            else:
                out.append(Unit(tuple(r), r.whole if r.__class__ is _Compound else None))
        return out

    def normalise_prefix(self, text: str) -> str:
        """A typed prefix as the index spells words (normalised, folded; not stemmed)."""
        text = normalise(text)
        return fold_diacritics(text) if self.fold_diacritics else text

    def prefix_stems(self, prefix: str) -> tuple[str, ...]:
        """The stems, shorter than ``prefix``, of the words ``prefix`` most likely begins: what a
        prefix search must also match because the index holds stems, not the words typed
        (``runnin*`` is written for *running*, whose stem ``run`` does not start with
        ``runnin``; ``connectio*`` for *connection*, stem ``connect``).

        ``prefix`` is normalised as :meth:`normalise_prefix` gives it.  Each of
        :data:`PREFIX_COMPLETIONS` is appended and the word stemmed; a stem of at least 3
        characters that ``prefix`` starts with, and that is not ``prefix`` itself, is kept.
        Stems that start with ``prefix`` are left out: the prefix search finds those already.
        Only for ASCII letters (Porter stems English); otherwise ``()``.
        """
        if not (prefix.isascii() and prefix.isalpha()) or len(prefix) < 4:
            return ()
        stems = {self._stem(prefix + ending) for ending in PREFIX_COMPLETIONS}
        return tuple(sorted(s for s in stems if len(s) >= 3 and len(s) < len(prefix) and prefix.startswith(s)))

    def _word(self, w: str):
        """One word's result: a token (``""`` when dropped), a tuple of CJK bigrams, or a
        :class:`_Compound` of an identifier's parts."""
        if not w.isascii():
            if _CJK_CHAR.match(w):
                return w if len(w) == 1 else tuple(w[i:i + 2] for i in range(len(w) - 1))
            if self.fold_diacritics:
                w = fold_diacritics(w)
        if "." in w or "_" in w:
            parts = _Compound(self._stem(p) for p in _ID_SPLIT.split(w) if p)
            if not parts:
                return ""
            parts.whole = w
            return parts
        if len(w) < 2 or w in STOP_WORDS:
            return ""
        return self._stem(w)

    def _stem(self, word: str) -> str:
        with self._stem_lock:
            return self._stemmer.stemWord(word)


_DEFAULT: dict[bool, Analyzer] = {}
_DEFAULT_LOCK = threading.Lock()


def analyzer(*, fold_diacritics: bool = True) -> Analyzer:
    """The shared :class:`Analyzer` of a setting (one word cache per process and setting)."""
    with _DEFAULT_LOCK:
        a = _DEFAULT.get(fold_diacritics)
        if a is None:
            a = _DEFAULT[fold_diacritics] = Analyzer(fold_diacritics=fold_diacritics)
        return a

