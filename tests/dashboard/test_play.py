"""Play in the world model over real uvicorn and httpx, with a real (small, untrained) world-model
checkpoint in the run: a session starts from a real start, its frames follow the action, repeat
for the same actions, and match the model's own rollout; bad input, unknown sessions, the session
limit, the shared work queue, and the schema."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from PIL import Image

from services.dashboard import DashboardSettings, create_app
from services.dashboard.errors import NotFound
from services.dashboard.play import PlaySessions
from services.dashboard.server import BackgroundServer
from services.dashboard.wm_imagine import WorldModelImagination
from services.dashboard.wm_play import WorldModelPlay
from tests.dashboard.rundata import make_run
from worldsample.store import EpisodeStore
from worldsample.world_model import WorldModel, WorldModelConfig, checkpoint
from worldsample.world_model.modes import checkpoint_dir

TOKEN = "play-token-0123456789abcdef"
START = {"group": "demo", "episode": 0, "step": 5, "camera": "front"}


def action_conditioned_model(seed: int = 0) -> WorldModel:
    """A world model of the test run's front camera and proprio. A new model starts as "no change":
    its FiLM layers (where the actions enter) and its output layer are zero. Those get random
    values here, so that the predicted frames depend on the action as a trained model's do."""
    cfg = WorldModelConfig(image_keys=["image_front"], vector_keys={"proprio": 4}, image_size=16, action_dim=4)
    torch.manual_seed(seed)
    model = WorldModel(cfg)
    with torch.no_grad():
        for p in model.dynamics.parameters():
            if not p.any():
                p.normal_(0.0, 0.2)
    return model


def play_run(path: Path, episodes: int = 2, length: int = 20, size: int = 16) -> Path:
    """A test run (make_run) with one world-model checkpoint (v1) in RUN/world_model/."""
    run = make_run(path, episodes=episodes, length=length, size=size, metric_rows=5)
    checkpoint.save(checkpoint_dir(run), action_conditioned_model(), {"note": "untrained, action-conditioned"})
    return run


def serve(run: Path, provider: WorldModelPlay | None = None, **kw) -> BackgroundServer:
    wm = provider.source if provider is not None else WorldModelImagination(run)
    play = provider if provider is not None else WorldModelPlay(wm)
    return BackgroundServer(create_app(run, DashboardSettings(token=TOKEN, **kw), imagine=wm, play=play))


def pixels(r: httpx.Response) -> np.ndarray:
    assert r.status_code == 200, r.text
    return np.asarray(Image.open(io.BytesIO(r.content)).convert("RGB"))


def begin(c: httpx.Client, **over) -> dict:
    r = c.post("/api/play", json={**START, **over})
    assert r.status_code == 201, r.text
    return r.json()


def steps(c: httpx.Client, sid: str, actions) -> list[httpx.Response]:
    return [c.post(f"/api/play/{sid}/step", json={"action": list(map(float, a))}) for a in actions]


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    run = play_run(tmp_path_factory.mktemp("play") / "run")
    provider = WorldModelPlay(WorldModelImagination(run))
    with serve(run, provider, max_play_sessions=3) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        yield run, provider, c


def test_a_session_starts_from_a_real_start(played):
    run, provider, c = played
    s = begin(c)
    assert s["group"] == "demo" and s["episode"] == 0 and s["step"] == 5 and s["camera"] == "front"
    assert s["wm_version"] == 1 and s["action_dim"] == 4 and s["history"] == 3 and s["steps"] == 0
    assert s["action_low"] == [-1.0] * 4 and s["action_high"] == [1.0] * 4
    assert (s["frame_width"], s["frame_height"]) == (16, 16)
    data = EpisodeStore(run).reader("demo").episode(0, keys=["image_front", "action"])
    # the first frame shown is the stored frame of the start
    assert np.array_equal(pixels(c.get(s["frame_url"])), data["image_front"][5])
    # driven by the episode's recorded actions, play predicts exactly what the model's own rollout
    # from that real start does (the imagine view's frames): one model step per request
    got = [pixels(r) for r in steps(c, s["session"], data["action"][5:10])]
    want = provider.source.imagine("demo", 0, "front", 5, 5)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    # the start matters: the same action from another real start gives another frame
    other = begin(c, step=12)
    a = data["action"][5]
    first = pixels(steps(c, begin(c)["session"], [a])[0])
    assert np.array_equal(first, got[0])
    assert not np.array_equal(pixels(steps(c, other["session"], [a])[0]), first)


