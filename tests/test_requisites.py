"""Page requisites found in HTML and CSS (indexerd.sources.web.requisites): what a mirrored page
needs to display, as wget's --page-requisites finds it."""

from __future__ import annotations

from indexerd.sources.web.requisites import css_requisites, html_requisites
from indexerd.sources.web.scope import Scope


def test_html_requisites_cover_every_element_that_displays_something():
    page = b"""<html><head><base href="/sub/"><link rel=stylesheet href="s.css">
    <link rel=next href="n.html"><link rel="icon" href="/favicon.ico">
    <style>@import "a.css"; body{background:url(bg.png)}</style><script src="j.js"></script></head>
    <body style="background-image:url('x.jpg')"><img src="i.png" srcset="i1.png 1x, i2.png 2x">
    <a href="p.html">p</a><object data="d.svg"></object><embed src="e.swf">
    <video poster="po.jpg"><source src="v.mp4"><track src="t.vtt"></video><audio src="au.ogg"></audio>
    <img src="data:image/png;base64,AAAA"><img src="javascript:x"><img src="i.png#frag">
    <picture><source srcset="pic.webp 1x"></picture><input type="image" src="btn.png"></body></html>"""
    got = html_requisites(page, None, "http://h/x/y.html")
    want = {f"http://h/sub/{n}" for n in ("s.css", "j.js", "i.png", "i1.png", "i2.png", "pic.webp",
                                          "v.mp4", "po.jpg", "t.vtt", "au.ogg", "e.swf", "d.svg",
                                          "btn.png", "a.css", "bg.png", "x.jpg")} | {"http://h/favicon.ico"}
    assert set(got) == want and len(got) == len(want)
    assert "http://h/sub/n.html" not in got and "http://h/sub/p.html" not in got


def test_css_requisites_read_imports_fonts_and_images_with_css_syntax():
    css = (b'@charset "utf-8"; @import url("b.css") screen; @import \'c.css\';'
           b'@font-face{src:url(f.woff2) format("woff2"), url("g.ttf")}'
           b'.a{background:url( "h.png" )} .b{background-image:image-set("k.png" 1x)}'
           b'/* url(comment.png) */ .c{content:"url(text.png)"} .d{background:url(data:image/png;base64,AA)}')
    got = css_requisites(css, None, "http://h/css/s.css")
    assert got == [f"http://h/css/{n}" for n in ("b.css", "c.css", "f.woff2", "g.ttf", "h.png", "k.png")]


def test_requisite_scope_is_the_sites_hosts_and_the_listed_domains_only():
    scope = Scope(["http://site.example/docs/"], include=["/docs/"], requisites=True,
                  requisite_domains=["cdn.example"])
    assert scope.check_requisite("http://site.example/static/a.png") is None   # outside include
    assert scope.check_requisite("https://img.cdn.example/a.png") is None
    assert scope.check_requisite("http://elsewhere.example/a.png") == "off-site"
    assert scope.check_requisite("ftp://site.example/a.png") == "scheme"
    off = Scope(["http://site.example/docs/"])
    assert off.check_requisite("http://site.example/a.png") == "no-requisites"
    assert off.fingerprint() != scope.fingerprint()
