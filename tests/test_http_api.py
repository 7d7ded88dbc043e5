"""The HTTP listener's API, metrics, health check and token, and ``ctl search|report|changed|
explain`` answered by the running daemon: a real ``indexerd run`` (tests/daemonhttp.py), real
HTTP on loopback, the real CLI.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemonhttp import BIRD_DOCS, HttpDaemon, serving, short_base


@pytest.fixture(scope="module")
def daemon():
    with serving(HttpDaemon(short_base())) as d:
        yield d


def metrics(d: HttpDaemon) -> dict[tuple[str, tuple], float]:
    """``/metrics`` parsed by prometheus_client's own parser: {(sample name, labels): value}."""
    status, headers, body = d.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_api_search_has_the_fields_of_ctl_search_json(daemon):
    api = daemon.get_json("/api/search?q=falcon&limit=10")
    p = daemon.ctl("search", "falcon", "--json")
    assert p.returncode == 0, p.stderr
    assert api["hits"] == json.loads(p.stdout)
    assert api["total"] == 2
    assert api["hits"][0]["title"] == "Peregrine falcon"
    assert set(api["hits"][0]) == {"rank", "key", "url", "path", "title", "last_modified", "date_source",
                                   "score", "snippet", "marks", "snippet_note", "also_at", "source", "media_type"}
    h = api["hits"][0]
    assert h["marks"] and all(h["snippet"][a:b].lower().startswith("falcon") for a, b in h["marks"]), h


def test_api_search_filters_sort_and_pages(daemon):
    page3 = daemon.get_json("/api/search?q=bird&limit=10&page=3")
    assert page3["total"] == BIRD_DOCS and [h["rank"] for h in page3["hits"]] == list(range(21, 26))
    notes = daemon.get_json("/api/search?q=bird&source=notes&limit=100")
    assert notes["total"] == BIRD_DOCS // 2 and {h["source"] for h in notes["hits"]} == {"notes"}
    both = daemon.get_json("/api/search?q=bird&source=notes&source=papers&type=text/markdown&limit=100")
    assert {h["media_type"] for h in both["hits"]} == {"text/markdown"}
    by_date = daemon.get_json("/api/search?q=bird&sort=date&limit=100")["hits"]
    dates = [h["last_modified"] for h in by_date]
    assert dates == sorted(dates, reverse=True)
    span = daemon.get_json("/api/search?q=bird&from=2023-01-01&to=2023-12-31&limit=100")
    assert span["total"] > 0 and all(h["last_modified"].startswith("2023-") for h in span["hits"])


@pytest.mark.parametrize("query, code, words", [
    ("q=%22open", 400, "unbalanced double quote"),
    ("q=", 400, "empty"),
    ("q=bird&page=0", 400, "page must be 1 or more"),
    ("q=bird&limit=101&page=10", 400, "bounded"),
    ("q=bird&from=yesterday", 400, "YYYY-MM-DD"),
    ("q=bird&sort=size", 400, "sort must be one of"),
    ("q=title%3A", 400, "field 'title' has no value"),
    ("q=dir%3A+%2Fsrv", 400, "field 'dir' has no value"),
    ("q=-", 400, "'-' needs a term after it"),
    ("q=bird+-", 400, "'-' needs a term after it"),
])
def test_api_search_refuses_bad_input_clearly(daemon, query, code, words):
    status, _, body = daemon.get("/api/search?" + query, check=False)
    assert status == code and words in json.loads(body)["error"]


@pytest.mark.parametrize("query, words", [
    ("title%3A", "field &#39;title&#39; has no value"),
    ("-", "&#39;-&#39; needs a term after it"),
])
def test_the_page_says_what_is_wrong_with_a_malformed_query(daemon, query, words):
    """``title:`` and a lone ``-`` searched the words on the page too (200 and hits)."""
    status, _, body = daemon.get("/?q=" + query, check=False)
    html = body.decode("utf-8")
    assert status == 400 and "malformed query" in html and words in html, html


