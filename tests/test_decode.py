"""Tests for indexerd.extract.decode: WHATWG charset labels and the in-page declaration prescan.

The rules come from the WHATWG Encoding Standard (https://encoding.spec.whatwg.org/, labels) and
the HTML standard's prescan (https://html.spec.whatwg.org/multipage/parsing.html, "prescan a
byte stream to determine its encoding").
"""

from __future__ import annotations

import pytest

from indexerd.extract import MEDIA_HTML, decode_text, extract
from indexerd.extract.decode import codec_for_label

KOI8_WORD = "привет"
KOI8 = KOI8_WORD.encode("koi8-r")


@pytest.mark.parametrize("label, codec", [
    # WHATWG names a Python codec does not spell the same way
    ("gbk", "gb18030"), ("GB2312", "gb18030"), ("x-gbk", "gb18030"), ("csgb2312", "gb18030"),
    ("big5", "big5hkscs"), ("x-x-big5", "big5hkscs"),
    ("shift_jis", "cp932"), ("windows-31j", "cp932"),
    ("euc-kr", "cp949"), ("windows-949", "cp949"), ("ks_c_5601-1989", "cp949"),
    ("iso-8859-1", "cp1252"), ("us-ascii", "cp1252"), ("x-cp1252", "cp1252"),
    ("iso-8859-9", "cp1254"), ("csisolatin5", "cp1254"), ("iso-8859-11", "cp874"),
    ("iso-8859-8-i", "iso8859-8"), ("iso88592", "iso8859-2"), ("koi8", "koi8-r"),
    ("x-mac-roman", "mac-roman"), ("x-mac-ukrainian", "mac-cyrillic"),
    ("utf-16", "utf-16-le"), ("unicode", "utf-16-le"), ("unicodefffe", "utf-16-be"),
    ("unicode-1-1-utf-8", "utf-8"), (" 'UTF-8' ", "utf-8"),
    # no text codec: ignored
    ("utf-7", None), ("base64", None), ("rot13", None), ("x-no-such", None), ("x-user-defined", None),
])
def test_whatwg_labels(label: str, codec: str | None) -> None:
    assert codec_for_label(label) == codec


def test_gbk_decodes_as_gb18030_with_the_euro_at_0x80() -> None:
    assert decode_text(b"\x80 \xc4\xe3\xba\xc3", "gbk") == ("€ 你好", "gb18030")


def test_utf7_declaration_is_ignored_so_no_markup_is_smuggled() -> None:
    page = b'<meta charset="utf-7"><p>+ADw-script+AD4-</p>'
    text, codec = decode_text(page, sniff_html=True)
    assert codec == "utf-8" and "<script>" not in text


@pytest.mark.parametrize("head", [
    b'<meta charset="koi8-r">',
    b"<meta charset=koi8-r>",
    b'<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">',
    b'<meta content="text/html; charset=koi8-r" http-equiv="content-type">',
    b'<meta name="x" content="a>b" charset="koi8-r">',          # a quoted ">" does not end the tag
    b'<?xml version="1.0" encoding="koi8-r"?><html>',
])
def test_page_declarations_that_count(head: bytes) -> None:
    assert decode_text(head + b"<p>" + KOI8, sniff_html=True) == (
        head.decode("ascii") + "<p>" + KOI8_WORD, "koi8-r")


@pytest.mark.parametrize("head", [
    b'<meta content="text/html; charset=koi8-r">',               # content without the pragma
    b'<meta name="description" content="save as charset=koi8-r">',
    b'<!-- <meta charset="koi8-r"> -->',                          # inside a comment
])
def test_page_declarations_that_do_not_count(head: bytes) -> None:
    text, codec = decode_text(head + b"<p>" + KOI8, sniff_html=True)
    assert codec == "cp1252" and KOI8_WORD not in text


def test_page_declaring_utf16_is_read_as_utf8() -> None:
    page = '<meta charset="utf-16"><title>café</title>'.encode()
    assert extract(page, MEDIA_HTML).encoding == "utf-8"
    assert extract(page, MEDIA_HTML).title == "café"


def test_declaration_only_in_html() -> None:
    page = b'<meta charset="koi8-r"> ' + KOI8
    assert decode_text(page)[1] == "cp1252"
    assert decode_text(page, sniff_html=True)[1] == "koi8-r"


