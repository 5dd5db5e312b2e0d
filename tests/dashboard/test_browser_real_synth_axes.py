"""Real and synthetic episodes on their own y axes, in headless Chromium: the store's curves
(per-episode return, rolling success, length, per group) of a `make run`-shaped run with a
synthetic group beside demo and real draw the synthetic episodes on a right-hand axis with its own
range, labelled, so its short episodes are not a flat line under the robot's; and the chart
engine's two axes on degenerate input (one axis empty, constant, all gaps)."""

from __future__ import annotations

import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.chromium import Page
from tests.dashboard.conftest import TOKEN
from tests.dashboard.rundata import episode, schema
from tests.dashboard.test_browser_loop_run import make_loop_run
from worldsample.store import EpisodeStore

SYNTH_COLOR, REAL_COLOR = "#b48cff", "#3ddc97"  # GROUP_COLORS in charts.js
SYNTH_LENGTHS = [4 + i % 6 for i in range(24)]  # the loop run's real and demo episodes are 20 steps long
TOP, BOTTOM = 8 + 13, 20  # the plot's margins (css px) of a chart with two axes: the title band above

# rows of a store chart's plot area holding a colour: its drawn line's vertical extent, as a share of the plot
EXTENT = """([key, hex, top, bottom]) => {
  const c = document.querySelector(`.chart[data-store="${key}"] canvas`);
  const k = c.height / c.clientHeight;
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const y0 = Math.ceil(top * k), y1 = Math.floor(c.height - bottom * k);
  let lo = Infinity, hi = -Infinity;
  for (let y = y0; y < y1; y++) for (let x = 0; x < c.width; x++) {
    const i = 4 * (y * c.width + x);
    if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60) {
      lo = Math.min(lo, y); hi = Math.max(hi, y);
    }
  }
  return hi >= lo ? (hi - lo) / (y1 - y0) : 0;
}"""


@pytest.fixture(scope="module")
def synth_server(tmp_path_factory):
    run = make_loop_run(tmp_path_factory.mktemp("synthrun") / "run")
    store = EpisodeStore(run)
    store.ensure_group("synthetic", schema(8))
    with store.writer("synthetic") as w:
        for i, n in enumerate(SYNTH_LENGTHS):
            w.append_episode(episode(500 + i, n, 8, success=i % 3 == 0), domain="synthetic")
    with BackgroundServer(create_app(run, DashboardSettings(token=TOKEN, refresh_interval_s=0.2))) as srv:
        yield srv


def _range(pg, key: str, side: str) -> tuple[float, float]:
    lo, hi = pg.get_attribute(f'.chart[data-store="{key}"]', f"data-y-{side}").split(",")
    return float(lo), float(hi)


def test_synthetic_episodes_get_their_own_axis(browser, synth_server):
    with Page(browser) as t:
        t.pg.goto(synth_server.url + "/")
        t.pg.wait_for_selector('.chart[data-store="length"][data-axes="2"][data-y-right]', timeout=15_000)
        for key in ("return", "length", "success"):
            box = f'.chart[data-store="{key}"]'
            assert t.pg.get_attribute(box, "data-axes") == "2"
            axes = {e.get_attribute("data-group"): (e.get_attribute("data-axis"), e.inner_text())
                    for e in t.pg.query_selector_all(f"{box} .legend span")}  # fmt: skip
            assert {g: a for g, (a, _) in axes.items()} == {"demo": "left", "real": "left", "synthetic": "right"}
            assert "right axis" in axes["synthetic"][1] and "left axis" in axes["real"][1], axes
        # lengths: demo and real all 20 steps (a constant, widened), synthetic 4-9 on its own range
        left, right = _range(t.pg, "length", "left"), _range(t.pg, "length", "right")
        assert left[0] < 20 < left[1] and left[1] - left[0] < 10, left
        assert 3 < right[0] < 4 and 9 < right[1] < 10, right
        ret_left, ret_right = _range(t.pg, "return", "left"), _range(t.pg, "return", "right")
        assert ret_right[1] < ret_left[0], (ret_left, ret_right)  # the synthetic returns are all below the real ones
        assert _range(t.pg, "success", "left") == _range(t.pg, "success", "right") == (0.0, 1.0)  # a rate: 0-1 both
        # drawn: the synthetic lengths span most of the plot's height (on one shared axis, about a quarter)
        t.pg.wait_for_function(f"(a) => ({EXTENT})(a) > 0.6", arg=["length", SYNTH_COLOR, TOP, BOTTOM], timeout=5000)
        assert t.pg.evaluate(EXTENT, ["return", SYNTH_COLOR, TOP, BOTTOM]) > 0.4
        assert t.pg.evaluate(EXTENT, ["length", REAL_COLOR, TOP, BOTTOM]) < 0.05  # constant: a flat line
        t.pg.hover('.chart[data-store="length"] canvas', position={"x": 200, "y": 60})  # the read-out of both axes
        t.pg.wait_for_timeout(200)
        assert not any(e.get_attribute("class") and "failed" in e.get_attribute("class")
                       for e in t.pg.query_selector_all(".chart[data-store]"))  # fmt: skip
        assert not t.errors, t.errors


