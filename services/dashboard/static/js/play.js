// Play in the world model: drive the arm frame by frame inside the run's newest world model, from
// a real start (the player's episode and its current step). One slider per action dimension and a
// Step button, or keys (each press is one step with that dimension at its bound); every step shows
// the predicted frame and the heads' reward and success. Reset goes back to the real start.
// Server side: POST /api/play, /api/play/{session}/step and /reset, DELETE /api/play/{session}.

import { ApiError, deleteJSON, getBitmap, postBitmap, postJSON, retrying } from "./api.js";
import { esc, num, PALETTE } from "./format.js";

// key -> [action dimension, sign]: D/A the first dimension, W/S the second, R/F the third, E/Q the fourth
export const KEYS = { d: [0, 1], a: [0, -1], w: [1, 1], s: [1, -1], r: [2, 1], f: [2, -1], e: [3, 1], q: [3, -1] };
const VIEW = 288; // px: the frame's longer side on screen

export class Play {
  constructor(root, player) {
    const $ = (sel) => root.querySelector(sel);
    this.player = player;
    this.el = {
      open: $("#play-open"), panel: $("#play-panel"), camera: $("#play-camera"), canvas: $("#play-frame"),
      caption: $("#play-caption"), sliders: $("#play-sliders"), step: $("#play-step"), reset: $("#play-reset"),
      close: $("#play-close"), readout: $("#play-readout"), note: $("#play-note"),
    };
    this.session = null; // the server's session (PlaySessionView), null when none is open
    this.start = null; // {group, episode, step, camera}: the real start, kept for a reset after the session ended
    this.busy = false;
    this.pending = null; // the newest action asked for while a step was on its way
    this.el.open.onclick = () => this.open();
    this.el.close.onclick = () => this.close();
    this.el.reset.onclick = () => this.reset();
    this.el.step.onclick = () => this.drive(this.sliderAction());
    document.addEventListener("keydown", (e) => this._key(e));
  }

  _say(text, kind = "") {
    this.el.note.textContent = text;
    this.el.note.className = `note ${kind}`;
  }

  // start a session from the player's episode at its current step
  async open() {
    const ep = this.player.ep;
    this.el.panel.classList.remove("hidden");
    if (!ep) { this._say("select an episode first: play starts from its current step", "warn"); return; }
    const cams = ep.detail.cameras;
    if (!cams.length) { this._say("this group has no cameras", "warn"); return; }
    const keep = this.el.camera.value;
    this.el.camera.innerHTML = cams.map((c) => `<option>${esc(c)}</option>`).join("");
    this.el.camera.value = cams.includes(keep) ? keep : cams[0];
    await this._begin({ group: ep.group, episode: ep.episode, step: this.player.t, camera: this.el.camera.value });
  }

  async _begin(start) {
    await this._drop();
    this.start = start;
    this._say(`starting from ${start.group}/${start.episode} at t ${start.step}…`);
    try {
      const s = await retrying(() => postJSON("/api/play", start), (sec) => this._say(`world-model queue full: retry in ${sec} s`, "warn"));
      await this._opened(s);
    } catch (err) {
      this._failed(err);
    }
  }

  async _opened(s) {
    this.session = s;
    this.pending = null;
    this._buildSliders(s);
    const scale = VIEW / Math.max(s.frame_width, s.frame_height);
    this.el.canvas.width = Math.round(s.frame_width * scale);
    this.el.canvas.height = Math.round(s.frame_height * scale);
    const { bitmap } = await getBitmap(s.frame_url);
    this._draw(bitmap);
    this.el.panel.dataset.session = s.session;
    this.el.panel.dataset.step = "0";
    this.el.caption.textContent = `real start · ${s.group}/${s.episode} t ${s.step}`;
    this.el.readout.textContent = `wm v${s.wm_version} · conditioned on ${s.history} real frames up to t ${s.step}`;
    const keys = Object.keys(KEYS).filter((k) => KEYS[k][0] < s.action_dim).map((k) => k.toUpperCase());
    this.hint = `keys ${keys.join(" ")}: one step with one dimension at its bound; or set the sliders and press Step`;
    this._say(this.hint);
  }

