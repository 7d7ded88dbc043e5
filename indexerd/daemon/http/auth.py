"""Who may ask the HTTP listener: a shared token, required on every request when it is set.

The listener serves loopback without a token by default; any other address needs one (the
config names an environment variable or a file holding it, see :func:`load_token`).  A request
carries it as ``Authorization: Bearer <token>`` (programs, Prometheus' ``authorization``) or as
HTTP Basic credentials whose password is the token (a browser asks for them by itself; the user
name is ignored).  Tokens are compared in constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import hmac
import os
import re
from pathlib import Path

from werkzeug.wrappers import Request, Response

from indexerd.config import is_loopback  # noqa: F401  (re-exported)
from indexerd.core.errors import ConfigError

#: a token shorter than this is refused (it would be guessable)
MIN_TOKEN_CHARS = 16


def load_token(token_env: str | None, token_file: str | None) -> str | None:
    """The token from the environment variable ``token_env`` or the file ``token_file`` (its
    first line, surrounding white space stripped); None when neither is configured.

    Raises:
        ConfigError: the variable is unset or empty, the file cannot be read, or the token is
            shorter than :data:`MIN_TOKEN_CHARS` (the message names the variable or file).
    """
    if token_env:
        token, where = os.environ.get(token_env, "").strip(), f"environment variable {token_env}"
        if not token:
            raise ConfigError(f"http.token_env: the {where} is unset or empty")
    elif token_file:
        where = f"file {token_file}"
        try:
            lines = Path(token_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"http.token_file: cannot read {token_file}: {e}") from None
        token = lines[0].strip() if lines else ""
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"http: the token in the {where} is {len(token)} characters long; use at "
                          f"least {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32`)")
    return token


class TokenCheck:
    """Lets a request in when it carries ``token`` (or always, when ``token`` is None)."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode("utf-8") if token else None

    @property
    def required(self) -> bool:
        return self._token is not None

    def _offered(self, request: Request) -> bytes | None:
        auth = request.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            return value.strip().encode("utf-8")
        if scheme.lower() == "basic":
            try:
                _user, _, password = base64.b64decode(value.strip(), validate=True).partition(b":")
            except ValueError:
                return None
            return password
        return None

    def deny(self, request: Request) -> Response | None:
        """None when the request may go on, else the 401 response to send."""
        if self._token is None:
            return None
        offered = self._offered(request)
        if offered is not None and hmac.compare_digest(offered, self._token):
            return None
        return Response("a token is required: Authorization: Bearer <token>, or the token as the "
                        "password of HTTP Basic authentication\n", status=401,
                        content_type="text/plain; charset=utf-8",
                        headers={"WWW-Authenticate": 'Basic realm="indexerd", charset="UTF-8"'})


class HostCheck:
    """Which ``Host`` header values the listener answers: a defence against DNS rebinding.

    A web page the admin opens may name a host of its own that resolves to 127.0.0.1 and then
    read the loopback listener as its own origin (the browser sends that name as ``Host``).
    A loopback listener without a token answers only the names of this machine's loopback
    (``localhost``, ``127.x.y.z``, ``[::1]``, the listen address), any port; others get 421
    Misdirected Request (RFC 9110, 15.5.20).  With a token any ``Host`` is answered: the
    browser never sends the token to another origin.

    Args:
        names: the host names answered (lower case, IPv6 in brackets); None answers every one.
    """

    def __init__(self, names: frozenset[str] | None) -> None:
        self.names = names

    @classmethod
    def for_listener(cls, listen_host: str, token_required: bool) -> HostCheck:
        """The check for a listener on ``listen_host`` (see the class docstring)."""
        if token_required or not is_loopback(listen_host):
            return cls(None)
        listen = listen_host.lower()
        if ":" in listen and not listen.startswith("["):
            listen = f"[{listen}]"
        return cls(frozenset({"localhost", "[::1]", listen}))

    def deny(self, request: Request) -> Response | None:
        """None when ``request``'s ``Host`` may be answered, else the 421 response."""
        if self.names is None:
            return None
        host = request.headers.get("Host", "").strip().lower()
        name = host[:host.index("]") + 1] if host.startswith("[") and "]" in host else host.rpartition(":")[0] or host
        if name in self.names or _LOOPBACK_V4.fullmatch(name):
            return None
        return Response(f"this listener answers only for this machine's loopback names, not Host: "
                        f"{host[:100]!r}\n", status=421, content_type="text/plain; charset=utf-8")


_LOOPBACK_V4 = re.compile(r"127(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}")
