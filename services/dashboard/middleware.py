"""Small ASGI guards: Host header check (DNS rebinding), request body limit, security headers."""

from __future__ import annotations

import json

MAX_BODY = 64 * 1024  # control bodies are a few hundred bytes

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        (
            b"default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
            b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
        ),
    ),
]


async def _reject(send, status: int, kind: str, detail: str) -> None:
    body = json.dumps({"error": kind, "detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def host_of(header: str) -> str:
    """Host name of a Host header value, without the port; IPv6 keeps its brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostGuard:
    """Answer only to expected Host names, so a rebinding DNS name cannot read a loopback server."""

    def __init__(self, app, allowed: list[str]):
        self.app = app
        names = {a.lower() for a in allowed}
        self.allowed = names | {f"[{a}]" for a in names if ":" in a and not a.startswith("[")}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            if host_of(host) not in self.allowed:
                await _reject(
                    send, 400, "BadHost", f"Host {host!r} is not served here; add it to allowed_hosts if it is yours"
                )
                return
        await self.app(scope, receive, send)


class _TooLarge(Exception):
    pass


class BodyLimit:
    """413 for a request body over MAX_BODY, declared or streamed."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _reject(send, 413, "BodyTooLarge", f"request bodies are limited to {self.limit} bytes")
        seen = 0
        started = False

        async def limited_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return msg

        async def tracking_send(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _reject(send, 413, "BodyTooLarge", f"request bodies are limited to {self.limit} bytes")


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def add_headers(msg):
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), *SECURITY_HEADERS]}
            await send(msg)

        await self.app(scope, receive, add_headers)