def test_hostile_queries_get_a_short_400_not_a_500(daemon):
    """From the attack run: 490 nested parentheses overflowed the parser's stack (HTTP 500 and a
    135 KB traceback in the log) and the error echoed the whole query."""
    deep = "(" * 490 + "bird" + ")" * 490
    status, _, body = daemon.get("/api/search?q=" + deep, check=False)
    error = json.loads(body)["error"]
    assert status == 400 and "nested more than 32 levels deep" in error and len(error) < 300, error
    status, _, body = daemon.get("/?q=" + deep, check=False)
    assert status == 400 and b"nested more than 32 levels deep" in body
    status, _, body = daemon.get("/api/search?q=" + "NOT+" * 40 + "bird", check=False)
    assert status == 400 and "nested more than 32 levels deep" in json.loads(body)["error"]
    fine = daemon.get_json("/api/search?q=" + "(" * 30 + "bird" + ")" * 30 + "&limit=100")
    assert fine["total"] == BIRD_DOCS


def test_the_widest_date_span_is_every_document(daemon):
    """``from=0001-01-01&to=9999-12-31`` (the calendar's ends) was an HTTP 500 (a date past
    9999-12-31); it is every dated document."""
    span = daemon.get_json("/api/search?q=bird&from=0001-01-01&to=9999-12-31&limit=100")
    assert span["total"] == BIRD_DOCS
    status, _, _ = daemon.get("/?q=bird&from=0001-01-01&to=9999-12-31", check=False)
    assert status == 200


def test_api_status_and_explain_match_ctl(daemon):
    st = daemon.get_json("/api/status")
    assert set(st["sources"]) == {"notes", "papers"}
    assert st["sources"]["notes"]["documents"]["indexed"] > 0
    path = str(daemon.notes / "falcon.html")
    api = daemon.get_json("/api/explain?key=file://" + path)
    p = daemon.ctl("explain", path, "--json")
    assert p.returncode == 0 and api == json.loads(p.stdout)
    status, _, body = daemon.get("/api/explain?key=file:///nowhere", check=False)
    assert status == 404 and "not known to indexerd" in json.loads(body)["error"]


def test_the_page_escapes_and_never_serves_files(daemon):
    status, headers, body = daemon.get("/?q=kestrel")
    html = body.decode("utf-8")
    assert status == 200 and "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert "script-src" not in headers["Content-Security-Policy"] and "default-src 'none'" in \
        headers["Content-Security-Policy"]
    for path in ("/static/../../../etc/passwd", "/static/style.css/../x", "/doc?key=file:///etc/passwd",
                 "/" + str(daemon.notes / "falcon.html")):
        status, _, body = daemon.get(path, check=False)
        assert status == 404 and b"root:" not in body and b"peregrine falcon is" not in body.lower()


def test_a_page_past_the_last_says_so_in_the_pages_words(daemon):
    """``/?q=..&page=999`` showed the API's "offset + limit must be at most 1000" wording."""
    status, _, body = daemon.get("/?q=bird&page=999", check=False)
    html = body.decode("utf-8")
    assert status == 400 and "offset" not in html, html
    assert "page 999 is past the last page (100): a search shows at most 1000 hits" in html
    status, _, body = daemon.get("/?q=falcon&page=7", check=False)  # 2 hits: one page
    assert status == 200 and "page 7 is past the last page (1) of this search" in body.decode("utf-8")


def test_healthz(daemon):
    status, headers, body = daemon.get("/healthz")
    assert (status, body) == (200, b"ok\n") and headers["Cache-Control"] == "no-store"


def test_only_get_and_head_are_answered(daemon):
    """Every page and API call only reads: POST, PUT and DELETE are 405 naming GET (they were
    answered 200 as a GET), HEAD is the GET without its body."""
    import urllib.error
    import urllib.request

    for method, path in (("POST", "/api/search?q=sparrow"), ("PUT", "/"), ("DELETE", "/api/status"),
                         ("POST", "/?q=x")):
        req = urllib.request.Request(daemon.url + path, method=method, data=b"" if method != "DELETE" else None)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        assert e.value.code == 405 and "GET" in e.value.headers["Allow"], (method, path)
    with urllib.request.urlopen(urllib.request.Request(daemon.url + "/healthz", method="HEAD"), timeout=30) as r:
        assert r.status == 200 and r.read() == b""


