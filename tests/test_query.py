"""The query language: text -> tree (indexerd.index.query.parse), and every malformed query's message."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from indexerd.core.errors import QueryError
from indexerd.index.query import date_span, parse
from indexerd.index.querytree import And, DateRange, Keyword, Not, NumberRange, Or, Phrase, Prefix, Word

UTC = timezone.utc


def d(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize("text, tree", [
    ("python", Word("python")),
    ("python asyncio", And((Word("python"), Word("asyncio")))),
    ('"event loop"', Phrase("event loop")),
    ("asyn*", Prefix("asyn")),
    ("pg_hba.conf", Word("pg_hba.conf")),
    ("-draft", Not(Word("draft"))),
    ("python -draft", And((Word("python"), Not(Word("draft"))))),
    ('python -"draft copy"', And((Word("python"), Not(Phrase("draft copy"))))),
    ("NOT draft python", And((Not(Word("draft")), Word("python")))),
    ("foo-bar", Word("foo-bar")),
    ("a - b", And((Word("a"), Word("-"), Word("b")))),
    # side by side binds loosest, then OR, then AND (as Whoosh's parser did)
    ("python asyncio OR trio", And((Word("python"), Or((Word("asyncio"), Word("trio")))))),
    ("a AND b OR c", Or((And((Word("a"), Word("b"))), Word("c")))),
    ("a OR b AND c", Or((Word("a"), And((Word("b"), Word("c")))))),
    ("(a OR b) c", And((Or((Word("a"), Word("b"))), Word("c")))),
    ("NOT (a b)", Not(And((Word("a"), Word("b"))))),
    ("a and or not", And((Word("a"), Word("and"), Word("or"), Word("not")))),
    ("title:falcon", Word("falcon", "title")),
    ("Title:falcon", Word("falcon", "title")),
    ('content:"event loop"', Phrase("event loop", "content")),
    ("title:(a OR b*) c", And((Or((Word("a", "title"), Prefix("b", "title"))), Word("c")))),
    ("source:docs", Keyword("source", "docs")),
    ('source:"my docs"', Keyword("source", "my docs")),
    ("media_type:text/*", Keyword("media_type", "text/", prefix=True)),
    ("url:https://example.com/a/*", Keyword("key", "https://example.com/a/", prefix=True)),
    ("key:file:///etc/x", Keyword("key", "file:///etc/x")),
    ("date_source:meta", Keyword("date_source", "meta")),
    ("source:(a OR b)", Or((Keyword("source", "a"), Keyword("source", "b")))),
    # a folder: the file keys below it (a path field's value starts with '/')
    ("notes dir:/srv/docs", And((Word("notes"), Keyword("key", "file:///srv/docs/", prefix=True)))),
    ('dir:"/srv/My Docs/"', Keyword("key", "file:///srv/My%20Docs/", prefix=True)),
    ("-Dir:/srv/a/../b", Not(Keyword("key", "file:///srv/b/", prefix=True))),
    ("dir:/", Keyword("key", "file:///", prefix=True)),
    ("subdir:/x", Word("subdir:/x")),
    # colons that are not fields are words
    ("std::vector", Word("std::vector")),
    ("http://example.com/x", Word("http://example.com/x")),
    ("12:30", Word("12:30")),
    ('"nosuchfield:x"', Phrase("nosuchfield:x")),
])
def test_parse(text, tree) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize("text, low, high", [
    ("size:100000", 100000, 100000),
    ("size:>100000", 100001, None),
    ("size:>=100k", 100000, None),
    ("size:<1MB", None, 999999),
    ("size:<=2MiB", None, 2 * 1024 * 1024),
    ("size:10..20", 10, 20),
    ("size:10..", 10, None),
    ("size:..20", None, 20),
    ("size:[10 TO 20]", 10, 20),
    ("size:{10 TO 20}", 11, 19),
    ("size:[10 TO *]", 10, None),
    ("size:[* TO 1.5kb]", None, 1500),
])
def test_size_ranges(text, low, high) -> None:
    assert parse(text) == NumberRange("size", low, high)


@pytest.mark.parametrize("text, start, end", [
    ("last_modified:2024", d(2024, 1, 1), d(2025, 1, 1)),
    ("last_modified:2024-02", d(2024, 2, 1), d(2024, 3, 1)),
    ("last_modified:2024-12", d(2024, 12, 1), d(2025, 1, 1)),
    ("last_modified:2024-02-29", d(2024, 2, 29), d(2024, 3, 1)),
    ("last_modified:>=2024-01-01", d(2024, 1, 1), None),
    ("last_modified:>2024-01-01", d(2024, 1, 2), None),
    ("last_modified:<2024-01-01", None, d(2024, 1, 1)),
    ("last_modified:<=2024-01", None, d(2024, 2, 1)),
    ("last_modified:2024-01..2024-03", d(2024, 1, 1), d(2024, 4, 1)),
    ("last_modified:2024-01..", d(2024, 1, 1), None),
    ("last_modified:..2023", None, d(2024, 1, 1)),
    ("last_modified:[2024-01-01 TO 2024-03-31]", d(2024, 1, 1), d(2024, 4, 1)),
    ("last_modified:{2024-01-01 TO 2024-03-31}", d(2024, 1, 2), d(2024, 3, 31)),
    ("last_modified:[2024 TO *]", d(2024, 1, 1), None),
    ("last_modified:2024-03-05T10:30", d(2024, 3, 5, 10, 30), d(2024, 3, 5, 10, 31)),
    ("last_modified:2024-03-05T10:30:15Z", d(2024, 3, 5, 10, 30, 15), d(2024, 3, 5, 10, 30, 16)),
    ("last_modified:2024-03-05T10:30+02:00", d(2024, 3, 5, 8, 30), d(2024, 3, 5, 8, 31)),
])
def test_date_ranges(text, start, end) -> None:
    assert parse(text) == DateRange("last_modified", start, end)


def test_date_span_is_utc_aware() -> None:
    start, end = date_span("2024-06")
    assert start.tzinfo is not None and start.utcoffset().total_seconds() == 0
    assert (start, end) == (d(2024, 6, 1), d(2024, 7, 1))


def test_ranges_combine_with_words() -> None:
    assert parse("python size:>1k -draft") == And((
        Word("python"), NumberRange("size", 1001, None), Not(Word("draft"))))


@pytest.mark.parametrize("text, message", [
    ("", "empty query"),
    ("   ", "empty query"),
    ('foo"', "malformed query 'foo\"': unbalanced double quote: this '\"' is never closed at character 4"),
    ('"', "malformed query '\"': unbalanced double quote: this '\"' is never closed at character 1"),
    ("(a", "malformed query '(a': unbalanced parentheses: this '(' is never closed at character 1"),
    ("a (b (c)", "malformed query 'a (b (c)': unbalanced parentheses: this '(' is never closed at character 3"),
    ("a)", "malformed query 'a)': unbalanced parentheses: this ')' has no '(' at character 2"),
    ("a ()", "malformed query 'a ()': empty parentheses at character 3"),
    ("AND a", "malformed query 'AND a': 'AND' needs a term before it at character 1"),
    ("OR a", "malformed query 'OR a': 'OR' needs a term before it at character 1"),
    ("a AND", "malformed query 'a AND': 'AND' needs a term after it at character 3"),
    ("a OR", "malformed query 'a OR': 'OR' needs a term after it at character 3"),
    ("a OR OR b", "malformed query 'a OR OR b': 'OR' needs a term after it at character 3"),
    ("(a AND) b", "malformed query '(a AND) b': 'AND' needs a term after it at character 4"),
    ("a NOT", "malformed query 'a NOT': 'NOT' needs a term after it at character 3"),
    ("NOT", "malformed query 'NOT': 'NOT' needs a term after it at character 1"),
    ("path:tmp", "malformed query 'path:tmp': field 'path' is stored but not searchable (searchable: "
                 "content, date_source, dir, key, last_modified, media_type, size, source, title) at character 1"),
    ("a nosuchfield:x", "malformed query 'a nosuchfield:x': no field 'nosuchfield' (searchable: content, "
                        "date_source, dir, key, last_modified, media_type, size, source, title); to search for "
                        "the text itself, quote it: '\"nosuchfield:...\"' at character 3"),
    ("dir:docs", "malformed query 'dir:docs': dir: takes a folder's absolute path (dir:/srv/docs), "
                 "got 'docs' at character 5"),
    ("dir:/srv/do*", "malformed query 'dir:/srv/do*': dir: takes a folder, not a pattern: it finds every "
                     "file below it at character 12"),
    ("title:(content:x)", "malformed query 'title:(content:x)': field 'content' inside field 'title' at character 8"),
    ("title:()", "malformed query 'title:()': empty parentheses at character 7"),
    ("title:)", "malformed query 'title:)': field 'title' has no value (write title:WORD, with no space "
                "after ':'; to search for the text itself, quote it) at character 1"),
    ("fo*o", "malformed query 'fo*o': '*' is only allowed at the end of a word (prefix search) at character 3"),
    ("a *", "malformed query 'a *': a '*' alone matches nothing: give a prefix before it at character 3"),
    ("title:[a TO b]", "malformed query 'title:[a TO b]': field 'title' takes no range (ranges: size, "
                       "last_modified) at character 7"),
    ("size:[1 TO 2", "malformed query 'size:[1 TO 2': unclosed range: this '[' has no ']' or '}' at character 6"),
    ("size:[1 2]", "malformed query 'size:[1 2]': a range is written [A TO B] (or {A TO B}, * for an open end), "
                   "not '[1 2]' at character 6"),
    ("size:big", "malformed query 'size:big': 'big' is not a size for 'size' (bytes, or like 100k, 1.5MB, 2MiB) "
                 "at character 6"),
    ("size:>x", "malformed query 'size:>x': 'x' is not a size for 'size' (bytes, or like 100k, 1.5MB, 2MiB) "
                "at character 7"),
    ("size:10..x", "malformed query 'size:10..x': 'x' is not a size for 'size' (bytes, or like 100k, 1.5MB, "
                   "2MiB) at character 10"),
    ("size:20..10", "malformed query 'size:20..10': the range of 'size' is empty (20 > 10) at character 6"),
    ("size:{10 TO 11}", "malformed query 'size:{10 TO 11}': the range of 'size' is empty (11 > 10) at character 6"),
    ("size:..", "malformed query 'size:..': '..' gives no bound for 'size' at character 6"),
    ('size:"10"', "malformed query 'size:\"10\"': field 'size' takes a value or a range, not a phrase at character 6"),
    ("last_modified:2024-13", "malformed query 'last_modified:2024-13': '2024-13' is not a date for "
                              "'last_modified' (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM], "
                              "UTC unless given) at character 15"),
    ("last_modified:yesterday", "malformed query 'last_modified:yesterday': 'yesterday' is not a date for "
                                "'last_modified' (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM], "
                                "UTC unless given) at character 15"),
    ("last_modified:2024-03..2024-01", "malformed query 'last_modified:2024-03..2024-01': the range of "
                                       "'last_modified' is empty (it ends before it starts) at character 15"),
    ("last_modified:9999", "malformed query 'last_modified:9999': '9999' is not a date for 'last_modified' "
                           "(YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM], UTC unless given) "
                           "at character 15"),
    ("last_modified:9999-12-31", "malformed query 'last_modified:9999-12-31': '9999-12-31' is not a date for 'last_modified' "
                                 "(YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM], UTC unless given) "
                                 "at character 15"),
    ("a -", "malformed query 'a -': '-' needs a term after it (write -WORD to leave out documents with WORD; "
            "to search for '-' itself, quote it) at character 3"),
])
def test_malformed(text, message) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    assert str(info.value) == message
    assert info.value.exit_code == 2


def test_a_query_names_at_most_max_words_words() -> None:
    """A new user's trial: a 1,000-word query made Whoosh's scorer recurse through a chain of
    1,000 intersections (RecursionError, retried 20 times, then "search failed ... rebuild with
    `indexerd index --rebuild`", exit 1) and held the query worker; now a query names at most
    MAX_WORDS words, a phrase's words counted, and one more is a malformed query (exit 2)."""
    from indexerd.index.query import MAX_WORDS

    words = [f"w{i}" for i in range(MAX_WORDS + 1)]
    assert isinstance(parse(" ".join(words[:-1])), And)
    assert isinstance(parse(" OR ".join(words[:-1])), Or)
    last = len(" ".join(words[:-1])) + 2  # the character the extra word starts at, from 1
    for text, at in ((" ".join(words), last),
                     (" OR ".join(words), len(" OR ".join(words[:-1])) + 5),
                     ('"' + " ".join(words) + '"', 1),
                     ("a " + '"' + " ".join(words[:-1]) + '"', 3)):
        with pytest.raises(QueryError) as ei:
            parse(text)
        assert f"more than {MAX_WORDS} words" in str(ei.value) and str(ei.value).endswith(f"at character {at}"), \
            (text[:40], str(ei.value)[-120:])


@pytest.mark.parametrize("text, at, value", [
    ("title:", 1, "WORD"), ("title: x", 1, "WORD"), ("x TITLE:", 3, "WORD"), ("dir:", 1, "/a/folder"),
    ("dir: /srv/docs", 1, "/a/folder"), ("a (title:)", 4, "WORD"), ("content:\tx", 1, "WORD"),
])
def test_a_fields_name_with_nothing_after_its_colon_is_a_field_without_value(text, at, value) -> None:
    """``title: x`` was searched as the words ``title:`` and ``x`` (exit 0, hits for the word
    title) although the README calls a field without a value malformed (exit 2)."""
    with pytest.raises(QueryError) as info:
        parse(text)
    name = text.split(":")[0].split()[-1].lstrip("(")
    assert str(info.value).endswith(f"field {name!r} has no value (write {name}:{value}, with no space after "
                                    f"':'; to search for the text itself, quote it) at character {at}")
    assert info.value.exit_code == 2


@pytest.mark.parametrize("text, tree", [
    ("Note: x", And((Word("Note:"), Word("x")))),       # not a field's name: a word
    ('"title:" x', And((Phrase("title:"), Word("x")))),  # quoted: the text itself
    ("a - b", And((Word("a"), Word("-"), Word("b")))),   # a dash between words: punctuation
    ('"-"', Phrase("-")),                                # quoted: the text itself
])
def test_a_colon_or_dash_that_is_text_stays_text(text, tree) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize("text, at", [
    ("-", 1), ("-  ", 1), ("a -", 3), ("(a -)", 4), ("(-)", 2), ("- -", 3), ("a OR -", 6),
])
def test_a_lone_dash_is_an_operator_without_its_term(text, at) -> None:
    """A lone ``-`` (the whole query, or with nothing but white space before the query's or its
    group's end) searched the words around it (exit 0) although the README calls an operator
    without its operand malformed (exit 2)."""
    with pytest.raises(QueryError) as info:
        parse(text)
    assert str(info.value).endswith("'-' needs a term after it (write -WORD to leave out documents with WORD; "
                                    f"to search for '-' itself, quote it) at character {at}")
    assert info.value.exit_code == 2



# -- the analysed tree every engine compiles ---------------------------------------------------

from indexerd.index.analysis import Analyzer  # noqa: E402
from indexerd.index.highlight import words_regex  # noqa: E402
from indexerd.index.querytokens import (MatchAll, MatchNone, TokenPrefix, Tokens,  # noqa: E402
                                        analyse_query, highlight_words)

ANA = Analyzer()


def aq(text):
    return analyse_query(parse(text), ANA)


def both(*tokens):
    """What an unfielded word or phrase becomes: title, content, and headings (to rank)."""
    return Or((Tokens("title", tokens), Tokens("content", tokens), Tokens("headings", tokens)))


@pytest.mark.parametrize("text, tree", [
    ("Running", both("run")),
    ("running dogs", And((both("run"), both("dog")))),
    ('"The event of loops"', both("event", "loop")),
    ("title:Café", Tokens("title", ("cafe",))),
    ("pg_hba.conf", Or((Tokens("ids", ("pg_hba.conf",)), Tokens("title", ("pg", "hba", "conf")),
                        Tokens("content", ("pg", "hba", "conf")), Tokens("headings", ("pg", "hba", "conf"))))),
    ("content:pg_hba.conf", Tokens("content", ("pg", "hba", "conf"))),
    ("foo-bar", both("foo", "bar")),
    ("東京都", both("東京", "京都")),
    ("pg_hb*", TokenPrefix("ids", "pg_hb")),
    ("Caf*", Or((TokenPrefix("title", "caf"), TokenPrefix("content", "caf")))),
    ("the python", both("python")),
    ("python OR the", both("python")),
    ("the", MatchNone()),
    ("the OR of -an", MatchNone()),
    ("-draft", And((MatchAll(), Not(both("draft"))))),
    ("python -draft", And((both("python"), Not(both("draft"))))),
    ("python OR NOT draft", Or((*both("python").children, And((MatchAll(), Not(both("draft"))))))),
    ("-a -draft", And((MatchAll(), Not(both("draft"))))),
    ("(aa bb) (cc dd)", And((both("aa"), both("bb"), both("cc"), both("dd")))),
    ("aa OR (bb OR cc)", Or(both("aa").children + both("bb").children + both("cc").children)),
    ("size:>10 source:docs", And((NumberRange("size", 11, None), Keyword("source", "docs")))),
])
def test_analysed_tree(text, tree) -> None:
    assert aq(text) == tree


def test_nfd_query_equals_nfc_query() -> None:
    import unicodedata
    assert aq(unicodedata.normalize("NFD", "Crème brûlée")) == aq("creme brulee") == aq("Crème Brûlée")


def test_highlight_words_skip_negated_terms() -> None:
    assert highlight_words(aq("pg_hba.conf run* -draft")) == ({"pg_hba.conf", "pg", "hba", "conf"}, {"run"})


@pytest.mark.parametrize("query, text, found", [
    ("running", "He RUNS fast and runner", ["RUNS", "runner"]),
    ("cafe", "un Café, un cafe\u0301 crème", ["Café", "cafe\u0301"]),
    ("café", "the cafe", ["cafe"]),
    ("hba", "edit pg_hba.conf now", ["hba"]),
    ("pg_hba.conf", "edit pg_hba.conf now", ["pg_hba.conf", "pg_hba.conf", "hba", "conf"]),
    ("東京", "私は東京都に住んでいます", ["東京"]),
    ("분석", "형태소 분석은 어렵습니다", ["분석"]),
    ("-draft", "a draft", []),
])
def test_highlight_regex_finds_matched_words_in_raw_text(query, text, found) -> None:
    tokens, prefixes = highlight_words(aq(query))
    rx = words_regex(tokens, prefixes)
    if not found:
        assert rx is None
        return
    hits = [m.group() for m in rx.finditer(text)]
    assert all(f in hits or any(f in h for h in hits) for f in found), hits


def test_text_analysis_fixtures_expectations_follow_the_token_stream() -> None:
    """tests/fixtures/text-analysis/expected.json (used by the conformance suite on every engine)
    is what the token-stream contract gives, evaluated without any engine."""
    import json
    from pathlib import Path

    from reference_matcher import expected_hits

    root = Path(__file__).parent / "fixtures" / "text-analysis"
    expected = json.loads((root / "expected.json").read_text(encoding="utf-8"))
    assert len(expected) > 30
    for query, names in expected.items():
        assert expected_hits(query, root) == names, query


def test_highlight_regex_of_an_ascii_letter_matches_what_ignorecase_matched() -> None:
    """The ASCII path spells cases out (no re.IGNORECASE, for speed): each letter's class
    matches exactly the characters of the Basic Multilingual Plane that the case-insensitive
    class matched (its cases, re's extra cases such as the Kelvin sign, accented letters)."""
    import re
    import string

    from indexerd.index import highlight

    for c in string.ascii_lowercase + string.digits:
        old = re.compile(highlight._char(c).removesuffix(highlight._MARKS), re.IGNORECASE)
        new = re.compile(highlight._ascii_char(c))
        differ = [hex(x) for x in range(0x10000) if bool(old.fullmatch(chr(x))) != bool(new.fullmatch(chr(x)))]
        assert differ == [], (c, differ)


@pytest.mark.parametrize("text, found", [
    ("x_run y", ["run"]), ("xrun", []), ("run", ["run"]), ("(Running)", ["Running"]),
    ("\u212aelvin KELVIN", ["\u212aelvin", "KELVIN"]), ("İnfo ınfo", ["İnfo", "ınfo"]), ("3run", []),
])
def test_highlight_regex_word_start_after_the_first_character(text, found) -> None:
    """The check that a word starts comes after the first character now: the same matches."""
    rx = words_regex({"run", "kelvin", "info"}, set())
    assert [m.group() for m in rx.finditer(text)] == found


def test_a_long_query_is_quoted_cut_in_its_error() -> None:
    """A message quotes at most 100 characters of the query and says how long it was (an 89 KB
    query was echoed whole by its timeout message, in the log and on the page)."""
    from indexerd.index.querylex import quoted_query

    assert quoted_query("bird") == "'bird'"
    long = "a* OR " * 20_000 + "("
    with pytest.raises(QueryError) as e:
        parse(long)
    assert len(str(e.value)) < 250 and f"({len(long)} characters)" in str(e.value)


def test_highlight_regex_is_spelled_out_once_per_set_of_words(monkeypatch) -> None:
    """A search's snippets ask for the regex of the query's words: the same words (in any order,
    as tokens or prefixes, with a prefix's ``*``) give the pattern spelled out the first time,
    not spelled out again (about 1 ms of every search)."""
    from indexerd.index import highlight

    spelled: list[str] = []
    real = highlight._word
    monkeypatch.setattr(highlight, "_word", lambda w: spelled.append(w) or real(w))
    first = words_regex(["kelvinoqua", "runoqua"], ["infoqua*"])
    assert sorted(spelled) == ["infoqua", "kelvinoqua", "runoqua"]
    assert words_regex({"runoqua", "kelvinoqua"}, {"infoqua"}) is first and len(spelled) == 3
    assert [m.group() for m in first.finditer("Kelvinoqua runoquas infoquax")] == \
        ["Kelvinoqua", "runoquas", "infoquax"]
    assert words_regex(["runoqua"], []) is not first and words_regex([], ["*"]) is None
