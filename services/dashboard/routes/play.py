"""Play in the world model: a person drives the arm frame by frame inside the run's newest world
model, from a real start (a step of a stored episode). docs/dashboard.md, "Play in the world model".

Read access, as the imagine view has: play moves no robot and writes nothing into the run. What it
costs is the world model's CPU, bounded by the imagine view's work queue, which it shares (one
model call at a time in a worker thread, `max_imagine_waiting` waiting, the rest 429 with
Retry-After), and memory, bounded by `max_play_sessions` sessions of a fixed size each.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, Depends, Path, Response

from services.dashboard import images
from services.dashboard.context import AppContext
from services.dashboard.errors import NotFound, NotImplementedYet, RangeNotSatisfiable, Unprocessable
from services.dashboard.models import PlayActionBody, PlaySessionView, PlayStartBody
from services.dashboard.play import PlayProvider, PlayState
from services.dashboard.routes.deps import RANGE_ERRORS, AuthFirstRoute, ErrorBody, get_ctx, read_access
from worldsample.paths import RunFiles


def _err(desc: str) -> dict:
    return {"model": ErrorBody, "description": desc}


PLAY_ERRORS = {
    **RANGE_ERRORS,
    404: _err("no world model checkpoint yet, no such group, episode or camera, a camera the model does not model, "
              "or no such play session (ended or closed)"),  # fmt: skip
    409: _err("the world model does not fit the group's data (keys, action dimensions or frame size)"),
    413: _err("body too large"),
    422: _err("a parameter or the body failed validation, or the action's length is not the session's action_dim"),
    429: _err("the world-model queue (shared with imagine) is full: retry after Retry-After; or too many wrong tokens"),
    501: _err("a world model checkpoint exists, but no play provider is wired in"),
}
router = APIRouter(
    prefix="/api/play",
    tags=["play"],
    dependencies=[Depends(read_access)],
    responses=PLAY_ERRORS,
    route_class=AuthFirstRoute,
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
SessionP = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{16,64}$", description="the session's id (from POST /api/play)")]
HEADERS = {
    "X-Play-Step": "steps taken since the start (1 for the first predicted frame)",
    "X-Action": "the action applied, after clipping, comma-separated",
    "X-Reward": "the reward head's prediction for this transition",
    "X-Success": "the success head's probability",
    "X-Success-Label": "true when the probability is above the model's calibrated threshold",
    "X-Done": "the done head's probability",
    "X-WM-Version": "the world-model version of the session",
}
FRAME = {
    "content": {"image/png": {}, "image/jpeg": {}},
    "description": "the next predicted frame of the session's camera; the heads' predictions in the headers",
    "headers": {name: {"description": d, "schema": {"type": "string"}} for name, d in HEADERS.items()},
}


def _provider(ctx: AppContext) -> PlayProvider:
    if not RunFiles.of(ctx.run_dir).world_model.is_dir():
        raise NotFound(f"no world model checkpoint in RUN ({ctx.run_dir.name}/world_model/ does not exist yet)")
    if ctx.play is None:
        raise NotImplementedYet("a world model checkpoint exists, but this dashboard has no play provider wired in")
    return ctx.play


def _view(ctx: AppContext, sid: str, s: PlayState) -> PlaySessionView:
    h, w = s.frame_shape[:2]
    return PlaySessionView(
        session=sid,
        group=s.group,
        episode=s.episode,
        step=s.start,
        camera=s.camera,
        wm_version=s.version,
        action_dim=s.action_dim,
        action_low=[float(x) for x in s.action_low],
        action_high=[float(x) for x in s.action_high],
        history=s.history,
        frame_width=w,
        frame_height=h,
        frame_url=f"/api/episodes/{s.group}/{s.episode}/frames/{s.camera}/{s.start}?format=png",
        steps=s.steps,
        sessions_open=len(ctx.play_sessions),
        max_sessions=ctx.play_sessions.limit,
        idle_timeout_s=ctx.play_sessions.idle_s,
    )


@router.post(
    "",
    status_code=201,
    response_model=PlaySessionView,
    summary="start playing in the world model from a step of a stored episode",
)
async def start(ctx: Ctx, body: PlayStartBody) -> PlaySessionView:
    provider = _provider(ctx)
    ctx.data.camera_key(body.group, body.camera)
    length = ctx.data.record(body.group, body.episode).length
    if body.step >= length:
        raise RangeNotSatisfiable(
            f"step {body.step} is past the last step ({length - 1}) of {body.group}/{body.episode}"
        )
    state = await ctx.imagine_work.run(lambda: provider.start(body.group, body.episode, body.camera, body.step))
    sid = ctx.play_sessions.add(state)
    return _view(ctx, sid, state)


@router.post(
    "/{session}/step",
    response_class=Response,
    responses={200: FRAME},
    summary="apply one action and get the next predicted frame",
)
async def step(ctx: Ctx, session: SessionP, body: PlayActionBody, format: Literal["png", "jpeg"] = "png") -> Response:
    state = ctx.play_sessions.get(session)
    if len(body.action) != state.action_dim:
        raise Unprocessable(
            f"the action has {len(body.action)} values; world model v{state.version} takes {state.action_dim}"
        )
    provider, q = _provider(ctx), ctx.settings.jpeg_quality

    def work():
        frame = provider.step(state, np.asarray(body.action, np.float64))
        return frame, images.encode(frame.image, format, q)

    frame, data = await ctx.imagine_work.run(work)
    values = {
        "X-Play-Step": str(frame.step),
        "X-Action": ",".join(f"{x:.6g}" for x in frame.action),
        "X-Reward": f"{frame.reward:.9g}",
        "X-Success": f"{frame.success:.9g}",
        "X-Success-Label": "true" if frame.success_label else "false",
        "X-Done": f"{frame.done:.9g}",
        "X-WM-Version": str(state.version),
        "Cache-Control": "no-store",
    }
    return Response(data, media_type=images.MEDIA[format], headers=values)


@router.post("/{session}/reset", response_model=PlaySessionView, summary="back to the session's real start")
async def reset(ctx: Ctx, session: SessionP) -> PlaySessionView:
    """The same start again, with the newest world model."""
    old = ctx.play_sessions.get(session)
    provider = _provider(ctx)
    state = await ctx.imagine_work.run(lambda: provider.start(old.group, old.episode, old.camera, old.start))
    ctx.play_sessions.replace(session, state)
    return _view(ctx, session, state)


@router.delete(
    "/{session}", status_code=204, response_class=Response, responses={204: {"description": "closed"}},
    summary="close a play session",
)  # fmt: skip
async def close(ctx: Ctx, session: SessionP) -> Response:
    ctx.play_sessions.remove(session)
    return Response(status_code=204)
