// Episode player: per-camera views drawn from contact sheets, a scrubber, and the action,
// reward and flag traces under the timeline. Optional "imagine" views from the world model.

import { ApiError, getBitmap, getBlob, getJSON, retrying, token } from "./api.js";
import { axisNum, esc, num, PALETTE } from "./format.js";

const SHEET = 256; // frames per contact-sheet request (the server's default limit)
const STEP_PAGE = 4096;
const VIEW_MAX = 300; // px: the longer side of a camera view on screen

export class Player {
  // runId(): the run's id (run_id in /api/run) once known: image URLs carry it, so the browser
  // caches them for this run only
  constructor(root, { onStatus, runId } = {}) {
    this.el = {
      title: root.querySelector("#player-title"),
      meta: root.querySelector("#player-meta"),
      views: root.querySelector("#views"),
      play: root.querySelector("#play"),
      back: root.querySelector("#step-back"),
      fwd: root.querySelector("#step-fwd"),
      scrub: root.querySelector("#scrubber"),
      label: root.querySelector("#step-label"),
      speed: root.querySelector("#speed"),
      traces: root.querySelector("#traces"),
      readout: root.querySelector("#readout"),
      imagine: root.querySelector("#imagine-toggle"),
      mcap: root.querySelector("#export-mcap"),
    };
    this.onStatus = onStatus;
    this.runId = runId || (() => "");
    this.ep = null;
    this.t = 0;
    this.playing = false;
    this.loadToken = 0;
    this.el.play.onclick = () => this.toggle();
    this.el.back.onclick = () => this.seek(this.t - 1);
    this.el.fwd.onclick = () => this.seek(this.t + 1);
    this.el.scrub.oninput = () => this.seek(+this.el.scrub.value);
    this.el.imagine.onchange = () => this.loadImagination();
    this.mcapTitle = this.el.mcap.title;
    this.el.mcap.onclick = (e) => this._download(e);
    this.el.traces.addEventListener("click", (e) => this._traceSeek(e));
    this.el.traces.addEventListener("mousemove", (e) => { if (e.buttons & 1) this._traceSeek(e); });
    window.addEventListener("resize", () => this.drawTraces());
    document.addEventListener("keydown", (e) => {
      if (!this.ep || e.target.closest("input, select, textarea") || !root.offsetParent) return;
      if (e.key === " ") { e.preventDefault(); this.toggle(); }
      else if (e.key === "ArrowLeft") this.seek(this.t - 1);
      else if (e.key === "ArrowRight") this.seek(this.t + 1);
    });
  }

  // `?run=<id>` (or `&run=`) for image URLs, empty until the run's id is known
  _run(sep) {
    const id = this.runId();
    return id ? `${sep}run=${encodeURIComponent(id)}` : "";
  }

  async load(group, episode) {
    const token = ++this.loadToken;
    this.pause();
    this.el.title.textContent = `${group} / ${episode}`;
    this.el.views.innerHTML = '<div class="muted">loading…</div>';
    this.el.mcap.hidden = true;
    let detail;
    const steps = {};
    try {
      detail = await getJSON(`/api/episodes/${group}/${episode}`);
      for (let start = 0; start < detail.length; start += STEP_PAGE) {
        const page = await getJSON(`/api/episodes/${group}/${episode}/steps?start=${start}&stop=${start + STEP_PAGE}`);
        for (const [k, v] of Object.entries(page.data)) (steps[k] ||= []).push(...v);
      }
    } catch (err) {
      if (token !== this.loadToken) return;
      this._unavailable(group, episode, err);
      throw err;
    }
    if (token !== this.loadToken) return;
    this.ep = { group, episode, detail, steps, views: {}, imagined: {} };
    this._renderMeta(detail);
    this._buildViews(detail);
    Object.assign(this.el.mcap, { href: `/api/episodes/${group}/${episode}/export.mcap`, hidden: false, title: this.mcapTitle });
    this.el.scrub.max = String(detail.length - 1);
    for (const b of [this.el.play, this.el.back, this.el.fwd, this.el.scrub]) b.disabled = false;
    this.t = 0;
    this.drawTraces();
    this.seek(0);
    // sheets load in the background; frames appear as they arrive
    await Promise.all(detail.cameras.map((cam) => this._loadSheets(token, cam)));
    if (token === this.loadToken) {
      this.seek(this.t);
      if (this.el.imagine.checked) this.loadImagination();
    }
  }

