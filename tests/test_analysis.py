"""Text analysis: the engine-neutral analyzer (indexerd.index.analysis) and its token stream, and
the Whoosh engine's fused posting format built on it."""

from __future__ import annotations

import unicodedata

import pytest

from indexerd.index.analysis import STOP_WORDS, Analyzer, analyzer, fold_diacritics, normalise

A = Analyzer()
NOFOLD = Analyzer(fold_diacritics=False)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def test_plain_english_words_are_stemmed_and_stop_words_dropped() -> None:
    assert A.analyse("The event loop is running; it runs the tasks.") == (
        ["event", "loop", "run", "run", "task"], [])
    assert A.tokens("a I x") == []  # one-letter words and stop words
    assert "the" in STOP_WORDS and "python" not in STOP_WORDS


def test_stems_are_the_porter_algorithm() -> None:
    """PyStemmer's Porter; Whoosh's own port differed on some words (added -> add, not ad)."""
    assert A.tokens("added connection connected generalizations abbreviated") == [
        "ad", "connect", "connect", "gener", "abbrevi"]


def test_identifiers_give_parts_with_positions_and_the_whole_in_ids() -> None:
    got = A.analyse("see pg_hba.conf, www.Example.com, v1.2.3 and snake_case or __init__ 3.14")
    assert got.tokens == ["see", "pg", "hba", "conf", "www", "exampl", "com", "v1", "2", "3",
                          "snake", "case", "init", "3", "14"]
    assert got.ids == ["pg_hba.conf", "www.example.com", "v1.2.3", "snake_case", "__init__", "3.14"]
    # parts keep stop words and single characters: the phrase of parts is exact
    assert A.analyse("is_a.b") == (["i", "a", "b"], ["is_a.b"])
    assert A.analyse("___ . ..") == ([], [])


def test_a_trailing_or_doubled_dot_ends_the_word() -> None:
    assert A.analyse("end. of sentence..next") == (["end", "sentenc", "next"], [])


@pytest.mark.parametrize("word", ["café", "Café", "CAFÉ", "naïve", "Łódź", "İstanbul", "Ærøskøbing",
                                  "façade", "Ünïcödé", "Ελληνικά"])
def test_nfd_and_nfc_give_the_same_tokens(word) -> None:
    for ana in (A, NOFOLD):
        nfc = unicodedata.normalize("NFC", word)
        assert ana.analyse(nfd(word)) == ana.analyse(nfc) != ([], [])
        assert ana.analyse(nfc.upper()) == ana.analyse(nfc.lower()) or nfc == "İstanbul"


def test_diacritics_folded_by_default_and_kept_when_off() -> None:
    assert A.tokens("café Café CAFE\u0301 cafe") == ["cafe"] * 4
    assert A.tokens("Łódź Straße Ærøskøbing") == ["lodz", "strass", "aeroskob"]
    assert NOFOLD.tokens("café cafe") == ["café", "cafe"]
    assert A.version == "2" and NOFOLD.version == "2-nofold"
    assert fold_diacritics("ascii") == "ascii"
    # other scripts' marks are letters of the word: the Japanese voicing mark stays
    assert A.tokens("がか") == ["がか"] and fold_diacritics("が") == "が"


def test_dotted_capital_i_stays_one_word() -> None:
    """casefold('İ') is 'i' + U+0307 (a combining mark): the word is not cut there."""
    assert A.tokens("İstanbul") == ["istanbul"]
    assert NOFOLD.tokens("İstanbul") == [normalise("İstanbul")]


def test_indic_vowel_signs_stay_inside_the_word() -> None:
    assert A.tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


@pytest.mark.parametrize("text, tokens", [
    # Chinese: 我们在北京大学学习中文 (we study Chinese at Peking University)
    ("我们在北京大学学习中文", ["我们", "们在", "在北", "北京", "京大", "大学", "学学", "学习", "习中", "中文"]),
    # Japanese, mixed Han, Hiragana, Katakana and Latin; punctuation cuts the runs
    ("東京都に住んでいます。私はPythonが好き", ["東京", "京都", "都に", "に住", "住ん", "んで", "でい", "いま",
                                         "ます", "私は", "python", "が好", "好き"]),
    ("コンピューター", ["コン", "ンピ", "ピュ", "ュー", "ータ", "ター"]),
    # Korean: words are space-separated, particles attached
    ("한국어 형태소 분석은 어렵습니다", ["한국", "국어", "형태", "태소", "분석", "석은", "어렵", "렵습", "습니", "니다"]),
    # a lone CJK character is a unigram, kept although it is one character
    ("我 是", ["我", "是"]),
])
def test_cjk_runs_give_overlapping_bigrams(text, tokens) -> None:
    assert A.tokens(text) == tokens


def test_cjk_with_identifiers_and_nfd_hangul() -> None:
    assert A.analyse("設定は pg_hba.conf です") == (["設定", "定は", "pg", "hba", "conf", "です"], ["pg_hba.conf"])
    assert A.tokens(nfd("한국어")) == A.tokens("한국어") == ["한국", "국어"]


