// A small line chart on a canvas: several series, null gaps, EMA smoothing, nice ticks, event
// markers, a hover crosshair with values, and a second y axis on the right for series that have
// their own scale (`axis: "right"`). Written for the dashboard; no library.
//
// Nothing here may hang or throw on odd data: the tick generator makes at most MAX_TICKS ticks
// by index (it cannot stall on a step below float spacing), ranges that are empty, a single
// point, constant, non-finite or near the float limits are widened or clamped to a drawable
// span (each y axis on its own), and each series is reduced to at most four points per pixel column (first, min, max,
// last of the column) before it is stroked, so a redraw costs O(points) arithmetic and
// O(pixels) canvas calls however long the run.

import { clock, num } from "./format.js";

const M = { right: 10, top: 8, bottom: 20 }; // the left margin fits the y labels (the right one a right axis's)
const TITLE_H = 13; // the band above the plot for the axis titles of a chart with two y axes
const GRID = "#1e2631";
const AXIS_TEXT = "#7d8a9c";
const FONT = '10px ui-monospace, "SF Mono", Menlo, Consolas, monospace';
export const MAX_TICKS = 50;
const LIMIT = 1e300; // values beyond are clamped for drawing (the read-out still shows them)

// Up to `count` (at most MAX_TICKS) round values in [lo, hi], ascending, finite, distinct.
export function niceTicks(lo, hi, count = 5, integer = false) {
  const finLo = Number.isFinite(lo), finHi = Number.isFinite(hi);
  if (!finLo || !finHi) return finLo ? [lo] : finHi ? [hi] : [];
  if (!(hi > lo)) return [lo];
  const n = Math.min(MAX_TICKS, Math.max(1, Math.floor(count) || 1));
  let raw = hi / n - lo / n; // (hi - lo) / n without overflowing
  if (integer) raw = Math.max(raw, 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].filter((m) => !integer || m !== 2.5).map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  if (!(step > 0) || !Number.isFinite(step)) return [lo, hi];
  const start = Math.ceil(lo / step - 1e-9);
  const out = [];
  for (let i = 0; i <= MAX_TICKS; i++) {
    let v = (start + i) * step;
    if (!Number.isFinite(v) || v > hi + step * 1e-9) break;
    if (Math.abs(v) < step * 1e-9) v = 0;
    if (out.length && v <= out[out.length - 1]) continue; // below float spacing: no duplicates
    out.push(v);
  }
  return out.length ? out : [lo, hi];
}

// A label for tick v when ticks are `step` apart: enough digits to tell neighbours apart.
export function tickLabel(v, step) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(Math.min(6, Math.max(1, Math.ceil(Math.log10(a / step)))));
  const mant = step / 10 ** Math.floor(Math.log10(step));
  const digits = Math.ceil(-Math.log10(step) - 1e-9) + (Math.abs(mant - 2.5) < 1e-6 ? 1 : 0);
  return v.toFixed(Math.min(8, Math.max(0, digits)));
}

// x labels: 950, 12k, 1.5M
export function compact(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  return num(v, 0);
}

// A span that can be drawn: finite, clamped to ±LIMIT, wider than float noise around its centre.
export function drawableRange(lo, hi, unit = 1, relative = 0.1) {
  if (!Number.isFinite(lo) && !Number.isFinite(hi)) return [0, 1];
  lo = Math.max(-LIMIT, Math.min(LIMIT, Number.isFinite(lo) ? lo : hi));
  hi = Math.max(-LIMIT, Math.min(LIMIT, Number.isFinite(hi) ? hi : lo));
  if (hi < lo) [lo, hi] = [hi, lo];
  const mid = lo / 2 + hi / 2;
  if (!(hi - lo > Math.max(Math.abs(lo), Math.abs(hi)) * 1e-12)) {
    const d = Math.abs(mid) * relative || unit;
    return [mid - d, mid + d];
  }
  return [lo, hi];
}