def _without_synthetic(route):
    """The episode listing as a run without its synthetic group would answer it."""
    resp = route.fetch()
    body = resp.json()
    body["items"] = [e for e in body["items"] if e["group"] != "synthetic"]
    body["total"] = len(body["items"])
    route.fulfill(response=resp, json=body)


def test_one_axis_without_synthetic_episodes(browser, synth_server):
    with Page(browser) as t:
        t.pg.route("**/api/episodes?order=oldest*", _without_synthetic)
        t.pg.goto(synth_server.url + "/")
        t.pg.wait_for_selector('.chart[data-store="length"][data-axes="1"]', timeout=15_000)
        box = '.chart[data-store="length"]'
        assert t.pg.get_attribute(box, "data-y-right") is None and t.pg.get_attribute(box, "data-y-left")
        assert "axis" not in t.pg.inner_text(f"{box} .legend")
        assert not t.errors, t.errors


ENGINE = """async () => {
  const { LineChart, MAX_TICKS } = await import('/static/js/chart.js');
  const c = document.createElement('canvas');
  c.style.width = '400px'; c.style.height = '150px';
  document.body.appendChild(c);
  const ch = new LineChart(c, { xMode: 'index' });
  const x = [0, 1, 2, 3];
  const out = {};
  const run = (name, series) => {
    ch.setSeries(series);
    const drawn = ch.draw();
    out[name] = { drawn, axes: ch.axes };
  };
  run('one', [{ name: 'real', color: '#fff', x, y: [1, 2, 3, 4] }]);
  run('two', [{ name: 'real', color: '#fff', x, y: [100, 120, 150, 130] },
              { name: 'synthetic', color: '#f0f', x, y: [4, 6, 5, 9], axis: 'right' }]);
  run('rightGaps', [{ name: 'real', color: '#fff', x, y: [1, 2, 3, 4] },
                    { name: 'synthetic', color: '#f0f', x, y: [null, NaN, null, Infinity], axis: 'right' }]);
  run('leftGaps', [{ name: 'real', color: '#fff', x, y: [null, null, null, null] },
                   { name: 'synthetic', color: '#f0f', x, y: [5, 5, 5, 5], axis: 'right' }]);
  run('huge', [{ name: 'a', color: '#fff', x, y: [-1e308, 1e308, 0, 1] },
               { name: 'b', color: '#f0f', x, y: [197, 197.00000000000003, 197, 197], axis: 'right' }]);
  run('none', [{ name: 'a', color: '#fff', x, y: [null, null, null, null] },
               { name: 'b', color: '#f0f', x, y: [null, null, null, null], axis: 'right' }]);
  c.remove();
  return { out, max: MAX_TICKS };
}"""


def test_two_axes_on_degenerate_input(browser, synth_server):
    with Page(browser) as t:
        t.pg.goto(synth_server.url + "/")
        got = t.pg.evaluate(ENGINE)
        out, max_ticks = got["out"], got["max"]
        assert out["one"]["drawn"] and out["one"]["axes"]["right"] is None
        two = out["two"]["axes"]
        assert two["left"]["lo"] < 100 and two["left"]["hi"] > 150
        assert 3 < two["right"]["lo"] < 4 and 9 < two["right"]["hi"] < 10
        assert out["rightGaps"]["drawn"] and out["rightGaps"]["axes"]["right"] is None  # nothing finite on the right
        lg = out["leftGaps"]
        assert lg["drawn"] and lg["axes"]["left"] is None and lg["axes"]["right"]["lo"] < 5 < lg["axes"]["right"]["hi"]
        for side in ("left", "right"):  # near the float limits and a constant with float noise: bounded ticks
            a = out["huge"]["axes"][side]
            assert out["huge"]["drawn"] and a["hi"] > a["lo"] and 2 <= len(a["ticks"]) <= max_ticks + 1, (side, a)
        assert out["none"]["drawn"] is False and out["none"]["axes"] is None
        assert not t.errors, t.errors
