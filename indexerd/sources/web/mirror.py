"""A crawled site kept as plain files on disk, at paths made from URLs, safely.

The layout follows ``wget --mirror``: ``root/<host>[_<port>]/<path segments>``, with the
percent-decoded path segments as names, so the mirror is easy to browse and to index as a
file tree.  URLs come from the network, so every name is escaped to stay inside ``root`` and the
mapping is injective: two different canonical URLs of one scheme and host never share a file,
and a page never has to be deleted to make room for another (see :meth:`Mirror.path_for` for the
rules, and the file-versus-directory rule in particular).

Writes are atomic (a temporary file in the same directory, then ``os.replace``) and walk the
directories with ``O_NOFOLLOW`` directory descriptors, so a symlink planted inside the mirror
cannot redirect a write, a removal or a lookup outside ``root``.  POSIX only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

from indexerd.sources.files.confined import open_dir
from indexerd.sources.web.urls import DEFAULT_PORTS, canonicalize

UTC = timezone.utc
log = logging.getLogger(__name__)

#: The file that stands for a URL whose path ends in '/'.
INDEX_NAME = "index.html"
#: Longest name (in UTF-8 bytes) written for one segment; longer ones are cut and hashed.
MAX_NAME_BYTES = 200
#: Appended to a name to keep files and directories apart (never produced by escaping).
CLASH_MARK = "%"
#: Separates a long name's kept prefix from its hash (never produced by escaping).
LONG_MARK = "%~"
#: The name of an empty path segment ('//' in a URL path).
EMPTY_NAME = "%"

_KEEP_ENCODED = re.compile(r"%3B", re.IGNORECASE)


def _escape_char(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode("utf-8"))


def _must_escape(c: str) -> bool:
    o = ord(c)
    return c in "%/\\@" or o < 0x20 or 0x7F <= o <= 0x9F


def _escape_text(text: str) -> str:
    """Percent-encode '%', '/', '\\', '@', C0/C1 controls and DEL; lone surrogates from
    undecodable bytes (surrogateescape) come back as the original ``%XX``."""
    out = []
    for c in text:
        o = ord(c)
        if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte kept by surrogateescape
            out.append(f"%{o - 0xDC00:02X}")
        elif _must_escape(c):
            out.append(_escape_char(c))
        else:
            out.append(c)
    return "".join(out)


def _escape_segment(raw: str) -> str:
    """One percent-encoded URL path segment -> a safe name (before the file/directory rule)."""
    if raw == "":
        return EMPTY_NAME
    # '%3B' and ';' are different canonical URLs (w3lib keeps the escape): keep '%3B' as is
    # (the escaping below turns every decoded '%' into '%25', so it cannot be confused).
    name = "%3B".join(_escape_text(unquote_to_bytes(piece).decode("utf-8", "surrogateescape"))
                      for piece in _KEEP_ENCODED.split(raw))
    if name in (".", ".."):
        return "%2E" * len(name)
    if name == INDEX_NAME:  # reserved for URLs ending in '/'
        return "%69" + name[1:]
    return name


def _shorten(name: str, kind: str) -> str:
    """Cut a name longer than MAX_NAME_BYTES, keeping a prefix, a hash of the whole name and,
    for a file, a short extension."""
    data = name.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256((kind + "\0").encode() + data).hexdigest()[:20]
    ext = ""
    if kind == "f":
        dot = name.rfind(".")
        if dot > 0 and 1 < len(name) - dot <= 10 and name[dot + 1:].isalnum() and name[dot + 1:].isascii():
            ext = name[dot:]
    room = MAX_NAME_BYTES - len(LONG_MARK) - len(digest) - len(ext)
    prefix = data[:room].decode("utf-8", "ignore")  # drops a cut multi-byte character
    if prefix.endswith("%"):
        prefix = prefix[:-1]
    elif len(prefix) >= 2 and prefix[-2] == "%":
        prefix = prefix[:-2]
    return f"{prefix}{LONG_MARK}{digest}{ext}"


def _dir_name(seg: str) -> str:
    name = _escape_segment(seg)
    if "." in name:
        name += CLASH_MARK
    return _shorten(name, "d")


def _file_name(seg: str, query: str, *, html: bool = False) -> str:
    name = INDEX_NAME if seg == "" else _escape_segment(seg)
    if query:
        # A canonical query is quote_plus-encoded by w3lib (only [A-Za-z0-9_.~+=&-] and %XX),
        # so it is kept verbatim; anything unsafe is still encoded, as a guard.
        name = f"{name}@" + "".join(_escape_char(c) if _must_escape(c) and c not in "%@" else c
                                    for c in query)
    elif "." not in name:
        name += CLASH_MARK
    if html and not name.lower().endswith((".html", ".htm")):
        # "%.html": no URL's plain name ends so (a "%" of a URL is written "%25", a query's is
        # followed by two hex digits), so an adjusted name never takes another URL's file
        name = (name if name.endswith(CLASH_MARK) else name + CLASH_MARK) + ".html"
    return _shorten(name, "f")


def _host_dir(scheme: str, host: str, port: int | None) -> str:
    name = _escape_text(host).replace("_", "%5F")
    if name in (".", ".."):
        name = "%2E" * len(name)
    if port is not None and port != DEFAULT_PORTS[scheme]:
        name = f"{name}_{port}"
    return _shorten(name, "h")


class Mirror:
    """Files under ``root`` at paths made from URLs (``wget --mirror`` layout).

    ``Mirror(root)``; ``root`` need not exist yet (it is created on the first write).  ``root``
    itself may be a symlink; nothing below it may be.  Methods raise ValueError for a URL that
    :func:`indexerd.sources.web.urls.canonicalize` refuses.
    """

    def __init__(self, root: str | Path, *, adjust_extension: bool = False) -> None:
        self.root = Path(os.path.abspath(root))
        #: an HTML page is kept as ``<file>.html`` when its file name does not end in ``.html``
        #: or ``.htm`` (wget's ``--adjust-extension``): a browser opening the mirror from disk
        #: then shows it as a page, not as text
        self.adjust_extension = adjust_extension

    # -- layout ---------------------------------------------------------------------------
    def _parts(self, url: str, *, html: bool = False) -> list[str]:
        canon = canonicalize(url)
        p = urlsplit(canon)
        segs = p.path.split("/")[1:]  # canonical paths start with '/'
        names = [_host_dir(p.scheme, p.hostname or "", p.port)]
        names += [_dir_name(s) for s in segs[:-1]]
        names.append(_file_name(segs[-1], p.query, html=html and self.adjust_extension))
        return names

    def _variants(self, url: str) -> list[list[str]]:
        """The names ``url``'s file may have: with :attr:`adjust_extension`, the HTML page's
        ``.html`` name first, then the plain one (a file kept before, or not HTML)."""
        plain = self._parts(url)
        if not self.adjust_extension:
            return [plain]
        html = self._parts(url, html=True)
        return [html, plain] if html != plain else [plain]

    def path_for(self, url: str) -> Path:
        """The file for ``url``: deterministic, pure (no disk access), always inside ``root``.

        The URL is canonicalised first (:func:`indexerd.sources.web.urls.canonicalize`).  Layout:
        ``root/<host>[_<port>]/<dir>/.../<file>``:

        - host dir: the IDNA host, plus ``_<port>`` for a non-default port (a ``_`` in the
          host itself is written ``%5F``).  The scheme and any user info are not part of the
          layout (as with wget): ``http://h/a`` and ``https://h/a`` share one file.
        - each path segment is percent-decoded to UTF-8; then ``%``, ``/``, ``\\``, ``@``,
          NUL and other control characters are percent-encoded back (``%2F``, ``%00``...),
          undecodable bytes stay as ``%XX``, an encoded ``;`` stays ``%3B`` (w3lib keeps
          ``%3B`` and ``;`` apart, so must the mirror), ``.``/``..`` become ``%2E``/``%2E%2E``, an empty
          segment (``//``) becomes ``%``, and a literal ``index.html`` becomes ``%69ndex.html``.
        - a path ending in ``/`` maps to ``index.html`` in that directory.
        - a query is appended to the file name as ``@<query>``: the canonical query verbatim
          (w3lib encodes it with ``quote_plus``, so a ``/`` in it is already ``%2F``), e.g.
          ``/cal?m=2020-01`` -> ``cal@m=2020-01``.
        - files and directories never clash: a directory name never contains a ``.`` unless it
          ends in ``%``, and a file name (without a query) always contains a ``.`` or ends in
          ``%``.  So ``/a`` is the file ``a%`` and ``/a/b`` is ``a/b%``: both kept, whatever
          the order they come in; ``/v1.2/x.html`` is ``v1.2%/x.html``; ``/doc.html`` stays
          ``doc.html``.
        - a name longer than 200 bytes is cut and given ``%~`` and a 20-hex-digit SHA-256
          suffix (a file keeps a short extension), so distinct URLs stay distinct.

        Raises:
            ValueError: the URL cannot be canonicalised (not http(s), no host, bad port).
        """
        path = self.root.joinpath(*self._parts(url))
        if os.path.commonpath([str(self.root), str(path)]) != str(self.root):  # cannot happen
            raise ValueError(f"{url!r}: maps outside the mirror root")
        return path

    def file_for(self, url: str) -> Path | None:
        """The path of the regular file the mirror holds for ``url`` (with
        :attr:`adjust_extension`, an HTML page's ``.html`` name or the plain one), or None."""
        for names in self._variants(url):
            try:
                with self._open_dirs(names[:-1], create=False) as dfd:
                    st = self._lstat(dfd, names[-1])
            except (ValueError, OSError):
                return None
            if st is not None and stat.S_ISREG(st.st_mode):
                return self.root.joinpath(*names)
        return None

    # -- safe directory walk --------------------------------------------------------------
    def _open_dirs(self, names: list[str], *, create: bool):
        """:func:`indexerd.sources.files.confined.open_dir` below ``root`` (a symlink or a file on the way
        raises ValueError)."""
        return open_dir(self.root, names, create=create)

    def _check_inside(self, fd: int, url: str) -> None:
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else None
        if real is not None and os.path.commonpath([real_root, real]) != real_root:
            raise ValueError(f"{url!r}: resolved path {real} is outside the mirror root {real_root}")

    # -- operations -----------------------------------------------------------------------
    def write(self, url: str, data: bytes, mtime: datetime | None = None, *, html: bool = False) -> Path:
        """Store ``data`` as the file for ``url``, atomically; return its path.  ``html``: the
        data is an HTML page (with :attr:`adjust_extension` its file name ends in ``.html``,
        and a file kept for ``url`` under its other name is removed).

        The bytes go to a temporary file in the same directory (named ``.%tmp-<hex>``, a name
        the layout never uses), which then replaces the target with ``os.replace`` (no fsync).
        When ``mtime`` is given (timezone-aware; converted to UTC), the file's access and
        modification times are set to it, to the microsecond.

        Raises:
            ValueError: ``mtime`` is naive; the URL cannot be canonicalised; or a directory on
                the way is a symlink (or a file), or resolves outside ``root``.
            OSError: the disk write failed (nothing is left behind but a stray temporary file
                at worst).
        """
        if mtime is not None:
            if mtime.tzinfo is None or mtime.utcoffset() is None:
                raise ValueError(f"mtime must be timezone-aware (UTC), got naive {mtime!r}")
            delta = mtime.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
            ns = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
        names = self._parts(url, html=html)
        with self._open_dirs(names[:-1], create=True) as dfd:
            self._check_inside(dfd, url)
            for other in self._variants(url):
                if other[-1] != names[-1] and (st := self._lstat(dfd, other[-1])) is not None \
                        and stat.S_ISREG(st.st_mode):
                    os.unlink(other[-1], dir_fd=dfd)  # the page kept under its other name
            tmp = f".%tmp-{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dfd)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    if mtime is not None:
                        os.utime(fd, ns=(ns, ns))
                finally:
                    os.close(fd)
                os.replace(tmp, names[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
        return self.root.joinpath(*names)

    @staticmethod
    def _lstat(dfd: int | None, name: str) -> os.stat_result | None:
        """The entry ``name`` in the open directory ``dfd`` (links not followed), or None."""
        if dfd is None:
            return None
        try:
            return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, url: str) -> bool:
        """True when the file for ``url`` exists as a regular file (a symlink does not count);
        False too when it cannot be looked at (``root`` not a directory, not readable: OSError)."""
        return self.file_for(url) is not None

    def read(self, url: str) -> tuple[bytes, datetime] | None:
        """The bytes and modification time (aware UTC) of the file for ``url``, or None when
        there is no regular file (a symlink is not followed) or it cannot be read."""
        found = self.file_for(url)
        if found is None:
            return None
        names = list(found.relative_to(self.root).parts)
        try:
            with self._open_dirs(names[:-1], create=False) as dfd:
                if dfd is None:
                    return None
                fd = os.open(names[-1], os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=dfd)
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    if not stat.S_ISREG(st.st_mode):
                        return None
                    data = f.read()
                return data, datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
        except (ValueError, OSError):
            return None

    def remove(self, url: str) -> bool:
        """Delete the file for ``url``; True if there was one (a regular file or a symlink).

        Then removes the directories that became empty, deepest first, up to but not including
        the host directory.  Raises ValueError as :meth:`path_for`, and for a symlinked
        directory on the way.
        """
        variants = self._variants(url)
        names = variants[-1]
        removed = False
        with self._open_dirs(names[:-1], create=False) as dfd:
            for names in variants:
                st = self._lstat(dfd, names[-1])
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    os.unlink(names[-1], dir_fd=dfd)
                    removed = True
        if not removed:
            return False
        for i in range(len(names) - 1, 1, -1):  # names[1:i] are the dirs below the host dir
            with self._open_dirs(names[:i - 1], create=False) as pfd:
                if pfd is None:
                    break
                try:
                    os.rmdir(names[i - 1], dir_fd=pfd)
                except OSError:  # not empty (or gone): stop pruning
                    break
        return True


class PassMirror:
    """One crawl pass's writes to a source's :class:`Mirror` (or nothing, when it has none).

    A write or removal that fails is counted (``error.mirror``, in ``ctl status``); the first of
    the pass is logged as a warning naming ``mirror_dir`` and the error, the others at debug
    level (an unwritable mirror_dir fails every page: one line, not one per page), and
    :meth:`report` logs how many failed when the pass ends.  Never raises.

    Args:
        mirror: the source's mirror, or None.
        source: the source's name, for the log.
        counters: the pass's named counters (``inc(name)``).
        on_remove: ``on_remove(url)`` after ``url``'s file was removed (or was not there): the
            page requisites it referenced are no longer needed by it.
    """

    def __init__(self, mirror: Mirror | None, source: str, counters,
                 on_remove: Callable[[str], None] | None = None) -> None:
        self.mirror = mirror
        self.source = source
        self.counters = counters
        self.on_remove = on_remove
        self.failures = 0

    def has(self, url: str) -> bool:
        """Whether the mirror holds ``url``'s file (True without a mirror: nothing is missing)."""
        return self.mirror is None or self.mirror.exists(url)

    def write(self, url: str, data: bytes, mtime: datetime | None, *, html: bool = False) -> None:
        if self.mirror is None:
            return
        try:
            self.mirror.write(url, data, mtime, html=html)
        except (OSError, ValueError) as e:
            self._failed("writing", url, e)

    def remove(self, url: str) -> None:
        if self.mirror is None:
            return
        try:
            self.mirror.remove(url)
        except (OSError, ValueError) as e:
            self._failed("removing", url, e)
            return
        if self.on_remove is not None:
            self.on_remove(url)

    def _failed(self, what: str, url: str, e: Exception) -> None:
        self.counters.inc("error.mirror")
        self.failures += 1
        if self.failures == 1:
            log.warning("%s: mirror_dir %s: %s %s failed: %s; further mirror failures of this pass are "
                        "only counted (error.mirror)", self.source, self._root(), what, url, e)
        else:
            log.debug("%s: mirror %s of %s failed: %s", self.source, what, url, e)

    def report(self) -> None:
        """At the end of a pass: one warning with the number of failures, if more than one."""
        if self.failures > 1:
            log.warning("%s: %d mirror writes/removals under mirror_dir %s failed in this pass",
                        self.source, self.failures, self._root())

    def _root(self) -> str:
        return str(self.mirror.root) if self.mirror is not None else "(none)"
