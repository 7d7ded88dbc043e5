"""More formats (issue 15): a mixed corpus indexed by indexerd and by Recoll in the same run.

The corpus (``$BENCH_DATA/formats-mixed``, built once and reused while its recipe holds):

- ``docs-fs/``: the docs-fs tree of bench/build_corpus.sh (hard links);
- ``usr-share-doc/``: ``cp -a /usr/share/doc`` as Debian ships it (``changelog.Debian.gz`` and
  the other ``.gz`` files, HTML, text, images, symlinks);
- ``generated/``: Office Open XML, OpenDocument, EPUB, RTF, ``.eml``, mbox and ``.bz2``/``.xz``/
  ``.zst``/``.gz`` files written by the format libraries (bench/gen_formats.py, seeded).

Per repetition (the order flips each time), each indexes the whole corpus from empty:
``indexerd index --json ROOT`` (default settings, Whoosh) and ``recollindex`` (the peer
harness's recoll.conf: noaspell, textunknownasplain; Debian's filters, with the helpers this
script installs: python3-recoll, python3-lxml, unrtf, xsltproc, zstd).  Measured: wall time and
the peak memory of the whole process tree (bench/benchlib.py ``measure``: the root's RSS plus
each descendant's private memory, so indexerd's extraction workers and Recoll's filters count).

Then what each indexed, from indexerd's state store and from Recoll's index (``mime:*`` through
python3-recoll): per file type, the files indexed with text by both, by only one, and the files
Recoll holds by name only (no filter, or its filter failed: ``indexallfilenames``); per mbox,
the messages each made documents of.  Every difference is listed with indexerd's own reason for
the file (its skip reason) or Recoll's (name only / absent), and examples.

    flock /tmp/indexerd-bench.lock .venv/bin/python bench/bench_formats.py [--reps 2]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import HERE, Indexerd, Recoll, measure  # noqa: E402

PACKAGES = ["python3-doc", "recollcmd", "python3-recoll", "python3-lxml", "unrtf", "xsltproc", "zstd"]
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
RECIPE = "docs-fs + cp -a /usr/share/doc + gen_formats --per-type {n} (v1)"

_RECOLL_LIST = r"""
import json, sys
from recoll import recoll
db = recoll.connect(confdir=sys.argv[1])
q = db.query()
q.execute("mime:*")
out = []
while True:
    docs = q.fetchmany(5000)
    if not docs:
        break
    out += [[d.url, d.ipath, d.mtype, int(d.dbytes or 0)] for d in docs]
json.dump(out, sys.stdout)
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ensure_packages() -> None:
    missing = [p for p in PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode]
    if missing:
        log(f"installing Debian packages: {' '.join(missing)} (apt-get install -y)")
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def build_corpus(data: Path, per_type: int) -> Path:
    """The mixed tree (see the module docstring); rebuilt only when its recipe changed."""
    root = data / "formats-mixed"
    marker = data / "formats-mixed.done"
    recipe = RECIPE.format(n=per_type)
    if root.is_dir() and marker.exists() and marker.read_text() == recipe:
        return root
    docs = data / "docs-fs"
    if not docs.is_dir():
        log("building docs-fs (bench/build_corpus.sh)")
        subprocess.run(["bash", str(HERE / "build_corpus.sh")], check=True,
                       env=dict(os.environ, BENCH_DATA=str(data)))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(docs), str(root / "docs-fs")], check=True)
    subprocess.run(["cp", "-a", "/usr/share/doc", str(root / "usr-share-doc")], check=True)
    sys.path.insert(0, str(HERE))
    from gen_formats import generate

    generate(str(root / "generated"), per_type)
    marker.write_text(recipe)
    return root


class DebianRecoll(Recoll):
    """Recoll with Debian's ``python3`` first on ``PATH``: its Python filters (OOXML, EPUB ...)
    run ``python3`` from ``PATH`` and need Debian's lxml; a pyenv or venv interpreter ahead of
    it makes them fail (``HELPERNOTFOUND python3:lxml``) and the files indexed by name only."""

    ENV_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

    def index(self) -> dict:
        m = measure(["recollindex", "-c", self.conf], cwd=self.conf,
                    env=dict(os.environ, PATH=self.ENV_PATH))
        if m["rc"] != 0:
            raise RuntimeError(f"recollindex failed: {m['stderr'][-2000:]}")
        m.update(indexed=int(self.idxstatus().get("dbtotdocs", 0) or 0))
        return m


# ---------------------------------------------------------------- what each indexed

def label(path: str) -> str:
    """The type of a file for the tables: its extension (``.docx``, ``.html``), a compressed
    file as ``.gz`` etc., ``mailbox`` for an mbox, ``(none)`` without one."""
    name = path.rpartition("/")[2].lower()
    for suffix in COMPRESSED:
        if name.endswith(suffix):
            return suffix
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else "(none)"


