"""Issue 33: a page requisite no page references any more (an orphan) was asked with a
conditional GET at every pass, forever, and stayed in mirror_dir.  Which page references which
requisite is kept in the crawl store (``crawl_requisites``, :mod:`indexerd.sources.web.orphans`):
replaced when a page is parsed (200), left as is on a 304; an orphan is dropped when it comes
due (not asked, its file removed, its crawl and document rows deleted).  End to end on the real
loopback server (tests/httpsite.py), counting its requests, on each state store (``Crawl`` runs
on SQLite and on PostgreSQL); the store's reachability rule on both stores."""

from __future__ import annotations

import sqlite3

from conftest import pg_store_address
from httpsite import site  # noqa: F401  (fixture)
from indexerd.config import parse_config
from indexerd.core.store import PgStore, Store
from indexerd.runtime.indexer import Indexer
from indexerd.sources.web.mirror import Mirror
from test_web import Crawl


def page(title: str, *stylesheets: str) -> bytes:
    links = "".join(f'<link rel="stylesheet" href="{href}">' for href in stylesheets)
    return f"<html><head><title>{title}</title>{links}</head><body><p>{title}word</p></body></html>".encode()


def gets(site, path: str) -> list[int | None]:
    """The statuses of the GETs ``path`` got, in order."""
    return [h.status for h in site.hits(path) if h.method == "GET"]


def references(crawl: Crawl) -> set[tuple[str, str]]:
    """The stored (referrer path, requisite path) pairs (not the marks of what to check)."""
    base = crawl.site.url("/").rstrip("/")
    return {(r["page"].removeprefix(base), r["requisite"].removeprefix(base))
            for r in crawl.query("SELECT page, requisite FROM crawl_requisites WHERE nested < 2")}


