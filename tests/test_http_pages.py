"""The search page's pure parts (indexerd.daemon.http.pages), the token (auth) and the ``[http]``
config, without a server."""

from __future__ import annotations

import base64
from datetime import datetime, timezone

import pytest
from werkzeug.datastructures import MultiDict
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from indexerd.config import parse_config
from indexerd.core.errors import ConfigError
from indexerd.daemon.http import pages
from indexerd.daemon.http.auth import TokenCheck, is_loopback, load_token

UTC = timezone.utc


def test_highlight_escapes_everything_and_marks_the_spans_it_is_given():
    text = '<script>alert(1)</script> "><img onerror=x> Falcons & falcon'
    out = pages.highlight(text, [(text.index("Falcons"), text.index("Falcons") + 7), (len(text) - 6, len(text))])
    assert str(out) == ('&lt;script&gt;alert(1)&lt;/script&gt; &#34;&gt;&lt;img onerror=x&gt; '
                        '<mark>Falcons</mark> &amp; <mark>falcon</mark>')
    assert str(pages.highlight("<b>", [])) == "&lt;b&gt;"
    # a marked span of markup characters cannot smuggle markup in; spans past the end are cut
    assert str(pages.highlight("a <mark> b", [(2, 8), (9, 99)])) == "a <mark>&lt;mark&gt;</mark> <mark>b</mark>"
    # only the spans given are marked: CVE-2023-48795, not the other CVE ids' CVE
    text = "CVE-2023-1 CVE-2023-48795"
    assert str(pages.highlight(text, [(11, 25)])) == "CVE-2023-1 <mark>CVE-2023-48795</mark>"


def test_read_form_and_its_dates():
    form = pages.read_form(MultiDict([("q", " bird "), ("source", "a"), ("source", "b"), ("type", ""),
                                      ("from", "2024-01-01"), ("to", "2024-01-31"), ("page", "2")]))
    assert (form.q, form.sources, form.media_types, form.page) == ("bird", ("a", "b"), (), 2)
    assert form.since() == datetime(2024, 1, 1, tzinfo=UTC)
    assert form.until() == datetime(2024, 2, 1, tzinfo=UTC)       # "to" is a whole day
    assert form.params(page=3) == [("q", "bird"), ("source", "a"), ("source", "b"), ("from", "2024-01-01"),
                                   ("to", "2024-01-31"), ("page", "3")]
    for bad, words in (({"page": "x"}, "page must be a number"), ({"page": "0"}, "1 or more"),
                       ({"from": "1/2/2024"}, "YYYY-MM-DD"), ({"q": "x" * 1001}, "at most 1000")):
        with pytest.raises(ConfigError, match=words):
            pages.read_form(MultiDict(bad))


def test_links_only_to_web_pages():
    assert pages.web_url("https://example.org/a?b=1") == "https://example.org/a?b=1"
    for key in ("file:///etc/passwd", "sql:articles/42", "javascript:alert(1)", "data:text/html,x", "http:/x"):
        assert pages.web_url(key) is None
    assert pages.file_path("file:///a%20b/c.txt", None) == "/a b/c.txt"
    assert pages.file_path("file:///x/caf%E9.txt", None) == "/x/caf\ufffd.txt"   # no UTF-8: U+FFFD shown
    for key in ("sql:articles/42", "https://example.org/a", "file:x"):   # no file, or a malformed key
        assert pages.file_path(key, None) is None and not pages.raw_file(key), key
    assert pages.raw_file("file:///a%20b/c.txt")


def test_a_hit_found_at_other_places_shows_each_as_its_kind_shows_it():
    """``ctl search``'s "also at": a file's key as its path, any other key as it is (the kinds
    say which keys are files: registry.key_file)."""
    from types import SimpleNamespace

    from indexerd.output.terminal import display_path, hits_text

    hit = SimpleNamespace(rank=1, title="t", path="/a", url="file:///a", last_modified=None, date_source="mtime",
                          score=1.0, snippet="", also_at=("file:///srv/caf%C3%A9.txt", "sql:notes/7",
                                                          "https://example.org/x"))
    text = hits_text([hit], display_path=display_path, format_utc=lambda _: "-", tty=False)
    assert "also at 3 other places: /srv/café.txt, sql:notes/7, https://example.org/x\n" in text, text


def test_page_numbers():
    assert pages.page_numbers(1, 1) == [1]
    assert pages.page_numbers(10, 30) == [1, 7, 8, 9, 10, 11, 12, 13, 30]


def _request(auth: str | None) -> Request:
    headers = {"Authorization": auth} if auth is not None else {}
    return Request(EnvironBuilder(path="/", headers=headers).get_environ())


def test_token_check():
    check = TokenCheck("0123456789abcdef-token")
    assert check.deny(_request("Bearer 0123456789abcdef-token")) is None
    basic = base64.b64encode(b"me:0123456789abcdef-token").decode()
    assert check.deny(_request(f"Basic {basic}")) is None
    for auth in (None, "", "Bearer wrong", "Bearer 0123456789abcdef-toke", "Basic !!!", "Token x"):
        denied = check.deny(_request(auth))
        assert denied is not None and denied.status_code == 401
    assert TokenCheck(None).deny(_request(None)) is None


def test_load_token(tmp_path, monkeypatch):
    monkeypatch.setenv("IXD_T", "  0123456789abcdef  ")
    assert load_token("IXD_T", None) == "0123456789abcdef"
    monkeypatch.setenv("IXD_T", "short")
    with pytest.raises(ConfigError, match="at least 16"):
        load_token("IXD_T", None)
    monkeypatch.delenv("IXD_T")
    with pytest.raises(ConfigError, match="IXD_T is unset"):
        load_token("IXD_T", None)
    f = tmp_path / "token"
    f.write_text("fedcba9876543210fedcba\nignored\n")
    assert load_token(None, str(f)) == "fedcba9876543210fedcba"
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(None, str(tmp_path / "missing"))
    assert load_token(None, None) is None


def test_http_config():
    assert parse_config("").http.listen is None
    cfg = parse_config('[http]\nlisten = "[::1]:8080"\n')
    assert cfg.http.address() == ("::1", 8080)
    assert is_loopback("::1") and is_loopback("127.0.0.2") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.org")
    with pytest.raises(ConfigError, match="needs a token"):
        parse_config('[http]\nlisten = "0.0.0.0:8080"\n')
    assert parse_config('[http]\nlisten = "0.0.0.0:8080"\ntoken_env = "T"\n').http.token_env == "T"
    for text, words in (('listen = "8080"', "HOST:PORT"), ('listen = "127.0.0.1:99999"', "HOST:PORT"),
                        ('page_size = 0', "page_size"), ('query_timeout = "2m"', "query_timeout"),
                        ('token_env = "A"\ntoken_file = "/b"', "not both"), ('port = 1', "unknown")):
        with pytest.raises(ConfigError, match=words):
            parse_config("[http]\n" + text + "\n")