def indexerd_docs(state: str) -> tuple[dict[str, dict], Counter]:
    """``{path: {"indexed": n documents, "reason": reason of the file's own row, "media":
    media type}}`` and the media types of the indexed documents."""
    from urllib.parse import unquote

    files: dict[str, dict] = defaultdict(lambda: {"indexed": 0, "reason": None, "media": None})
    media = Counter()
    with sqlite3.connect(f"file:{state}/state.sqlite3?mode=ro", uri=True) as con:
        for key, status, reason, mtype in con.execute(
                "SELECT key, status, reason, media_type FROM documents"):
            base, _, frag = key.partition("#")
            path = unquote(base[len("file://"):])
            row = files[path]
            if status == "indexed":
                row["indexed"] += 1
                row["media"] = mtype
                media[mtype] += 1
            elif not frag:
                row["reason"] = reason
    return dict(files), media


def recoll_docs(conf: str) -> dict[str, dict]:
    """``{path: {"docs": documents with text, "subdocs": of which sub-documents (mbox messages,
    EPUB chapters), "name_only": documents without text, "mtype": of the top document}}``;
    directories are left out."""
    p = subprocess.run(["/usr/bin/python3", "-c", _RECOLL_LIST, conf], capture_output=True, text=True,
                       check=True)
    files: dict[str, dict] = defaultdict(lambda: {"docs": 0, "subdocs": 0, "name_only": 0, "mtype": None})
    for url, ipath, mtype, dbytes in json.loads(p.stdout):
        if mtype == "inode/directory":
            continue
        row = files[url[len("file://"):]]
        if not ipath:
            row["mtype"] = mtype
        if dbytes > 0:
            row["docs"] += 1
            row["subdocs"] += bool(ipath)
        elif not ipath:
            row["name_only"] += 1
    return dict(files)


def compare(ix: dict[str, dict], rc: dict[str, dict], root: str) -> dict:
    """Per type: files with text in both, only in indexerd, only in Recoll (with text), Recoll by
    name only; documents each made; and the differences with reasons and examples."""
    by_type: dict[str, Counter] = defaultdict(Counter)
    why: dict[tuple[str, str], Counter] = defaultdict(Counter)
    examples: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    mbox: list[tuple[str, int, int]] = []
    for path in sorted(set(ix) | set(rc)):
        if not path.startswith(root):
            continue
        t = label(path)
        i, r = ix.get(path), rc.get(path)
        i_text = bool(i and i["indexed"])
        r_text = bool(r and r["docs"])
        c = by_type[t]
        c["indexerd docs"] += i["indexed"] if i else 0
        c["Recoll docs"] += r["docs"] if r else 0
        if i_text and r_text:
            c["both"] += 1
            if i["reason"] == "container" or r["subdocs"]:
                if i["reason"] == "container" or (r["mtype"] or "").startswith("text/x-mail"):
                    mbox.append((os.path.relpath(path, root), i["indexed"], r["docs"]))
            continue
        if r_text:
            side, reason = "Recoll only", f"indexerd: {(i or {}).get('reason') or 'no row'}"
        elif i_text:
            side = "indexerd only"
            reason = ("Recoll: name only (" + (r["mtype"] or "?") + ")") if r else "Recoll: absent"
        elif r and r["name_only"]:
            side, reason = "Recoll name only", f"indexerd: {(i or {}).get('reason') or 'no row'}"
        else:
            side, reason = "neither", f"indexerd: {(i or {}).get('reason') or 'no row'}"
        c[side] += 1
        why[(t, side)][reason] += 1
        if len(examples[(t, side, reason)]) < 3:
            examples[(t, side, reason)].append(os.path.relpath(path, root))
    return {"by_type": {t: dict(c) for t, c in by_type.items()},
            "why": {f"{t}|{s}": dict(c) for (t, s), c in why.items()},
            "examples": {"|".join(k): v for k, v in examples.items()},
            "mbox": mbox}


# ---------------------------------------------------------------- report

