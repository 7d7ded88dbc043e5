"""What ``indexerd ctl`` prints on a terminal: the text layouts, and escaping of untrusted values.

Imports nothing but :mod:`re` and :mod:`sys`, so the daemon can render ``ctl search``'s text
with it too (:func:`search_reply_text`, for the fast path :mod:`indexerd.cli.entry`): both
paths print the same bytes because one function writes them.

File names, titles, snippets, URLs and error messages come from documents and pages, i.e. from
whoever wrote them.  Printed raw, a control sequence in a title (``ESC ] 0 ; ... BEL`` sets the
window title, ``ESC [ 2 J`` clears the screen, others rewrite the clipboard or fake earlier
output) reaches the user's terminal.  Every such value goes through :func:`safe` before it is
printed; JSON output needs nothing more (``json.dumps(..., ensure_ascii=True)`` escapes every
control character).
"""

from __future__ import annotations

import re
import sys

from indexerd.core.plurals import counted
from indexerd.core.replica import REPLICA_LAG_NOTE_SECONDS

# C0 (U+0000-U+001F), DEL (U+007F), C1 (U+0080-U+009F: ECMA-48 §5.3; U+009B is a one-byte CSI),
# and the Unicode bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069)
# that reorder what is displayed ("Trojan Source", CVE-2021-42574); also U+2028/U+2029, which
# some terminals treat as line breaks; and lone surrogates (U+D800-U+DFFF: the undecodable bytes
# of a file name, ``\udce9``), which a UTF-8 terminal cannot show and a strict encoder refuses.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape(m: re.Match) -> str:
    """The escape of one matched control character (``\\t``, ``\\x1b``, ``\\u202e``)."""
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def safe(value: object) -> str:
    """``str(value)`` with every control character shown as an escape (``\\x1b``, ``\\n``,
    ``\\u202e``), so it prints on one line and changes nothing on the terminal.

    Printable text (any script, emoji, U+FFFD for undecodable bytes) is kept as it is.
    """
    return _UNSAFE.sub(escape, str(value))


#: what :class:`indexerd.cli.logformat.SafeLogFormatter` escapes (newlines are kept)
UNSAFE_KEEP_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                                  "\u202a-\u202e\u2066-\u2069]")


def one_line(value: object) -> str:
    """Like :func:`safe`, but runs of whitespace (newlines included) become one space first: for
    snippets, whose line breaks come from the document's layout and mean nothing here."""
    return safe(" ".join(str(value).split()))


def marked_line(snippet: str, marks, tty: bool) -> str:
    """:func:`one_line` of a snippet (whitespace already single spaces), with each ``(start,
    end)`` of ``marks`` in bold when ``tty``."""
    if not tty or not marks:
        return one_line(snippet)
    out, last = [], 0
    for start, end in marks:
        if start < last or end > len(snippet):
            continue
        out += [safe(snippet[last:start]), "\x1b[1m", safe(snippet[start:end]), "\x1b[0m"]
        last = end
    out.append(safe(snippet[last:]))
    return "".join(out)


class ReplyHit:
    """A hit of the daemon's ``search`` reply (:func:`indexerd.daemon.queries.hits_json`) as
    :func:`print_hits` reads it: ``last_modified`` already formatted, the full-precision score."""

    __slots__ = ("rank", "key", "url", "path", "title", "last_modified", "date_source", "snippet", "score",
                 "marks", "snippet_note", "also_at")

    def __init__(self, h: dict, score: float) -> None:
        self.rank, self.key, self.url, self.path = h["rank"], h["key"], h["url"], h.get("path")
        self.title, self.last_modified, self.date_source = h["title"], h["last_modified"], h["date_source"]
        self.snippet, self.score = h["snippet"], score
        self.marks = [tuple(m) for m in h.get("marks") or ()]
        self.snippet_note, self.also_at = h.get("snippet_note"), tuple(h.get("also_at") or ())


def shown_key(key: str, display_path) -> str:
    """How a key is shown to a person: the local file a key of a kind whose keys are files is
    (:func:`indexerd.sources.registry.key_file`, through ``display_path``), else the key."""
    from indexerd.sources.registry import key_file  # only with a hit found at other places

    try:
        path = key_file(key)
    except ValueError:      # a malformed file key: shown as it is
        path = None
    return display_path(path) if path is not None else key


