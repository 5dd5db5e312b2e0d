// A small line chart on a canvas: several series, null gaps, EMA smoothing, nice ticks,
// a hover crosshair with values. Written for the dashboard; no library.

import { clock, num } from "./format.js";

const M = { left: 46, right: 10, top: 8, bottom: 20 };
const GRID = "#1e2631";
const AXIS_TEXT = "#7d8a9c";
const FONT = '10px ui-monospace, "SF Mono", Menlo, Consolas, monospace';

export function niceTicks(lo, hi, count = 5, integer = false) {
  if (!(hi > lo)) return [lo];
  const raw = Math.max((hi - lo) / count, integer ? 1 : 0);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const steps = integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
  const step = steps.map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

export function ema(ys, alpha) {
  if (!alpha) return ys;
  const out = new Array(ys.length);
  let acc = null;
  let w = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (y === null || !Number.isFinite(y)) { out[i] = null; continue; }
    // debiased EMA (as TensorBoard): early points are not pulled towards zero
    acc = acc === null ? 0 : acc;
    acc = alpha * acc + (1 - alpha) * y;
    w = alpha * w + (1 - alpha);
    out[i] = acc / w;
  }
  return out;
}

function lowerBound(xs, x) {
  let lo = 0, hi = xs.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid + 1; else hi = mid; }
  return lo;
}

