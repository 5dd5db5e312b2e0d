"""The run at a glance: status.json when a service writes one, else what the store shows."""

from __future__ import annotations

import os
import time

from services.dashboard.artifacts import list_policies, list_reports
from services.dashboard.cluster import cluster_view
from services.dashboard.data import RunData
from services.dashboard.models import (
    ControlView,
    DamagedItem,
    GroupSummary,
    MetricsSummary,
    RunOverview,
    ServiceView,
    TrainerView,
)
from worldsample.paths import RunFiles
from worldsample.runlog.control import ControlChannel
from worldsample.runlog.events import EventReader
from worldsample.runlog.metrics import MetricsReader
from worldsample.runlog.status import RunStatus, StatusFile

STALE_AFTER_S = 10.0
NO_TRAINER = "nothing will act on pause, resume or labels until `worldsample train` runs on this run"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def trainer_view(st: RunStatus | None, now: float) -> TrainerView:
    """Whether a trainer runs on this run: its entry in status.json is fresh, not stopped, and its
    process exists (checked when it runs on this host)."""
    s = st.services.get("trainer") if st is not None else None
    if s is None:
        return TrainerView(running=False, reason=f"no trainer has written status.json: {NO_TRAINER}")
    age = max(0.0, now - s.heartbeat)
    view = dict(state=s.state, pid=s.pid, host=s.host, age_s=age)
    if s.state in ("stopped", "error"):
        why = f"the trainer {'stopped' if s.state == 'stopped' else 'ended with an error'}"
        detail = f" ({s.detail[:300]})" if s.detail else ""
        return TrainerView(running=False, reason=f"{why}{detail}: {NO_TRAINER}", **view)
    if s.pid is not None and s.host == os.uname().nodename and not pid_alive(s.pid):
        return TrainerView(running=False, reason=f"the trainer's process {s.pid} is gone: {NO_TRAINER}", **view)
    if age > STALE_AFTER_S:
        return TrainerView(running=False, reason=f"the trainer's last heartbeat was {age:.0f} s ago: {NO_TRAINER}",
                           **view)
    return TrainerView(running=True, reason="", **view)


def group_summaries(data: RunData) -> list[GroupSummary]:
    out = []
    for g in data.groups():
        recs = [r for _, r in data.records(g)]
        schema = data.schema(g)
        cams = schema.cameras
        shape = list(schema.keys[f"image_{cams[0]}"].shape) if cams else None
        n = len(recs)
        out.append(
            GroupSummary(
                name=g,
                episodes=n,
                steps=sum(r.length for r in recs),
                success_rate=sum(r.success for r in recs) / n if n else None,
                mean_return=sum(r.episode_return for r in recs) / n if n else None,
                interventions=sum(r.interventions for r in recs),
                cameras=cams,
                image_size=shape,
                writer_active=data.writer_active(g),
                last_episode_end=max((r.wall_time_end for r in recs), default=None),
            )
        )
    return out


def control_views(control: ControlChannel, limit: int) -> list[ControlView]:
    return [ControlView(**cmd.model_dump(exclude={"version"}), acks=acks) for cmd, acks in control.history(limit)]


def build_overview(
    data: RunData,
    metrics: MetricsReader,
    events: EventReader,
    control: ControlChannel,
    controls: int = 8,
    run_id: str = "",
) -> RunOverview:
    now = time.time()
    files = RunFiles.of(data.run_dir)
    st = StatusFile(data.run_dir).read()
    groups = group_summaries(data)
    services = []
    if st is not None:
        for name, s in sorted(st.services.items()):
            age = max(0.0, now - s.heartbeat)
            services.append(
                ServiceView(
                    name=name,
                    state=s.state,
                    heartbeat=s.heartbeat,
                    age_s=age,
                    stale=age > STALE_AFTER_S,
                    detail=s.detail,
                )
            )
        phase = st.phase
    else:
        phase = "recording" if any(g.writer_active for g in groups) else ("idle" if data.has_store else "empty")
    real = next((g.steps for g in groups if g.name == "real"), None)
    return RunOverview(
        run=data.run_dir.resolve().name,
        run_id=run_id,
        now=now,
        status_source="status.json" if st is not None else "derived",
        phase=phase,
        paused=st.paused if st else False,
        learner_step=st.learner_step if st else metrics.last_step,
        real_steps=st.real_steps if st and st.real_steps is not None else real,
        policy_version=st.policy_version if st else None,
        wm_version=st.wm_version if st else None,
        robot=st.robot if st else None,
        trainer=trainer_view(st, now),
        services=services,
        groups=groups,
        metrics=MetricsSummary(
            rows=metrics.rows,
            names=metrics.names(),
            malformed=metrics.malformed,
            last_step=metrics.last_step,
            last_time=metrics.last_time,
        ),
        events=events.total,
        world_model=files.world_model.is_dir(),
        policies=len(list_policies(data.run_dir)),
        reports=len(list_reports(data.run_dir)),
        recent_controls=control_views(control, controls),
        damaged=[DamagedItem(group=g, episode=e, reason=why[:500]) for g, e, why in data.damaged()],
        cluster=cluster_view(data.run_dir, now),
    )
