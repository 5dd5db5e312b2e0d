"""The bridge's live camera frames (RUN/live/, services/dashboard/live_frames.py): which there are
with their stamps and ages, and the newest frame of one camera.

A live frame changes a few times a second, so it is never cached without asking: its ETag is the
run's id and a hash of the frame, and the browser revalidates it (304 while unchanged)."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from services.dashboard import live_frames
from services.dashboard.context import AppContext
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, get_ctx, read_access
from services.dashboard.routes.frames import NOT_MODIFIED, REVALIDATE, CameraP, not_modified

router = APIRouter(
    prefix="/api/live",
    tags=["frames"],
    dependencies=[Depends(read_access)],
    responses=READ_ERRORS,
    route_class=AuthFirstRoute,
)
Ctx = Annotated[AppContext, Depends(get_ctx)]


@router.get(
    "/frames",
    response_model=live_frames.LiveFramesView,
    summary="the bridge's live camera frames: each camera's stamp, age and whether it is stale",
    description="Empty when the bridge writes none (RUN/live/ absent); a linked RUN/live/ is not followed (`error`).",
)
def live_list(ctx: Ctx) -> live_frames.LiveFramesView:
    return live_frames.listing(ctx.run_dir, ctx.settings.live_frame_stale_s)


@router.get(
    "/frames/{camera}",
    response_class=Response,
    responses={200: {"content": {"image/jpeg": {}}, "description": "the newest frame; its stamp and age in "
                     "X-Frame-Stamp-Ns, X-Frame-Age-S, X-Frame-Stale"}, **NOT_MODIFIED},
    summary="the newest live frame of one camera (JPEG), flagged stale with its age",
)
def live_frame(
    ctx: Ctx,
    request: Request,
    camera: CameraP,
    t: Annotated[int | None, Query(ge=0, le=2**63, description="ignored: a new value per frame (its stamp) makes "
                                   "an <img> ask again")] = None,
) -> Response:
    stale_after = ctx.settings.live_frame_stale_s
    f = live_frames.read_frame(ctx.run_dir, camera, stale_after)
    headers = {
        "ETag": f'"{ctx.run_id}-live-{hashlib.sha256(f.data).hexdigest()[:20]}"',
        "Cache-Control": REVALIDATE,
        "X-Frame-Stale": "true" if f.stale else "false",
        "X-Frame-Stale-After-S": f"{stale_after:g}",
    }
    if f.stamp is not None:
        headers |= {"X-Frame-Stamp-Ns": str(f.stamp.stamp_ns), "X-Frame-Written-Ns": str(f.stamp.written_ns),
                    "X-Frame-Age-S": f"{f.age_s:.3f}"}
    if (same := not_modified(request, headers)) is not None:
        return same
    return Response(f.data, media_type="image/jpeg", headers=headers)
