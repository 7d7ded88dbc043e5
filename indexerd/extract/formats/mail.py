"""Mail: one message (``.eml``, RFC 5322 + MIME) -> text, subject as title, ``Date:``; and the
splitting of an mbox (RFC 4155) into its messages.

Messages are parsed with the standard library (:mod:`email` with ``policy.default``, which
decodes RFC 2047 encoded words and charsets, and records malformed headers as defects rather
than raising).  The text is the sender, recipients and subject (so they are searchable) then
each ``text/plain`` part, or a ``text/html`` part through indexerd's HTML extraction when a
message or an alternative has no plain text; attachments that are not text are not read.

An mbox file gives one document per message (:func:`iter_mbox`, used by the file source:
``indexerd.sources.files.mailboxes``): messages are split at ``From_`` lines while the file is
read line by line, so memory holds one message at a time, and a message over the size cap is
counted but not kept.  :func:`extract_mbox` (an mbox reached any other way, e.g. over HTTP) makes
one document of all its messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesHeaderParser, BytesParser
from typing import IO, Iterator
from urllib.parse import quote

from indexerd.core.errors import SkipDocument
from indexerd.extract.decode import codec_for_label, decode_text
from indexerd.extract.formats import MEDIA_EML, MEDIA_MBOX, DocumentText
from indexerd.extract.formats.bounded import parse_errors
from indexerd.extract.formats.xmlstream import one_line

#: The start of an mbox's first line ("From ", RFC 4155 §2); the file was taken for an mbox by it.
_FROM_ = re.compile(rb"From \S*")
#: A later separator line (RFC 4155 §2: "From ", the sender's address, then a timestamp in
#: UNIX asctime format, after a blank line): an address and a time of day and a year after it,
#: so a body line that merely starts with "From " ("From the start, ...") splits nothing.
_SEPARATOR = re.compile(rb"From \S+ +(?=.*\b\d{1,2}:\d{2}(?::\d{2})?\b)(?=.*\b\d{4}\b)")
#: Bytes of a message's header block kept even when its body is over the size cap (for its key).
HEADER_BYTES = 64 * 1024
LINE_BYTES = 64 * 1024
_ADDRESS_HEADERS = ("From", "To", "Cc")


def extract_eml(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one message.

    Raises:
        SkipDocument: ``too-large`` (over ``max_bytes``) or ``parse-error`` (no header at all).
    """
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    with parse_errors(label):
        message = BytesParser(policy=policy.default).parsebytes(data)
        if not any(message.keys()):
            raise SkipDocument("parse-error", f"{label}: no mail header")
        return _message_text(message, media_type)


def _header(message: EmailMessage, name: str) -> str:
    try:
        value = message.get(name)
        return one_line(str(value)) if value is not None else ""
    except (ValueError, IndexError, TypeError, LookupError):  # a header policy.default cannot parse
        raw = message.get_all(name, failobj=[""])[0]
        return one_line(str(raw))


def _message_text(message: EmailMessage, media_type: str) -> DocumentText:
    subject = _header(message, "Subject")
    lines = [f"{name}: {value}" for name in _ADDRESS_HEADERS if (value := _header(message, name))]
    if subject:
        lines.append(f"Subject: {subject}")
    lines.append("")
    lines.extend(_body_texts(message))
    date = None
    raw_dates = message.get_all("Date", failobj=[])
    if raw_dates:
        date = one_line(str(raw_dates[0])) or None
    meta = tuple((name.lower(), value) for name in ("From", "To", "Subject", "Message-ID")
                 if (value := _header(message, name)))
    text = "\n".join(" ".join(line.split()) for line in "\n".join(lines).splitlines())
    return DocumentText(subject, "\n".join(line for line in text.split("\n") if line), media_type,
                        "Date" if date else None, date, meta)


def _body_texts(message: EmailMessage) -> list[str]:
    """The text of the message's readable parts, in order."""
    out: list[str] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        kind = part.get_content_type()
        if part.get_content_disposition() == "attachment" and not kind.startswith("text/"):
            continue
        if kind == "text/plain":
            out.append(_decoded(part))
        elif kind == "text/html" and not _has_plain_sibling(message, part):
            from indexerd.extract import extract

            try:
                out.append(extract(_decoded(part).encode("utf-8"), "text/html; charset=utf-8").text)
            except SkipDocument:
                continue
    return out


def _decoded(part: EmailMessage) -> str:
    """A text part's payload as text: its ``charset`` label read as the WHATWG Encoding Standard
    reads it (``iso-8859-1`` and ``us-ascii`` are windows-1252, as mail clients treat them: the
    bytes 0x80-0x9F are curly quotes and dashes, not control characters), else the bytes decoded
    as a document's (BOM, UTF-8, detection: :func:`~indexerd.extract.decode.decode_text`)."""
    raw = part.get_payload(decode=True)
    payload = raw if isinstance(raw, bytes) else b""  # decode=True gives the bytes of a leaf part
    codec = codec_for_label(part.get_content_charset() or "")
    if codec is not None:
        return payload.decode(codec, "replace")
    return decode_text(payload)[0]


