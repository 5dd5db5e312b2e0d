"""`create_app(run_dir, settings)`: the dashboard's FastAPI app for one run directory."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from services.dashboard.apidocs import install_docs, state_limits
from services.dashboard.auth import QueryTokenRejector, TokenGuard, resolve_token
from services.dashboard.context import AppContext
from services.dashboard.data import RunData
from services.dashboard.errors import install_handlers
from services.dashboard.imagine import ImagineProvider
from services.dashboard.live import LiveHub
from services.dashboard.middleware import BodyLimit, HostGuard, SecurityHeaders
from services.dashboard.play import PlayProvider
from services.dashboard.routes import control, episodes, export, frames, live_frames, metrics, policies, run, runs
from services.dashboard.routes import play as play_routes
from services.dashboard.settings import DashboardSettings
from worldsample import __version__
from worldsample.errors import RunDirectoryError
from worldsample.runlog.control import ControlChannel
from worldsample.runlog.events import EventReader
from worldsample.runlog.metrics import MetricsReader

STATIC = Path(__file__).parent / "static"


def create_app(
    run_dir: Path | str,
    settings: DashboardSettings | None = None,
    imagine: ImagineProvider | None = None,
    play: PlayProvider | None = None,
) -> FastAPI:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirectoryError(f"{run_dir} is not a run directory (it does not exist or is not a folder)")
    settings = settings or DashboardSettings()
    guard = TokenGuard(resolve_token(run_dir, settings), settings)
    ctx = AppContext(
        run_dir=run_dir,
        settings=settings,
        guard=guard,
        data=RunData(run_dir, settings),
        metrics=MetricsReader(run_dir),
        events=EventReader(run_dir),
        control=ControlChannel(run_dir),
        imagine=imagine,
        play=play,
    )
    ctx.hub = LiveHub(ctx, settings.refresh_interval_s, ctx.streams)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI):
        ctx.hub.poll()  # metrics and episodes are there before the first request (a broken file is logged)
        task = asyncio.create_task(ctx.hub.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(
        title="WorldSample dashboard",
        version=__version__,
        description=(
            "Run status, metrics, stored episodes and their frames, policies, and control of one run directory."
        ),
        lifespan=lifespan,
        docs_url=None,  # served by apidocs (local assets; FastAPI's page loads a CDN that the CSP blocks)
        redoc_url=None,
    )
    app.state.ctx = ctx

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = state_limits(FastAPI.openapi(app), settings)
        return app.openapi_schema

    app.openapi = openapi
    install_docs(app)
    install_handlers(app)
    app.include_router(play_routes.router)
    for r in (run, metrics, episodes, frames, export, live_frames, policies, runs, control):
        app.include_router(r.router)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    # outermost first: host check, then token-in-query, then body size, then headers on every answer
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit)
    app.add_middleware(QueryTokenRejector, guard=guard)
    app.add_middleware(HostGuard, allowed=settings.host_names())
    return app