def test_frames_follow_the_action_and_repeat_for_the_same_actions(played):
    _, _, c = played
    drive = [[1, 0, 0, 0], [1, 0.5, 0, 0], [0, 0, -1, 0.3]]
    a, b = begin(c)["session"], begin(c)["session"]
    ra = steps(c, a, drive)
    rb = steps(c, b, [[-1, 0, 0, 0], *drive[1:]])
    assert [r.headers["x-play-step"] for r in ra] == ["1", "2", "3"]
    # another first action: another frame, and other predictions of the heads
    assert not np.array_equal(pixels(ra[0]), pixels(rb[0]))
    assert ra[0].headers["x-reward"] != rb[0].headers["x-reward"]
    for r in ra:
        assert r.headers["content-type"] == "image/png" and r.headers["x-wm-version"] == "1"
        assert 0 <= float(r.headers["x-success"]) <= 1 and 0 <= float(r.headers["x-done"]) <= 1
        assert r.headers["x-success-label"] in ("true", "false") and np.isfinite(float(r.headers["x-reward"]))
    # the same actions again, after a reset and in a new session: the same frames, byte for byte
    reset = c.post(f"/api/play/{a}/reset")
    assert reset.status_code == 200 and reset.json()["steps"] == 0 and reset.json()["session"] == a
    again = steps(c, a, drive)
    fresh = steps(c, begin(c)["session"], drive)
    assert [r.content for r in again] == [r.content for r in ra] == [r.content for r in fresh]
    assert [r.headers["x-reward"] for r in again] == [r.headers["x-reward"] for r in ra]
    # actions beyond the bounds are clipped to them
    c.post(f"/api/play/{a}/reset")
    clipped = steps(c, a, [[5.0, -1e30, 0.5, 0]])[0]
    c.post(f"/api/play/{a}/reset")
    bound = steps(c, a, [[1.0, -1.0, 0.5, 0]])[0]
    assert clipped.headers["x-action"] == "1,-1,0.5,0" and clipped.content == bound.content
    # JPEG on request
    r = c.post(f"/api/play/{a}/step", params={"format": "jpeg"}, json={"action": [0, 0, 0, 0]})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg" and r.headers["x-play-step"] == "2"


