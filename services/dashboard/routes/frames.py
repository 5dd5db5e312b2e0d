"""An episode's camera frames: single images, contact sheets (the player's format), an MJPEG
stream, and the world model's imagination of them.

Images carry an ETag made of the run's id and what the image shows (episode, the camera's
checksum, the range), and are cached for a day only when the URL names the run (`run=<run_id>`
from /api/run); otherwise the browser revalidates (304 when unchanged). So a browser never shows
one run's frames for another run served later on the same port."""

from __future__ import annotations

import hashlib
import logging
from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from services.dashboard import images
from services.dashboard.context import AppContext
from services.dashboard.errors import BadRequest, NotFound, NotImplementedYet, RangeNotSatisfiable
from services.dashboard.routes.deps import RANGE_ERRORS, AuthFirstRoute, ErrorBody, get_ctx, read_access
from services.dashboard.routes.episodes import EpisodeP, GroupP
from worldsample.errors import WorldSampleError
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)

router = APIRouter(
    prefix="/api/episodes",
    tags=["frames"],
    dependencies=[Depends(read_access)],
    responses=RANGE_ERRORS,
    route_class=AuthFirstRoute,
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
CameraP = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="camera name")]
RunQ = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9a-f]{16}$",
        description="the run's id (run_id in /api/run): with it, the image is cached for a day; without it "
        "(or with another run's id), the browser revalidates it with its ETag",
    ),
]
IMMUTABLE = "private, max-age=86400, immutable"  # committed episodes never change
REVALIDATE = "private, no-cache"
IMAGE = {"content": {"image/jpeg": {}, "image/png": {}}, "description": "the image"}
NOT_MODIFIED = {304: {"description": "unchanged since the ETag sent in If-None-Match"}}


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


def validators(ctx: AppContext, request: Request, group: str, episode: int, camera: str, *what) -> dict[str, str]:
    """ETag and Cache-Control of an image of a stored episode (see the module's docstring)."""
    rec = ctx.data.record(group, episode)
    shown = (group, episode, rec.wall_time_start, rec.checksums.get(f"image_{camera}"), ctx.settings.jpeg_quality, what)
    digest = hashlib.sha256(repr(shown).encode()).hexdigest()[:20]
    named = request.query_params.get("run") == ctx.run_id
    return {"ETag": f'"{ctx.run_id}-{digest}"', "Cache-Control": IMMUTABLE if named else REVALIDATE}


def not_modified(request: Request, headers: dict[str, str]) -> Response | None:
    sent = request.headers.get("if-none-match")
    if sent is None:
        return None
    tags = {t.strip().removeprefix("W/") for t in sent.split(",")}
    return Response(status_code=304, headers=headers) if headers["ETag"] in tags or "*" in tags else None


@router.get(
    "/{group}/{episode}/frames/{camera}/{step}",
    response_class=Response,
    responses={200: IMAGE, **NOT_MODIFIED},
    summary="one frame of one camera",
)
async def frame(
    ctx: Ctx,
    request: Request,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    step: Annotated[int, Path(ge=0, le=2**31)],
    format: Literal["jpeg", "png"] = "jpeg",
    run: RunQ = None,
) -> Response:
    ctx.data.camera_key(group, camera)
    _check_step(ctx, group, episode, step)
    headers = validators(ctx, request, group, episode, camera, "frame", step, format)
    if (same := not_modified(request, headers)) is not None:
        return same
    key = (group, episode, camera, step, format, ctx.settings.jpeg_quality)
    body = await cached_or_thread(ctx, key, lambda: frame_bytes(ctx, group, episode, camera, step, format))
    return Response(body, media_type=images.MEDIA[format], headers=headers)