  // the episode cannot be shown (damaged: 410, gone, ...): say so where the frames would be
  _unavailable(group, episode, err) {
    this.ep = null;
    for (const b of [this.el.play, this.el.back, this.el.fwd, this.el.scrub]) b.disabled = true;
    const damaged = err instanceof ApiError && err.status === 410;
    this.el.title.textContent = `${group} / ${episode}${damaged ? " (damaged)" : ""}`;
    this.el.meta.innerHTML = "";
    this.el.views.innerHTML = "";
    const msg = document.createElement("div");
    msg.className = `msg${damaged ? " damaged" : ""}`;
    msg.dataset.status = String(err.status || "");
    msg.textContent = damaged
      ? `This episode's stored data is damaged and set aside: ${err.detail}`
      : `cannot load ${group}/${episode}: ${err instanceof ApiError ? err.detail : err}`;
    this.el.views.appendChild(msg);
    this.el.readout.textContent = "";
    this.drawTraces();
  }

  // the .mcap link downloads as it is; with a token set (reads may need it), it is fetched with
  // the token and saved from a blob
  _download(e) {
    if (!token.get()) return;
    e.preventDefault();
    const link = this.el.mcap;
    const name = `${this.ep.group}-${this.ep.episode}.mcap`;
    getBlob(link.href).then((blob) => {
      const a = Object.assign(document.createElement("a"), { href: URL.createObjectURL(blob), download: name });
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    }, (err) => { link.title = `download failed: ${err instanceof ApiError ? err.detail : err}`; });
  }

  _renderMeta(d) {
    const ok = d.success ? '<span class="ok-mark">success</span>' : '<span class="bad-mark">failure</span>';
    // the operator's verdict (a stored label) beside the recorded outcome
    const verdict = d.label === true || d.label === false
      ? `<span class="label-mark ${d.label ? "ok-mark" : "bad-mark"}" data-label="${d.label}">operator: ${d.label ? "success" : "failure"}</span>`
      : "";
    const bits = [
      `recorded ${ok}`,
      verdict,
      `${d.length} steps`,
      `return ${num(d.episode_return)}`,
      `domain ${esc(d.domain)}`,
      d.policy_version !== null ? `policy v${d.policy_version}` : "",
      d.wm_version !== null ? `wm v${d.wm_version}` : "",
      d.interventions ? `${d.interventions} interventions` : "",
      d.source ? `from ${esc(d.source.group)}/${d.source.episode}@${d.source.step}` : "",
    ];
    this.el.meta.innerHTML = bits.filter(Boolean).map((b) => `<span>${b}</span>`).join("");
  }

  _buildViews(d) {
    this.el.views.innerHTML = "";
    const img = d.keys.find((k) => k.kind === "image");
    if (!img) { this.el.views.innerHTML = '<div class="muted">this group has no cameras</div>'; return; }
    const [h, w] = img.shape;
    const scale = Math.max(1, Math.floor(VIEW_MAX / Math.max(h, w))) || VIEW_MAX / Math.max(h, w);
    for (const cam of d.cameras) {
      this.ep.views[cam] = this._view(`cam-${cam}`, cam, w, h, scale, "");
    }
    this.ep.frame = { w, h, scale };
  }

  _view(id, caption, w, h, scale, cls) {
    const box = document.createElement("div");
    box.className = `view ${cls}`;
    box.dataset.view = id;
    box.innerHTML = `<div class="cap"><span>${esc(caption)}</span><span class="where"></span></div>`;
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(w * scale); canvas.height = Math.round(h * scale);
    box.appendChild(canvas);
    this.el.views.appendChild(box);
    return { box, canvas, sheets: [], where: box.querySelector(".where") };
  }

  async _loadSheets(token, cam) {
    const { group, episode, detail } = this.ep;
    const view = this.ep.views[cam];
    for (let start = 0; start < detail.length; start += SHEET) {
      if (token !== this.loadToken) return;
      const count = Math.min(SHEET, detail.length - start);
      const url = `/api/episodes/${group}/${episode}/sheet/${encodeURIComponent(cam)}?start=${start}&count=${count}${this._run("&")}`;
      let got;
      try {
        got = await retrying(() => getBitmap(url), (s, _, n) => { view.where.textContent = `busy: retry in ${s} s`; view.box.dataset.retried = String(n); });
      } catch (err) {
        if (token === this.loadToken) this._viewError(view, err);
        return;
      }
      if (token !== this.loadToken) return;
      view.sheets.push(sheetOf(got.bitmap, got.headers));
      if (this.t >= start && this.t < start + count) this.drawFrame();
    }
  }

