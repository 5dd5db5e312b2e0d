// The curves: one chart per training metric, grouped into collapsible sections (robot, learning,
// data mix, world model, synthesis, other), fed by the series endpoint and then by live rows, with
// event markers (world-model versions, pauses, resumes, e-stops); and the store's own curves
// (per-episode return, rolling success, length) per group.
//
// A chart that fails to draw shows its error in its own box; the others and the page go on.

import { LineChart } from "./chart.js";
import { esc, num, PALETTE } from "./format.js";

const GROUP_COLORS = { demo: "#4cc2ff", real: "#3ddc97", sim: "#ffb547", synthetic: "#b48cff" };
const MAX_POINTS = 20000;
const SECTIONS_KEY = "worldsample-dashboard-sections";

// first match wins; "open" is the default state (a person's choice is kept in localStorage)
const LEARNING = /loss|alpha|^qf_|^q_|td_error|logps|entropy|learning_rate|^bc_|^num_|^module_|weights_seq|target_update|grad/;
export const SECTIONS = [
  { key: "robot", title: "robot", open: true, color: "#3ddc97",
    match: (n) => /^(episode|eval|robot|bridge|return|success|policy|real)\//.test(n) || /^(real_steps|success|success_rate|episode_return)$/.test(n) },
  { key: "learning", title: "learning", open: true, color: "#ffb547",
    match: (n) => /^(loss|learner|pretrain|train|sac|actor|critic)\//.test(n) || (!n.includes("/") && LEARNING.test(n)) },
  { key: "data", title: "data mix", open: false, color: "#b48cff", match: (n) => /^(batch|ppl|data|replay|buffer)\//.test(n) },
  { key: "wm", title: "world model", open: true, color: "#66e0e0", match: (n) => /^(wm|wm_eval|world_model)\//.test(n) },
  { key: "synth", title: "synthesis", open: false, color: "#ff8fd1", match: (n) => /^(synth|synthesis|synthetic|imagine)\//.test(n) },
  { key: "other", title: "other", open: false, color: "#4cc2ff", match: () => true },
];

export function sectionOf(name) {
  return SECTIONS.find((s) => s.match(name));
}

// inside a section: outcomes first, then losses and errors, then the rest, counters last
function rank(name) {
  if (/success|return/.test(name)) return 0;
  if (/loss|error|mse|psnr|ssim|nll/.test(name)) return 1;
  if (/learning_rate|^num_|^module_|weights_seq|target_update|_ts$|version|rounds/.test(name)) return 3;
  return 2;
}

// event kinds drawn as markers on the metric curves
const MARKS = [
  { re: /^(wm|world_model)|world.?model/i, color: "#66e0e0", what: "world model" },
  { re: /^e-?stop/i, color: "#ff5c6c", what: "e-stop" },
  { re: /^pause/i, color: "#ffb547", what: "pause" },
  { re: /^resume/i, color: "#3ddc97", what: "resume" },
];
export const MARK_LEGEND = MARKS.map((m) => ({ color: m.color, what: m.what }));

function lowerBound(xs, x) {
  let lo = 0, hi = xs.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid + 1; else hi = mid; }
  return lo;
}

let boxTemplate = null;
function chartBox(title) {
  if (!boxTemplate) {
    boxTemplate = document.createElement("div");
    boxTemplate.className = "chart";
    boxTemplate.innerHTML = '<div class="title"><span class="name"></span><span class="last"></span></div><canvas></canvas><div class="chart-error hidden" role="alert"></div><div class="legend"></div>';
  }
  const box = boxTemplate.cloneNode(true); // cheaper than parsing HTML for each of many charts
  const name = box.querySelector(".name");
  name.textContent = title;
  name.title = title;
  return box;
}

function loadOpenState() {
  try { return JSON.parse(localStorage.getItem(SECTIONS_KEY) || "{}") || {}; } catch (_) { return {}; }
}

export class Charts {
  constructor(root, emptyNote) {
    this.root = root;
    this.empty = emptyNote;
    this.items = new Map();
    this.sections = new Map();
    this.openState = loadOpenState();
    this.opts = { xMode: "step", smoothing: 0.6 };
    this.filterText = "";
    this.dirty = new Set();
    this.frame = 0;
    this.events = [];
    this.failures = 0;
    this.later = new Set(); // open charts outside the viewport: drawn a few per task after the first frame
    this.draining = false;
    this.onIdle = null; // called once every open chart is drawn
    this.overlays = new Map(); // run name -> {color, series: {metric: {step, time, value}}, t0, shifted}
  }

  // another run's series (from /api/runs/<name>/series) drawn on the charts of the metrics this run
  // also has. On the wall-time axis it is shifted so that both runs start together.
  setOverlay(run, color, resp) {
    let t0 = Infinity;
    for (const s of Object.values(resp.series)) if (s.time.length && s.time[0] < t0) t0 = s.time[0];
    this.overlays.set(run, { color, series: resp.series, t0, shifted: new Map() });
    this.drawAll();
  }

  removeOverlay(run) {
    if (this.overlays.delete(run)) this.drawAll();
  }

  // this run's first wall time (the overlays' zero on the time axis)
  _start() {
    let t0 = Infinity;
    for (const it of this.items.values()) if (it.time.length && it.time[0] < t0) t0 = it.time[0];
    return t0;
  }

  _overlaySeries(it, timeMode, start) {
    const out = [];
    for (const [run, ov] of this.overlays) {
      const s = ov.series[it.name];
      if (!s || !s.step.length) continue;
      let x = s.step;
      if (timeMode) {
        const shift = Number.isFinite(start) && Number.isFinite(ov.t0) ? start - ov.t0 : 0;
        let c = ov.shifted.get(it.name);
        if (!c || c.shift !== shift) ov.shifted.set(it.name, (c = { shift, x: s.time.map((t) => t + shift) }));
        x = c.x;
      }
      out.push({ name: run, color: ov.color, x, y: s.value });
    }
    return out;
  }

  load(resp) {
    for (const [name, s] of Object.entries(resp.series)) {
      const it = this._ensure(name);
      it.step = s.step; it.time = s.time; it.value = s.value;
    }
    this._layout();
    this.drawAll();
  }

  // the same series at a finer resolution: replaces what was loaded, keeps live rows added since
  refine(resp) {
    let added = false;
    for (const [name, s] of Object.entries(resp.series)) {
      if (!this.items.has(name)) added = true;
      const it = this._ensure(name);
      const end = s.step.length ? s.step[s.step.length - 1] : -Infinity;
      let i = it.step.length;
      while (i > 0 && it.step[i - 1] > end) i--;
      it.step = s.step.concat(it.step.slice(i)); it.time = s.time.concat(it.time.slice(i)); it.value = s.value.concat(it.value.slice(i));
    }
    this.refined = true;
    if (added) this._layout();
    this._marks = null;
    this.drawAll();
  }

  // draws what waits in `later`, a few charts per task, so that input and the first frame go first
  _drain() {
    if (this.draining) return;
    this.draining = true;
    requestAnimationFrame(() => setTimeout(() => this._drainStep(), 0));
  }

  _drainStep() {
    const batch = [...this.later].slice(0, 8);
    for (const it of batch) this.later.delete(it);
    this._drawNow(batch.filter((it) => this._visible(it)));
    if (this.later.size) { setTimeout(() => this._drainStep(), 0); return; }
    this.draining = false;
    if (this.onIdle) this.onIdle();
  }

  addRows(rows) {
    let added = false, versions = false;
    for (const row of rows) {
      for (const [k, raw] of Object.entries(row)) {
        if (k === "step" || k === "time") continue;
        const v = typeof raw === "number" ? raw : null;
        let it = this.items.get(k);
        if (!it) { it = this._ensure(k); added = true; }
        const last = it.step.length ? it.step[it.step.length - 1] : -Infinity;
        if (row.step < last) continue; // the series endpoint already had it
        it.step.push(row.step); it.time.push(row.time); it.value.push(v);
        if (it.step.length > MAX_POINTS) for (const key of ["step", "time", "value"]) it[key] = it[key].filter((_, i, a) => i % 2 === 0 || i === a.length - 1);
        this.dirty.add(k);
        if (k === "wm/version") versions = true;
      }
    }
    if (added) this._layout();
    if (versions) this._markersChanged();
    this._schedule();
  }

  // run events (newest first or not): those of a marker kind are drawn on every metric chart
  addEvents(items) {
    let any = false;
    for (const e of items) {
      const m = MARKS.find((k) => k.re.test(e.kind || ""));
      if (!m || !Number.isFinite(e.time)) continue;
      this.events.push({ time: e.time, color: m.color, label: `${e.kind}${e.message ? ": " + e.message : ""}`.slice(0, 60) });
      any = true;
    }
    if (any) { this._markersChanged(); this._schedule(); }
  }

  _markersChanged() {
    this._marks = null;
    for (const k of this.items.keys()) this.dirty.add(k);
  }

  _ensure(name) {
    let it = this.items.get(name);
    if (it) return it;
    const sec = sectionOf(name);
    const box = chartBox(name);
    box.dataset.metric = name;
    box.dataset.section = sec.key;
    const chart = new LineChart(box.querySelector("canvas"), this.opts);
    it = { name, box, chart, section: sec.key, color: sec.color, step: [], time: [], value: [] };
    chart.onError = (err) => this._fail(it, err);
    box.querySelector(".last").style.color = sec.color;
    this.items.set(name, it);
    return it;
  }

  _section(spec) {
    let s = this.sections.get(spec.key);
    if (s) return s;
    const details = document.createElement("details");
    details.className = "section";
    details.dataset.section = spec.key;
    details.innerHTML = `<summary><span class="sec-title">${esc(spec.title)}</span><span class="sec-count"></span></summary><div class="charts"></div>`;
    s = { spec, details, grid: details.querySelector(".charts"), count: details.querySelector(".sec-count"), names: [] };
    s.known = details.open = this.openState[spec.key] ?? spec.open;
    // "toggle" also follows a change made here (async): only a person's click is kept and drawn for
    details.addEventListener("toggle", () => {
      if (details.open === s.known) return;
      s.known = details.open;
      if (!this.filterText) {
        this.openState[spec.key] = details.open;
        try { localStorage.setItem(SECTIONS_KEY, JSON.stringify(this.openState)); } catch (_) { /* private mode */ }
      }
      if (details.open) this._drawItems([...this.items.values()].filter((it) => it.section === spec.key));
    });
    this.sections.set(spec.key, s);
    return s;
  }

  _layout() {
    for (const s of this.sections.values()) s.names = [];
    const names = [...this.items.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    for (const name of names) this._section(sectionOf(name)).names.push(name);
    for (const spec of SECTIONS) {
      const s = this.sections.get(spec.key);
      if (!s) continue;
      this.root.appendChild(s.details); // in SECTIONS order
      for (const name of s.names) s.grid.appendChild(this.items.get(name).box);
      s.details.classList.toggle("hidden", !s.names.length);
    }
    this.empty.classList.toggle("hidden", this.items.size > 0);
    this.filter(this.filterText, false);
  }

  filter(text, draw = true) {
    this.filterText = text.trim().toLowerCase();
    const f = this.filterText;
    for (const it of this.items.values()) it.box.classList.toggle("hidden", !!f && !it.name.toLowerCase().includes(f));
    for (const s of this.sections.values()) {
      const shown = s.names.filter((n) => !f || n.toLowerCase().includes(f)).length;
      s.details.classList.toggle("hidden", !shown);
      s.count.textContent = f ? `${shown} of ${s.names.length}` : `${s.names.length}`;
      const open = f ? shown > 0 : this.openState[s.spec.key] ?? s.spec.open;
      if (s.details.open !== open) s.known = s.details.open = open;
    }
    if (draw) this.drawAll();
  }

  setOptions(opts) {
    Object.assign(this.opts, opts);
    for (const it of this.items.values()) it.chart.set(this.opts);
    this._marks = null;
    this.drawAll();
  }

  _schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      const items = [...this.dirty].map((k) => this.items.get(k)).filter(Boolean);
      this.dirty.clear();
      this._drawItems(items);
    });
  }

  drawAll() {
    this._drawItems([...this.items.values()]);
  }

  _visible(it) {
    return !it.box.classList.contains("hidden") && this.sections.get(it.section)?.details.open;
  }

  // markers in the current x coordinates: run events (placed on the step axis through the
  // metrics' own time -> step pairs) and the steps where `wm/version` changed
  _markers() {
    if (this._marks) return this._marks;
    const timeMode = this.opts.xMode === "time";
    let line = null;
    for (const it of this.items.values()) if (!line || it.time.length > line.time.length) line = it;
    const out = [];
    for (const e of this.events) {
      let x = e.time;
      if (!timeMode) {
        if (!line || !line.time.length) continue;
        const i = Math.min(lowerBound(line.time, e.time), line.time.length - 1);
        x = line.step[i];
      }
      out.push({ x, color: e.color, label: e.label });
    }
    const wm = this.items.get("wm/version");
    if (wm) {
      let prev = null;
      wm.value.forEach((v, i) => {
        if (v === null || v === prev) return;
        prev = v;
        out.push({ x: timeMode ? wm.time[i] : wm.step[i], color: MARKS[0].color, label: `world model v${v}` });
      });
    }
    this._marks = out;
    return out;
  }

  // charts in the viewport now, the others right after the next frame
  _drawItems(items) {
    if (!this.root.offsetParent) return; // the Run tab is hidden: drawn when shown
    const vis = items.filter((it) => this._visible(it));
    const rects = vis.map((it) => it.box.getBoundingClientRect()); // one layout for all
    const near = [];
    vis.forEach((it, i) => {
      if (rects[i].bottom >= 0 && rects[i].top <= innerHeight) near.push(it);
      else this.later.add(it);
    });
    for (const it of near) this.later.delete(it);
    this._drawNow(near);
    if (this.later.size) this._drain();
    else if (this.onIdle && !this.draining) this.onIdle();
  }

  _drawNow(items) {
    if (!items.length || !this.root.offsetParent) return;
    // read every size first (one layout), then draw
    const sizes = items.map((it) => ({ W: it.chart.canvas.clientWidth, H: it.chart.canvas.clientHeight }));
    const marks = this._markers();
    const start = this.overlays.size ? this._start() : NaN;
    items.forEach((it, i) => this._draw(it, sizes[i], marks, start));
  }

  _draw(it, size, marks, start) {
    try {
      const timeMode = this.opts.xMode === "time";
      const x = timeMode ? it.time : it.step;
      const others = this.overlays.size ? this._overlaySeries(it, timeMode, start) : [];
      it.chart.setSeries([{ name: others.length ? "this run" : "", color: it.color, x, y: it.value }, ...others]);
      it.box.dataset.overlays = String(others.length);
      const legendKey = others.map((o) => `${o.name}:${o.color}`).join("|");
      if (legendKey !== (it.legendKey || "")) {
        it.legendKey = legendKey;
        const legend = it.box.querySelector(".legend");
        legend.innerHTML = others.length
          ? [{ name: "this run", color: it.color }, ...others].map((o) => `<span data-run="${esc(o.name)}"><i data-color="${o.color}"></i>${esc(o.name)}</span>`).join("")
          : "";
        legend.querySelectorAll("[data-color]").forEach((el) => { el.style.background = el.dataset.color; });
      }
      it.chart.setMarkers(marks);
      const drawn = it.chart.draw(size);
      let last = null;
      for (let i = it.value.length - 1; i >= 0 && last === null; i--) last = it.value[i];
      it.box.querySelector(".last").textContent = num(last);
      it.box.dataset.points = String(it.value.length);
      it.box.dataset.drawn = drawn ? "1" : "0";
      it.box.dataset.markers = String(it.chart.shownMarkers || 0);
      it.box.dataset.x = this.opts.xMode;
      it.box.dataset.smoothing = String(this.opts.smoothing);
      if (it.failed) { it.failed = false; it.box.classList.remove("failed"); it.box.querySelector(".chart-error").classList.add("hidden"); }
    } catch (err) {
      this._fail(it, err);
    }
  }

  _fail(it, err) {
    this.failures++;
    it.failed = true;
    it.box.classList.add("failed");
    it.box.dataset.drawn = "0";
    const el = it.box.querySelector(".chart-error");
    el.textContent = `this chart failed to draw: ${err && err.message ? err.message : err}`;
    el.classList.remove("hidden");
    console.error(`chart ${it.name}:`, err);
  }
}

const isSynthetic = (group) => /^synth/.test(group);

function rolling(ys, window) {
  const out = [];
  let acc = 0;
  for (let i = 0; i < ys.length; i++) {
    acc += ys[i];
    if (i >= window) acc -= ys[i - window];
    out.push(acc / Math.min(i + 1, window));
  }
  return out;
}

export class StoreCharts {
  constructor(root) {
    this.root = root;
    this.charts = [
      { key: "return", title: "episode return", get: (eps) => eps.map((e) => e.episode_return) },
      { key: "success", title: "success rate (rolling 10 episodes)", get: (eps) => rolling(eps.map((e) => (e.success ? 1 : 0)), 10), opts: { yMin: 0, yMax: 1 } },
      { key: "length", title: "episode length (steps)", get: (eps) => eps.map((e) => e.length) },
      { key: "interventions", title: "interventions per episode", get: (eps) => eps.map((e) => e.interventions) },
    ].map((spec) => {
      const box = chartBox(spec.title);
      box.dataset.store = spec.key;
      root.appendChild(box);
      return { ...spec, box, chart: new LineChart(box.querySelector("canvas"), { xMode: "index", xLabel: "episode", ...spec.opts }) };
    });
    this.series = null;
  }

  update(items) {
    const byGroup = {};
    for (const e of items) (byGroup[e.group] ||= []).push(e);
    this.byGroup = byGroup;
    this.drawAll();
  }

  // Synthetic episodes (the synthesiser's group) are on a y axis of their own, on the right, when
  // the chart also draws real ones: their lengths and returns differ from the robot's by a lot, and
  // on one scale the smaller would be a flat line.
  drawAll() {
    if (!this.byGroup || !this.root.offsetParent) return;
    const groups = Object.keys(this.byGroup).sort();
    const dual = groups.some(isSynthetic) && groups.some((g) => !isSynthetic(g));
    const side = (g) => (dual && isSynthetic(g) ? "right" : "left");
    for (const c of this.charts) {
      try {
        c.chart.setSeries(groups.map((g, i) => {
          const eps = this.byGroup[g];
          return { name: g, color: GROUP_COLORS[g] || PALETTE[i % PALETTE.length], x: eps.map((_, j) => j), y: c.get(eps), axis: side(g) };
        }));
        c.chart.draw();
        const legend = c.box.querySelector(".legend");
        legend.innerHTML = groups.map((g, i) => `<span data-group="${esc(g)}" data-axis="${side(g)}"><i data-color="${GROUP_COLORS[g] || PALETTE[i % PALETTE.length]}"></i>${esc(g)} (${this.byGroup[g].length})${dual ? ` · ${side(g)} axis` : ""}</span>`).join("");
        legend.querySelectorAll("[data-color]").forEach((el) => { el.style.background = el.dataset.color; }); // CSP: no inline style attributes
        c.box.dataset.points = String(groups.reduce((a, g) => a + this.byGroup[g].length, 0));
        const axes = c.chart.axes || {};
        c.box.dataset.axes = String(dual ? 2 : 1);
        for (const [k, attr] of [["left", "yLeft"], ["right", "yRight"]]) { // data-y-left="lo,hi": each axis's range
          if (axes[k]) c.box.dataset[attr] = `${axes[k].lo},${axes[k].hi}`; else delete c.box.dataset[attr];
        }
      } catch (err) {
        c.box.classList.add("failed");
        const el = c.box.querySelector(".chart-error");
        el.textContent = `this chart failed to draw: ${err && err.message ? err.message : err}`;
        el.classList.remove("hidden");
        console.error(`store chart ${c.key}:`, err);
      }
    }
  }
}