def display_path(path: str) -> str:
    """:func:`indexerd.sources.files.keys.display_path` (undecodable bytes as U+FFFD), without
    importing the scanner into ``ctl``."""
    import os

    return os.fsencode(path).decode("utf-8", "replace")


# -- layouts -----------------------------------------------------------------------------------
def hits_text(hits, *, display_path, format_utc, tty: bool) -> str:
    """``ctl search``'s text: one block per hit (rank, title, path or URL, date, snippet), each
    line ending in a newline; the title bold when ``tty``."""
    bold, off = ("\x1b[1m", "\x1b[0m") if tty else ("", "")
    lines = []
    for h in hits:
        where = display_path(h.path) if h.path else h.url
        lines.append(f"{h.rank:>3}. {bold}{safe(h.title or '(untitled)')}{off}")
        lines.append(f"     {safe(where)}")
        lines.append(f"     last modified {format_utc(h.last_modified)} ({safe(h.date_source)}), "
                     f"score {h.score:.2f}")
        if h.snippet:
            lines.append(f"     {marked_line(h.snippet, getattr(h, 'marks', ()), tty)}")
        if getattr(h, "snippet_note", None):
            lines.append(f"     ({safe(h.snippet_note)})")
        also = getattr(h, "also_at", ())
        if also:
            lines.append(f"     also at {len(also)} other place{'' if len(also) == 1 else 's'}: "
                         + ", ".join(safe(shown_key(k, display_path)) for k in also[:3]) + (", ..." if len(also) > 3 else ""))
    return "".join(line + "\n" for line in lines)


def stdout_is_tty() -> bool:
    """True when standard output is a terminal (False when there is none: closed at start)."""
    return sys.stdout is not None and sys.stdout.isatty()


def emit(text: str) -> None:
    """Write ``text`` to standard output (:func:`indexerd.output.stdout.write_stdout`).

    Raises:
        BrokenPipeError: the reader went away (the caller exits 0, as ``print`` would).
        IndexerdError: the write failed otherwise (a full disk: exit 1, said in one line).
    """
    from indexerd.output.stdout import write_stdout

    problem = write_stdout(text)
    if problem is not None:
        from indexerd.core.errors import IndexerdError

        raise IndexerdError(problem)


def print_hits(hits, *, display_path, format_utc) -> None:
    """Print :func:`hits_text` (bold titles when standard output is a terminal)."""
    emit(hits_text(hits, display_path=display_path, format_utc=format_utc, tty=stdout_is_tty()))


def no_hits_text(query: str, suggestion: dict | None = None) -> str:
    """What ``ctl search`` prints when nothing matches ``query``: that, and a query near it
    that finds something (``suggestion`` as :func:`indexerd.daemon.queries.suggestion_json`
    makes it; None: none)."""
    out = f"no documents match {safe(repr(query))}\n"
    if suggestion:
        n = suggestion.get("hits", 0)
        return out + f"did you mean: {safe(suggestion.get('query'))}  ({n} hit{'' if n == 1 else 's'})\n"
    return out


def search_reply_text(query: str, hits: list[dict], scores: list[float], *, as_json: bool, tty: bool,
                      suggestion: dict | None = None) -> str:
    """Everything ``ctl search`` prints on standard output for the daemon's ``search`` reply
    (``hits`` as :func:`indexerd.daemon.queries.hits_json` makes them, ``scores`` at full
    precision, ``suggestion`` as :func:`indexerd.daemon.queries.suggestion_json`): the JSON array
    with ``as_json`` (the suggestion goes to standard error then: :func:`suggestion_note`), else
    :func:`hits_text` or :func:`no_hits_text`."""
    if as_json:
        import json

        return json.dumps(hits, ensure_ascii=True) + "\n"
    if not hits:
        return no_hits_text(query, suggestion)
    return hits_text([ReplyHit(h, s) for h, s in zip(hits, scores)], display_path=display_path,
                     format_utc=lambda text: text, tty=tty)