def test_units_say_which_word_is_an_identifier() -> None:
    assert [tuple(u) for u in A.units("pg_hba.conf")] == [(("pg", "hba", "conf"), "pg_hba.conf")]
    assert [tuple(u) for u in A.units("foo-bar the")] == [(("foo",), None), (("bar",), None), ((), None)]
    assert A.normalise_prefix("Café") == "cafe" and NOFOLD.normalise_prefix("Café") == "café"


def test_shared_analyzer_per_setting() -> None:
    assert analyzer() is analyzer() and analyzer(fold_diacritics=False) is not analyzer()


def test_long_texts_and_cache_overflow() -> None:
    from indexerd.index import analysis
    ana = Analyzer()
    words = [f"w{i}" for i in range(analysis._CACHE_MAX + 10)]
    assert ana.tokens(" ".join(words)) == words
    assert ana.tokens(" ".join(words[:5])) == words[:5]  # the cache was cleared, results the same
    long_cjk = "中文" * 100
    assert len(ana.tokens(long_cjk)) == 199


# -- the Whoosh engine's fused analyzer -----------------------------------------------------------


from pathlib import Path  # noqa: E402  (the imports of this part, kept with it)

from hypothesis import given, settings, strategies as st  # noqa: E402
from whoosh.analysis import StemmingAnalyzer  # noqa: E402

from indexerd.index.whoosh.analysis import FusedStemmingAnalyzer  # noqa: E402

REF = StemmingAnalyzer()
FUSED = FusedStemmingAnalyzer()


def toks(ana, text, **kw):
    return [(t.text, t.pos, t.startchar, t.endchar) for t in ana(text, positions=True, chars=True, **kw)]


def test_same_tokens_on_real_text() -> None:
    import email.message
    text = Path(email.message.__file__).read_text(encoding="utf-8")
    text += " Grüße İstanbul tls_* a.b.c x I the THE Running runs ran 3.14 v4l2_cid"
    assert toks(FUSED, text) == toks(REF, text)
    assert len(toks(FUSED, text)) > 1000


def test_query_mode_and_stops_kept() -> None:
    text = "the event loop is running"
    assert toks(FUSED, text, mode="query") == toks(REF, text, mode="query")
    a = [(t.text, t.stopped) for t in FUSED(text, removestops=False)]
    b = [(t.text, t.stopped) for t in REF(text, removestops=False)]
    assert a == b


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_same_tokens_on_any_text(text) -> None:
    assert toks(FUSED, text) == toks(REF, text)


def test_schema_round_trip(tmp_path) -> None:
    """The analyzer is pickled into the index schema and comes back usable."""
    import pickle
    assert pickle.loads(pickle.dumps(FUSED)) == FUSED


# -- FusedPositions: the posting format with the analyzer inline ---------------------------------

from whoosh.formats import Positions  # noqa: E402

from indexerd.index.whoosh.analysis import FusedPositions  # noqa: E402


def postings(fmt, text, ana=FUSED):
    return list(fmt.word_values(text, ana, mode="index"))


def test_fused_positions_same_postings_on_real_text() -> None:
    import email.message
    text = Path(email.message.__file__).read_text(encoding="utf-8") * 3
    text += " Grüße İstanbul tls_* a.b.c x I the THE Running runs ran 3.14 v4l2_cid"
    for boost in (1.0, 3.0):
        got = postings(FusedPositions(field_boost=boost), text)
        assert got == postings(Positions(field_boost=boost), text)
        assert len(got) > 500
        assert all(isinstance(w, float) for _t, _f, w, _v in got)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fused_positions_same_postings_on_any_text(text) -> None:
    assert postings(FusedPositions(), text) == postings(Positions(), text)


def test_fused_positions_other_analyzers_and_values_go_through_whoosh() -> None:
    text = "The running dogs ran"
    assert postings(FusedPositions(), text, REF) == postings(Positions(), text, REF)
    assert postings(FusedPositions(), ["already", "split"]) == postings(Positions(), ["already", "split"])


def test_fused_positions_keep_memory_per_word_small() -> None:
    """A 1.2M-word text: the positions of its terms take ~4 bytes per word, not ~37 (list of
    ints): the peak of tracemalloc while indexing stays under 16 MB."""
    import tracemalloc

    words = [f"w{i % 5000}" for i in range(1_200_000)]
    text = " ".join(words)
    tracemalloc.start()
    try:
        n = sum(1 for _ in FusedPositions().word_values(text, FUSED, mode="index"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 5000
    assert peak < 16 * 1024 * 1024, peak


def test_a_prefix_also_means_the_stems_of_the_words_it_begins() -> None:
    """``runnin*`` is typed for *running*, indexed as ``run``: the prefix search adds the stems,
    shorter than the prefix, of the prefix's likely completions; none for short or non-English
    prefixes (the prefix search alone)."""
    from indexerd.index.analysis import analyzer

    a = analyzer()
    assert a.prefix_stems("runnin") == ("run",)
    assert a.prefix_stems("connectio") == ("connect",)
    assert a.prefix_stems("fetche") == ("fetch",)
    assert a.prefix_stems("quickl") == ()      # quickli starts with quickl: the prefix finds it
    assert a.prefix_stems("run") == ()         # too short to guess from
    assert a.prefix_stems("東京") == () and a.prefix_stems("naïve") == ()