def test_a_requisite_a_page_stops_referencing_is_dropped_with_what_it_imports(tmp_path, site) -> None:
    """(a) Page A references x.css, which @imports y.css.  A is edited to drop it: pass 2
    fetches A (200, its requisites recorded anew); pass 3 asks neither stylesheet, their files
    are gone from the mirror and their crawl and document rows with them; A stays."""
    site.static("/", page("Home", "/x.css"), etag='"a1"')
    site.static("/x.css", b'@import "y.css"; p{color:red}', etag='"x1"', content_type="text/css")
    site.static("/y.css", b"p{margin:0}", etag='"y1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    crawl.run()
    m = Mirror(mirror_dir)
    assert m.path_for(site.url("/x.css")).is_file() and m.path_for(site.url("/y.css")).is_file()
    assert references(crawl) == {("/", "/x.css"), ("/x.css", "/y.css")}
    site.static("/", page("Home"), etag='"a2"')      # A no longer needs x.css
    crawl.run()
    assert gets(site, "/") == [200, 200]
    assert references(crawl) == {("/x.css", "/y.css")}
    asked = (len(site.hits("/x.css")), len(site.hits("/y.css")))
    crawl.run()
    assert (len(site.hits("/x.css")), len(site.hits("/y.css"))) == asked, site.log
    assert gets(site, "/")[-1] == 304
    assert not m.path_for(site.url("/x.css")).exists() and not m.path_for(site.url("/y.css")).exists()
    assert m.path_for(site.url("/")).is_file()
    assert crawl.counters["web.requisite.orphaned"] == 2, crawl.counters
    rows = crawl.crawl_rows()
    assert site.url("/x.css") not in rows and site.url("/y.css") not in rows and site.url("/") in rows
    assert crawl.doc("/x.css") is None and crawl.doc("/y.css") is None
    assert references(crawl) == set()
    crawl.run()                                           # and never again
    assert (len(site.hits("/x.css")), len(site.hits("/y.css"))) == asked


def test_with_adaptive_recrawl_an_orphan_goes_at_the_next_pass_not_when_it_would_be_due(tmp_path, site) -> None:
    """Adaptive recrawl on (the default): a stylesheet asked twice unchanged is not due again
    for a while.  A page edited to drop it is found (``ctl crawl --all``'s pass); at the next
    pass the stylesheet is not asked and its file is gone, without waiting for its due time."""
    site.static("/", page("Home", "/x.css"), etag='"a1"')
    site.static("/x.css", b"p{color:red}", etag='"x1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir), max_recrawl_interval="30d")
    crawl.run()
    site.static("/", page("Home"), etag='"a2"')
    crawl.run(recheck=True)
    assert gets(site, "/") == [200, 200] and gets(site, "/x.css") == [200, 304]
    crawl.run()
    assert gets(site, "/x.css") == [200, 304]
    assert not Mirror(mirror_dir).path_for(site.url("/x.css")).exists()
    assert crawl.counters["web.requisite.orphaned"] == 1, crawl.counters
    assert crawl.query("SELECT requisite FROM crawl_requisites") == []      # the marks checked, cleared


def test_a_requisite_two_pages_share_stays_while_either_references_it(tmp_path, site) -> None:
    """(b) Pages A and B both use s.css.  A drops it: s.css is still asked (conditionally) and
    kept, B still needs it; once B drops it too, it is asked no more and its file goes."""
    site.static("/", page("Home", "/s.css") + b'<a href="/b.html">b</a>', etag='"a1"')
    site.static("/b.html", page("Bee", "/s.css"), etag='"b1"')
    site.static("/s.css", b"p{color:red}", etag='"s1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    crawl.run()
    css = Mirror(mirror_dir).path_for(site.url("/s.css"))
    assert gets(site, "/s.css") == [200] and css.is_file()
    site.static("/", page("Home") + b'<a href="/b.html">b</a>', etag='"a2"')
    crawl.run()
    crawl.run()
    assert gets(site, "/s.css") == [200, 304, 304] and css.read_bytes() == b"p{color:red}"
    assert references(crawl) == {("/b.html", "/s.css")}
    assert crawl.counters.get("web.requisite.orphaned", 0) == 0
    site.static("/b.html", page("Bee"), etag='"b2"')
    crawl.run()                                           # B parsed: s.css referenced by no page
    crawl.run()
    crawl.run()
    assert gets(site, "/s.css") == [200, 304, 304, 304] and not css.exists()
    assert crawl.doc("/s.css") is None and site.url("/s.css") not in crawl.crawl_rows()


def test_a_page_answering_304_keeps_its_requisites(tmp_path, site) -> None:
    """(c) A page that answers 304 did not change, so neither did what it needs: its recorded
    requisites stay, and its stylesheet is asked (304) and kept at every pass."""
    site.static("/", page("Home", "/x.css"), etag='"a1"')
    site.static("/x.css", b"p{color:red}", etag='"x1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    for _ in range(3):
        crawl.run()
    assert gets(site, "/") == [200, 304, 304]
    assert gets(site, "/x.css") == [200, 304, 304]
    assert Mirror(mirror_dir).path_for(site.url("/x.css")).read_bytes() == b"p{color:red}"
    assert references(crawl) == {("/", "/x.css")}
    assert crawl.doc("/x.css")["reason"] == "requisite"


def test_a_moved_requisite_is_kept_while_the_page_references_its_old_url(tmp_path, site) -> None:
    """A stylesheet moved permanently (301) is asked at its new URL, which nothing but the
    redirect names: kept (asked conditionally, never fetched whole again) while the page
    references the old URL, dropped with it after."""
    site.static("/", page("Home", "/old.css"), etag='"a1"')
    site.add("/old.css", status=301, body=b"", headers={"Location": "/new.css"})
    site.static("/new.css", b"p{color:red}", etag='"n1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    crawl.run()
    crawl.run()
    assert gets(site, "/new.css") == [200, 304]
    assert references(crawl) == {("/", "/old.css"), ("/old.css", "/new.css")}
    site.static("/", page("Home"), etag='"a2"')
    crawl.run()
    crawl.run()
    assert len(site.hits("/old.css")) == 3 and gets(site, "/new.css") == [200, 304, 304]
    assert not Mirror(mirror_dir).path_for(site.url("/new.css")).exists()
    assert crawl.counters["web.requisite.orphaned"] == 2, crawl.counters


def test_after_an_upgrade_requisites_are_kept_until_a_reindex_has_parsed_every_page(tmp_path, site) -> None:
    """A store from before references were kept (its requisites marked by the migration's
    statement, run here on this store): a page answering 304 records nothing, yet its
    stylesheet stays; even one no page references any more stays until a ``ctl reindex
    --source`` pass has run to its end, and is dropped at the pass after it."""
    site.static("/", page("Home", "/x.css"), etag='"a1"')
    site.static("/x.css", b"p{color:red}", etag='"x1"', content_type="text/css")
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    crawl.run()
    with (PgStore(pg_store_address(crawl.store_schema)) if crawl.pg else Store(crawl.state / "state.sqlite3")) as s:
        s._transaction([("DELETE FROM crawl_requisites", [()]),   # as before the migration, then its step
                        ("INSERT INTO crawl_requisites(source, page, requisite, nested) SELECT source, '', url, 0 "
                         "FROM crawl WHERE via = 'requisite' OR last_outcome = 'requisite'", [()])])
    assert references(crawl) == {("", "/x.css")}
    crawl.run()
    assert gets(site, "/") == [200, 304] and gets(site, "/x.css") == [200, 304]
    site.static("/", page("Home"), etag='"a2"')
    crawl.run()
    crawl.run()
    css = Mirror(mirror_dir).path_for(site.url("/x.css"))
    assert gets(site, "/x.css") == [200, 304, 304, 304] and css.is_file()
    reindex(crawl)                                        # every page parsed: the marks go after it
    crawl.run()
    assert len(gets(site, "/x.css")) == 5 and not css.exists(), site.log
    assert crawl.counters["web.requisite.orphaned"] == 1


def reindex(crawl: Crawl) -> None:
    """One ``ctl reindex --source`` pass (no validators, every known URL asked)."""
    if crawl.pg:
        crawl.query("DELETE FROM robots")
    ix = Indexer(parse_config(crawl.config()))
    ix.open("index")
    try:
        ix.run_pass(progress=False, forced=True)
    finally:
        ix.close()


# -- the store's rule, on both stores -----------------------------------------------------------
def refs(store, source: str, page: str, urls: list[str], *, nested: bool = False) -> None:
    store.crawl_write(source, [], requisites={page: (nested, urls) if urls else None})


def test_a_requisite_is_needed_through_stylesheets_up_to_a_page_and_not_in_a_cycle(open_any_store) -> None:
    """Needed: referenced by a page, or by a stylesheet a page needs (at any depth); not: by
    nothing, or only by stylesheets no page needs (an @import cycle included).  Dropping a
    stylesheet forgets what it referenced; a referrer's references are replaced as a whole."""
    s = open_any_store()
    every = ["http://h/s.css", "http://h/i.png", "http://h/t.css", "http://h/f.woff2", "http://h/c1.css",
             "http://h/c2.css", "http://h/alone.png", "http://h/none.png"]
    s.crawl_write("web", [_row(url, "requisite", "requisite") for url in every])    # what a pass asks about
    s.crawl_write("other", [_row("http://h/alone.png", "requisite", "requisite")])
    refs(s, "web", "http://h/a", ["http://h/s.css", "http://h/i.png"])
    refs(s, "web", "http://h/s.css", ["http://h/t.css"], nested=True)
    refs(s, "web", "http://h/t.css", ["http://h/f.woff2"], nested=True)
    refs(s, "web", "http://h/c1.css", ["http://h/c2.css"], nested=True)      # a cycle no page needs
    refs(s, "web", "http://h/c2.css", ["http://h/c1.css"], nested=True)
    refs(s, "other", "http://h/b", ["http://h/alone.png"])                   # another source's
    assert s.crawl_requisites_referenced("web", every) == {"http://h/s.css", "http://h/i.png", "http://h/t.css",
                                                           "http://h/f.woff2"}
    s.crawl_requisites_checked("web", s.crawl_requisites_to_check("web"))
    refs(s, "web", "http://h/a", ["http://h/i.png"])                         # a re-parse without s.css
    assert s.crawl_requisites_referenced("web", every) == {"http://h/i.png"}
    assert s.crawl_requisites_to_check("web") == ["http://h/i.png", "http://h/s.css"]  # what a had: checked next
    s.crawl_requisites_checked("web", ["http://h/i.png", "http://h/s.css"])
    assert s.crawl_requisites_to_check("web") == []
    s.crawl_drop_requisites("web", ["http://h/s.css"])
    assert s.crawl_requisites_to_check("web") == ["http://h/t.css"]          # what the dropped one used
    refs(s, "web", "http://h/x", ["http://h/t.css"])                         # t.css needed again
    assert s.crawl_requisites_referenced("web", every) == {"http://h/i.png", "http://h/t.css", "http://h/f.woff2"}
    s.crawl_write("web", [], deletes=["http://h/x"])                         # a forgotten page
    assert s.crawl_requisites_referenced("web", every) == {"http://h/i.png"}
    s.forget_source("web", [])
    assert s.crawl_requisites_referenced("web", every) == set()
    assert s.crawl_requisites_referenced("other", every) == {"http://h/alone.png"}


def test_requisites_known_before_the_migration_are_kept_until_a_reindex_has_parsed_every_page(tmp_path) -> None:
    """SQLite schema 10 -> 11: the requisites a store knew had no recorded referrer; dropping
    them as orphans would empty the mirror of its stylesheets while their pages answer 304.
    They are marked referenced (by the page ''), until a finished ``ctl reindex --source``."""
    path = tmp_path / "state.sqlite3"
    with Store(path) as s:
        s.crawl_write("web", [_row("http://h/", "seed", "indexed:new"), _row("http://h/s.css", "requisite", "requisite"),
                              _row("http://h/old.png", "recheck", "requisite")])
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE crawl_requisites; PRAGMA user_version = 10;")
    db.close()
    with Store(path) as s:
        wanted = ["http://h/", "http://h/s.css", "http://h/old.png"]
        assert s.crawl_requisites_referenced("web", wanted) == {"http://h/s.css", "http://h/old.png"}
        s.crawl_trust_requisite_references("web")
        assert s.crawl_requisites_referenced("web", wanted) == set()


def test_the_postgresql_store_marks_the_requisites_it_knew_when_migrated(pg_index_server) -> None:
    """PostgreSQL schema 5 -> 6, as SQLite's 10 -> 11 (the session's server: a missing one fails)."""
    from indexerd.core.store.pg_migrations import PG_SCHEMA_VERSION

    address = pg_store_address()
    with PgStore(address) as s:
        s.crawl_write("web", [_row("http://h/", "seed", "indexed:new"), _row("http://h/s.css", "requisite", "requisite")])
        s._exec_many("DROP TABLE crawl_requisites", [()])
        s._exec_many("ALTER TABLE nodes DROP COLUMN dead_seconds", [()])  # schema 7's, made again by its step
        s._exec_many("UPDATE store_schema SET version = 5", [()])
    with PgStore(address) as s:
        assert s.schema_version == PG_SCHEMA_VERSION
        assert s.crawl_requisites_referenced("web", ["http://h/", "http://h/s.css"]) == {"http://h/s.css"}


def _row(url: str, via: str, outcome: str) -> dict:
    return dict(url=url, pass_id=1, state="done", hops=0, seed_depth=1, seq=1, via=via, origin=None, redirects=0,
                doc_key=None, sitemap_lastmod=None, gone_count=0, fail_count=0, last_status=200,
                last_outcome=outcome, checked_at=None, recrawl_seconds=None, due_at=None, due_reason=None,
                changefreq=None)