export function ema(ys, alpha) {
  if (!alpha) return ys;
  const out = new Array(ys.length);
  let acc = null;
  let w = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (typeof y !== "number" || !Number.isFinite(y)) { out[i] = null; continue; }
    // debiased EMA (as TensorBoard): early points are not pulled towards zero
    acc = acc === null ? 0 : acc;
    acc = alpha * acc + (1 - alpha) * y;
    w = alpha * w + (1 - alpha);
    out[i] = acc / w;
  }
  return out;
}

// At most four points per pixel column (first, min, max, last, in x order): the drawn line is the
// same as with every point. Gaps (null / non-finite) become NaN breaks. Returns [xs, ys].
export function decimate(xs, ys, x0, x1, width) {
  const n = Math.min(xs.length, ys.length);
  const ox = [], oy = [];
  const scale = width > 0 && x1 > x0 ? width / (x1 - x0) : 0;
  let cur = null, f = 0, l = 0, lo = 0, hi = 0;
  const gap = () => { if (ox.length && !Number.isNaN(ox[ox.length - 1])) { ox.push(NaN); oy.push(NaN); } };
  const flush = () => {
    if (cur === null) return;
    const idx = [f, lo, hi, l].sort((a, b) => a - b);
    for (let k = 0; k < 4; k++) if (k === 0 || idx[k] !== idx[k - 1]) { ox.push(xs[idx[k]]); oy.push(ys[idx[k]]); }
    cur = null;
  };
  for (let i = 0; i < n; i++) {
    const x = xs[i], y = ys[i];
    if (typeof y !== "number" || !Number.isFinite(y) || typeof x !== "number" || !Number.isFinite(x)) { flush(); gap(); continue; }
    const b = Math.floor((x - x0) * scale);
    if (b !== cur) { flush(); cur = b; f = l = lo = hi = i; continue; }
    l = i;
    if (y < ys[lo]) lo = i;
    if (y > ys[hi]) hi = i;
  }
  flush();
  return [ox, oy];
}

function lowerBound(xs, x) {
  let lo = 0, hi = xs.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid + 1; else hi = mid; }
  return lo;
}

const clampPx = (v) => Math.max(-1e6, Math.min(1e6, v));

