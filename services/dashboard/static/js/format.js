// Number, time and HTML helpers shared by the views.

export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function num(v, digits = 3) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
  if (Number.isInteger(v) && a < 1e5) return String(v);
  return v.toFixed(a >= 100 ? 1 : digits);
}

// axis labels: short, and a zero that is zero (not 7.12e-9)
export function axisNum(v, span = Math.abs(v)) {
  if (Math.abs(v) < Math.max(span, 1e-12) * 1e-3) return "0";
  return num(v, 2);
}

// 1,234,567 (without toLocaleString: its first call loads locale data, ~0.1 s on a busy machine)
export function int(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return String(Math.round(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function pct(v) {
  return v === null || v === undefined ? "–" : `${(100 * v).toFixed(0)}%`;
}

// a rate with its interval, "42 % [28-57]" ("–" without a rate; the rate alone without an interval)
export function pctCI(rate, lo, hi) {
  if (rate === null || rate === undefined) return "–";
  const p = (v) => (100 * v).toFixed(0);
  return lo === null || lo === undefined || hi === null || hi === undefined ? `${p(rate)} %` : `${p(rate)} % [${p(lo)}-${p(hi)}]`;
}

export function ago(t, now = Date.now() / 1000) {
  if (!t) return "–";
  const s = Math.max(0, now - t);
  if (s < 60) return `${s.toFixed(0)}s`;
  if (s < 3600) return `${(s / 60).toFixed(0)}m`;
  if (s < 86400) return `${(s / 3600).toFixed(1)}h`;
  return `${(s / 86400).toFixed(1)}d`;
}

export function clock(t) {
  const d = new Date(t * 1000);
  return d.toTimeString().slice(0, 8);
}

export function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

export const PALETTE = ["#4cc2ff", "#ffb547", "#3ddc97", "#ff5c6c", "#b48cff", "#ff8fd1", "#9be15d", "#f7d774", "#66e0e0", "#c0c8d4"];
