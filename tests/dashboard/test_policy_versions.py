"""Success per policy version with Wilson 95 % intervals: the interval itself (closed forms at
0/n and n/n, scipy's Wilson interval elsewhere), the table /api/policies serves for a run built
here (evaluation rows in metrics.jsonl, online episodes of two versions in the store, an
operator's label, a damaged row, a damaged record), and the policies view in Chromium."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.conftest import TOKEN
from tests.dashboard.rundata import episode, schema
from worldsample.evaluation.intervals import wilson, z_for
from worldsample.runlog import MetricsWriter
from worldsample.store import EpisodeStore
from worldsample.store.labels import LabelLog

Z = 1.959963984540054  # the 97.5 % standard normal quantile


# -- the interval -----------------------------------------------------------------------------
def test_wilson_closed_forms_at_the_ends():
    assert z_for(0.95) == pytest.approx(Z, abs=1e-12)
    for n in (1, 2, 5, 10, 30):
        # k = 0: [0, z^2 / (n + z^2)];  k = n: [n / (n + z^2), 1]
        assert wilson(0, n) == (0.0, pytest.approx(Z * Z / (n + Z * Z), abs=1e-12))
        assert wilson(n, n) == (pytest.approx(n / (n + Z * Z), abs=1e-12), 1.0)


def test_wilson_by_hand_and_against_scipy():
    # 5/10 by hand: centre 0.5, half = z/(1+z^2/10) * sqrt(0.025 + z^2/400) = 0.26341
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.5 - 0.2634069, abs=1e-6) and hi == pytest.approx(0.5 + 0.2634069, abs=1e-6)
    assert wilson(1, 3) == (pytest.approx(0.0614919, abs=1e-6), pytest.approx(0.7923404, abs=1e-6))
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(0, 1), (1, 1), (0, 3), (1, 3), (2, 3), (3, 10), (7, 10), (42, 100), (1, 50), (199, 200)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson(k, n) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12)), (k, n)
    ci = stats.binomtest(3, 10).proportion_ci(confidence_level=0.9, method="wilson")
    assert wilson(3, 10, 0.9) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))


@pytest.mark.parametrize("k,n", [(0, 0), (-1, 3), (4, 3), (1.5, 3), (True, 3)])
def test_wilson_refuses_what_is_not_a_count(k, n):
    with pytest.raises(ValueError):
        wilson(k, n)


# -- the served table -------------------------------------------------------------------------
V1 = [True, False, True, True]  # online outcomes of v1 (episode 1 with a person intervening)
V2 = [False, False, True]  # v2; the operator marks its first episode a success
LENGTH, SIZE = 20, 16


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("versions") / "run"
    store = EpisodeStore(run, create=True)
    store.ensure_group("real", schema(SIZE))
    with store.writer("real") as w:
        for i, ok in enumerate(V1):
            w.append_episode(episode(i, LENGTH, SIZE, success=ok, intervene=i == 1), policy_version=1)
        for i, ok in enumerate(V2):
            w.append_episode(episode(10 + i, LENGTH, SIZE, success=ok), policy_version=2)
        w.append_episode(episode(20, LENGTH, SIZE, success=True), policy_version=2)  # damaged below
    LabelLog(run / "store" / "real").append(4, True, source="dashboard", reason="it did push the cube")
    rec = run / "store" / "real" / "commits" / f"{7:09d}.json"
    rec.write_bytes(rec.read_bytes()[:40])  # a truncated commit record: set aside, counted
    with MetricsWriter(run) as m:
        m.log(0, {"eval/success_rate": 0.0, "eval/episodes": 5, "eval/successes": 0}, time=1.0)  # no policy yet
        m.log(10, {"eval/success_rate": 0.25}, time=2.0)  # an older run's row: a rate only
        m.log(12, {"eval/success_rate": 0.5, "eval/policy_version": 1}, time=2.5)  # a rate only, with its version
        m.log(20, {"eval/success_rate": 0.2, "eval/episodes": 10, "eval/successes": 2, "eval/policy_version": 1},
              time=3.0)
        m.log(30, {"eval/success_rate": 0.3, "eval/episodes": 10, "eval/successes": 3, "eval/policy_version": 1},
              time=4.0)
        m.log(40, {"eval/success_rate": 1.0, "eval/episodes": 10, "eval/successes": 12, "eval/policy_version": 2},
              time=5.0)  # damaged: more successes than episodes
        m.log(50, {"eval/success_rate": 0.9, "eval/episodes": 10, "eval/successes": 7, "eval/policy_version": 2},
              time=6.0)  # damaged: the rate disagrees with its counts
        m.log(55, {"eval/success_rate": 0.7, "eval/episodes": 10, "eval/successes": 7, "eval/policy_version": -2},
              time=6.5)  # damaged: a negative version
        m.log(57, {"eval/episodes": 10.5, "eval/successes": 7, "eval/policy_version": 2}, time=6.7)  # not whole
        m.log(60, {"eval/success_rate": 0.7, "eval/episodes": 10, "eval/successes": 7, "eval/policy_version": 2},
              time=7.0)
        m.log(70, {"loss/critic": 1.0}, time=8.0)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 80, "time": 9.0, "eval/episodes": [1, 2]}\n{"step": 9\n')  # two broken lines
    return run


@pytest.fixture(scope="module")
def server(run):
    settings = DashboardSettings(token=TOKEN, refresh_interval_s=0.2, store_refresh_min_s=0.0)
    with BackgroundServer(create_app(run, settings)) as srv:
        yield srv


def _by_name(table: dict) -> dict:
    return {v["name"]: v for v in table["versions"]}


def test_the_api_serves_success_per_version_with_intervals(server):
    r = httpx.get(server.url + "/api/policies", timeout=10)
    assert r.status_code == 200, r.text
    t = r.json()["versions"]
    rows = _by_name(t)
    assert [v["name"] for v in t["versions"]] == ["none", "v1", "v2"]
    # evaluations: the newest of each version, not pooled
    none, v1, v2 = rows["none"]["evaluation"], rows["v1"]["evaluation"], rows["v2"]["evaluation"]
    assert (none["episodes"], none["successes"], none["evaluations"]) == (5, 0, 1)
    assert (none["ci_low"], none["ci_high"]) == (0.0, pytest.approx(Z * Z / (5 + Z * Z)))
    assert (v1["episodes"], v1["successes"], v1["evaluations"], v1["step"]) == (10, 3, 2, 30)
    assert (v1["ci_low"], v1["ci_high"]) == (pytest.approx(0.1077913), pytest.approx(0.6032219))
    assert (v2["episodes"], v2["successes"], v2["evaluations"], v2["success_rate"]) == (10, 7, 1, 0.7)
    assert (v2["ci_low"], v2["ci_high"]) == (pytest.approx(1 - 0.6032219), pytest.approx(1 - 0.1077913))
    # online episodes: v1 3/4 with 6 of 80 steps driven by a person; v2 2/3 with the label applied
    o1, o2 = rows["v1"]["online"], rows["v2"]["online"]
    assert (o1["episodes"], o1["successes"], o1["labelled"], o1["episodes_with_intervention"]) == (4, 3, 0, 1)
    assert o1["intervention_share"] == pytest.approx(6 / (4 * LENGTH))
    assert (o1["ci_low"], o1["ci_high"]) == tuple(pytest.approx(x) for x in wilson(3, 4))
    assert (o2["episodes"], o2["successes"], o2["labelled"], o2["intervention_share"]) == (3, 2, 1, 0.0)
    assert (o2["ci_low"], o2["ci_high"]) == tuple(pytest.approx(x) for x in wilson(2, 3))
    assert rows["none"]["online"] is None
    # what was set aside is counted and said
    assert t["eval_rows"] == 4 and t["rate_only_rows"] == 2 and t["skipped_rows"] == 4
    why = " | ".join(t["skipped_reasons"])
    assert "step 40" in why and "step 50: eval/success_rate=0.9 disagrees" in why, why
    assert "step 55: eval/policy_version=-2.0" in why and "step 57: eval/episodes=10.5" in why, why
    assert t["damaged_episodes"] == 1
    assert httpx.get(server.url + "/api/metrics", timeout=10).json()["malformed"] == 2
    # the comparison table carries the interval of its store rows too
    comp = {(c["policy"], c["source"]): c for c in r.json()["comparison"]}
    c1 = comp[("v1", "store/real")]
    assert (c1["ci_low"], c1["ci_high"]) == tuple(pytest.approx(x) for x in wilson(3, 4))


def test_the_schema_states_the_limits(server):
    schema_ = httpx.get(server.url + "/openapi.json", timeout=10).json()["components"]["schemas"]
    assert schema_["VersionTable"]["properties"]["versions"]["maxItems"] == 500
    assert schema_["VersionOnline"]["properties"]["success_rate"]["maximum"] == 1


# -- the policies view ------------------------------------------------------------------------
def test_the_policies_view_shows_the_intervals(server, browser):
    pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(server.url + "/#policies")
    pg.wait_for_selector('#versions-table tr[data-version="v2"]', timeout=10_000)

    def cell(version: str, col: str) -> str:
        return pg.inner_text(f'#versions-table tr[data-version="{version}"] .{col}')

    lo, hi = wilson(3, 10)
    assert cell("v1", "eval-ci") == f"30 % [{100 * lo:.0f}-{100 * hi:.0f}]" == "30 % [11-60]"
    assert cell("v2", "eval-ci") == "70 % [40-89]"
    assert cell("v2", "online-ci") == f"67 % [{100 * wilson(2, 3)[0]:.0f}-{100 * wilson(2, 3)[1]:.0f}]"
    assert cell("none", "eval-ci") == "0 % [0-43]" and cell("none", "online-ci") == "–"
    # the whiskers span the interval: their box runs from lo to hi of the bar's width
    box = pg.evaluate("""() => {
        const bar = document.querySelector('#versions-table tr[data-version="v1"] .cibar');
        const ci = bar.querySelector('.ci').getBoundingClientRect(), b = bar.getBoundingClientRect();
        const fill = bar.querySelector('.fill').getBoundingClientRect();
        return [(ci.left - b.left) / b.width, (ci.right - b.left) / b.width, fill.width / b.width];
    }""")
    assert box == [pytest.approx(lo, abs=0.02), pytest.approx(hi, abs=0.02), pytest.approx(0.3, abs=0.02)]
    note = pg.inner_text("#versions-note")
    assert "4 evaluation rows skipped" in note and "1 damaged real episodes" in note, note
    assert "2 evaluation rows carry a rate only" in note
    comp = pg.inner_text("#comparison-table")
    assert f"75 % [{100 * wilson(3, 4)[0]:.0f}-{100 * wilson(3, 4)[1]:.0f}]" in comp, comp
    assert not errors, errors