def test_metrics_move_when_a_file_is_edited(daemon):
    before = metrics(daemon)
    assert before[("indexerd_documents", (("source", "notes"), ("status", "indexed")))] > 10
    assert before[("indexerd_pass_duration_seconds_count", (("kind", "filesystem"), ("source", "notes")))] >= 1
    assert before[("indexerd_last_successful_pass_timestamp_seconds", (("source", "notes"),))] > time.time() - 600
    assert ("indexerd_change_queue_length", ()) in before and ("indexerd_writer_queue_length", ()) in before
    edits = before.get(("indexerd_edit_to_searchable_seconds_count", ()), 0)
    indexed = before.get(("indexerd_documents_indexed_total", (("reason", "newer-date"),)), 0)
    (daemon.notes / "falcon.html").write_text(
        "<html><head><title>Peregrine falcon</title></head><body><main><p>falcon gyrfalcon</p>"
        "</main></body></html>", encoding="utf-8")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        after = metrics(daemon)
        if after.get(("indexerd_edit_to_searchable_seconds_count", ()), 0) > edits:
            break
        time.sleep(0.1)
    assert after[("indexerd_edit_to_searchable_seconds_count", ())] == edits + 1
    assert after[("indexerd_documents_indexed_total", (("reason", "newer-date"),))] == indexed + 1
    assert after[("indexerd_commit_seconds_count", ())] > before[("indexerd_commit_seconds_count", ())]
    assert after[("indexerd_edit_to_searchable_seconds_sum", ())] - \
        before.get(("indexerd_edit_to_searchable_seconds_sum", ()), 0) < 5
    assert daemon.get_json("/api/search?q=gyrfalcon")["total"] == 1


def test_ctl_reads_through_the_daemon_with_the_same_output(daemon, tmp_path):
    """``ctl search|report|changed|explain``: the daemon answers (its ctl query counter moves),
    and the output and exit code are the same as when ``ctl`` reads the state dir itself."""
    calls = [("search", "bird", "--limit", "5"), ("search", "bird", "--json", "--since", "2023-01-01..2024-01-01"),
             ("search", '"open'), ("search", "bird", "--since", "soon"), ("search", "falcn"),
             ("search", "falcn", "--json"),
             ("report", "--dates"), ("report", "--dates", "--json", "--source", "papers"),
             ("changed", "--since", "2022-01-01..2023-01-01"), ("explain", str(daemon.papers / "hostile.txt")),
             ("explain", "--json", str(daemon.papers / "hostile.txt")), ("explain", "/nowhere/at/all")]
    before = metrics(daemon).get(("indexerd_query_seconds_count", (("via", "ctl"),)), 0)
    via_daemon = [daemon.ctl(*c) for c in calls]
    assert metrics(daemon)[("indexerd_query_seconds_count", (("via", "ctl"),))] == before + 4
    # the same commands reading the state dir: a client config that names no reachable socket
    alone = tmp_path / "alone.toml"
    alone.write_text(f'state_dir = "{daemon.base / "state"}"\ncontrol_socket = "{tmp_path / "none.sock"}"\n',
                     encoding="utf-8")
    import subprocess
    import sys
    for c, up in zip(calls, via_daemon):
        down = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "-c", str(alone), *c],
                              capture_output=True, text=True, env=daemon.env, timeout=60)
        assert (up.returncode, up.stdout, up.stderr) == (down.returncode, down.stdout, down.stderr), c
    assert [p.returncode for p in via_daemon] == [0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 1]
    assert "did you mean: falcon" in via_daemon[4].stdout and '"suggestion"' in via_daemon[5].stderr


def test_a_loopback_listener_answers_only_loopback_host_names(daemon):
    """DNS rebinding (attack run): any ``Host`` was answered, so a page of a rebinding name in
    the admin's browser could read the index.  Now only this machine's loopback names are."""
    port = daemon.url.rsplit(":", 1)[1]
    for host in ("127.0.0.1:" + port, "localhost:" + port, "127.0.0.2", "LOCALHOST", "[::1]:" + port):
        assert daemon.get("/api/search?q=bird", headers={"Host": host})[0] == 200, host
    for host in ("evil.example:" + port, "evil.example", "127.0.0.1.evil.example", "localhost.evil.example:80"):
        status, _, body = daemon.get("/api/search?q=bird", headers={"Host": host}, check=False)
        assert status == 421 and "loopback" in json.loads(body)["error"], (host, status)
        assert daemon.get("/", headers={"Host": host}, check=False)[0] == 421


