"""Stored episodes: a filtered, paged list; one episode's metadata; its steps by range."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, Depends, Path, Query

from services.dashboard.context import AppContext
from services.dashboard.errors import BadRequest, RangeNotSatisfiable
from services.dashboard.models import EpisodeDetail, EpisodePage, EpisodeSummary, KeyInfo, StepsPage
from services.dashboard.routes.deps import RANGE_ERRORS, READ_ERRORS, AuthFirstRoute, get_ctx, read_access
from worldsample.store import EpisodeRecord, Label, Provenance

router = APIRouter(
    prefix="/api/episodes", tags=["episodes"], dependencies=[Depends(read_access)], route_class=AuthFirstRoute
)
Ctx = Annotated[AppContext, Depends(get_ctx)]
GroupP = Annotated[Provenance, Path(description="store group")]
EpisodeP = Annotated[int, Path(ge=0, le=2**53, description="episode id in the group")]
MAX_PAGE = 500


def summary(group: str, rec: EpisodeRecord, label: Label | None = None) -> EpisodeSummary:
    fields = rec.model_dump(include=set(EpisodeSummary.model_fields) - {"group", "label"})
    return EpisodeSummary(group=group, label=label.success if label is not None else None, **fields)


@router.get("", response_model=EpisodePage, responses=READ_ERRORS, summary="episodes, filtered and paged")
def list_episodes(
    ctx: Ctx,
    group: Provenance | None = None,
    success: bool | None = None,
    domain: Annotated[str | None, Query(max_length=64)] = None,
    policy_version: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    order: Literal["newest", "oldest"] = "newest",
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> EpisodePage:
    groups = [group] if group else ctx.data.groups()
    rows = [(g, r) for g in groups if g in ctx.data.groups() for _, r in ctx.data.records(g)]
    if success is not None:
        rows = [x for x in rows if x[1].success == success]
    if domain is not None:
        rows = [x for x in rows if x[1].domain == domain]
    if policy_version is not None:
        rows = [x for x in rows if x[1].policy_version == policy_version]
    rows.sort(key=lambda x: (x[1].wall_time_start, x[0], x[1].episode), reverse=order == "newest")
    page = rows[offset : offset + limit]
    labels = {g: ctx.data.labels(g) for g in {g for g, _ in page}}
    items = [summary(g, r, labels[g].get(r.episode)) for g, r in page]
    return EpisodePage(total=len(rows), offset=offset, limit=limit, items=items)


@router.get(
    "/{group}/{episode}", response_model=EpisodeDetail, responses=READ_ERRORS, summary="one episode's metadata and keys"
)
def episode_detail(ctx: Ctx, group: GroupP, episode: EpisodeP) -> EpisodeDetail:
    rec = ctx.data.record(group, episode)
    keys = [
        KeyInfo(name=k, dtype=s.dtype, shape=list(s.shape), kind=s.kind, camera=s.camera)
        for k, s in ctx.data.schema(group).keys.items()
    ]
    return EpisodeDetail(**summary(group, rec, ctx.data.labels(group).get(episode)).model_dump(), keys=keys,
                         domain_info=rec.domain_info, extra=rec.extra)


def _jsonable(a: np.ndarray) -> list:
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return [_jsonable(x) if isinstance(x, np.ndarray) else (float(x) if np.isfinite(x) else None) for x in a]
    return a.tolist()


@router.get(
    "/{group}/{episode}/steps",
    response_model=StepsPage,
    responses=RANGE_ERRORS,
    summary="per-step data of an episode, by step range",
)
def episode_steps(
    ctx: Ctx,
    group: GroupP,
    episode: EpisodeP,
    start: Annotated[int, Query(ge=0, le=2**31)] = 0,
    stop: Annotated[int | None, Query(ge=1, le=2**31, description="exclusive; default: the episode's end")] = None,
    keys: Annotated[list[str] | None, Query(description="step keys (repeat); default: all non-image keys")] = None,
) -> StepsPage:
    rec = ctx.data.record(group, episode)
    schema = ctx.data.schema(group)
    if start >= rec.length:
        raise RangeNotSatisfiable(f"start {start} is past the last step ({rec.length - 1}) of {group}/{episode}")
    stop = rec.length if stop is None else min(stop, rec.length)
    if stop <= start:
        raise BadRequest(f"stop ({stop}) must be greater than start ({start})")
    limit = ctx.settings.max_steps_per_request
    if stop - start > limit:
        raise BadRequest(f"{stop - start} steps asked; at most {limit} per request: page with start and stop")
    lowdim = [k for k, s in schema.keys.items() if s.kind != "image"]
    keys = keys or lowdim
    if len(keys) > len(schema.keys):
        raise BadRequest("too many keys")
    for k in keys:
        if k not in schema.keys:
            raise BadRequest(f"no key {k!r} in {group}; keys: {sorted(schema.keys)}")
        if k not in lowdim:
            raise BadRequest(f"{k!r} is an image key: fetch it from the frames, sheet or video endpoints")
    data = {k: _jsonable(ctx.data.steps(group, episode, k)[start:stop]) for k in dict.fromkeys(keys)}
    return StepsPage(group=group, episode=episode, start=start, stop=stop, length=rec.length, data=data)
