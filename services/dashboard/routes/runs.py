"""The run's config (read-only) and the runs beside it, whose curves the page overlays."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from services.dashboard import runinfo
from services.dashboard.context import AppContext
from services.dashboard.models import ConfigView, MetricsSeries, SiblingRuns
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, get_ctx, read_access

router = APIRouter(
    prefix="/api", tags=["runs"], dependencies=[Depends(read_access)], responses=READ_ERRORS, route_class=AuthFirstRoute
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
RunNameP = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", description="a directory beside this run (/api/runs)")
]


@router.get(
    "/config",
    response_model=ConfigView,
    summary="the run's config.yaml and config history",
    description=(
        f"RUN/config.yaml as text (at most {runinfo.MAX_CONFIG_BYTES >> 10} KiB) and the newest "
        f"{runinfo.MAX_HISTORY_ENTRIES} entries of RUN/config_history.jsonl (at most "
        f"{runinfo.MAX_HISTORY_BYTES >> 20} MiB, entries nested at most 32 levels). A symbolic link is not followed: "
        "the file is reported as not served."
    ),
)
def config(ctx: Ctx) -> ConfigView:
    return runinfo.config_view(ctx.run_dir)


@router.get(
    "/runs",
    response_model=SiblingRuns,
    summary="runs beside this one (same parent directory) that hold a metrics.jsonl",
    description=(
        f"At most {runinfo.MAX_SIBLING_RUNS} runs, newest metrics.jsonl first, from the first "
        f"{runinfo.MAX_SCAN} entries of the parent directory; symbolic links (a run or its metrics.jsonl) are "
        "left out."
    ),
)
def runs(ctx: Ctx) -> SiblingRuns:
    return runinfo.sibling_runs(ctx.run_dir)


@router.get(
    "/runs/{run}/series",
    response_model=MetricsSeries,
    summary="metric series of a run beside this one, thinned (for overlaid curves)",
    description=(
        f"The run's metrics.jsonl is read whole (at most {runinfo.MAX_METRICS_BYTES >> 20} MiB; larger is 400) "
        f"without following a symbolic link; at most {runinfo.MAX_SERIES_NAMES} names per request; names the run "
        "did not log are left out."
    ),
)
def run_series(
    ctx: Ctx,
    run: RunNameP,
    name: Annotated[
        list[str] | None,
        Query(max_length=runinfo.MAX_SERIES_NAMES, description="metric names (repeat); all when absent"),
    ] = None,
    max_points: Annotated[int, Query(ge=2, le=20_000)] = 2000,
) -> MetricsSeries:
    return runinfo.sibling_series(ctx.run_dir, run, name, max_points)
