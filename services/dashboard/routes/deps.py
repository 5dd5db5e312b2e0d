"""Dependencies shared by the routers: the app context, auth, and documented error answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from services.dashboard.context import AppContext

# declares the scheme in the OpenAPI schema; the check itself is TokenGuard's
bearer_scheme = HTTPBearer(auto_error=False, description="the token in RUN/dashboard_token (or --token)")


class ErrorBody(BaseModel):
    error: str
    detail: object


def _err(desc: str) -> dict:
    return {"model": ErrorBody, "description": desc}


READ_ERRORS = {
    400: _err("bad input (e.g. a token in the query string, a too-large range)"),
    401: _err("a token is needed (read policy) and none was sent"),
    403: _err("wrong token"),
    404: _err("no such group, episode, camera or file"),
    410: _err("the episode's stored data is damaged: it is set aside (listed under damaged in /api/run)"),
    422: _err("a parameter failed validation"),
    429: _err("too many wrong tokens from this client: wait Retry-After seconds"),
}
RANGE_ERRORS = {**READ_ERRORS, 416: _err("a step range outside the episode")}
CONTROL_ERRORS = {**READ_ERRORS, 401: _err("the bearer token is missing"), 413: _err("body too large")}


# async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a thread hop
# per dependency per request; these only read memory, so they run on the event loop
async def get_ctx(request: Request) -> AppContext:
    return request.app.state.ctx


# the access checks that already passed for this request (AuthFirstRoute runs them before the body is
# read; the dependency, which FastAPI solves after that, then skips the second check)
_CHECKED = "dashboard.auth_checked"


def _checked(request: Request, kind: str) -> bool:
    return kind in request.scope.get(_CHECKED, ())


def _mark(request: Request, kind: str) -> None:
    request.scope.setdefault(_CHECKED, set()).add(kind)


async def read_access(request: Request, _=Depends(bearer_scheme)) -> None:
    if not _checked(request, "read"):
        request.app.state.ctx.guard.read(request)
        _mark(request, "read")


async def control_access(request: Request, _=Depends(bearer_scheme)) -> None:
    if not _checked(request, "control"):
        request.app.state.ctx.guard.control(request)
        _mark(request, "control")


class AuthFirstRoute(APIRoute):
    """The route class of every router here: a route that has read_access or control_access among
    its dependencies (its router's or its own) runs that check before FastAPI reads the body or
    validates a parameter. FastAPI parses a JSON body (a malformed one is a 422) before it solves
    any dependency, so the dependency alone would answer an unauthenticated client 422 and tell it
    what the route accepts; with this it gets 401/403/429 first. The dependency stays, so the
    OpenAPI schema declares the bearer scheme on each operation (and skips its second check)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()
        checks = [d.dependency for d in self.dependencies if d.dependency in (control_access, read_access)]
        if not checks:
            return handler

        async def auth_first(request: Request) -> Response:
            for check in checks:
                await check(request)
            return await handler(request)

        return auth_first