@pytest.mark.parametrize("where", ["env", "file"])
def test_token_is_required_off_loopback(where):
    """Listening on every address, the token from an environment variable or from a file: a
    request without the token, or with a wrong one, gets 401; the token as a Bearer header or
    as a Basic password gets in."""
    token = "s3cret-token-0123456789"
    with serving(HttpDaemon(short_base(), listen_host="0.0.0.0", token=token, token_in=where)) as d:
        for path in ("/", "/?q=bird", "/api/search?q=bird", "/metrics", "/healthz", "/static/style.css"):
            assert d.get(path, headers={"Authorization": "Bearer nope"}, check=False)[0] == 401
            status, headers, _ = d.get(path, headers={"Authorization": ""}, check=False)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert d.get("/api/search?q=bird")[0] == 200
        basic = base64.b64encode(f"anyone:{token}".encode()).decode()
        assert d.get("/healthz", headers={"Authorization": f"Basic {basic}"})[0] == 200


NOBODY_UID = 65534


def _get_as(uid: int, url: str, cwd) -> tuple[int, str]:
    """GET ``url`` from a process of user ``uid`` (setpriv, no groups): (status, body)."""
    import subprocess
    import sys

    code = ("import sys, urllib.request, urllib.error\n"
            "try:\n"
            "    r = urllib.request.urlopen(sys.argv[1], timeout=30); print(r.status); print(r.read().decode())\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code); print(e.read().decode())\n")
    p = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                        sys.executable, "-c", code, url], capture_output=True, text=True,
                       cwd=cwd, timeout=60)
    assert p.returncode == 0, p.stderr
    status, _, body = p.stdout.partition("\n")
    return int(status), body


def test_a_loopback_listener_refuses_local_users_who_may_not_use_the_control_socket(daemon):
    """Attack run: ``runuser -u nobody -- curl 127.0.0.1:PORT/api/search?q=python`` returned
    hits while the control socket kept nobody out.  Now a local user who could not open the
    control socket gets 401 naming the rule (``/healthz`` still answers); the daemon's own user
    is answered."""
    import os

    if os.geteuid() != 0:
        pytest.fail("this test runs a client as nobody: run the suite as root (the CI does)")
    for path in ("/api/search?q=bird", "/", "/metrics", "/api/status", "/status"):
        status, body = _get_as(NOBODY_UID, daemon.url + path, "/")
        assert status == 401 and f"uid {NOBODY_UID} may not use this daemon" in body, (path, status, body)
        if path.startswith("/api/"):  # the API's errors are JSON, as the README says
            assert json.loads(body)["error"].startswith(f"uid {NOBODY_UID} may not use"), body
    assert _get_as(NOBODY_UID, daemon.url + "/healthz", "/")[0] == 200
    assert daemon.get_json("/api/search?q=bird&limit=1")["total"] == BIRD_DOCS


def test_peer_uid_names_the_owner_of_the_client_socket_and_the_group_rule():
    """The kernel's socket table gives the client socket's owner (this process here); a user
    whose primary group is the access group is let in, others are not."""
    import os
    import pwd
    import socket

    from indexerd.daemon.http.peer import PeerCheck, peer_uid

    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as server, socket.socket(family) as client:
            server.bind((host, 0))
            server.listen(1)
            client.connect(server.getsockname()[:2])
            conn, peer = server.accept()
            with conn:
                assert peer_uid(peer[0], peer[1], server.getsockname()[1]) == os.geteuid()
                assert peer_uid(peer[0], peer[1] + 1 or 1, server.getsockname()[1]) is None
    nobody = pwd.getpwuid(NOBODY_UID)
    assert PeerCheck(nobody.pw_gid, own_uid=12345).allows(NOBODY_UID)
    assert not PeerCheck(nobody.pw_gid + 1 if nobody.pw_gid != 0 else 1, own_uid=12345).allows(NOBODY_UID)
    assert PeerCheck(999_999, own_uid=12345).allows(0) and PeerCheck(999_999, own_uid=12345).allows(12345)