  // one view's frames failed (damaged episode: 410, refused, ...): a message in its place
  _viewError(v, err) {
    const msg = document.createElement("div");
    const damaged = err instanceof ApiError && err.status === 410;
    msg.className = `msg${damaged ? " damaged" : ""}`;
    msg.dataset.status = String(err.status || "");
    msg.textContent = damaged ? `damaged, set aside: ${err.detail}` : (err instanceof ApiError ? err.detail : String(err));
    msg.style.width = `${v.canvas.width}px`;
    msg.style.height = `${v.canvas.height}px`;
    if (v.canvas.isConnected) v.canvas.replaceWith(msg);
    v.where.textContent = damaged ? "damaged" : "";
  }

  async loadImagination() {
    if (!this.ep) return;
    const ep = this.ep;
    for (const id of Object.keys(ep.imagined)) ep.imagined[id].box.remove();
    ep.imagined = {};
    if (!this.el.imagine.checked) return;
    const { w, h, scale } = ep.frame;
    for (const cam of ep.detail.cameras) {
      const v = this._view(`imagine-${cam}`, `${cam} · imagined`, w, h, scale, "imagined");
      ep.imagined[cam] = v;
      const start = this.t;
      const url = `/api/episodes/${ep.group}/${ep.episode}/imagine/${encodeURIComponent(cam)}?start=${start}&horizon=32`;
      try {
        // the server runs one rollout at a time: a full queue answers 429 with Retry-After, shown and retried
        const { bitmap, headers } = await retrying(() => getBitmap(url), (s, _, n) => {
          v.where.textContent = `queue full: retry in ${s} s`;
          v.box.dataset.retried = String(n);
        });
        if (ep !== this.ep || ep.imagined[cam] !== v) return; // another episode or toggle meanwhile
        v.sheets.push(sheetOf(bitmap, headers));
        v.where.textContent = `wm v${headers.get("X-WM-Version")}`;
      } catch (err) {
        if (ep !== this.ep || ep.imagined[cam] !== v) return;
        this._viewError(v, err);
        break;
      }
    }
    if (ep === this.ep) this.drawFrame();
  }

  toggle() { this.playing ? this.pause() : this.play(); }

  play() {
    if (!this.ep) return;
    if (this.t >= this.ep.detail.length - 1) this.seek(0);
    this.playing = true;
    this.el.play.innerHTML = "&#10074;&#10074;";
    let last = performance.now();
    const tick = (now) => {
      if (!this.playing) return;
      const period = 1000 / +this.el.speed.value;
      if (now - last >= period) {
        last = now - ((now - last) % period);
        if (this.t >= this.ep.detail.length - 1) { this.pause(); return; }
        this.seek(this.t + 1);
      }
      this.raf = requestAnimationFrame(tick);
    };
    this.raf = requestAnimationFrame(tick);
  }

  pause() {
    this.playing = false;
    cancelAnimationFrame(this.raf);
    this.el.play.innerHTML = "&#9654;";
  }

  seek(t) {
    if (!this.ep) return;
    this.t = Math.max(0, Math.min(this.ep.detail.length - 1, t | 0));
    this.el.scrub.value = String(this.t);
    this.el.label.textContent = `t ${this.t} / ${this.ep.detail.length - 1}`;
    this.drawFrame();
    this.drawTraces();
    this._readout();
    this.onStatus?.(this.t);
  }

  drawFrame() {
    const ep = this.ep;
    if (!ep) return;
    for (const v of [...Object.values(ep.views), ...Object.values(ep.imagined)]) if (v.canvas.isConnected) blit(v, this.t);
  }

  _readout() {
    const s = this.ep.steps, t = this.t;
    const flag = (k) => (s[k] ? (s[k][t] ? `<b class="ok-mark">${k}</b>` : `<span>${k}</span>`) : "");
    const a = s.action ? `action [${s.action[t].map((x, d) => `<span data-color="${PALETTE[d % PALETTE.length]}">${num(x, 2)}</span>`).join(", ")}]` : "";
    this.el.readout.innerHTML = [a, s.reward ? `reward <span data-color="#3ddc97">${num(s.reward[t])}</span>` : "", flag("intervention"), flag("success"), flag("done")]
      .filter(Boolean).join(" &nbsp; ");
    this.el.readout.querySelectorAll("[data-color]").forEach((el) => { el.style.color = el.dataset.color; });
  }

  _traceSeek(e) {
    if (!this.ep || !this._traceX) return;
    const { x0, pw } = this._traceX;
    this.seek(Math.round(((e.offsetX - x0) / pw) * (this.ep.detail.length - 1)));
  }

