"""An episode's camera frames: single images, contact sheets (the player's format), an MJPEG
stream, and the world model's imagination of them."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import StreamingResponse

from services.dashboard import images
from services.dashboard.context import AppContext
from services.dashboard.errors import BadRequest, NotFound, NotImplementedYet, RangeNotSatisfiable, TooManyStreams
from services.dashboard.routes.deps import RANGE_ERRORS, get_ctx, read_access
from services.dashboard.routes.episodes import EpisodeP, GroupP
from worldsample.paths import RunFiles

router = APIRouter(prefix="/api/episodes", tags=["frames"], dependencies=[Depends(read_access)], responses=RANGE_ERRORS)
Ctx = Annotated[AppContext, Depends(get_ctx)]
CameraP = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="camera name")]
CACHE = {"Cache-Control": "private, max-age=86400"}  # committed episodes never change
IMAGE = {"content": {"image/jpeg": {}, "image/png": {}}, "description": "the image"}


def _check_step(ctx: AppContext, group: str, episode: int, step: int) -> int:
    length = ctx.data.record(group, episode).length
    if step >= length:
        raise RangeNotSatisfiable(f"step {step} is past the last step ({length - 1}) of {group}/{episode}")
    return length


def frame_bytes(ctx: AppContext, group: str, episode: int, camera: str, step: int, fmt: str) -> bytes:
    q = ctx.settings.jpeg_quality
    key = (group, episode, camera, step, fmt, q)
    return ctx.data.images.get_or_load(key, lambda: images.encode(ctx.data.frame(group, episode, camera, step), fmt, q))


async def cached_or_thread(ctx: AppContext, key: tuple, make):
    """A cached image straight from the event loop; decoding and encoding in a worker thread."""
    hit = ctx.data.images.peek(key)
    return hit if hit is not None else await anyio.to_thread.run_sync(make)


@router.get(
    "/{group}/{episode}/frames/{camera}/{step}",
    response_class=Response,
    responses={200: IMAGE},
    summary="one frame of one camera",
)
async def frame(
    ctx: Ctx,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    step: Annotated[int, Path(ge=0, le=2**31)],
    format: Literal["jpeg", "png"] = "jpeg",
) -> Response:
    ctx.data.camera_key(group, camera)
    _check_step(ctx, group, episode, step)
    key = (group, episode, camera, step, format, ctx.settings.jpeg_quality)
    body = await cached_or_thread(ctx, key, lambda: frame_bytes(ctx, group, episode, camera, step, format))
    return Response(body, media_type=images.MEDIA[format], headers=CACHE)


class _Sheet:
    """An encoded contact sheet and its layout headers (cached as a unit)."""

    def __init__(self, body: bytes, headers: dict[str, str]):
        self.body, self.headers = body, headers
        self.nbytes = len(body) + 256

    def response(self, extra: dict[str, str] | None = None) -> Response:
        return Response(self.body, media_type="image/jpeg", headers={**CACHE, **self.headers, **(extra or {})})


def _make_sheet(ctx: AppContext, frames, start: int, cols: int | None) -> _Sheet:
    n, h, w, _ = frames.shape
    try:
        cols = images.sheet_layout(n, h, w, cols)
    except ValueError as e:
        raise BadRequest(str(e)) from e
    body = images.encode(images.contact_sheet(frames, cols), "jpeg", ctx.settings.jpeg_quality)
    headers = {
        "X-Frame-Width": str(w),
        "X-Frame-Height": str(h),
        "X-Frame-Count": str(n),
        "X-Sheet-Cols": str(cols),
        "X-Start": str(start),
    }
    return _Sheet(body, headers)


@router.get(
    "/{group}/{episode}/sheet/{camera}",
    response_class=Response,
    responses={
        200: {
            "content": {"image/jpeg": {}},
            "description": "frames tiled row-major; layout in X-Frame-*/X-Sheet-Cols headers",
        }
    },
    summary="a range of frames as one contact-sheet JPEG (what the player loads)",
)
async def sheet(
    ctx: Ctx,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    count: Annotated[
        int | None, Query(ge=1, le=100_000, description="frames; default: to the end, at most max_sheet_frames")
    ] = None,
    cols: Annotated[int | None, Query(ge=1, le=256)] = None,
) -> Response:
    ctx.data.camera_key(group, camera)
    length = _check_step(ctx, group, episode, start)
    limit = ctx.settings.max_sheet_frames
    if count is not None and count > limit:
        raise BadRequest(f"{count} frames asked; at most {limit} per sheet: page with start and count")
    stop = min(length, start + (count or limit))
    key = (group, episode, camera, "sheet", start, stop, cols)

    def make() -> _Sheet:
        return ctx.data.images.get_or_load(
            key, lambda: _make_sheet(ctx, ctx.data.frames(group, episode, camera, start, stop), start, cols)
        )

    return (await cached_or_thread(ctx, key, make)).response()


@router.get(
    "/{group}/{episode}/video/{camera}",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"multipart/x-mixed-replace": {}}, "description": "MJPEG stream"},
        429: {"description": "too many streams"},
    },
    summary="the episode as an MJPEG stream (plays in an <img>), paced at fps",
)
async def video(
    ctx: Ctx,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    stop: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    fps: Annotated[float, Query(gt=0, le=240)] = 10.0,
    loop: bool = False,
) -> StreamingResponse:
    ctx.data.camera_key(group, camera)
    length = _check_step(ctx, group, episode, start)
    stop = length if stop is None else min(stop, length)
    if stop <= start:
        raise BadRequest(f"stop ({stop}) must be greater than start ({start})")
    if fps > ctx.settings.max_video_fps:
        raise BadRequest(f"fps {fps} is above the limit {ctx.settings.max_video_fps}")
    if not ctx.streams.acquire():
        raise TooManyStreams("too many streams open; close some players or raise max_stream_clients")

    async def body():
        try:
            q = ctx.settings.jpeg_quality
            async for part in images.mjpeg(
                lambda t: frame_bytes(ctx, group, episode, camera, t, "jpeg"),
                lambda t: ctx.data.images.peek((group, episode, camera, t, "jpeg", q)),
                start,
                stop,
                fps,
                loop,
            ):
                yield part
        finally:
            ctx.streams.release()

    return StreamingResponse(
        body(),
        media_type=f"multipart/x-mixed-replace; boundary={images.BOUNDARY}",
        headers={"Cache-Control": "no-store"},
    )


@router.get(
    "/{group}/{episode}/imagine/{camera}",
    response_class=Response,
    responses={
        200: {"content": {"image/jpeg": {}}, "description": "predicted frames as a contact sheet"},
        501: {"description": "no provider wired in"},
    },
    summary="the world model's imagination from a step of a stored episode (a contact sheet)",
)
def imagine(
    ctx: Ctx,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    horizon: Annotated[int, Query(ge=1, le=512)] = 16,
) -> Response:
    if not RunFiles.of(ctx.run_dir).world_model.is_dir():
        raise NotFound(f"no world model checkpoint in RUN ({ctx.run_dir.name}/world_model/ does not exist yet)")
    ctx.data.camera_key(group, camera)
    length = _check_step(ctx, group, episode, start)
    if ctx.imagine is None:
        raise NotImplementedYet(
            "a world model checkpoint exists, but this dashboard has no imagination provider wired in yet"
        )
    horizon = min(horizon, length - start)
    frames = ctx.imagine.imagine(group, episode, camera, start, horizon)
    return _make_sheet(ctx, frames, start, None).response(
        {"X-WM-Version": str(ctx.imagine.version), "Cache-Control": "no-store"}
    )