def render(res: dict) -> str:
    out = []
    rows = res["runs"]
    wall = statistics.median(r["indexerd"]["wall"] / r["recoll"]["wall"] for r in rows)
    mem = statistics.median(r["indexerd"]["peak_mb"] / r["recoll"]["peak_mb"] for r in rows)
    out.append(f"Corpus {res['root']}: {res['files']} files, {res['mb']:.0f} MB; {len(rows)} repetition(s), "
               "order alternating.\n")
    out.append("| metric | indexerd | Recoll | ratio | target | met? |")
    out.append("|---|---:|---:|---:|---|---|")
    for n, r in enumerate(rows, 1):
        a, b = r["indexerd"], r["recoll"]
        out.append(f"| rep {n} ({r['first']} first): wall | {a['wall']:.1f} s | {b['wall']:.1f} s | "
                   f"{a['wall'] / b['wall']:.2f}x | | |")
        out.append(f"| rep {n}: peak memory, process tree | {a['peak_mb']:.0f} MB | {b['peak_mb']:.0f} MB | "
                   f"{a['peak_mb'] / b['peak_mb']:.2f}x | | |")
    out.append(f"| wall time (median ratio) | | | {wall:.2f}x | <= 1.0x | {'yes' if wall <= 1.0 else '**NO**'} |")
    out.append(f"| peak memory (median ratio) | | | {mem:.2f}x | <= 0.5x | {'yes' if mem <= 0.5 else '**NO**'} |")
    last = rows[-1]
    out.append(f"| documents indexed (indexerd rows indexed; Recoll dbtotdocs) | {last['indexerd']['indexed']} | "
               f"{last['recoll']['indexed']} | | | |")
    cmp_ = res["compare"]
    cols = ["both", "indexerd only", "Recoll only", "Recoll name only", "neither", "indexerd docs", "Recoll docs"]
    out.append("\nFiles by type (\"both\": indexed with text by each; \"Recoll name only\": Recoll holds the "
               "file name, no text; docs: documents made, mbox messages and EPUB chapters counted one by one):\n")
    out.append("| type | " + " | ".join(cols) + " |")
    out.append("|---|" + "---:|" * len(cols))
    types = sorted(cmp_["by_type"], key=lambda t: -sum(cmp_["by_type"][t].get(c, 0) for c in cols[:5]))
    shown = [t for t in types if any(cmp_["by_type"][t].get(c) for c in cols[1:5])] + types[:12]
    rest = Counter()
    for t in types:
        c = cmp_["by_type"][t]
        if t in shown:
            continue
        rest.update(c)
    for t in dict.fromkeys(shown):
        c = cmp_["by_type"][t]
        out.append(f"| {t} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
    if rest:
        out.append("| other types | " + " | ".join(str(rest.get(k, 0)) for k in cols) + " |")
    tot = Counter()
    for c in cmp_["by_type"].values():
        tot.update(c)
    out.append("| **all** | " + " | ".join(f"**{tot.get(k, 0)}**" for k in cols) + " |")
    out.append("\nDifferences, with the other side's reason and examples:\n")
    for key, reasons in sorted(cmp_["why"].items()):
        t, side = key.split("|")
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            ex = ", ".join(f"`{e}`" for e in cmp_["examples"].get(f"{t}|{side}|{reason}", []))
            out.append(f"- {t}, {side}: {n} ({reason}); e.g. {ex}")
    if cmp_["mbox"]:
        same = sum(1 for _, a, b in cmp_["mbox"] if a == b)
        out.append(f"\nMailboxes: {len(cmp_['mbox'])}, messages made documents of: indexerd "
                   f"{sum(a for _, a, _b in cmp_['mbox'])}, Recoll {sum(b for *_, b in cmp_['mbox'])}; "
                   f"the same number in {same} of them.")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", "/tmp/bench-data"))
    ap.add_argument("--work", default="/tmp/bench-formats-work")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--per-type", type=int, default=30)
    ap.add_argument("--first", choices=("indexerd", "recoll"), default="indexerd",
                    help="who indexes first in the first repetition (then they alternate)")
    args = ap.parse_args(argv)
    ensure_packages()
    root = build_corpus(Path(args.data), args.per_type)
    nfiles = sum(len(f) for _, _, f in os.walk(root))
    mb = sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(root) for f in fs) / 1e6
    log(f"corpus {root}: {nfiles} files, {mb:.0f} MB")
    ix, rc = Indexerd(str(root), args.work), DebianRecoll(str(root), args.work)
    runs = []
    for rep in range(args.reps):
        order = [ix, rc] if (rep % 2 == 0) == (args.first == "indexerd") else [rc, ix]
        run = {"first": order[0].name}
        for engine in order:
            engine.fresh()
            m = engine.index()
            run["indexerd" if engine is ix else "recoll"] = {
                "wall": m["wall"], "peak_mb": m["peak_rss_mb"], "maxrss_one_mb": m["maxrss_one_mb"],
                "cpu": m["cpu"], "indexed": m["indexed"],
                **({"skipped": m["skipped"], "seen": m["seen"], "errors": m["errors"]} if engine is ix else
                   {"fileerrors": engine.idxstatus().get("fileerrors")})}
            log(f"rep {rep + 1}: {engine.name}: {m['wall']:.1f} s, peak {m['peak_rss_mb']:.0f} MB, "
                f"{m['indexed']} documents")
            (HERE / "out").mkdir(exist_ok=True)
            (HERE / "out" / "bench_formats-partial.json").write_text(json.dumps(runs + [run], indent=1))
        runs.append(run)
    ixd, media = indexerd_docs(ix.state)
    res = {"root": str(root), "files": nfiles, "mb": mb, "runs": runs, "indexerd_media": dict(media),
           "compare": compare(ixd, recoll_docs(rc.conf), str(root) + "/"),
           "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "recoll": subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "recollcmd"],
                                    capture_output=True, text=True).stdout}
    text = render(res)
    print(text)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"bench_formats-{stamp}.json").write_text(json.dumps(res, indent=1))
    (out / f"bench_formats-{stamp}.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
