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