def test_utf8_with_a_few_bad_bytes_stays_utf8() -> None:
    """A UTF-8 file with a stray Latin-1 byte and a cut sequence was decoded as a Baltic/DOS code
    page (title ``cafķ ■├(``: a new-user trial): each bad byte becomes U+FFFD, the rest stays."""
    good = "hello café crème Straße Müller über 東京都に住む 北京大学 ".encode() * 20
    data = good + b"caf\xe9 marker \xe2\x82 world " + good
    text, codec = decode_text(data)
    assert codec == "utf-8"
    assert "café crème" in text and "東京都" in text and "caf\ufffd marker \ufffd world" in text


@pytest.mark.parametrize("data, shown", [
    ("Réunion: café".encode() + b" \xff\n", "Réunion: café \ufffd\n"),
    ("naïve".encode() + b"\x92s\n", "naïve\ufffds\n"),
])
def test_a_short_utf8_text_with_one_bad_byte_stays_utf8(data, shown) -> None:
    """A short note in UTF-8 with one stray byte was read as cp1252: every accent shown as two
    characters (``cafÃ©``) and the word ``café`` not findable."""
    assert decode_text(data) == (shown, "utf-8")


@pytest.mark.parametrize("data, shown", [
    ("naïve".encode() + b"\xff\xff ok\n", "naïve\ufffd\ufffd ok\n"),
    ("Grüße".encode() + b"\x80\x81\x82 abc", "Grüße\ufffd\ufffd\ufffd abc"),
    ("déjà vu".encode() + b"\xe2\x82 \xc3", "déjà vu\ufffd \ufffd"),              # cut sequences
    ("éé".encode() + b"x" * 2000 + b"\xff" * 3, "éé" + "x" * 2000 + "\ufffd" * 3),  # long: no detector guess
    ("Zürich ".encode() * 200 + bytes(range(0x80, 0xa0)), "Zürich " * 200 + "\ufffd" * 32),
])
def test_utf8_with_as_many_bad_bytes_as_good_ones_stays_utf8(data, shown) -> None:
    """A UTF-8 text whose bad bytes are as many as its valid multi-byte characters' bytes was
    read as cp1252 (short) or the detector's guess (cp1250 for the long one): ``naÃ¯ve``,
    ``GrÃ¼ÃŸe``, ``Ă©`` in the preview and the snippet, the words not findable.  Bytes that form
    valid UTF-8 are UTF-8; the bad ones are U+FFFD."""
    assert decode_text(data) == (shown, "utf-8")


@pytest.mark.parametrize("data", ["café crème brûlée".encode("cp1252"), "Grüße".encode("latin-1") + b"\n",
                                  "\u201cquoted\u201d résumé".encode("cp1252")])
def test_a_short_legacy_text_is_not_taken_for_utf8(data) -> None:
    text, codec = decode_text(data)
    assert codec == "cp1252" and "\ufffd" not in text


def test_a_legacy_8bit_text_is_not_taken_for_utf8() -> None:
    data = ("Le café était très animé ce soir-là; déjà vu, où est la crème brûlée? " * 40).encode("cp1252")
    text, codec = decode_text(data)
    assert codec != "utf-8" and "\ufffd" not in text  # left to the detector (its guess may vary)


@pytest.mark.parametrize("text, codec", [
    ("Зимова ніч. Їжак і єнот пішли до лісу, де все біле від снігу. " * 30, "cp1251"),
    ("Съешь же ещё этих мягких французских булок, да выпей чаю. " * 30, "cp1251"),
    ("Příliš žluťoučký kůň úpěl ďábelské ódy. Šíleně žluťoučký kůň. " * 30, "cp1250"),
])
def test_a_legacy_text_with_a_few_chance_utf8_pairs_is_not_taken_for_utf8(text, codec) -> None:
    """cp1251's capitals followed by ``і``, ``ї``, ``є`` or ``ё`` (0xB3, 0xBF, 0xBA, 0xB8) are valid
    UTF-8 pairs by chance; the rest of its letters are not, so the text stays the detector's."""
    data = text.encode(codec)
    decoded, used = decode_text(data)
    assert used != "utf-8" and "\ufffd" not in decoded
