"""Response and request bodies of the API (they make the OpenAPI schema precise)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsample.runlog.control import Ack, ControlKind
from worldsample.runlog.status import RobotState
from worldsample.store import Provenance, SourceRef

# -- run overview ------------------------------------------------------------------------------


class GroupSummary(BaseModel):
    name: str
    episodes: int
    steps: int
    success_rate: float | None
    mean_return: float | None
    interventions: int
    cameras: list[str]
    image_size: list[int] | None = Field(None, description="[height, width, channels] of every camera")
    writer_active: bool
    last_episode_end: float | None


class ServiceView(BaseModel):
    name: str
    state: str
    heartbeat: float
    age_s: float
    stale: bool
    detail: str


class TrainerView(BaseModel):
    running: bool = Field(
        description="a trainer is alive on this run (fresh heartbeat in status.json, state not stopped or error, and "
        "its process exists when it runs on this host): pause, resume and labels act only while this is true"
    )
    state: str | None = Field(None, description="the trainer's own state (starting, running, paused, stopped, error)")
    reason: str = Field(description="why no trainer is running (empty while one is)")
    pid: int | None = None
    host: str | None = None
    age_s: float | None = Field(None, description="seconds since the trainer's last heartbeat")


class MetricsSummary(BaseModel):
    rows: int
    names: list[str]
    malformed: int
    last_step: int | None
    last_time: float | None


class ControlView(BaseModel):
    id: str
    kind: ControlKind
    time: float
    expires: float | None
    source: str
    reason: str
    group: str | None
    episode: int | None
    success: bool | None
    acks: list[Ack]


class DamagedItem(BaseModel):
    group: str
    episode: int | None = Field(description="null when the whole group could not be opened")
    reason: str


class ClusterNode(BaseModel):
    node_id: str
    ip: str | None
    hostname: str | None
    alive: bool = Field(description="false once Ray has lost the node")
    head: bool = Field(description="the node that holds Ray's control store")
    resources: dict[str, float] = Field(description="Ray resources of the node (memory left out)")


class ClusterPart(BaseModel):
    name: str = Field(description="the part of the trainer (world_model, learner, ...)")
    state: str | None = Field(description="Ray's state of its actor (ALIVE, RESTARTING, DEAD, ...); null when Ray "
                              "could not tell")
    node_id: str | None
    node_ip: str | None
    hostname: str | None = Field(description="the hostname of the node its actor runs on")
    node_alive: bool | None = Field(description="whether that node is alive in `nodes`; null when it is not listed")
    pid: int | None
    restarts: int | None = Field(description="times Ray restarted its actor")
    actor: str | None
    placement: str | None = Field(description="what the part asked for (GPU share, custom resource)")
    generation: int | None = Field(description="times the trainer made the part again elsewhere")


class ClusterView(BaseModel):
    updated: float | None = Field(description="when the trainer last wrote RUN/nodes.json (its own clock)")
    age_s: float | None = Field(None, description="seconds since `updated` (or since the file changed)")
    stale: bool = Field(False, description="the file says the trainer runs but is older than 90 s")
    modified: float | None = Field(description="the file's modification time")
    running: bool | None = Field(description="false once the trainer has stopped")
    address: str | None = Field(description="the Ray cluster's address, or `local`")
    driver_node: str | None
    nodes: list[ClusterNode]
    parts: list[ClusterPart]
    malformed: int = Field(0, description="entries of the wrong shape left out")
    truncated: bool = Field(False, description="more than 256 nodes or parts: the first are shown")
    error: str | None = Field(description="why the file is not shown (a symbolic link, too large, not JSON, "
                              "nested deeper than 32 levels); nodes and parts are then empty")


class RunOverview(BaseModel):
    run: str
    run_id: str = Field(
        description="changes when another run is served from this address; image URLs with run=<run_id> are cached"
    )
    now: float
    status_source: Literal["status.json", "derived"]
    phase: str
    paused: bool
    learner_step: int | None
    real_steps: int | None
    policy_version: int | None
    wm_version: int | None
    robot: RobotState | None
    trainer: TrainerView = Field(description="whether a trainer is running on this run, so that pause, resume and "
                                 "labels will act; `reason` says why not")
    services: list[ServiceView]
    groups: list[GroupSummary]
    metrics: MetricsSummary
    events: int
    world_model: bool
    policies: int
    reports: int
    recent_controls: list[ControlView]
    damaged: list[DamagedItem] = Field(
        description="episodes the store's readers set aside as damaged (unreadable record, chunks that do not "
        "decode or do not match their checksums), and groups that could not be opened"
    )
    cluster: ClusterView | None = Field(
        None, description="the Ray nodes and the node each part of the trainer runs on, from RUN/nodes.json; null "
        "when there is no such file (the trainer has not run on Ray in this run directory)"
    )


# -- episodes ----------------------------------------------------------------------------------


class EpisodeSummary(BaseModel):
    group: str
    episode: int
    length: int
    episode_return: float
    success: bool
    terminated: bool
    interventions: int
    policy_version: int | None
    wm_version: int | None
    domain: str
    cameras: list[str]
    source: SourceRef | None
    wall_time_start: float
    wall_time_end: float
    label: bool | None = Field(
        None, description="the operator's verdict stored beside the episode (true: success), which the learner's "
        "reward follows; null when none (`success` is always as recorded)")


class EpisodePage(BaseModel):
    total: int
    offset: int
    limit: int
    items: list[EpisodeSummary]


class KeyInfo(BaseModel):
    name: str
    dtype: str
    shape: list[int]
    kind: str
    camera: str | None


class EpisodeDetail(EpisodeSummary):
    keys: list[KeyInfo]
    domain_info: dict[str, Any]
    extra: dict[str, Any]


class StepsPage(BaseModel):
    group: str
    episode: int
    start: int
    stop: int
    length: int
    data: dict[str, list[Any]] = Field(description="key -> one value per step (numbers, lists of numbers or booleans)")


# -- metrics and events ------------------------------------------------------------------------


class Series(BaseModel):
    step: list[float]
    time: list[float]
    value: list[float | None] = Field(description="null where the logged value was NaN or infinite")


class MetricsSeries(BaseModel):
    series: dict[str, Series]
    rows: int
    malformed: int


class LatestValue(BaseModel):
    step: float
    value: float | None


class MetricsLatest(BaseModel):
    names: list[str]
    latest: dict[str, LatestValue]
    rows: int
    malformed: int


class EventView(BaseModel):
    time: float
    kind: str
    level: str
    source: str
    message: str
    data: dict[str, Any]


class EventPage(BaseModel):
    total: int
    malformed: int
    items: list[EventView]


# -- control -----------------------------------------------------------------------------------


class ControlBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=500, description="why (shown in the run's control history)")


class LabelBody(ControlBody):
    group: Provenance
    episode: int = Field(ge=0, le=2**53, strict=True, description='an integer (false, 1.0 or "1" are refused)')
    success: bool = Field(strict=True, description='true or false (0, 1 or "yes" are refused)')


# -- policies and reports ----------------------------------------------------------------------


class PolicyEntry(BaseModel):
    name: str
    modified: float
    size_bytes: int
    files: list[str]
    meta: dict[str, Any]


class ReportEntry(BaseModel):
    name: str
    modified: float
    size_bytes: int
    summary: dict[str, Any]


class ComparisonRow(BaseModel):
    policy: str
    source: str = Field(description="where the figures come from: store/<group> or report/<name>")
    episodes: int | None
    success_rate: float | None
    mean_return: float | None
    mean_length: float | None
    interventions_per_episode: float | None
    ci_low: float | None = Field(None, description="Wilson 95 % interval of success_rate, lower end (null unless "
                                 "episodes and success_rate give a whole number of successes)")
    ci_high: float | None = Field(None, description="Wilson 95 % interval of success_rate, upper end")


class VersionEval(BaseModel):
    evaluations: int = Field(ge=1, description="evaluation rows of this version in metrics.jsonl")
    step: int = Field(description="the step of the newest evaluation (the one shown)")
    episodes: int = Field(ge=1, description="episodes of the newest evaluation")
    successes: int = Field(ge=0)
    success_rate: float = Field(ge=0, le=1)
    ci_low: float = Field(ge=0, le=1, description="Wilson score interval, lower end")
    ci_high: float = Field(ge=0, le=1, description="Wilson score interval, upper end")


class VersionOnline(BaseModel):
    episodes: int = Field(ge=1, description="episodes of the online group recorded with this version")
    successes: int = Field(ge=0, description="successes, the operator's label where there is one")
    success_rate: float = Field(ge=0, le=1)
    ci_low: float = Field(ge=0, le=1, description="Wilson score interval, lower end")
    ci_high: float = Field(ge=0, le=1, description="Wilson score interval, upper end")
    labelled: int = Field(ge=0, description="episodes whose success is the operator's label")
    intervention_share: float = Field(ge=0, le=1, description="share of steps a person drove")
    episodes_with_intervention: int = Field(ge=0)


class VersionRow(BaseModel):
    version: int | None = Field(description="null: no policy published yet (random actions)")
    name: str = Field(max_length=32, description="v<version>, or none")
    evaluation: VersionEval | None = Field(description="the trainer's newest evaluation of this version")
    online: VersionOnline | None = Field(description="the episodes the robot ran with this version")


class VersionTable(BaseModel):
    confidence: float = Field(description="the intervals' confidence level (0.95)")
    online_group: str = Field(description="the store group whose episodes count as online")
    versions: list[VersionRow] = Field(max_length=500, description="oldest version first (at most 500, newest kept)")
    truncated: bool = Field(description="more versions than listed")
    eval_rows: int = Field(description="evaluation rows used")
    rate_only_rows: int = Field(description="evaluation rows with a rate but no counts (older runs): no interval")
    skipped_rows: int = Field(description="evaluation rows skipped because their figures do not hold together")
    skipped_reasons: list[str] = Field(max_length=5, description="why, for the first few")
    damaged_episodes: int = Field(description="online episodes the store set aside as damaged (not counted)")


class PolicyOverview(BaseModel):
    policies: list[PolicyEntry]
    reports: list[ReportEntry]
    comparison: list[ComparisonRow]
    versions: VersionTable = Field(description="success per policy version with Wilson 95 % intervals: the "
                                   "trainer's evaluations and the online episodes")


# -- the run's config and the runs beside it ----------------------------------------------------


class ConfigFile(BaseModel):
    text: str = Field(description="RUN/config.yaml as written (not parsed)")
    size_bytes: int
    modified: float


class ConfigView(BaseModel):
    config: ConfigFile | None = Field(description="null when there is none or it is not served (config_error)")
    config_error: str | None = Field(description="why config is null: missing, a symbolic link, too large")
    history: list[dict[str, Any]] = Field(
        description="the newest entries of RUN/config_history.jsonl (one per start or resume), oldest first"
    )
    history_lines: int = Field(description="non-empty lines in config_history.jsonl")
    history_malformed: int = Field(description="lines skipped: not a JSON object, too deep or too long")
    history_error: str | None = Field(description="why the history could not be read at all")


class SiblingRun(BaseModel):
    name: str
    modified: float = Field(description="when its metrics.jsonl last changed")
    size_bytes: int = Field(description="size of its metrics.jsonl")


class SiblingRuns(BaseModel):
    current: str = Field(description="this run's directory name")
    runs: list[SiblingRun] = Field(description="directories beside this run that hold a metrics.jsonl, newest first")
    truncated: bool = Field(description="more were there than listed (the limit, or the parent's scan bound)")
    limit: int


# -- play in the world model -------------------------------------------------------------------

MAX_ACTION_DIM = 64  # WorldModelConfig.action_dim's bound
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class PlayStartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group: Provenance
    episode: int = Field(ge=0, le=2**53, strict=True, description="a stored episode of the group")
    step: int = Field(0, ge=0, le=2**31, strict=True, description="the step to start from (before the episode's end)")
    camera: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a camera of the group that the model models")


class PlayActionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: list[FiniteFloat] = Field(
        min_length=1,
        max_length=MAX_ACTION_DIM,
        description="one finite number per action dimension (action_dim of the session), clipped to "
        "[action_low, action_high]; true, strings, NaN and infinities are refused",
    )


class PlaySessionView(BaseModel):
    session: str = Field(description="the session's id, for /api/play/{session}/...")
    group: str
    episode: int
    step: int = Field(description="the real start: the step of the episode the session starts from")
    camera: str
    wm_version: int = Field(description="the world-model version the session runs on (the newest at its start)")
    action_dim: int
    action_low: list[float]
    action_high: list[float]
    history: int = Field(description="frames of the episode up to the start that the model conditions on")
    frame_width: int
    frame_height: int
    frame_url: str = Field(description="the real start frame (the frames endpoint)")
    steps: int = Field(description="steps taken since the start (0 after a start or reset)")
    sessions_open: int
    max_sessions: int
    idle_timeout_s: float
