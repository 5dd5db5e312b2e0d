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
import threading
import time
from collections import OrderedDict
from pathlib import Path
from urllib.parse import parse_qsl

from fastapi import Request

from services.dashboard.errors import Forbidden, TooManyRequests, Unauthorized
from services.dashboard.settings import MIN_TOKEN_LENGTH, DashboardSettings
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
        if len(token) >= MIN_TOKEN_LENGTH:
            return token
        log.warning("%s holds no usable token (under %d characters): writing a new one", path, MIN_TOKEN_LENGTH)
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


class Backoff:
    """Wrong tokens per client address. After `free` wrong tokens in a row a client must wait
    1 s, then 2 s, 4 s, ... up to `max_s` after each further one; while it waits, every token it
    sends is refused unchecked (429), so waiting is the only way to guess faster. A right token
    clears the count; so do `forget_s` seconds without a wrong one. At most `max_clients` are
    remembered (the least recently failed are forgotten first), so memory stays bounded."""

    def __init__(self, free: int, max_s: float, max_clients: int = 4096, forget_s: float = 900.0):
        self.free, self.max_s, self.max_clients, self.forget_s = free, max_s, max_clients, forget_s
        self._clients: OrderedDict[str, tuple[int, float, float]] = OrderedDict()  # failures, blocked until, last
        self._lock = threading.Lock()

    def wait_s(self, client: str) -> float:
        """Seconds the client must still wait (0 when it may try)."""
        now = time.monotonic()
        with self._lock:
            got = self._clients.get(client)
            if got is None:
                return 0.0
            if now - got[2] > self.forget_s:
                del self._clients[client]
                return 0.0
            return max(0.0, got[1] - now)

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            n, _, last = self._clients.pop(client, (0, 0.0, now))
            n = 1 if now - last > self.forget_s else n + 1
            wait = 0.0 if n <= self.free else min(self.max_s, 2.0 ** (n - self.free - 1))
            self._clients[client] = (n, now + wait, now)
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._clients.pop(client, None)

    def __len__(self) -> int:
        return len(self._clients)


class TokenGuard:
    def __init__(self, token: str, settings: DashboardSettings):
        self._token = token.encode()
        self.read_policy = settings.read_policy
        self.backoff = Backoff(settings.auth_free_failures, settings.auth_backoff_max_s)

    def check_bearer(self, request: Request) -> None:
        header = request.headers.get("authorization")
        if not header:
            raise Unauthorized(
                "this endpoint needs 'Authorization: Bearer <token>' (the token is in RUN/dashboard_token)"
            )
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <token>'")
        client = request.client.host if request.client else "?"
        wait = self.backoff.wait_s(client)
        if wait > 0:
            raise TooManyRequests(
                f"too many wrong tokens from {client}: wait {wait:.0f} s before the next try", retry_after_s=wait
            )
        if not hmac.compare_digest(value.strip().encode(), self._token):
            self.backoff.failed(client)
            log.warning("wrong dashboard token from %s", client)
            raise Forbidden("wrong token")
        self.backoff.succeeded(client)

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
