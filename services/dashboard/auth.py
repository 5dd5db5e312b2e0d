"""Bearer-token auth: control always needs the token; reads follow `settings.read_policy`.

The token comes from the settings, or from RUN/dashboard_token (created with mode 0600 when
missing). It is accepted only in the `Authorization: Bearer` header: a request that carries it
(or a token-like parameter) in the query string is refused, since URLs end up in logs, browser
history and Referer headers.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from urllib.parse import parse_qsl

from fastapi import Request

from services.dashboard.errors import Forbidden, Unauthorized
from services.dashboard.settings import DashboardSettings
from worldsample.atomic import atomic_write_text
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)

TOKEN_PARAMS = {"token", "access_token", "auth", "authorization", "bearer", "api_key", "apikey", "key"}


def resolve_token(run_dir: Path, settings: DashboardSettings) -> str:
    """The configured token, or the run's token file's, or a new one written there (0600)."""
    if settings.token is not None and settings.token.get_secret_value():
        return settings.token.get_secret_value()
    path = RunFiles.of(run_dir).dashboard_token
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("%s is readable by others (mode %o): setting it to 0600", path, mode)
            os.chmod(path, 0o600)
        token = path.read_text().strip()
        if len(token) >= 16:
            return token
        log.warning("%s holds no usable token (under 16 characters): writing a new one", path)
    token = secrets.token_urlsafe(32)
    atomic_write_text(path, token + "\n", mode=0o600)
    return token


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TokenGuard:
    def __init__(self, token: str, settings: DashboardSettings):
        self._token = token.encode()
        self.read_policy = settings.read_policy

    def check_bearer(self, request: Request) -> None:
        header = request.headers.get("authorization")
        if not header:
            raise Unauthorized(
                "this endpoint needs 'Authorization: Bearer <token>' (the token is in RUN/dashboard_token)"
            )
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <token>'")
        if not hmac.compare_digest(value.strip().encode(), self._token):
            raise Forbidden("wrong token")

    def control(self, request: Request) -> None:
        """Dependency of every control endpoint."""
        self.check_bearer(request)

    def read(self, request: Request) -> None:
        """Dependency of every read endpoint."""
        if self.read_policy == "open":
            return
        if self.read_policy == "loopback" and is_loopback(request.client.host if request.client else None):
            return
        self.check_bearer(request)

    def token_in_query(self, query_string: bytes) -> bool:
        for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
            if name.lower() in TOKEN_PARAMS or hmac.compare_digest(value.encode(), self._token):
                return True
        return False


class QueryTokenRejector:
    """ASGI middleware: 400 for any request with a token in its query string."""

    def __init__(self, app, guard: TokenGuard):
        self.app = app
        self.guard = guard

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("query_string") and self.guard.token_in_query(scope["query_string"]):
            body = json.dumps(
                {
                    "error": "TokenInQuery",
                    "detail": "tokens are never accepted in the query string; send 'Authorization: Bearer <token>'",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
