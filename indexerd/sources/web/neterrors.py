"""Network, HTTP and decoding trouble -> the fixed error words of
:attr:`indexerd.sources.web.httpresponse.Response.error`.

Contract relied on (requests 2.34, urllib3 2.8): requests wraps urllib3's ``ProtocolError``
(itself around an ``http.client`` error) in ``ConnectionError``; everything below us raises one of
:data:`NETWORK_ERRORS`, and anything else is a bug that propagates.
"""

from __future__ import annotations

import http.client
import socket

import requests
import urllib3

__all__ = ["NETWORK_ERRORS", "Failure", "classify", "short"]

#: What network, HTTP and decoding trouble raises below us; anything else is a bug and propagates.
NETWORK_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError,
                   UnicodeError)


class Failure(Exception):
    """Carries an error word and its detail out of the fetcher's body loop."""

    def __init__(self, word: str, detail: str) -> None:
        super().__init__(word, detail)
        self.word = word
        self.detail = detail


def short(exc: BaseException) -> str:
    """``Type: message``, at most 300 characters."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:297] + "..."


def classify(exc: BaseException) -> tuple[str, str]:
    """An exception from requests/urllib3/sockets -> (error word, detail)."""
    detail = short(exc)
    rq = requests.exceptions
    u3 = urllib3.exceptions
    if isinstance(exc, (rq.Timeout, u3.TimeoutError, TimeoutError, socket.timeout)):
        return "timeout", detail
    if isinstance(exc, (rq.SSLError, u3.SSLError)):
        return "ssl", detail
    if isinstance(exc, (rq.ContentDecodingError, u3.DecodeError)):
        return "bad-encoding", detail
    if isinstance(exc, (rq.ChunkedEncodingError, u3.IncompleteRead, u3.InvalidChunkLength, u3.InvalidHeader,
                        http.client.HTTPException)) and not isinstance(exc, http.client.RemoteDisconnected):
        return "protocol", detail
    if isinstance(exc, rq.ConnectionError):
        # requests wraps urllib3's ProtocolError(http.client error) in ConnectionError.
        inner = exc.args[0] if exc.args else None
        reason = inner.args[1] if isinstance(inner, u3.ProtocolError) and len(inner.args) > 1 else None
        if isinstance(reason, http.client.HTTPException) and not isinstance(reason, http.client.RemoteDisconnected):
            return "protocol", detail
        return "connection", detail
    if isinstance(exc, (u3.ProtocolError, u3.NewConnectionError, u3.MaxRetryError, OSError)):
        return "connection", detail
    return "protocol", detail