class _Sheet:
    """An encoded contact sheet and its layout headers (cached as a unit)."""

    def __init__(self, body: bytes, headers: dict[str, str]):
        self.body, self.headers = body, headers
        self.nbytes = len(body) + 256

    def response(self, extra: dict[str, str]) -> Response:
        return Response(self.body, media_type="image/jpeg", headers={**self.headers, **extra})


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
        },
        **NOT_MODIFIED,
    },
    summary="a range of frames as one contact-sheet JPEG (what the player loads)",
)
async def sheet(
    ctx: Ctx,
    request: Request,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    count: Annotated[
        int | None,
        Query(ge=1, le=100_000, description="frames; default: to the end, at most max_sheet_frames (the maximum)"),
    ] = None,
    cols: Annotated[int | None, Query(ge=1, le=256)] = None,
    run: RunQ = None,
) -> Response:
    ctx.data.camera_key(group, camera)
    length = _check_step(ctx, group, episode, start)
    limit = ctx.settings.max_sheet_frames
    if count is not None and count > limit:
        raise BadRequest(f"{count} frames asked; at most {limit} per sheet: page with start and count")
    stop = min(length, start + (count or limit))
    headers = validators(ctx, request, group, episode, camera, "sheet", start, stop, cols)
    if (same := not_modified(request, headers)) is not None:
        return same
    key = (group, episode, camera, "sheet", start, stop, cols)

    def make() -> _Sheet:
        return ctx.data.images.get_or_load(
            key, lambda: _make_sheet(ctx, ctx.data.frames(group, episode, camera, start, stop), start, cols)
        )

    return (await cached_or_thread(ctx, key, make)).response(headers)


@router.get(
    "/{group}/{episode}/video/{camera}",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"multipart/x-mixed-replace": {}}, "description": "MJPEG stream"},
        429: {"model": ErrorBody, "description": "too many streams (on the server, or from this client)"},
    },
    summary="the episode as an MJPEG stream (plays in an <img>), paced at fps",
)
async def video(
    ctx: Ctx,
    request: Request,
    group: GroupP,
    episode: EpisodeP,
    camera: CameraP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    stop: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    fps: Annotated[float, Query(gt=0, le=240, description="at most max_video_fps (in the maximum)")] = 10.0,
    loop: bool = False,
) -> StreamingResponse:
    ctx.data.camera_key(group, camera)
    length = _check_step(ctx, group, episode, start)
    stop = length if stop is None else min(stop, length)
    if stop <= start:
        raise BadRequest(f"stop ({stop}) must be greater than start ({start})")
    if fps > ctx.settings.max_video_fps:
        raise BadRequest(f"fps {fps} is above the limit {ctx.settings.max_video_fps}")
    q = ctx.settings.jpeg_quality
    # the first frame before the answer starts: a damaged episode is a JSON error, not an empty 200
    await cached_or_thread(
        ctx, (group, episode, camera, start, "jpeg", q), lambda: frame_bytes(ctx, group, episode, camera, start, "jpeg")
    )
    client = request.client.host if request.client else "?"
    ctx.streams.acquire("video", client)

    async def body():
        try:
            async for part in images.mjpeg(
                lambda t: frame_bytes(ctx, group, episode, camera, t, "jpeg"),
                lambda t: ctx.data.images.peek((group, episode, camera, t, "jpeg", q)),
                start,
                stop,
                fps,
                loop,
            ):
                yield part
        except WorldSampleError as e:  # found damaged (or dropped) mid-stream: end the stream, say why in the log
            log.error("video of %s/%s/%s ended: %s", group, episode, camera, e)
            yield f"--{images.BOUNDARY}--\r\n".encode()
        finally:
            ctx.streams.release("video", client)

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
        409: {"model": ErrorBody, "description": "the world model does not fit the group's data"},
        429: {"model": ErrorBody, "description": "the imagine queue is full (Retry-After)"},
        501: {"model": ErrorBody, "description": "no provider wired in"},
    },
    summary="the world model's imagination from a step of a stored episode (a contact sheet)",
)
async def imagine(
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
    provider = ctx.imagine
    if provider is None:
        raise NotImplementedYet(
            "a world model checkpoint exists, but this dashboard has no imagination provider wired in yet"
        )
    horizon = min(horizon, length - start)

    def work() -> _Sheet:
        return _make_sheet(ctx, provider.imagine(group, episode, camera, start, horizon), start, None)

    # one rollout at a time in a worker thread, a few queued, the rest refused: the thread pool
    # that every other endpoint uses is never filled with waiting rollouts
    sheet = await ctx.imagine_work.run(work)
    return sheet.response({"X-WM-Version": str(provider.version), "Cache-Control": "no-store"})