def test_slow_clients_do_not_take_the_listener_down(daemon):
    """Slowloris (attack run): ~200 connections dripping a header line every 15 s took the
    listener and /healthz down for as long as they dripped.  Now, with more drippers than the
    connection limit, /healthz answers at once (the connection that waited longest makes
    room), and a request that has not arrived whole within 10 s loses its connection."""
    import socket
    import threading

    from indexerd.daemon.http.connections import REQUEST_SECONDS
    from indexerd.daemon.http.server import CONNECTION_LIMIT

    host, port = "127.0.0.1", int(daemon.url.rsplit(":", 1)[1])
    drippers: list[socket.socket] = []
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(1.0):
            for s in list(drippers):
                try:
                    s.sendall(b"X-Drip: 1\r\n")
                except OSError:
                    pass

    t = threading.Thread(target=drip, daemon=True)
    try:
        for _ in range(CONNECTION_LIMIT + 20):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(b"GET /api/search?q=bird HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            drippers.append(s)
        t.start()
        began = time.monotonic()
        for _ in range(3):
            status, _, body = daemon.get("/healthz")
            assert (status, body) == (200, b"ok\n")
        assert time.monotonic() - began < REQUEST_SECONDS / 2
        assert daemon.get_json("/api/search?q=bird&limit=1")["total"] == BIRD_DOCS
        # every dripper is cut off by the request deadline (or made room earlier)
        deadline = time.monotonic() + REQUEST_SECONDS + 10
        for s in drippers:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b"", data[:200]
        assert time.monotonic() - began < REQUEST_SECONDS + 8
    finally:
        stop.set()
        for s in drippers:
            s.close()


def test_api_search_counts_the_hits_per_media_type_and_source(daemon):
    """Issue 34: the facets beside the hits, counted by the engine over the whole query (not
    the page), narrowed by the filters like the hits."""
    api = daemon.get_json("/api/search?q=bird&limit=5")
    markdown = len([i for i in range(BIRD_DOCS) if i % 3 == 0])
    assert api["facets"] == {
        "media_type": [{"value": "text/plain", "count": BIRD_DOCS - markdown},
                       {"value": "text/markdown", "count": markdown}],
        "source": [{"value": "papers", "count": BIRD_DOCS - BIRD_DOCS // 2},
                   {"value": "notes", "count": BIRD_DOCS // 2}]}
    narrowed = daemon.get_json("/api/search?q=bird+media_type:text/markdown&source=notes")
    notes_md = len([i for i in range(BIRD_DOCS) if i % 3 == 0 and i % 2])
    assert narrowed["total"] == notes_md
    assert narrowed["facets"] == {"media_type": [{"value": "text/markdown", "count": notes_md}],
                                  "source": [{"value": "notes", "count": notes_md}]}
    assert api["suggestion"] is None and api["query_help"] == "/help"


def test_a_query_that_finds_nothing_suggests_one_that_does_in_the_api_and_ctl(daemon):
    """Issue 34: 0 hits -> "did you mean" from the index's own words, in the API, ``ctl search``
    through the daemon (text and ``--json``: the suggestion on stderr) and without it."""
    api = daemon.get_json("/api/search?q=peregrne+falcn")
    assert (api["total"], api["hits"], api["facets"]) == (0, [], {})
    assert api["suggestion"] == {"query": "peregrine falcon", "replaced": [["peregrne", "peregrine"], ["falcn", "falcon"]],
                                 "hits": 1}
    # the source filter applies to the suggestion too: falcon is in papers, peregrine only in notes
    assert daemon.get_json("/api/search?q=peregrne+falcn&source=papers")["suggestion"] is None
    assert daemon.get_json("/api/search?q=falcn&source=papers")["suggestion"]["hits"] == 1
    p = daemon.ctl("search", "peregrne falcn")
    assert (p.returncode, p.stdout) == (0, "no documents match 'peregrne falcn'\n"
                                           "did you mean: peregrine falcon  (1 hit)\n"), p.stderr
    p = daemon.ctl("search", "peregrne falcn", "--json")
    assert (p.returncode, p.stdout) == (0, "[]\n"), p.stderr
    assert json.loads(p.stderr.strip().splitlines()[-1]) == {"suggestion": api["suggestion"]}
    p = daemon.ctl("search", "zzyzx")
    assert (p.returncode, p.stdout) == (0, "no documents match 'zzyzx'\n")
    assert daemon.get_json("/api/search?q=zzyzx")["suggestion"] is None