export class LineChart {
  // opts: {xMode: "step"|"time"|"index", smoothing: 0..1, yMin, yMax, yFormat, xLabel}
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.opts = { xMode: "step", smoothing: 0, ...opts };
    this.series = [];
    this.markers = [];
    this.hoverX = null;
    this.cursorX = null;
    this._smooth = [];
    canvas.addEventListener("mousemove", (e) => { this.hoverX = e.offsetX; this.safeDraw(); });
    canvas.addEventListener("mouseleave", () => { this.hoverX = null; this.safeDraw(); });
  }

  // series: [{name, color, x: number[], y: (number|null)[], axis?: "left"|"right"}]
  setSeries(series) { this.series = series; }

  // markers: [{x, color, label}] in the chart's x coordinates
  setMarkers(markers) { this.markers = markers || []; }

  set(opts) { Object.assign(this.opts, opts); }

  safeDraw() {
    try { this.draw(); } catch (err) { this.onError?.(err); }
  }

  // the EMA of each series, recomputed only when its data, length or the smoothing changed
  _smoothed() {
    const a = this.opts.smoothing;
    return this.series.map((s, k) => {
      const c = this._smooth[k];
      if (c && c.y === s.y && c.n === s.y.length && c.a === a) return c.out;
      const out = ema(s.y, a);
      this._smooth[k] = { y: s.y, n: s.y.length, a, out };
      return out;
    });
  }

  // y range of the series on one axis ("left" or "right"; a series without `axis` is on the left)
  _yRange(smoothed, side) {
    let y0 = Infinity, y1 = -Infinity, any = false;
    this.series.forEach((s, k) => {
      if ((s.axis === "right" ? "right" : "left") !== side) return;
      any = true;
      for (const ys of s.y === smoothed[k] ? [s.y] : [s.y, smoothed[k]]) {
        for (let i = 0; i < ys.length; i++) {
          const y = ys[i];
          if (typeof y === "number" && Number.isFinite(y)) { if (y < y0) y0 = y; if (y > y1) y1 = y; }
        }
      }
    });
    if (!any) return null;
    const finiteY = Number.isFinite(y0);
    if (this.opts.yMin !== undefined) y0 = Math.min(y0, this.opts.yMin);
    if (this.opts.yMax !== undefined) y1 = Math.max(y1, this.opts.yMax);
    [y0, y1] = finiteY || this.opts.yMin !== undefined ? drawableRange(y0, y1) : [0, 1];
    const pad = (y1 - y0) * 0.06;
    return { y0: this.opts.yMin ?? y0 - pad, y1: this.opts.yMax ?? y1 + pad, finiteY };
  }

  // x range of every series, and a y range per axis: `right` only when a series is on the right
  _bounds(smoothed) {
    let x0 = Infinity, x1 = -Infinity;
    for (const s of this.series) {
      const xs = s.x;
      for (let i = 0; i < xs.length; i++) { const x = xs[i]; if (Number.isFinite(x)) { if (x < x0) x0 = x; if (x > x1) x1 = x; } }
    }
    if (!Number.isFinite(x0)) return null;
    [x0, x1] = drawableRange(x0, x1, 1, 1e-9);
    const left = this._yRange(smoothed, "left") || { y0: 0, y1: 1, finiteY: false };
    return { x0, x1, left, right: this._yRange(smoothed, "right") };
  }

  // an axis's ticks and their labels, or null when it has nothing to show
  _axis(g, a, count) {
    if (!a || !a.finiteY) return null;
    const ticks = niceTicks(a.y0, a.y1, count);
    const step = ticks.length > 1 ? ticks[1] - ticks[0] : Math.abs(a.y1 - a.y0) || 1;
    const labels = ticks.map((v) => (this.opts.yFormat ? this.opts.yFormat(v) : tickLabel(v, step)));
    const width = Math.min(90, Math.max(30, Math.ceil(Math.max(0, ...labels.map((t) => g.measureText(t).width))) + 9));
    return { ...a, ticks, labels, width };
  }

  // Draws the chart; `size` ({W, H}) skips reading the layout (the caller read it for many charts).
  // Series with `axis: "right"` get their own y axis on the right, with its own range and labels, and
  // each axis is titled with its series' names above the plot.
  draw(size) {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const W = size ? size.W : c.clientWidth, H = size ? size.H : c.clientHeight;
    if (!W || !H) return false;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) { c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); }
    this._size = { W, H };
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const smoothed = this._smoothed();
    const b = this._bounds(smoothed);
    g.font = FONT;
    this.axes = null;
    if (!b || !(b.left.finiteY || b.right?.finiteY)) {
      g.fillStyle = AXIS_TEXT; g.textAlign = "center"; g.textBaseline = "middle";
      g.fillText(b ? "no finite values" : "no data yet", W / 2, H / 2);
      return false;
    }
    const dual = !!b.right;
    const top = M.top + (dual ? TITLE_H : 0); // a band for the axis titles
    const ph = Math.max(1, H - top - M.bottom);
    const count = Math.max(2, Math.floor(ph / 28));
    const L = this._axis(g, b.left, count), R = dual ? this._axis(g, b.right, count) : null;
    const main = L || R; // the grid follows the left axis (the right one when the left has no values)
    const left = L ? L.width : 30;
    const right = R ? R.width : M.right;
    this._left = left; this._top = top;
    const pw = Math.max(1, W - left - right);
    const kx = pw / (b.x1 - b.x0);
    const sx = (x) => clampPx(left + (x - b.x0) * kx);
    const syOf = (a) => { const ky = ph / (a.y1 - a.y0); return (y) => clampPx(top + (a.y1 - y) * ky); };
    const sy = syOf(main), syR = R ? syOf(R) : sy, syL = L ? syOf(L) : sy;
    const syFor = (k) => (this.series[k].axis === "right" ? syR : syL);
    this.axes = { left: L && { lo: L.y0, hi: L.y1, ticks: L.ticks }, right: R && { lo: R.y0, hi: R.y1, ticks: R.ticks } };

    // grid and ticks
    g.strokeStyle = GRID; g.lineWidth = 1; g.fillStyle = AXIS_TEXT;
    const time = this.opts.xMode === "time";
    const xt = niceTicks(b.x0, b.x1, Math.max(2, Math.floor(pw / 80)), !time);
    g.beginPath(); // the whole grid in one path
    for (const v of main.ticks) { const y = Math.round(sy(v)) + 0.5; g.moveTo(left, y); g.lineTo(W - right, y); }
    for (const v of xt) { const x = Math.round(sx(v)) + 0.5; g.moveTo(x, top); g.lineTo(x, top + ph); }
    if (R) for (const v of R.ticks) { const y = Math.round(syR(v)) + 0.5; g.moveTo(W - right, y); g.lineTo(W - right + 3, y); }
    g.stroke();
    g.textBaseline = "middle";
    if (L) { g.textAlign = "right"; L.ticks.forEach((v, i) => g.fillText(L.labels[i], left - 5, Math.round(syL(v)) + 0.5)); }
    if (R) { g.textAlign = "left"; R.ticks.forEach((v, i) => g.fillText(R.labels[i], W - right + 5, Math.round(syR(v)) + 0.5)); }
    g.textAlign = "center"; g.textBaseline = "top";
    for (const v of xt) g.fillText(time ? clock(v) : compact(v), Math.round(sx(v)) + 0.5, top + ph + 5);
    if (dual) this._axisTitles(g, left, W - right, M.top);

    g.save();
    g.beginPath(); g.rect(left, top, pw, ph); g.clip();
    this._drawMarkers(g, b, sx, ph);
    // lines: raw faint under smoothed when smoothing is on; each reduced to the pixel width
    this.series.forEach((s, k) => {
      const y = syFor(k);
      if (this.opts.smoothing > 0) this._line(g, ...decimate(s.x, s.y, b.x0, b.x1, pw), sx, y, s.color, 0.22, 1, false);
      this._line(g, ...decimate(s.x, smoothed[k], b.x0, b.x1, pw), sx, y, s.color, 1, 1.6, true);
    });
    if (this.cursorX !== null) {
      const x = sx(this.cursorX);
      g.strokeStyle = "#ffffff88"; g.beginPath(); g.moveTo(x, top); g.lineTo(x, top + ph); g.stroke();
    }
    g.restore();
    if (this.hoverX !== null && this.hoverX >= left && this.hoverX <= W - right) this._hover(g, smoothed, sx, syFor, b, pw, ph, W - right);
    return true;
  }

  // "◂ real" over the left axis and "synthetic ▸" over the right one, in their series' colours
  _axisTitles(g, x0, x1, y) {
    const named = (right) => this.series.filter((s) => s.name && (s.axis === "right") === right);
    g.textBaseline = "top";
    g.textAlign = "left";
    let x = x0;
    named(false).forEach((s, i, all) => {
      const t = `${i ? "" : "◂ "}${s.name}${i < all.length - 1 ? "," : ""}`;
      g.fillStyle = s.color; g.fillText(t, x, y); x += g.measureText(t).width + 4;
    });
    g.textAlign = "right";
    x = x1;
    named(true).reverse().forEach((s, i) => {
      const t = `${s.name}${i ? "," : " ▸"}`;
      g.fillStyle = s.color; g.fillText(t, x, y); x -= g.measureText(t).width + 4;
    });
  }

  _drawMarkers(g, b, sx, ph) {
    this.shownMarkers = 0;
    for (const m of this.markers) {
      if (!(m.x >= b.x0 && m.x <= b.x1)) continue;
      const x = Math.round(sx(m.x)) + 0.5;
      g.strokeStyle = m.color; g.fillStyle = m.color; g.globalAlpha = 0.75; g.lineWidth = 1;
      g.setLineDash([3, 3]);
      const top = this._top;
      g.beginPath(); g.moveTo(x, top); g.lineTo(x, top + ph); g.stroke();
      g.setLineDash([]);
      g.beginPath(); g.moveTo(x - 4, top); g.lineTo(x + 4, top); g.lineTo(x, top + 6); g.fill();
      g.globalAlpha = 1;
      this.shownMarkers++;
    }
  }

  // a polyline with NaN breaks; a point with no neighbour is drawn as a dot
  _line(g, xs, ys, sx, sy, color, alpha, width, dots) {
    g.strokeStyle = color; g.fillStyle = color; g.globalAlpha = alpha; g.lineWidth = width; g.lineJoin = "round";
    g.beginPath();
    const lonely = [];
    let run = 0;
    for (let i = 0; i < xs.length; i++) {
      const y = ys[i];
      if (Number.isNaN(y)) { if (run === 1) lonely.push(i - 1); run = 0; continue; }
      if (run) g.lineTo(sx(xs[i]), sy(y)); else g.moveTo(sx(xs[i]), sy(y));
      run++;
    }
    if (run === 1) lonely.push(xs.length - 1);
    g.stroke();
    if (dots) for (const i of lonely) { g.beginPath(); g.arc(sx(xs[i]), sy(ys[i]), 3.5, 0, 7); g.fill(); }
    g.globalAlpha = 1;
  }

  // `syFor(k)`: series k's y scale; `xr`: the plot's right edge
  _hover(g, smoothed, sx, syFor, b, pw, ph, xr) {
    const top = this._top;
    const xv = b.x0 + ((this.hoverX - this._left) / pw) * (b.x1 - b.x0);
    const lines = [];
    let at = null;
    this.series.forEach((s, k) => {
      if (!s.x.length) return;
      let i = lowerBound(s.x, xv);
      if (i >= s.x.length || (i > 0 && xv - s.x[i - 1] < s.x[i] - xv)) i = Math.max(0, i - 1);
      const y = smoothed[k][i];
      at = s.x[i];
      if (typeof y === "number" && Number.isFinite(y)) {
        g.fillStyle = s.color; g.beginPath(); g.arc(sx(s.x[i]), syFor(k)(y), 3, 0, 7); g.fill();
      }
      lines.push([s.color, `${s.name ? s.name + " " : ""}${num(y)}`]);
    });
    if (at === null) return;
    const x = Math.round(sx(at)) + 0.5;
    for (const m of this.markers) if (Math.abs(sx(m.x) - this.hoverX) <= 4) lines.push([m.color, `▼ ${m.label}`]);
    g.strokeStyle = "#ffffff44"; g.beginPath(); g.moveTo(x, top); g.lineTo(x, top + ph); g.stroke();
    const head = this.opts.xMode === "time" ? clock(at) : `${this.opts.xLabel || "step"} ${num(at, 0)}`;
    const w = Math.max(...[head, ...lines.map((l) => l[1])].map((t) => g.measureText(t).width)) + 16;
    const h = 14 * (lines.length + 1) + 6;
    const bx = Math.max(0, Math.min(x + 8, xr - w)), by = top + 2;
    g.fillStyle = "#0b0e13ee"; g.strokeStyle = "#2c3747";
    g.fillRect(bx, by, w, h); g.strokeRect(bx + 0.5, by + 0.5, w, h);
    g.textAlign = "left"; g.textBaseline = "top";
    g.fillStyle = AXIS_TEXT; g.fillText(head, bx + 8, by + 4);
    lines.forEach(([color, text], i) => { g.fillStyle = color; g.fillText(text, bx + 8, by + 4 + 14 * (i + 1)); });
  }
}