  drawTraces() {
    const c = this.el.traces;
    const dpr = window.devicePixelRatio || 1;
    const W = c.clientWidth, H = c.clientHeight;
    if (!W) return;
    c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    g.font = '10px ui-monospace, Menlo, monospace';
    if (!this.ep) return;
    const s = this.ep.steps, n = this.ep.detail.length;
    const x0 = 92, pw = W - x0 - 10;
    this._traceX = { x0, pw };
    const sx = (i) => x0 + (n > 1 ? (i / (n - 1)) * pw : pw / 2);
    const flags = [["intervention", "#ffb547"], ["success", "#3ddc97"], ["done", "#ff5c6c"]];
    const fh = 11;
    const flagTop = H - 4 - flags.length * (fh + 3);
    const body = flagTop - 6 - 4 - 6;
    const lanes = [
      { key: "action", top: 4, h: body * 0.62 },
      { key: "reward", top: 4 + body * 0.62 + 6, h: body * 0.38 },
    ];
    g.textBaseline = "middle";
    for (const lane of lanes) {
      const data = s[lane.key];
      g.fillStyle = "#121720"; g.fillRect(x0, lane.top, pw, lane.h);
      g.fillStyle = "#aab4c3"; g.textAlign = "left";
      g.fillText(lane.key, 6, lane.top + lane.h / 2);
      if (!data) continue;
      const rows = Array.isArray(data[0]) ? data[0].map((_, d) => data.map((r) => r[d])) : [data];
      let lo = Infinity, hi = -Infinity;
      for (const r of rows) for (const v of r) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      if (lane.key === "action") { lo = Math.min(lo, -1); hi = Math.max(hi, 1); }
      if (hi === lo) { hi += 1; lo -= 1; }
      const sy = (v) => lane.top + lane.h - ((v - lo) / (hi - lo)) * lane.h;
      if (lo < 0 && hi > 0) { g.strokeStyle = "#2c3747"; g.beginPath(); g.moveTo(x0, sy(0)); g.lineTo(x0 + pw, sy(0)); g.stroke(); }
      g.textAlign = "right"; g.fillStyle = "#56637a";
      g.fillText(axisNum(hi, hi - lo), x0 - 5, lane.top + 6); g.fillText(axisNum(lo, hi - lo), x0 - 5, lane.top + lane.h - 6);
      rows.forEach((r, d) => {
        g.strokeStyle = lane.key === "reward" ? "#3ddc97" : PALETTE[d % PALETTE.length];
        g.lineWidth = 1.3; g.beginPath();
        r.forEach((v, i) => (i ? g.lineTo(sx(i), sy(v ?? 0)) : g.moveTo(sx(i), sy(v ?? 0))));
        g.stroke();
      });
    }
    flags.forEach(([k, color], j) => {
      const y = flagTop + j * (fh + 3);
      g.fillStyle = "#121720"; g.fillRect(x0, y, pw, fh);
      g.fillStyle = "#7d8a9c"; g.textAlign = "left"; g.fillText(k, 6, y + fh / 2);
      if (!s[k]) return;
      g.fillStyle = color;
      const bw = Math.max(1.5, pw / n);
      s[k].forEach((v, i) => { if (v) g.fillRect(sx(i) - bw / 2, y, bw, fh); });
    });
    const cx = Math.round(sx(this.t)) + 0.5;
    g.strokeStyle = "#ffffff"; g.lineWidth = 1; g.beginPath(); g.moveTo(cx, 2); g.lineTo(cx, H - 2); g.stroke();
  }
}

function sheetOf(bitmap, headers) {
  return {
    bitmap,
    start: +headers.get("X-Start"),
    count: +headers.get("X-Frame-Count"),
    cols: +headers.get("X-Sheet-Cols"),
    w: +headers.get("X-Frame-Width"),
    h: +headers.get("X-Frame-Height"),
  };
}

// draw frame t of a view from whichever of its sheets holds it
function blit(view, t) {
  const s = view.sheets.find((x) => t >= x.start && t < x.start + x.count);
  const g = view.canvas.getContext("2d");
  g.imageSmoothingEnabled = false;
  if (!s) {
    if (view.sheets.length && view.sheets[0].start > t) { g.fillStyle = "#05070a"; g.fillRect(0, 0, view.canvas.width, view.canvas.height); }
    view.where.textContent = view.sheets.length ? "–" : "loading";
    return;
  }
  const i = t - s.start;
  const sx = (i % s.cols) * s.w, sy = Math.floor(i / s.cols) * s.h;
  g.drawImage(s.bitmap, sx, sy, s.w, s.h, 0, 0, view.canvas.width, view.canvas.height);
  view.where.textContent = `t ${t}`;
}
