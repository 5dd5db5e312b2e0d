"""Dependencies shared by the routers: the app context, auth, and documented error answers."""

from __future__ import annotations

from fastapi import Depends, Request
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


async def read_access(request: Request, _=Depends(bearer_scheme)) -> None:
    request.app.state.ctx.guard.read(request)


async def control_access(request: Request, _=Depends(bearer_scheme)) -> None:
    request.app.state.ctx.guard.control(request)