def suggestion_note(suggestion: dict | None, *, as_json: bool) -> str:
    """What ``ctl search --json`` prints on standard error for a suggestion (one JSON object,
    ``{"suggestion": {...}}``: standard output keeps the array of hits); "" without one or
    without ``as_json`` (the text form has it on standard output)."""
    if not as_json or not suggestion:
        return ""
    import json

    return json.dumps({"suggestion": suggestion}, ensure_ascii=True) + "\n"


def print_explain(out: dict) -> None:
    """``ctl explain``: one ``field value`` line per known field (a nested field, such as the
    recrawl schedule, as ``name value, name value``), then the explanation."""
    for k, v in out.items():
        if k != "explanation" and v is not None:
            if isinstance(v, dict):
                v = ", ".join(f"{name} {value}" for name, value in v.items() if value is not None)
            print(f"{k:22} {safe(v)}")
    for line in out["explanation"]:
        print(f"- {safe(line)}")


def print_rows(rows: list[dict], cols: list[str]) -> None:
    """``ctl report``/``changed``: the chosen columns, two spaces apart, ``-`` for none."""
    for r in rows:
        print("  ".join(safe(r.get(c)) if r.get(c) is not None else "-" for c in cols))


def _progress_line(p: dict) -> str:
    """A running pass's progress, worded by what its walk counts (``unit``: pages, rows, files)."""
    done, total, found, unit = p.get("done", 0), p.get("total", 0), p.get("found", 0), p.get("unit")
    if unit == "pages":
        return f"{counted(done, 'page')} fetched, {total - done} queued"
    if unit == "rows":
        return f"{counted(found, 'row')} read, {done} of {total} indexed" if total else f"{counted(found, 'row')} read"
    return f"{done}/{total} read, {counted(found, 'file')} found"


def replica_lag_words(lag_seconds: float | None) -> str:
    """How far behind its primary a read replica is, as ``ctl status`` and the status page say
    it: searches say so too once it lags more than
    :data:`~indexerd.core.replica.REPLICA_LAG_NOTE_SECONDS`; None: it does not answer."""
    if lag_seconds is None:
        return "not answering; searches read the primary"
    if lag_seconds > REPLICA_LAG_NOTE_SECONDS:
        return f"LAGGING {lag_seconds:.1f} s behind the primary (searches say so)"
    return f"{lag_seconds:.1f} s behind the primary"


