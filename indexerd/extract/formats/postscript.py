"""PostScript (``.ps``, ``.eps``; ``.ps.gz`` through :mod:`.compressed`) -> the text its pages
show, through Ghostscript, as Recoll's ``rclps`` does with ``ps2ascii``.

Outside contract relied on: **Ghostscript** (Debian package ``ghostscript``, ``gs`` on PATH;
tested with 10.00).  ``ps2ascii`` is a shell script around ``gs -q -dSAFER -sDEVICE=txtwrite``;
``gs`` is called directly, the document from a file:

- ``-sDEVICE=txtwrite -sOutputFile=-``: the text of each page on stdout, UTF-8, one line per
  text line, placed with spaces (https://ghostscript.readthedocs.io/en/latest/Devices.html,
  "Text output");
- ``-dSAFER``: the job may read files, but write only the output file and files in the
  temporary directory ``TMPDIR`` names (https://ghostscript.readthedocs.io/en/latest/Use.html,
  "-dSAFER"); ``TMPDIR`` is set to a fresh directory of our own, removed afterwards, and the
  working directory is that directory, so a document writes nothing anywhere else;
  ``GS_OPTIONS`` (options gs reads from the environment) is removed;
- ``-sstdout=%stderr``: what the program itself prints (``print``, ``==``) goes to stderr,
  never into the text; ``-dBATCH -dNOPAUSE -q``: no prompt, no banner;
- ``-c showpage`` after the document: an EPS (which need not call ``showpage``) has its text
  output too; after a document that ended its page it shows an empty page, which adds nothing.

Bounds: gs runs at most ``timeout_seconds`` of wall time (then it is killed: ``timeout``), its
text at most ``max_bytes`` (``too-large``), its error output is cut to 4 KiB, and its CPU time
is limited (``RLIMIT_CPU``) so that a looping gs ends even when the worker that started it was
killed first.  It inherits the worker's address-space limit (:mod:`indexerd.extract.worker`).

Title: the DSC comment ``%%Title:`` (Adobe's Document Structuring Conventions 3.0), else
the caller's first line of text.  Date: ``%%CreationDate:`` when it reads as a date (the
``D:YYYYMMDDHHmmSS`` form some writers copy from PDF is turned into ISO 8601); otherwise none.
"""

from __future__ import annotations

import math
import os
import re
import resource
import select
import shutil
import subprocess
import tempfile
import time

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_POSTSCRIPT, DocumentText
from indexerd.extract.formats.xmlstream import one_line

#: gs's wall-time bound when the caller gives none (the worker passes its own, see
#: :func:`ghostscript_seconds`).
DEFAULT_TIMEOUT_SECONDS = 30.0
#: Of the worker's time bound, the share gs may use: the rest is for the reply, so a slow
#: document costs gs, not the worker.
GS_SHARE = 0.8
#: Bytes of gs's error output kept for a skip's detail.
STDERR_KEEP_BYTES = 4096
#: Leading bytes read for the DSC header comments.
HEADER_BYTES = 65536
GS_PROGRAM = "gs"

_DSC = re.compile(rb"^%%(Title|CreationDate):[ \t]*([^\r\n]{0,500})", re.M)
_PDF_DATE = re.compile(r"D:(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(Z|[+-]\d\d'?\d\d'?)?$")