  _buildSliders(s) {
    this.el.sliders.innerHTML = "";
    this.inputs = [];
    for (let d = 0; d < s.action_dim; d++) {
      const row = document.createElement("label");
      row.className = "play-slider";
      row.innerHTML = `<span class="dim">a${d}</span><input type="range" min="${s.action_low[d]}" max="${s.action_high[d]}" step="0.05" value="0"><span class="val mono">0.00</span>`;
      row.querySelector(".dim").style.color = PALETTE[d % PALETTE.length];
      const input = row.querySelector("input");
      input.dataset.dim = String(d);
      input.oninput = () => { row.querySelector(".val").textContent = (+input.value).toFixed(2); };
      this.el.sliders.appendChild(row);
      this.inputs.push(input);
    }
  }

  sliderAction() { return (this.inputs || []).map((i) => +i.value); }

  _setSliders(action) {
    action.forEach((v, d) => {
      const i = this.inputs[d];
      i.value = String(v);
      i.dispatchEvent(new Event("input"));
    });
  }

  _key(e) {
    if (!this.session || this.el.panel.classList.contains("hidden") || !this.el.panel.offsetParent) return;
    if (e.ctrlKey || e.metaKey || e.altKey || e.target.closest("input:not([type=range]), select, textarea")) return;
    const k = KEYS[e.key.toLowerCase()];
    if (!k || k[0] >= this.session.action_dim) return;
    e.preventDefault();
    const action = new Array(this.session.action_dim).fill(0);
    action[k[0]] = k[1] > 0 ? this.session.action_high[k[0]] : this.session.action_low[k[0]];
    this._setSliders(action);
    this.drive(action);
  }

  // one step with `action`; while one is on its way, the newest action asked for waits for it
  async drive(action) {
    if (!this.session) return;
    if (this.busy) { this.pending = action; return; }
    this.busy = true;
    const s = this.session;
    try {
      const { bitmap, headers } = await retrying(
        () => postBitmap(`/api/play/${encodeURIComponent(s.session)}/step`, { action }),
        (sec) => this._say(`world-model queue full: retry in ${sec} s`, "warn"),
      );
      if (s !== this.session) return; // reset or closed meanwhile
      this._draw(bitmap);
      this._shown(headers);
    } catch (err) {
      if (s === this.session) this._failed(err);
    } finally {
      this.busy = false;
    }
    const next = this.pending;
    this.pending = null;
    if (next && this.session) this.drive(next);
  }

  _shown(h) {
    const step = h.get("X-Play-Step");
    this.el.panel.dataset.step = step;
    this.el.caption.textContent = `imagined · step ${step} from ${this.session.group}/${this.session.episode} t ${this.session.step}`;
    const ok = h.get("X-Success-Label") === "true";
    const action = h.get("X-Action").split(",").map((x) => (+x).toFixed(2)).join(", ");
    this.el.readout.innerHTML = [
      `step <b>${esc(step)}</b>`,
      `reward <span class="ok-mark">${num(+h.get("X-Reward"))}</span>`,
      `success <span class="${ok ? "ok-mark" : ""}" data-success="${ok}">${num(+h.get("X-Success"), 2)}${ok ? " ✓" : ""}</span>`,
      `done ${num(+h.get("X-Done"), 2)}`,
      `action [${esc(action)}]`,
      `wm v${esc(h.get("X-WM-Version"))}`,
    ].join(" &nbsp; ");
    this._say(this.hint);
  }

  _draw(bitmap) {
    const g = this.el.canvas.getContext("2d");
    g.imageSmoothingEnabled = false;
    g.drawImage(bitmap, 0, 0, this.el.canvas.width, this.el.canvas.height);
  }

  _failed(err) {
    const ended = err instanceof ApiError && err.status === 404 && this.session && /play session/.test(err.detail);
    if (ended) {
      this.session = null;
      this._say(`the session ended (${err.detail}); Reset starts again from the same real start`, "warn");
    } else this._say(`play: ${err instanceof ApiError ? err.detail : err}`, "warn");
  }

  // back to the real start: the same session when it is still open, else a new one from the same start
  async reset() {
    if (!this.session) { if (this.start) await this._begin(this.start); return; }
    const s = this.session;
    try {
      const fresh = await retrying(() => postJSON(`/api/play/${encodeURIComponent(s.session)}/reset`, {}), (sec) => this._say(`world-model queue full: retry in ${sec} s`, "warn"));
      await this._opened(fresh);
    } catch (err) {
      this._failed(err);
    }
  }

  async _drop() {
    const s = this.session;
    this.session = null;
    if (s) await deleteJSON(`/api/play/${encodeURIComponent(s.session)}`).catch(() => {});
  }

  async close() {
    await this._drop();
    this.el.panel.classList.add("hidden");
    delete this.el.panel.dataset.session;
  }
}