def test_bad_actions_and_unknown_sessions(played):
    _, _, c = played
    sid = begin(c)["session"]
    url = f"/api/play/{sid}/step"
    r = c.post(url, json={"action": [0.1, 0.2, 0.3]})
    assert r.status_code == 422 and "has 3 values" in r.json()["detail"] and "takes 4" in r.json()["detail"]
    for raw in ('{"action": [NaN, 0, 0, 0]}', '{"action": [Infinity, 0, 0, 0]}', '{"action": [0, -Infinity, 0, 0]}'):
        r = c.post(url, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "finite" in r.text, (raw, r.text)
    for body in (
        {"action": [True, 0, 0, 0]},
        {"action": ["1", 0, 0, 0]},
        {"action": []},
        {"action": [0.0] * 65},
        {"action": [0, 0, 0, 0], "extra": 1},
        {},
        [0, 0, 0, 0],
    ):
        assert c.post(url, json=body).status_code == 422, body
    # a cross-site form cannot send JSON: a body of any other type is refused
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        r = c.post(url, content='{"action": [0, 0, 0, 0]}', headers={"content-type": kind})
        assert r.status_code == 422, (kind, r.text)
    plain = '{"group": "demo", "episode": 0, "camera": "front"}'
    assert c.post("/api/play", content=plain, headers={"content-type": "text/plain"}).status_code == 422
    # the session is unharmed by refused steps
    assert c.post(url, json={"action": [0, 0, 0, 0]}).headers["x-play-step"] == "1"
    # unknown, closed and malformed sessions
    unknown = "A" * 22
    for r in (
        c.post(f"/api/play/{unknown}/step", json={"action": [0, 0, 0, 0]}),
        c.post(f"/api/play/{unknown}/reset"),
        c.delete(f"/api/play/{unknown}"),
    ):
        assert r.status_code == 404 and "no play session" in r.json()["detail"], r.text
    assert c.delete(f"/api/play/{sid}").status_code == 204
    r = c.post(url, json={"action": [0, 0, 0, 0]})
    assert r.status_code == 404 and "POST /api/play" in r.json()["detail"]
    assert c.post("/api/play/bad!id-0123456789abc/step", json={"action": [0, 0, 0, 0]}).status_code == 422
    assert c.post("/api/play/short/step", json={"action": [0, 0, 0, 0]}).status_code == 422
    # bad starts
    cases = [
        ({"camera": "wrist"}, 404, "does not model camera 'wrist'"),
        ({"camera": "nocam"}, 404, "has no camera 'nocam'"),
        ({"group": "sim"}, 404, "has no data"),
        ({"episode": 99}, 404, "no such committed episode"),
        ({"step": 20}, 416, "past the last step (19)"),
        ({"step": -1}, 422, ""),
        ({"episode": "0"}, 422, ""),
        ({"group": "other"}, 422, ""),
        ({"camera": "../x"}, 422, ""),
    ]
    for over, status, text in cases:
        r = c.post("/api/play", json={**START, **over})
        assert r.status_code == status and text in r.text, (over, r.text)


def test_the_session_limit_holds(played):
    _, _, c = played
    opened = [begin(c) for _ in range(5)]  # the server keeps 3
    assert [s["max_sessions"] for s in opened] == [3] * 5 and opened[-1]["sessions_open"] == 3
    alive = [c.post(f"/api/play/{s['session']}/step", json={"action": [0, 0, 0, 0]}).status_code for s in opened]
    assert alive == [404, 404, 200, 200, 200]
    # using a session keeps it: the least recently *used* one ends when another starts
    c.post(f"/api/play/{opened[2]['session']}/step", json={"action": [0, 0, 0, 0]})
    begin(c)
    alive = [c.post(f"/api/play/{s['session']}/reset").status_code for s in opened[2:]]
    assert alive == [200, 404, 200]


def test_idle_sessions_end():
    now = [0.0]
    sessions = PlaySessions(limit=2, idle_s=10, clock=lambda: now[0])
    a, b = sessions.add("state a"), sessions.add("state b")
    now[0] = 6
    assert sessions.get(a) == "state a"  # used at 6: ends after 16
    now[0] = 12
    with pytest.raises(NotFound, match="unused for 10 s"):
        sessions.get(b)
    assert len(sessions) == 1 and sessions.get(a) == "state a"
    now[0] = 30
    assert len(sessions) == 0


def test_no_world_model_and_no_provider(tmp_path):
    run = make_run(tmp_path / "run", episodes=1, length=8, size=16, metric_rows=5)
    with serve(run) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        r = c.post("/api/play", json=START)
        assert r.status_code == 404 and "no world model checkpoint in RUN" in r.json()["detail"]
        (run / "world_model").mkdir()  # a folder but no checkpoint yet
        r = c.post("/api/play", json=START)
        assert r.status_code == 404 and "no world model checkpoint" in r.json()["detail"]
    with BackgroundServer(create_app(run, DashboardSettings(token=TOKEN))) as srv:
        r = httpx.post(srv.url + "/api/play", json=START)
        assert r.status_code == 501 and "no play provider" in r.json()["detail"]


class SlowPlay(WorldModelPlay):
    """The real provider, each step held until the test sets `release`: the queue stays full meanwhile."""

    def __init__(self, source):
        super().__init__(source)
        self.inside = 0
        self.release = threading.Event()

    def step(self, state, action):
        self.inside += 1
        try:
            assert self.release.wait(timeout=60), "the test never released the step"
            return super().step(state, action)
        finally:
            self.inside -= 1


def test_play_shares_the_bounded_imagine_queue(tmp_path):
    run = play_run(tmp_path / "run", episodes=1)
    provider = SlowPlay(WorldModelImagination(run))
    with serve(run, provider, max_imagine_waiting=0) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        sid = begin(c)["session"]
        slow: list[httpx.Response] = []
        other = httpx.Client(base_url=srv.url, timeout=30)
        t = threading.Thread(target=lambda: slow.append(steps(other, sid, [[0, 0, 0, 0]])[0]))
        t.start()
        try:
            deadline = time.monotonic() + 30
            while provider.inside == 0:
                assert time.monotonic() < deadline, "the first step did not start in 30 s"
                time.sleep(0.01)
            busy = c.post(f"/api/play/{sid}/step", json={"action": [0, 0, 0, 0]})
            assert busy.status_code == 429 and busy.headers["retry-after"] == "1", busy.text
            assert "imagine and play" in busy.json()["detail"]
            assert c.get("/api/episodes/demo/0/imagine/front", params={"horizon": 2}).status_code == 429
            assert c.post("/api/play", json=START).status_code == 429
            # the rest of the API is not held up: it answers while the step still holds the queue
            assert c.get("/api/run").status_code == 200
            assert provider.inside == 1 and not slow
        finally:
            provider.release.set()
        t.join(timeout=60)
        assert not t.is_alive(), "the held step did not finish after its release"
        other.close()
        assert slow[0].status_code == 200 and slow[0].headers["x-play-step"] == "1"
        assert c.post(f"/api/play/{sid}/step", json={"action": [0, 0, 0, 0]}).headers["x-play-step"] == "2"


def test_the_schema_states_the_limits(played):
    _, _, c = played
    schema = c.get("/openapi.json").json()
    start = schema["paths"]["/api/play"]["post"]
    assert "At most 3 sessions" in start["description"] and "900 s" in start["description"]
    assert {"201", "404", "409", "416", "422", "429", "501"} <= set(start["responses"])
    step = schema["paths"]["/api/play/{session}/step"]["post"]
    assert {"X-Reward", "X-Success", "X-Play-Step"} <= set(step["responses"]["200"]["headers"])
    assert set(step["responses"]["200"]["content"]) == {"image/png", "image/jpeg"}
    body = schema["components"]["schemas"]["PlayActionBody"]["properties"]["action"]
    assert body["maxItems"] == 64 and body["minItems"] == 1 and body["items"]["type"] == "number"
    assert "delete" in schema["paths"]["/api/play/{session}"]


def test_the_play_operations_conform_to_their_schema(tmp_path):
    """The bounded schemathesis run of test_openapi_fuzz.py, on the play operations with a world
    model in the run (that run has none, so every start there is a 404)."""
    import schemathesis
    from schemathesis import GenerationMode

    from tests.dashboard.test_openapi_fuzz import _fuzz

    run = play_run(tmp_path / "run", episodes=1)
    with serve(run) as srv:
        schema = schemathesis.openapi.from_url(srv.url + "/openapi.json").include(path_regex=r"^/api/play")
        operations = [r.ok() for r in schema.get_all_operations()]
        assert len(operations) == 4
        failures: list[str] = []
        for op in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                _fuzz(op, mode, srv.url, failures)
    assert not failures, "\n\n".join(failures)


def test_play_is_behind_the_read_policy_not_the_control_token(tmp_path):
    run = play_run(tmp_path / "run", episodes=1)
    with serve(run, read_policy="token") as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        assert c.post("/api/play", json=START).status_code == 401
        wrong = {"Authorization": "Bearer wrong-token-0123456789"}
        assert c.post("/api/play", json=START, headers=wrong).status_code == 403
        r = c.post("/api/play", json=START, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 201, r.text
        assert c.post(f"/api/play/{r.json()['session']}/step", json={"action": [0, 0, 0, 0]}).status_code == 401
    with serve(run) as srv:  # the default policy: loopback clients read without a token, and so play
        assert httpx.post(srv.url + "/api/play", json=START, timeout=30).status_code == 201


def test_sessions_keep_their_model_and_a_model_must_fit_the_data(tmp_path):
    run = play_run(tmp_path / "run", episodes=1)
    with serve(run) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        old = begin(c)
        first = steps(c, old["session"], [[1, 0, 0, 0]])[0]
        checkpoint.save(checkpoint_dir(run), action_conditioned_model(seed=1), {"note": "next"})  # v2
        # a session runs on the model it started with; a new start (or a reset) takes the newest
        assert old["wm_version"] == 1 and begin(c)["wm_version"] == 2
        assert steps(c, old["session"], [[0, 0, 0, 0]])[0].headers["x-wm-version"] == "1"
        c.post(f"/api/play/{old['session']}/reset")  # now on v2
        on_v2 = steps(c, old["session"], [[1, 0, 0, 0]])[0]
        assert on_v2.headers["x-wm-version"] == "2" and on_v2.content != first.content
        kept = begin(c)  # v2 ...
        cfg = action_conditioned_model().cfg.model_copy(update={"action_dim": 5})
        checkpoint.save(checkpoint_dir(run), WorldModel(cfg), {"note": "another robot"})  # v3: 5-dim actions
        r = c.post("/api/play", json=START)
        assert r.status_code == 409 and "its actions have 4 dimensions, the model's 5" in r.json()["detail"], r.text
        r = c.get("/api/episodes/demo/0/imagine/front", params={"horizon": 2})
        assert r.status_code == 409
        step = steps(c, kept["session"], [[0, 0, 0, 0]])[0]  # ... plays on while v3 is the newest
        assert step.status_code == 200 and step.headers["x-wm-version"] == "2"