def _has_plain_sibling(message: EmailMessage, html_part: EmailMessage) -> bool:
    """True when ``html_part`` is one alternative of a multipart/alternative with text/plain."""
    for part in message.walk():
        if part.get_content_type() == "multipart/alternative":
            children = part.get_payload()
            if isinstance(children, list) and any(c is html_part for c in children):
                return any(isinstance(c, EmailMessage) and c.get_content_type() == "text/plain"
                           for c in children)
    return False


# --------------------------------------------------------------------------- mbox


@dataclass(frozen=True)
class MboxMessage:
    """One message of an mbox, as split by :func:`iter_mbox`.

    Attributes:
        ordinal: 1 for the first message of the file.
        message_id: the ``Message-ID`` header without angle brackets, or ``""``.
        data: the message (without its ``From_`` line), or ``None`` when it is over the cap.
        size: its size in bytes (counted whole even when ``data`` is ``None``).
    """

    ordinal: int
    message_id: str
    data: bytes | None
    size: int


def iter_mbox(stream: IO[bytes], max_bytes: int) -> Iterator[MboxMessage]:
    """Split an mbox read from ``stream`` (binary) into messages, one at a time.

    A message over ``max_bytes`` is yielded with ``data=None`` (its header block, up to
    :data:`HEADER_BYTES`, still gives its Message-ID).  Bytes before the first ``From_`` line
    are not a message.  Memory: one message (at most ``max_bytes``) plus one line piece of
    :data:`LINE_BYTES`.
    """
    ordinal = 0
    parts: list[bytes] | None = None
    headers: list[bytes] = []
    in_headers = True
    size = 0
    at_line_start = True
    previous_blank = True

    def finish() -> MboxMessage:
        header_bytes = b"".join(headers)
        data = b"".join(parts) if parts is not None and size <= max_bytes else None
        return MboxMessage(ordinal, _message_id(header_bytes), data, size)

    started = False
    while True:
        piece = stream.readline(LINE_BYTES)
        if not piece:
            break
        is_line_start = at_line_start
        at_line_start = piece.endswith(b"\n")
        if is_line_start and previous_blank and (_SEPARATOR.match(piece) if started else _FROM_.match(piece)):
            if started:
                yield finish()
            started = True
            ordinal += 1
            parts, headers, in_headers, size = [], [], True, 0
            previous_blank = False
            continue
        if is_line_start:
            previous_blank = piece in (b"\n", b"\r\n")
        if not started:
            continue
        size += len(piece)
        if in_headers:
            if is_line_start and piece in (b"\n", b"\r\n"):
                in_headers = False
            elif sum(map(len, headers)) < HEADER_BYTES:
                headers.append(piece)
        if parts is not None:
            if size > max_bytes:
                parts = None  # over the cap: keep counting, stop keeping
            else:
                parts.append(piece)
    if started:
        yield finish()


def _message_id(header_bytes: bytes) -> str:
    try:
        headers = BytesHeaderParser(policy=policy.compat32).parsebytes(header_bytes)
        value = headers.get("Message-ID") or ""
    except Exception:  # a header block that does not parse: no id, the ordinal keys it
        return ""
    return str(value).strip().strip("<>").strip()


def message_fragment(message: MboxMessage, seen_ids: set[str]) -> str:
    """The key fragment of a message: its Message-ID percent-encoded, or ``n<ordinal>`` when it
    has none or the id already appeared earlier in the same file (``seen_ids`` is updated)."""
    mid = message.message_id
    if mid and mid not in seen_ids and len(mid) <= 500:
        seen_ids.add(mid)
        return quote(mid, safe="@.-_+=$!~*'()")
    return f"n{message.ordinal}"


def extract_mbox(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """A whole mbox as one document: each message's text, in order; the first subject is the
    title and the last ``Date:`` the date.  (A file source gives one document per message
    instead.)

    Raises:
        SkipDocument: ``too-large`` (over ``max_bytes``), ``parse-error`` (no message).
    """
    import io

    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    texts, title, date = [], "", None
    for message in iter_mbox(io.BytesIO(data), max_bytes):
        if message.data is None:
            continue
        one = extract_eml(message.data, MEDIA_EML, f"{label} message {message.ordinal}", max_bytes)
        texts.append(one.text)
        title = title or one.title
        date = one.date_value or date
    if not texts:
        raise SkipDocument("parse-error", f"{label}: no message (no From_ line)")
    return DocumentText(title, "\n".join(texts), MEDIA_MBOX, "Date" if date else None, date)
