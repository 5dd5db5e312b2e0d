"""Metric time series (from RUN/metrics.jsonl, kept in memory by the live-update poller)."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from services.dashboard.context import AppContext
from services.dashboard.errors import BadRequest, NotFound
from services.dashboard.models import LatestValue, MetricsLatest, MetricsSeries, Series
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, get_ctx, read_access

router = APIRouter(
    prefix="/api/metrics",
    tags=["metrics"],
    responses=READ_ERRORS,
    dependencies=[Depends(read_access)],
    route_class=AuthFirstRoute,
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
MAX_SERIES = 64


def _clean(values: list[float]) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in values]


@router.get("", response_model=MetricsLatest, summary="metric names and their latest values")
def latest(ctx: Ctx) -> MetricsLatest:
    last = ctx.metrics.latest()
    return MetricsLatest(
        names=sorted(last),
        latest={k: LatestValue(step=s, value=v if math.isfinite(v) else None) for k, (s, v) in last.items()},
        rows=ctx.metrics.rows,
        malformed=ctx.metrics.malformed,
    )


@router.get("/series", response_model=MetricsSeries, summary="time series of some (or all) metrics, thinned")
def series(
    ctx: Ctx,
    name: Annotated[list[str] | None, Query(description="metric names (repeat); all when absent")] = None,
    since_step: Annotated[
        float | None, Query(description="only points after this step (for incremental updates)")
    ] = None,
    max_points: Annotated[int, Query(ge=2, le=20_000)] = 2000,
) -> MetricsSeries:
    names = ctx.metrics.names()
    if name and len(name) > MAX_SERIES:
        raise BadRequest(f"at most {MAX_SERIES} metrics per request, got {len(name)}")
    if name:
        unknown = [n for n in name if n not in names]
        if unknown:
            raise NotFound(f"no metric {unknown[0]!r}; logged metrics: {names[:50] or 'none yet'}")
        names = name
    if since_step is not None and not math.isfinite(since_step):
        since_step = None
    out = {}
    for n in names:
        steps, times, values = ctx.metrics.series(n, since_step=since_step, max_points=max_points)
        out[n] = Series(step=steps, time=times, value=_clean(values))
    return MetricsSeries(series=out, rows=ctx.metrics.rows, malformed=ctx.metrics.malformed)
