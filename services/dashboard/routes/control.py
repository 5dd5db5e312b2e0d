"""Control requests: pause/resume training, e-stop, start/stop an episode, label an episode.

Each endpoint needs `Authorization: Bearer <token>` and writes one request file into
RUN/control/requests/ (worldsample.runlog.control); the trainer and the bridge act on it and
acknowledge it, which the control history shows.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from services.dashboard.context import AppContext
from services.dashboard.models import ControlBody, ControlView, LabelBody
from services.dashboard.routes.deps import CONTROL_ERRORS, AuthFirstRoute, control_access, get_ctx
from worldsample.runlog.control import ControlKind

router = APIRouter(
    prefix="/api/control",
    tags=["control"],
    dependencies=[Depends(control_access)],
    responses=CONTROL_ERRORS,
    route_class=AuthFirstRoute,  # the token before the body: 401/403, never a 422 first
)
Ctx = Annotated[AppContext, Depends(get_ctx)]


def _send(ctx: AppContext, kind: ControlKind, body: ControlBody | None, **fields) -> ControlView:
    cmd = ctx.control.send(kind, reason=body.reason if body else "", source="dashboard", **fields)
    return ControlView(**cmd.model_dump(exclude={"version"}), acks=[])


@router.post(
    "/pause", status_code=202, response_model=ControlView, summary="pause training (the robot keeps its safe state)"
)
def pause(ctx: Ctx, body: ControlBody | None = None) -> ControlView:
    return _send(ctx, ControlKind.pause, body)


@router.post("/resume", status_code=202, response_model=ControlView, summary="resume training")
def resume(ctx: Ctx, body: ControlBody | None = None) -> ControlView:
    return _send(ctx, ControlKind.resume, body)


@router.post("/estop", status_code=202, response_model=ControlView, summary="emergency stop (the bridge stops the arm)")
def estop(ctx: Ctx, body: ControlBody | None = None) -> ControlView:
    return _send(ctx, ControlKind.estop, body)


@router.post("/episode/start", status_code=202, response_model=ControlView, summary="start a real episode")
def start_episode(ctx: Ctx, body: ControlBody | None = None) -> ControlView:
    return _send(ctx, ControlKind.start_episode, body)


@router.post("/episode/stop", status_code=202, response_model=ControlView, summary="stop the current episode")
def stop_episode(ctx: Ctx, body: ControlBody | None = None) -> ControlView:
    return _send(ctx, ControlKind.stop_episode, body)


@router.post(
    "/label", status_code=202, response_model=ControlView, summary="label a stored episode a success or a failure"
)
def label(ctx: Ctx, body: LabelBody) -> ControlView:
    ctx.data.record(body.group, body.episode)  # 404 for an unknown episode
    return _send(ctx, ControlKind.label, body, group=body.group, episode=body.episode, success=body.success)
