"""The run at a glance, its events and control history, and live updates (SSE)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from services.dashboard.context import AppContext
from services.dashboard.models import ControlView, EventPage, EventView, RunOverview
from services.dashboard.overview import build_overview, control_views
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, get_ctx, read_access
from worldsample import __version__

router = APIRouter(prefix="/api", tags=["run"], responses=READ_ERRORS, route_class=AuthFirstRoute)
Ctx = Annotated[AppContext, Depends(get_ctx)]


@router.get("/health", summary="liveness (no auth)")
def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/run", response_model=RunOverview, dependencies=[Depends(read_access)], summary="the run at a glance")
def run_overview(ctx: Ctx) -> RunOverview:
    return build_overview(ctx.data, ctx.metrics, ctx.events, ctx.control, run_id=ctx.run_id)


@router.get("/events", response_model=EventPage, dependencies=[Depends(read_access)], summary="newest run events")
def events(ctx: Ctx, limit: Annotated[int, Query(ge=1, le=2000)] = 200) -> EventPage:
    items = ctx.events.events[-limit:]
    return EventPage(
        total=ctx.events.total,
        malformed=ctx.events.malformed,
        items=[EventView(**e.model_dump()) for e in reversed(items)],
    )


@router.get(
    "/control/history",
    response_model=list[ControlView],
    dependencies=[Depends(read_access)],
    summary="recent control requests and their acknowledgements",
)
def control_history(ctx: Ctx, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[ControlView]:
    return control_views(ctx.control, limit)


@router.get(
    "/stream",
    dependencies=[Depends(read_access)],
    summary="live updates as server-sent events (overview, metrics, events, episodes)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 429: {"description": "too many streams"}},
)
async def stream(ctx: Ctx, request: Request) -> StreamingResponse:
    gen = await ctx.hub.subscribe(request.client.host if request.client else "?")
    return StreamingResponse(
        gen, media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