export class LineChart {
  // opts: {xMode: "step"|"time"|"index", smoothing: 0..1, yMin, yMax, yFormat}
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.opts = { xMode: "step", smoothing: 0, ...opts };
    this.series = [];
    this.hoverX = null;
    this.cursorX = null;
    canvas.addEventListener("mousemove", (e) => { this.hoverX = e.offsetX; this.draw(); });
    canvas.addEventListener("mouseleave", () => { this.hoverX = null; this.draw(); });
  }

  // series: [{name, color, x: number[], y: (number|null)[]}]
  setSeries(series) { this.series = series; }

  set(opts) { Object.assign(this.opts, opts); }

  _bounds(smoothed) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    this.series.forEach((s, k) => {
      if (!s.x.length) return;
      x0 = Math.min(x0, s.x[0]); x1 = Math.max(x1, s.x[s.x.length - 1]);
      for (const ys of [s.y, smoothed[k]]) for (const y of ys) if (y !== null && Number.isFinite(y)) { if (y < y0) y0 = y; if (y > y1) y1 = y; }
    });
    if (this.opts.yMin !== undefined) y0 = Math.min(y0, this.opts.yMin);
    if (this.opts.yMax !== undefined) y1 = Math.max(y1, this.opts.yMax);
    if (!Number.isFinite(x0)) return null;
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (!Number.isFinite(y0)) { y0 = 0; y1 = 1; }
    if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
    const pad = (y1 - y0) * 0.06;
    return { x0, x1, y0: this.opts.yMin ?? y0 - pad, y1: this.opts.yMax ?? y1 + pad };
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const W = c.clientWidth, H = c.clientHeight;
    if (!W || !H) return;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) { c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const smoothed = this.series.map((s) => ema(s.y, this.opts.smoothing));
    const b = this._bounds(smoothed);
    g.font = FONT;
    if (!b) {
      g.fillStyle = AXIS_TEXT; g.textAlign = "center"; g.fillText("no data yet", W / 2, H / 2);
      return;
    }
    const pw = W - M.left - M.right, ph = H - M.top - M.bottom;
    const sx = (x) => M.left + ((x - b.x0) / (b.x1 - b.x0)) * pw;
    const sy = (y) => M.top + (1 - (y - b.y0) / (b.y1 - b.y0)) * ph;
    this._scale = { sx, b, pw };

    // grid and ticks
    g.strokeStyle = GRID; g.lineWidth = 1; g.fillStyle = AXIS_TEXT;
    g.textAlign = "right"; g.textBaseline = "middle";
    for (const v of niceTicks(b.y0, b.y1, Math.max(2, Math.floor(ph / 28)))) {
      const y = Math.round(sy(v)) + 0.5;
      g.beginPath(); g.moveTo(M.left, y); g.lineTo(W - M.right, y); g.stroke();
      g.fillText((this.opts.yFormat || num)(v, 2), M.left - 5, y);
    }
    g.textAlign = "center"; g.textBaseline = "top";
    const xt = niceTicks(b.x0, b.x1, Math.max(2, Math.floor(pw / 80)), this.opts.xMode !== "time");
    for (const v of xt) {
      const x = Math.round(sx(v)) + 0.5;
      g.beginPath(); g.moveTo(x, M.top); g.lineTo(x, M.top + ph); g.stroke();
      g.fillText(this.opts.xMode === "time" ? clock(v) : num(v, 0), x, M.top + ph + 5);
    }

    // lines: raw faint under smoothed when smoothing is on
    g.save();
    g.beginPath(); g.rect(M.left, M.top, pw, ph); g.clip();
    this.series.forEach((s, k) => {
      if (this.opts.smoothing > 0) this._line(g, s.x, s.y, sx, sy, s.color, 0.22, 1);
      this._line(g, s.x, smoothed[k], sx, sy, s.color, 1, 1.6);
      if (s.x.length === 1) { g.fillStyle = s.color; g.beginPath(); g.arc(sx(s.x[0]), sy(smoothed[k][0] ?? 0), 2.5, 0, 7); g.fill(); }
    });
    if (this.cursorX !== null) {
      const x = sx(this.cursorX);
      g.strokeStyle = "#ffffff88"; g.beginPath(); g.moveTo(x, M.top); g.lineTo(x, M.top + ph); g.stroke();
    }
    g.restore();
    if (this.hoverX !== null && this.hoverX >= M.left && this.hoverX <= W - M.right) this._hover(g, smoothed, sx, sy, b, pw, ph, W);
  }

  _line(g, xs, ys, sx, sy, color, alpha, width) {
    g.strokeStyle = color; g.globalAlpha = alpha; g.lineWidth = width; g.lineJoin = "round";
    g.beginPath();
    let pen = false;
    for (let i = 0; i < xs.length; i++) {
      const y = ys[i];
      if (y === null || !Number.isFinite(y)) { pen = false; continue; }
      if (pen) g.lineTo(sx(xs[i]), sy(y)); else { g.moveTo(sx(xs[i]), sy(y)); pen = true; }
    }
    g.stroke();
    g.globalAlpha = 1;
  }

  _hover(g, smoothed, sx, sy, b, pw, ph, W) {
    const xv = b.x0 + ((this.hoverX - M.left) / pw) * (b.x1 - b.x0);
    const lines = [];
    let at = null;
    this.series.forEach((s, k) => {
      if (!s.x.length) return;
      let i = lowerBound(s.x, xv);
      if (i >= s.x.length || (i > 0 && xv - s.x[i - 1] < s.x[i] - xv)) i = Math.max(0, i - 1);
      const y = smoothed[k][i];
      at = s.x[i];
      if (y !== null && Number.isFinite(y)) {
        g.fillStyle = s.color; g.beginPath(); g.arc(sx(s.x[i]), sy(y), 3, 0, 7); g.fill();
      }
      lines.push([s.color, `${s.name ? s.name + " " : ""}${num(y)}`]);
    });
    if (at === null) return;
    const x = Math.round(sx(at)) + 0.5;
    g.strokeStyle = "#ffffff44"; g.beginPath(); g.moveTo(x, M.top); g.lineTo(x, M.top + ph); g.stroke();
    const head = this.opts.xMode === "time" ? clock(at) : `${this.opts.xLabel || "step"} ${num(at, 0)}`;
    const w = Math.max(...[head, ...lines.map((l) => l[1])].map((t) => g.measureText(t).width)) + 16;
    const h = 14 * (lines.length + 1) + 6;
    const bx = Math.min(x + 8, W - M.right - w), by = M.top + 2;
    g.fillStyle = "#0b0e13ee"; g.strokeStyle = "#2c3747";
    g.fillRect(bx, by, w, h); g.strokeRect(bx + 0.5, by + 0.5, w, h);
    g.textAlign = "left"; g.textBaseline = "top";
    g.fillStyle = AXIS_TEXT; g.fillText(head, bx + 8, by + 4);
    lines.forEach(([color, text], i) => { g.fillStyle = color; g.fillText(text, bx + 8, by + 4 + 14 * (i + 1)); });
  }
}
