// The curves: one chart per training metric (grouped by the prefix before "/"), fed by the
// series endpoint and then by live rows; and the store's own curves (per-episode return,
// rolling success, length) per group.

import { LineChart } from "./chart.js";
import { esc, num, PALETTE } from "./format.js";

const GROUP_ORDER = ["success", "eval", "return", "ppl", "synthetic", "synth", "wm", "world_model", "loss", "learner", "train", "real", "sys"];
const GROUP_COLORS = { demo: "#4cc2ff", real: "#3ddc97", sim: "#ffb547", synthetic: "#b48cff" };
const MAX_POINTS = 20000;
const PREFIX_COLORS = { success: "#3ddc97", eval: "#3ddc97", return: "#3ddc97", ppl: "#b48cff", synthetic: "#b48cff", synth: "#b48cff", wm: "#66e0e0", world_model: "#66e0e0", loss: "#ffb547" };

function prefix(name) {
  const i = name.indexOf("/");
  return i > 0 ? name.slice(0, i) : "metrics";
}

function groupRank(g) {
  const i = GROUP_ORDER.indexOf(g);
  return i < 0 ? GROUP_ORDER.length : i;
}

function chartBox(title) {
  const box = document.createElement("div");
  box.className = "chart";
  box.innerHTML = `<div class="title"><span class="name" title="${esc(title)}">${esc(title)}</span><span class="last"></span></div><canvas></canvas><div class="legend"></div>`;
  return box;
}

export class Charts {
  constructor(root, emptyNote) {
    this.root = root;
    this.empty = emptyNote;
    this.items = new Map();
    this.opts = { xMode: "step", smoothing: 0.6 };
    this.filterText = "";
    this.dirty = new Set();
    this.frame = 0;
  }

  load(resp) {
    for (const [name, s] of Object.entries(resp.series)) {
      const it = this._ensure(name);
      it.step = s.step; it.time = s.time; it.value = s.value;
    }
    this._layout();
    this.drawAll();
  }

  addRows(rows) {
    let added = false;
    for (const row of rows) {
      for (const [k, v] of Object.entries(row)) {
        if (k === "step" || k === "time") continue;
        let it = this.items.get(k);
        if (!it) { it = this._ensure(k); added = true; }
        const last = it.step.length ? it.step[it.step.length - 1] : -Infinity;
        if (row.step < last) continue; // the series endpoint already had it
        it.step.push(row.step); it.time.push(row.time); it.value.push(v);
        if (it.step.length > MAX_POINTS) for (const key of ["step", "time", "value"]) it[key] = it[key].filter((_, i) => i % 2 === 0 || i === it[key].length - 1);
        this.dirty.add(k);
      }
    }
    if (added) this._layout();
    this._schedule();
  }

  _ensure(name) {
    let it = this.items.get(name);
    if (it) return it;
    const box = chartBox(name);
    box.dataset.metric = name;
    it = { name, box, chart: new LineChart(box.querySelector("canvas"), this.opts), step: [], time: [], value: [] };
    this.items.set(name, it);
    return it;
  }

  _layout() {
    const groups = new Map();
    for (const name of [...this.items.keys()].sort()) {
      const g = prefix(name);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(this.items.get(name));
    }
    // one flowing grid, ordered by group (success first, losses later); names carry the prefix
    this.root.innerHTML = "";
    for (const g of [...groups.keys()].sort((a, b) => groupRank(a) - groupRank(b) || a.localeCompare(b))) {
      for (const it of groups.get(g)) this.root.appendChild(it.box);
    }
    this.empty.classList.toggle("hidden", this.items.size > 0);
    this.filter(this.filterText);
  }

  filter(text) {
    this.filterText = text.trim().toLowerCase();
    for (const it of this.items.values()) it.box.classList.toggle("hidden", !!this.filterText && !it.name.toLowerCase().includes(this.filterText));
    this.drawAll();
  }

  setOptions(opts) {
    Object.assign(this.opts, opts);
    for (const it of this.items.values()) it.chart.set(this.opts);
    this.drawAll();
  }

  _schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      for (const k of this.dirty) this._draw(this.items.get(k));
      this.dirty.clear();
    });
  }

  drawAll() {
    for (const it of this.items.values()) this._draw(it);
  }

  _draw(it) {
    if (!it || it.box.classList.contains("hidden") || !it.box.offsetParent) return;
    const x = this.opts.xMode === "time" ? it.time : it.step;
    it.chart.setSeries([{ name: "", color: PREFIX_COLORS[prefix(it.name)] || "#4cc2ff", x, y: it.value }]);
    it.chart.draw();
    const last = it.value.length ? it.value[it.value.length - 1] : null;
    const lastEl = it.box.querySelector(".last");
    lastEl.textContent = num(last);
    lastEl.style.color = PREFIX_COLORS[prefix(it.name)] || "";
    it.box.dataset.points = String(it.value.length);
  }
}

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

  drawAll() {
    if (!this.byGroup) return;
    for (const c of this.charts) {
      const groups = Object.keys(this.byGroup).sort();
      c.chart.setSeries(groups.map((g, i) => {
        const eps = this.byGroup[g];
        return { name: g, color: GROUP_COLORS[g] || PALETTE[i % PALETTE.length], x: eps.map((_, j) => j), y: c.get(eps) };
      }));
      c.chart.draw();
      const legend = c.box.querySelector(".legend");
      legend.innerHTML = groups.map((g, i) => `<span><i data-color="${GROUP_COLORS[g] || PALETTE[i % PALETTE.length]}"></i>${esc(g)} (${this.byGroup[g].length})</span>`).join("");
      legend.querySelectorAll("[data-color]").forEach((el) => { el.style.background = el.dataset.color; }); // CSP: no inline style attributes
      c.box.dataset.points = String(groups.reduce((a, g) => a + this.byGroup[g].length, 0));
    }
  }
}
