"""Policies, evaluation reports and the policy comparison table."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from services.dashboard import artifacts
from services.dashboard.context import AppContext
from services.dashboard.models import PolicyOverview, ReportEntry
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, get_ctx, read_access
from services.dashboard.versions import version_table

router = APIRouter(
    prefix="/api",
    tags=["policies"],
    dependencies=[Depends(read_access)],
    responses=READ_ERRORS,
    route_class=AuthFirstRoute,
)
Ctx = Annotated[AppContext, Depends(get_ctx)]


@router.get("/policies", response_model=PolicyOverview, summary="policies, reports and the comparison table")
def policies(ctx: Ctx) -> PolicyOverview:
    return PolicyOverview(
        policies=artifacts.list_policies(ctx.run_dir),
        reports=artifacts.list_reports(ctx.run_dir),
        comparison=artifacts.store_rows(ctx.data) + artifacts.report_rows(ctx.run_dir),
        versions=version_table(ctx.data, ctx.metrics),
    )


@router.get("/reports", response_model=list[ReportEntry], summary="evaluation reports in RUN/reports/")
def reports(ctx: Ctx) -> list[ReportEntry]:
    return artifacts.list_reports(ctx.run_dir)


@router.get("/reports/{name}", summary="one evaluation report, as written")
def report(ctx: Ctx, name: Annotated[str, Path(max_length=128)]) -> Any:
    return artifacts.read_report(ctx.run_dir, name)
