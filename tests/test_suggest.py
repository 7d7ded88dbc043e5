"""The pure parts of 'did you mean' (indexerd/index/suggest.py): the edit distance and the
filter that picks the index terms near a word; the engines' side is in the conformance suite."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from indexerd.index.suggest import _replace_word, edit_distance, near_terms


def reference_osa(a: str, b: str) -> int:
    """The optimal-string-alignment distance, the textbook table (no cut-off)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        cost = 0 if a[i - 1] == b[j - 1] else 1
        d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
        if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
            d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def test_edit_distance_counts_insertions_deletions_substitutions_and_swaps() -> None:
    assert edit_distance("python", "python", 2) == 0
    assert edit_distance("pyhton", "python", 2) == 1          # a swap of neighbours is one edit
    assert edit_distance("confgure", "configure", 2) == 1     # an insertion
    assert edit_distance("falcn", "falcon", 2) == 1
    assert edit_distance("kitten", "sitting", 3) == 3
    assert edit_distance("kitten", "sitting", 2) == 3         # past the limit: limit + 1
    assert edit_distance("a", "abcd", 2) == 3


@settings(max_examples=400, deadline=None)
@given(st.text("abcde", min_size=1, max_size=9), st.text("abcde", min_size=1, max_size=9), st.integers(1, 2))
def test_edit_distance_and_the_filter_agree_with_the_textbook_table(a: str, b: str, limit: int) -> None:
    """The cut-off gives the distance when within ``limit``, else ``limit + 1``; the pair filter
    of near_terms never drops a term within the limit."""
    ref = reference_osa(a, b)
    assert edit_distance(a, b, limit) == (ref if ref <= limit else limit + 1)
    b = a[0] + b[1:]          # near_terms keeps the first letter
    assert (near_terms(a, [b], limit) == [b]) == (reference_osa(a, b) <= limit)


def test_near_terms_keeps_the_first_letter_and_the_order() -> None:
    terms = ["configur", "konfigur", "configuration", "confgur", "cnofigur", "config", "python"]
    assert near_terms("configur", terms, 2) == ["configur", "confgur", "cnofigur", "config"]
    assert near_terms("configur", terms, 1) == ["configur", "confgur", "cnofigur"]
    assert near_terms("", terms, 2) == []


def test_a_word_is_replaced_where_it_stands_alone() -> None:
    assert _replace_word("pyhton -daemon", "pyhton", "python") == "python -daemon"
    assert _replace_word("title:pyhton OR (pyhton)", "pyhton", "python") == "title:python OR (pyhton)"
    assert _replace_word("xpyhton pyhton", "pyhton", "python") == "xpyhton python"
    assert _replace_word("a\\b pyhton", "pyhton", "py\\thon") == "a\\b py\\thon"
