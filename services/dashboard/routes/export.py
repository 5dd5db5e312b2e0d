"""An episode as a download for Foxglove: the MCAP file of worldsample/export/foxglove.py.

The file is written in a worker thread, one export at a time with two more waiting (beyond that
429), into a temp directory that is removed as soon as the file is open: the answer streams from
the open file, so nothing is left behind when the client goes away."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from services.dashboard.context import AppContext, WorkQueue
from services.dashboard.errors import EpisodeDamaged, NotFound
from services.dashboard.routes.deps import READ_ERRORS, AuthFirstRoute, ErrorBody, get_ctx, read_access
from services.dashboard.routes.episodes import EpisodeP, GroupP
from worldsample.errors import StoreCorruptError, StoreError
from worldsample.export.foxglove import MEDIA_TYPE, write_episode

router = APIRouter(
    prefix="/api/episodes", tags=["episodes"], dependencies=[Depends(read_access)], route_class=AuthFirstRoute
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
RUNNING, WAITING = 1, 2
BLOCK = 1 << 20


def _queue(request: Request) -> WorkQueue:
    """The app's export queue (made on first use; this runs on the event loop, so without a race)."""
    q = getattr(request.app.state, "export_work", None)
    if q is None:
        q = request.app.state.export_work = WorkQueue(RUNNING, WAITING, "export")
    return q


def _export(ctx: AppContext, group: str, episode: int, images: str, out: Path) -> None:
    try:
        write_episode(ctx.data.reader(group), episode, out, images=images, jpeg_quality=ctx.settings.jpeg_quality,
                      run_name=ctx.run_dir.resolve().name)
    except StoreCorruptError as e:  # the store's reader has set the episode aside
        raise EpisodeDamaged(f"{e}; the episode is set aside (listed under damaged in /api/run)") from e
    except StoreError as e:  # retention dropped it meanwhile
        raise NotFound(f"{group}/{episode} is no longer in the store: {e}") from e


@router.get(
    "/{group}/{episode}/export.mcap",
    response_class=Response,
    responses={
        **READ_ERRORS,
        200: {"content": {MEDIA_TYPE: {}}, "description": "the episode as an MCAP file (Foxglove's schemas)"},
        429: {"model": ErrorBody, "description": "exports are already running and waiting: try again shortly"},
    },
    summary="the episode as an MCAP file for Foxglove: cameras, step vectors, the episode record",
)
async def export_mcap(
    ctx: Ctx,
    request: Request,
    group: GroupP,
    episode: EpisodeP,
    images: Annotated[Literal["jpeg", "raw"], Query(description="foxglove.CompressedImage or RawImage")] = "jpeg",
) -> StreamingResponse:
    ctx.data.record(group, episode)  # 404 / 410 before any work
    tmp = Path(tempfile.mkdtemp(prefix="worldsample-export-"))
    try:
        out = tmp / "episode.mcap"
        await _queue(request).run(lambda: _export(ctx, group, episode, images, out))
        f = open(out, "rb")  # closed by the body's generator
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = os.fstat(f.fileno()).st_size

    async def body():
        try:
            while chunk := await anyio.to_thread.run_sync(f.read, BLOCK):
                yield chunk
        finally:
            f.close()

    run = re.sub(r"[^A-Za-z0-9_.-]", "_", ctx.run_dir.resolve().name)[:64]
    headers = {
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="{run}-{group}-{episode}.mcap"',
        "Cache-Control": "no-store",
    }
    return StreamingResponse(body(), media_type=MEDIA_TYPE, headers=headers)