def extract_postscript(data: bytes, media_type: str, label: str, max_bytes: int, *,
                       timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> DocumentText:
    """Extract one PostScript document (see the module docstring).

    Args:
        timeout_seconds: wall time gs may run (> 0).

    Raises:
        SkipDocument: ``unsupported-type`` when Ghostscript is not installed (the raw program
            is never indexed instead); ``timeout`` when gs ran longer than ``timeout_seconds``;
            ``too-large`` for a document or a text over ``max_bytes``; ``parse-error`` when gs
            fails and shows no text.
    """
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    text = ghostscript_text(data, label, max_bytes, timeout_seconds)
    lines = (" ".join(line.split()) for line in text.splitlines())
    title, date = dsc_fields(data[:HEADER_BYTES])
    return DocumentText(title, "\n".join(line for line in lines if line), MEDIA_POSTSCRIPT,
                        "CreationDate" if date else None, date)


def ghostscript_seconds(worker_seconds: float | None) -> float:
    """gs's wall-time bound inside a worker whose document may take ``worker_seconds``
    (``None``: no bound known, :data:`DEFAULT_TIMEOUT_SECONDS`)."""
    return DEFAULT_TIMEOUT_SECONDS if worker_seconds is None else worker_seconds * GS_SHARE


def ghostscript_text(data: bytes, label: str, max_bytes: int, timeout_seconds: float) -> str:
    """The text Ghostscript's txtwrite device gives for ``data`` (a PostScript program).

    Raises:
        SkipDocument: as :func:`extract_postscript`.
    """
    program = shutil.which(GS_PROGRAM)
    if program is None:
        raise SkipDocument("unsupported-type", f"{label}: PostScript is read with Ghostscript, "
                           f"and {GS_PROGRAM} is not on PATH; install the ghostscript package")
    with tempfile.TemporaryDirectory(prefix="indexerd-gs-") as scratch:
        source = os.path.join(scratch, "document.ps")
        with open(source, "wb") as fh:
            fh.write(data)
        env = {k: v for k, v in os.environ.items() if k != "GS_OPTIONS"}
        env.update(TMPDIR=scratch, TEMP=scratch, TMP=scratch, HOME=scratch)
        argv = [program, "-dSAFER", "-dBATCH", "-dNOPAUSE", "-q", "-sstdout=%stderr",
                "-sDEVICE=txtwrite", "-sOutputFile=-", "-f", source, "-c", "showpage"]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=scratch, env=env, close_fds=True)
        except OSError as exc:  # removed between which() and here, or not executable
            raise SkipDocument("unsupported-type", f"{label}: cannot run {program} "
                               f"({exc.strerror or exc}); install the ghostscript package") from None
        try:
            cpu_seconds = math.ceil(timeout_seconds) + 1
            resource.prlimit(proc.pid, resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        except (OSError, ValueError):  # it already ended
            pass
        try:
            out, err = _collect(proc, label, max_bytes, timeout_seconds)
            try:
                proc.wait(timeout=1.0)  # it closed its output: it is ending
            except subprocess.TimeoutExpired:  # lingering: killed below, its text kept
                pass
        finally:
            if proc.poll() is None:  # over a bound, or lingering after its output closed
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    text = out.decode("utf-8", "replace").replace("\x00", "")
    if proc.returncode != 0 and not text.strip():
        error = next((line for line in err.decode("utf-8", "replace").splitlines()
                      if line.startswith("Error:")), f"exit {proc.returncode}")
        raise SkipDocument("parse-error", f"{label}: Ghostscript: {error}"[:500])
    return text


def _collect(proc: subprocess.Popen, label: str, max_bytes: int,
             timeout_seconds: float) -> tuple[bytes, bytes]:
    """gs's stdout (at most ``max_bytes``) and the end of its stderr, until it exits.

    Raises:
        SkipDocument: ``timeout`` or ``too-large`` (the caller kills gs).
    """
    assert proc.stdout is not None and proc.stderr is not None  # Popen(stdout=PIPE, ...)
    deadline = time.monotonic() + timeout_seconds
    out = bytearray()
    err = bytearray()
    open_fds = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    while open_fds:
        left = deadline - time.monotonic()
        ready = select.select(list(open_fds), [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            raise SkipDocument("timeout", f"{label}: Ghostscript ran more than "
                                          f"{timeout_seconds:g} s")
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                del open_fds[fd]
                continue
            buffer = open_fds[fd]
            buffer += chunk
            if buffer is err:
                del err[:-STDERR_KEEP_BYTES]
            elif len(out) > max_bytes:
                raise SkipDocument("too-large", f"{label}: more than max_size {max_bytes} "
                                                "bytes of text")
    return bytes(out), bytes(err)


def dsc_fields(head: bytes) -> tuple[str, str | None]:
    """``(title, creation date)`` from the DSC header comments in ``head``: ``""`` and ``None``
    when absent; the date only when it reads as one (:func:`indexerd.core.dates.parse_date`).
    Never raises."""
    from indexerd.core.dates import parse_date

    found: dict[bytes, str] = {}
    for match in _DSC.finditer(head):
        found.setdefault(match.group(1), _dsc_text(match.group(2)))
    title = one_line(found.get(b"Title"))
    raw = found.get(b"CreationDate") or ""
    pdf = _PDF_DATE.match(raw)
    if pdf:
        y, mo, d, h, mi, s, zone = pdf.groups()
        zone = "Z" if zone in (None, "Z") else zone.replace("'", "")[:3] + ":" + \
            zone.replace("'", "")[3:5]
        raw = f"{y}-{mo}-{d}T{h}:{mi}:{s}{zone}"
    return title, raw if raw and parse_date(raw) is not None else None


def _dsc_text(value: bytes) -> str:
    """A DSC ``<text>`` value: a PostScript string in parentheses (its escapes of ``(``, ``)``
    and ``\\`` undone) or the rest of the line; UTF-8, else Latin-1."""
    value = value.strip()
    if value.startswith(b"(") and value.endswith(b")"):
        value = re.sub(rb"\\([()\\])", rb"\1", value[1:-1])
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")