def print_status(r: dict) -> None:
    """``ctl status``: the daemon, the index, the last reload, then each source."""
    print(f"indexerd pid {r['pid']}, up {r['uptime_seconds']:.0f} s, state dir {safe(r['state_dir'])}")
    ix = r["index"]
    segments = f"{counted(ix['segments'], 'segment')}, " if ix.get("segments") is not None else ""  # a server's index has none
    engine = f" ({safe(ix['engine'])})" if ix.get("engine") else ""
    # None: the index could not be read just now (its error follows), or is not open yet
    figures = (f"{counted(ix['documents'], 'document')}, {segments}{(ix['size_bytes'] or 0) / 1e6:.1f} MB"
               if ix.get("documents") is not None else "not readable now" if ix.get("error") else "not open yet")
    print(f"index{engine}: {figures}; last commit {r['writer']['last_commit'] or '-'}; "
          f"queues: changes {r['change_queue']}, writer {r['writer']['queue']}")
    if ix.get("error"):
        print(f"index error: {safe(ix['error'])}")
    if ix.get("read_server"):
        print(f"read replica {safe(ix['read_server'])}: {replica_lag_words(ix.get('replica_lag_seconds'))}")
    if r["writer"]["last_error"]:
        print(f"writer error: {safe(r['writer']['last_error'])}")
    rl = r.get("reload") or {}
    if rl.get("at"):
        if rl.get("ok"):
            print(f"config: {safe(r.get('config'))}, last reload {rl['at']}: ok")
        else:
            print(f"config: {safe(r.get('config'))}: RELOAD REFUSED at {rl['at']}, still running on the "
                  f"config loaded {rl.get('loaded_at') or 'at start'}: {safe(rl.get('error'))}")
        if rl.get("pending_restart"):
            print(f"config: {', '.join(rl['pending_restart'])} changed since the start: applied at the next restart")
    for name, s in r["sources"].items():
        docs = ", ".join(f"{k} {v}" for k, v in sorted(s["documents"].items())) or "no documents"
        where = f", {safe(s['root'])}" if s["root"] else ""
        print(f"- {safe(name)} ({s['kind']}{where}{', watched' if s['watched'] else ''}): {docs}")
        if s.get("watch_error"):
            print(f"    NOT WATCHED: {safe(s['watch_error'])} (kept current by scheduled reconciles)")
        cr = s.get("current_run")
        if cr:
            counts = ", ".join(f"{k} {v}" for k, v in (cr.get("counts") or {}).items())
            print(f"    running since {cr['started']}: {_progress_line(cr.get('progress') or {})}"
                  + (f"; so far {counts}" if counts else ""))
        lr = s["last_run"]
        if lr["finished"]:
            counts = ", ".join(f"{k} {v}" for k, v in (lr["counts"] or {}).items())
            print(f"    last run {lr['started']} .. {lr['finished']}: {counts}")
        le = s.get("last_error")
        if le:
            print(f"    last error ({le['at']}): {safe(le['message'])}")
        if s.get("cluster"):
            print(f"    on this node: not run, {safe(s['cluster'])}")
        print(f"    next run {s['next_run'] or '-'}")
    failures = {k: v for k, v in r.get("counters", {}).items() if k.startswith(("error.", "skip.", "web."))}
    if failures:
        print("counts by reason: " + ", ".join(f"{safe(k)} {v}" for k, v in failures.items()))
    for host, h in (r.get("hosts") or {}).items():
        print(f"host {safe(host)}: " + ", ".join(f"{k} {round(v, 2) if isinstance(v, float) else v}"
                                                 for k, v in h.items()))
    if r.get("cluster"):
        print_cluster(r["cluster"])


def print_cluster(c: dict) -> None:
    """``ctl status`` in a cluster: the nodes, the host leases, each web source's cluster pass
    (totals and each node's share), the shared frontier per host (who fetched it, who holds it)."""
    if c.get("error"):
        print(f"cluster (this node {safe(c['node'])}): CANNOT READ THE SHARED STORE: {safe(c['error'])}")
        return
    print(f"cluster: this node is {safe(c['node'])}; {sum(n['alive'] for n in c['nodes'])} of "
          f"{len(c['nodes'])} nodes alive")
    for n in c["nodes"]:
        state = "alive" if n["alive"] else "stopped" if n.get("stopped") else "DEAD"
        doing = safe(n["working_on"]) or "idle" if n["alive"] else "-"
        print(f"  node {safe(n['name'])} ({safe(n['host'])}, pid {n['pid']}): {state}, last heartbeat "
              f"{n['seconds_since_heartbeat']:.0f} s ago, {doing}")
    for h in c["hosts"]:
        held = f"request in flight from {safe(h['node'])}" if h["node"] else "free"
        print(f"  host {safe(h['host'])}: {held}, next request in {h['next_in']:.1f} s, "
              f"{h['requests']} requests, failures {h['failures']}")
    for source, p in sorted((c.get("passes") or {}).items()):
        shares = ", ".join(f"{safe(n)} {v['fetched']}" + (f" ({v['errors']} unanswered)" if v["errors"] else "")
                           for n, v in sorted(p["nodes"].items()))
        print(f"  pass {p['pass_id'] if p['pass_id'] is not None else '-'} of {safe(source)} (the cluster's): "
              f"fetched {p['fetched']}, unanswered {p['errors']}, done {p['done']}, queued {p['queued']}"
              + (f"; by node: {shares}" if shares else ""))
    for f in c["frontier"]:
        fetchers = f.get("fetched_by") or {}
        by = (", crawled by " + ", ".join(f"{safe(n)} ({k})" for n, k in sorted(fetchers.items(), key=lambda x: (-x[1], x[0])))
              if fetchers else "")
        held = f", claimed by {safe(f['node'])}" if f.get("node") else ""
        print(f"  frontier {safe(f['source'])} {safe(f['host'] or '-')}: queued {f['queued']}, done {f['done']}"
              f"{by}{held}")
