"""Errors the API turns into clear 4xx answers: {"error": <type>, "detail": <what to do>}."""

from __future__ import annotations

from typing import ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from worldsample.errors import StoreCorruptError, WorldSampleError


class DashboardError(WorldSampleError):
    status = 400
    headers: ClassVar[dict[str, str]] = {}


class BadRequest(DashboardError):
    status = 400


class Unauthorized(DashboardError):
    status = 401
    headers: ClassVar[dict[str, str]] = {"WWW-Authenticate": 'Bearer realm="worldsample"'}


class Forbidden(DashboardError):
    status = 403


class NotFound(DashboardError):
    status = 404


class Conflict(DashboardError):
    """The request does not fit the state it addresses (e.g. a world model that does not fit a group's data)."""

    status = 409


class Unprocessable(DashboardError):
    """A body that is valid JSON of the right shape but does not fit what it addresses (e.g. an action's length)."""

    status = 422


class RangeNotSatisfiable(DashboardError):
    status = 416


class EpisodeDamaged(DashboardError):
    """The episode's stored data is damaged; the store's readers set it aside."""

    status = 410
    headers: ClassVar[dict[str, str]] = {"Cache-Control": "no-store"}


class TooManyStreams(DashboardError):
    status = 429


class TooManyRequests(DashboardError):
    """429 with a Retry-After: too many wrong tokens from this client, or too much queued work."""

    status = 429

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.headers = {"Retry-After": str(max(1, round(retry_after_s)))}


class NotImplementedYet(DashboardError):
    status = 501


def _body(kind: str, detail) -> dict:
    return {"error": kind, "detail": detail}


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(DashboardError)
    async def _dashboard(_: Request, exc: DashboardError):
        return JSONResponse(_body(type(exc).__name__, str(exc)), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StoreCorruptError)
    async def _damaged(_: Request, exc: StoreCorruptError):
        # damaged stored data found while answering: the store's reader has set the episode aside
        return JSONResponse(
            _body("EpisodeDamaged", f"{exc}; the episode is set aside (see damaged in /api/run)"),
            status_code=EpisodeDamaged.status,
            headers=EpisodeDamaged.headers,
        )

    @app.exception_handler(WorldSampleError)
    async def _library(_: Request, exc: WorldSampleError):
        # a store or run-file problem caused by the request (e.g. an unknown group)
        return JSONResponse(_body(type(exc).__name__, str(exc)), status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError):
        errs = [
            {"where": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "invalid")}
            for e in exc.errors()
        ]
        return JSONResponse(_body("InvalidRequest", errs), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException):
        return JSONResponse(_body("HTTPError", exc.detail), status_code=exc.status_code, headers=exc.headers)
