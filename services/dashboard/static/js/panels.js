// The live robot panel, the Ray cluster table, the runs-side-by-side picker and the config view.
//
// The robot panel shows what the API provides: the bridge's entry and `robot` in RUN/status.json
// (through the overview), the bridge's live camera frames (RUN/live/) while they are fresh, else
// the newest stored episode and its frames (stills, or its replay as MJPEG), saying which it shows.
// A figure the bridge does not publish is "–", and its tooltip names the field it would need to
// write. Alarms: no or stale bridge, stale observations, robot disconnected, the bridge's fault and
// each stale stream's cause in the bridge's words, a camera stream that failed, and this page's own
// live updates stalled (the figures are then old).

import { ApiError, getJSON } from "./api.js";
import { ago, bytes, clock, esc, num } from "./format.js";

const OBS_STALE_S = 2; // as the top bar's alarm
const LIVE_STALE_S = 5; // no overview for this long: the page's live updates stalled
const REPLAY_FPS = 10;
const LIVE_POLL_MS = 500; // the bridge writes its live frames about twice a second
const notPublished = (field, what) => `not published: the bridge would need to write ${what} into RUN/status.json (${field})`;

export class RobotPanel {
  // runId(): a promise of the run's id; consumer(ov, name): is the bridge up (app.js)
  constructor(root, { runId, consumer }) {
    this.root = root;
    this.runId = runId;
    this.consumer = consumer;
    this.el = {
      figs: root.querySelector("#robot-figures"),
      cams: root.querySelector("#robot-cams"),
      alarms: root.querySelector("#robot-alarms"),
      play: root.querySelector("#robot-play"),
      camNote: root.querySelector("#robot-cam-note"),
    };
    this.alarms = new Map();
    this.lastOverviewAt = 0;
    this.live = false;
    this.newest = null;
    this.playing = false;
    this.shown = "";
    this.el.play.onclick = () => { this.playing = !this.playing; this._renderCams(true); };
    this.started = false; // the cameras load once the Robot tab is first shown (not during first paint)
    this.liveFrames = { cameras: [], stale_after_s: null, error: null }; // /api/live/frames
    this.liveError = "";
    this.livePolling = false;
    setInterval(() => this._checkFresh(), 1000);
    setInterval(() => this._pollLive(), LIVE_POLL_MS);
  }

  show() {
    if (this.started) return;
    this.started = true;
    this.newestChanged();
    this._pollLive();
  }

  setLive(on) {
    this.live = on;
    this._checkFresh();
  }

  _alarm(key, text) {
    if (text) this.alarms.set(key, text); else this.alarms.delete(key);
    this.el.alarms.innerHTML = [...this.alarms.entries()].map(([k, t]) => `<div data-robot-alarm="${esc(k)}">${esc(t)}</div>`).join("");
    this.el.alarms.classList.toggle("hidden", !this.alarms.size);
    this.root.classList.toggle("alarmed", this.alarms.size > 0);
    const tab = document.querySelector("#robot-tab"); // the tab says so while another one is shown
    if (tab) { tab.classList.toggle("alarmed", this.alarms.size > 0); tab.title = [...this.alarms.values()].join("\n"); }
  }

  // the figures come from the overview: when none came for a while, they are old, and said so
  _checkFresh() {
    if (!this.lastOverviewAt) return;
    const age = (Date.now() - this.lastOverviewAt) / 1000;
    this._alarm("live", age > LIVE_STALE_S
      ? `This page's live updates ${this.live ? "stalled" : "are disconnected"}: the figures below are from ${clock(this.lastOverviewAt / 1000)} (${Math.round(age)} s ago).`
      : "");
  }

  update(ov) {
    this.lastOverviewAt = Date.now();
    this._checkFresh();
    const r = ov.robot;
    const svc = ov.services.find((s) => s.name === "bridge" || s.name.startsWith("bridge-"));
    const bridge = this.consumer(ov, "bridge");
    const intervened = r ? /^interven/.test(r.mode || "") : false;
    const ep = this.newest;
    const figs = [
      ["bridge", "bridge", svc ? `${svc.stale ? "stale" : esc(svc.state)} · ${ago(svc.heartbeat, ov.now)} ago` : "none",
        bridge.up ? "ok" : "bad", svc ? "the bridge's entry in RUN/status.json and its heartbeat age" : "no bridge has written RUN/status.json"],
      ["robot", "robot", !r ? "–" : r.estop ? "E-STOP" : r.connected ? `connected${r.transport ? ` · ${esc(r.transport)}` : ""}` : "disconnected",
        !r ? "" : r.estop || !r.connected ? "bad" : "ok", r ? "robot.connected, robot.estop, robot.transport" : notPublished("robot", "the robot's state")],
      ["mode", "mode", r?.mode ? `${esc(r.mode)}${r.episode !== null && r.episode !== undefined ? ` · episode ${r.episode}` : ""}` : "–", "",
        r?.mode ? "robot.mode (the bridge's episode state)" : notPublished("robot.mode", "its episode state")],
      ["intervention", "intervention", !r?.mode ? "–" : intervened ? "human driving" : "no", intervened ? "warn" : "",
        r?.mode ? "a person drives while robot.mode is intervened" : notPublished("robot.mode", "its episode state")],
      ["obs-age", "observation age", r?.obs_age_s === null || r?.obs_age_s === undefined ? "–" : `${num(r.obs_age_s, 1)} s`,
        r?.obs_age_s > OBS_STALE_S ? "bad" : "", r?.obs_age_s === null || r?.obs_age_s === undefined
          ? notPublished("robot.obs_age_s", "the age of its newest observation") : `robot.obs_age_s (stale above ${OBS_STALE_S} s)`],
      ["rate", "control rate", r?.control_hz ? `${num(r.control_hz, 1)} Hz` : "–", "",
        r?.control_hz ? "robot.control_hz, as the bridge reports it" : notPublished("robot.control_hz", "its control rate")],
      ["jitter", "jitter p99", Number.isFinite(r?.jitter_p99_ms) ? `${num(r.jitter_p99_ms, 2)} ms` : "–", "",
        Number.isFinite(r?.jitter_p99_ms) ? "robot.jitter_p99_ms" : notPublished("robot.jitter_p99_ms", "its control loop's period jitter")],
      ["policy", "policy published", ov.policy_version === null ? "–" : `v${ov.policy_version}`, "",
        "the newest policy the trainer published (policy_version in RUN/status.json)"],
      ["policy-robot", "policy on robot", Number.isFinite(r?.policy_version) ? `v${r.policy_version}` : "–", "",
        Number.isFinite(r?.policy_version) ? "robot.policy_version" : notPublished("robot.policy_version", "the policy version it runs")],
      ["fault", "fault", r?.fault ? esc(r.fault) : r ? "none" : "–", r?.fault ? "bad" : "",
        "robot.fault: why the bridge holds the arm (a stale stream, a reset timeout, the e-stop)"],
      ["last-episode", "newest episode", ep ? `${esc(ep.group)}/${ep.episode} · ${ago(ep.wall_time_end, ov.now)} ago${ep.policy_version !== null ? ` · ran v${ep.policy_version}` : ""}${ep.interventions ? ` · ${ep.interventions} interventions` : ""}` : "–", "",
        "the newest committed episode in the store"],
    ];
    this.el.figs.innerHTML = figs.map(([key, label, value, cls, title]) =>
      `<div class="fig" data-fig="${key}" title="${esc(title)}"><label>${label}</label><span class="${cls}">${value}</span></div>`).join("");

    this._alarm("bridge", bridge.up ? "" : `${bridge.why[0].toUpperCase()}${bridge.why.slice(1)}: the robot figures are not live.`);
    this._alarm("obs", r?.obs_age_s > OBS_STALE_S ? `Observations stale: the newest is ${num(r.obs_age_s, 1)} s old.` : "");
    this._alarm("disconnected", bridge.up && r && !r.connected ? "The bridge reports the robot disconnected." : "");
    const causes = Object.values(r?.stale_causes || {});
    this._alarm("fault", bridge.up && r?.fault ? `The bridge holds the arm: ${r.fault}` : "");
    this._alarm("streams", bridge.up && causes.length && !(r?.fault || "").includes(causes[0]) ? `Stale: ${causes.join("; ")}` : "");
  }

  // the bridge's live frames (RUN/live/), asked for about twice a second while the Robot tab is shown
  async _pollLive() {
    if (!this.started || this.livePolling || !this.root.offsetParent) return;
    this.livePolling = true;
    try {
      this.liveFrames = await getJSON("/api/live/frames");
      this.liveError = "";
    } catch (err) {
      this.liveFrames = { cameras: [], stale_after_s: null, error: null };
      this.liveError = err instanceof ApiError ? err.detail : String(err);
    } finally {
      this.livePolling = false;
    }
    this._renderCams(false);
  }

  // the newest stored episode (a real one when there is one): its cameras' frames are shown
  async newestChanged() {
    if (!this.started) return;
    try {
      const real = await getJSON("/api/episodes?group=real&limit=1");
      this.newest = real.items[0] || (await getJSON("/api/episodes?limit=1")).items[0] || null;
    } catch (err) {
      this.el.camNote.textContent = `cannot list the episodes: ${err instanceof ApiError ? err.detail : err}`;
      return;
    }
    this._renderCams(false);
  }

  // Chromium keeps loading an MJPEG stream of an <img> taken out of the page: its src is cleared
  // first, which ends the stream (and frees the server's stream slot)
  _clearCams() {
    for (const img of this.el.cams.querySelectorAll("img")) {
      img.onload = img.onerror = null;
      img.removeAttribute("src");
    }
    this.el.cams.innerHTML = "";
    for (const k of [...this.alarms.keys()]) if (k.startsWith("camera-")) this._alarm(k, "");
  }

  // one camera's box; `failed` says what failed (shown in its caption and as an alarm)
  _camBox(cam, caption, failed) {
    const box = document.createElement("figure");
    box.className = "cam";
    box.dataset.camera = cam;
    const img = document.createElement("img");
    img.alt = `${cam} camera`;
    const cap = document.createElement("figcaption");
    cap.textContent = caption;
    img.onload = () => { box.classList.remove("failed"); this._alarm(`camera-${cam}`, ""); };
    img.onerror = () => {
      box.classList.add("failed");
      cap.textContent = `${cam} · the stream failed or ended`;
      this._alarm(`camera-${cam}`, `Camera ${cam}: ${failed()} failed or ended.`);
    };
    box.append(img, cap);
    this.el.cams.appendChild(box);
    return { box, img, cap };
  }

  // live frames while at least one is fresh (and no replay was asked for); else the newest stored episode's
  async _renderCams(force) {
    const live = (this.liveFrames.cameras || []).filter((c) => !c.error);
    if (!this.playing && live.some((c) => !c.stale)) return this._renderLive(live, force);
    const ep = this.newest;
    const key = ep ? `stored:${ep.group}/${ep.episode}/${this.playing}` : "stored:";
    this.el.play.disabled = !ep || !ep.cameras.length;
    this.el.play.textContent = this.playing ? "Stop replay" : "Replay";
    const why = this._noLive(live);
    if (!ep || !ep.cameras.length) {
      if (key !== this.shown) this._clearCams();
      this.shown = key;
      this.el.cams.dataset.source = "none";
      this.el.camNote.textContent = `${ep ? "the newest episode has no cameras" : "no episode stored yet: no camera frames to show"}; ${why}`;
      return;
    }
    this.el.camNote.textContent = `Recorded frames of the newest stored episode (ended ${ago(ep.wall_time_end)} ago), not a live feed: ${why}`;
    if (!force && key === this.shown) return;
    this.shown = key;
    const id = await Promise.race([this.runId(), new Promise((r) => setTimeout(() => r(""), 3000))]);
    if (key !== this.shown) return;
    const base = `/api/episodes/${ep.group}/${ep.episode}`;
    this._clearCams();
    this.el.cams.dataset.source = this.playing ? "replay" : "stored";
    for (const cam of ep.cameras) {
      const caption = this.playing
        ? `${cam} · replay of ${ep.group}/${ep.episode} (MJPEG, ${REPLAY_FPS} fps)`
        : `${cam} · newest recorded frame · ${ep.group}/${ep.episode} t${ep.length - 1}`;
      const { img } = this._camBox(cam, caption, () => `the ${this.playing ? "replay stream" : "frame"} of ${ep.group}/${ep.episode}`);
      img.src = this.playing
        ? `${base}/video/${encodeURIComponent(cam)}?fps=${REPLAY_FPS}&loop=true`
        : `${base}/frames/${encodeURIComponent(cam)}/${ep.length - 1}${id ? `?run=${encodeURIComponent(id)}` : ""}`;
    }
  }

  // why the panel shows no live frames, in words
  _noLive(live) {
    const lf = this.liveFrames;
    if (this.playing && live.some((c) => !c.stale)) return "a replay was asked for (the bridge's live frames are fresh: Stop replay shows them).";
    if (live.length) {
      const age = Math.min(...live.map((c) => (Number.isFinite(c.age_s) ? c.age_s : Infinity)));
      return `the bridge's live frames are stale (the newest is ${Number.isFinite(age) ? `${num(age, 1)} s old` : "unstamped"}; stale after ${num(lf.stale_after_s)} s).`;
    }
    if (this.liveError) return `the live frames cannot be listed (${this.liveError}).`;
    if (lf.error) return `${lf.error}.`;
    const broken = (lf.cameras || []).find((c) => c.error);
    if (broken) return `the live frame of ${broken.camera} is not served (${broken.error}).`;
    return "the bridge writes no live frames to the run directory (RUN/live/; live_frames_hz in its robot profile).";
  }

  _renderLive(cams, force) {
    const key = `live:${cams.map((c) => c.camera).join(",")}`;
    this.el.play.disabled = !this.newest || !this.newest.cameras.length;
    this.el.play.textContent = "Replay";
    if (force || key !== this.shown) {
      this.shown = key;
      this._clearCams();
      this.el.cams.dataset.source = "live";
      for (const c of cams) this._camBox(c.camera, "", () => "the live frame");
    }
    for (const c of cams) {
      const box = [...this.el.cams.querySelectorAll("figure.cam")].find((b) => b.dataset.camera === c.camera);
      if (!box) continue;
      const stamp = String(c.stamp_ns ?? 0);
      if (box.dataset.stamp !== stamp) {
        box.dataset.stamp = stamp;
        box.querySelector("img").src = `/api/live/frames/${encodeURIComponent(c.camera)}?t=${stamp}`;
      }
      box.classList.toggle("stale", c.stale);
      box.dataset.stale = String(c.stale);
      box.querySelector("figcaption").textContent = `${c.camera} · live · ${Number.isFinite(c.age_s) ? `${num(c.age_s, 1)} s old` : "unstamped"}${c.stale ? " · stale" : ""}`;
    }
    this.el.camNote.textContent = `Live frames from the bridge: the newest frame per camera (RUN/live/), refreshed about twice a second; `
      + `a frame is stale after ${num(this.liveFrames.stale_after_s)} s, and once every camera's is, the newest stored episode is shown instead.`;
  }
}

// -- the Ray cluster: the nodes and the node each part of the trainer runs on ------------------
// From the overview's `cluster` (RUN/nodes.json, written by the trainer on Ray); hidden when it is
// null. A part whose actor is not ALIVE, or whose node is lost, and a lost node are marked red.
export function renderCluster(root, c) {
  root.classList.toggle("hidden", !c);
  if (!c) { root.dataset.state = "none"; return; }
  const note = root.querySelector("#cluster-note");
  const age = Number.isFinite(c.age_s) ? `${num(c.age_s, 0)} s ago` : "at an unknown time";
  note.textContent = c.error ? c.error : [
    `written ${age}`,
    c.address ? `cluster ${c.address}` : "",
    c.running === false ? "the trainer has stopped: its last view" : "",
    c.stale ? "stale: the trainer's driver has not rewritten it for over 90 s" : "",
    c.malformed ? `${c.malformed} malformed entries left out` : "",
    c.truncated ? "the first 256 shown" : "",
  ].filter(Boolean).join(" · ");
  note.classList.toggle("error", !!c.error || c.stale);
  root.dataset.state = c.error ? "error" : c.stale ? "stale" : c.running === false ? "stopped" : "running";
  const node = (host, ip) => host || ip ? `${esc(host || ip)}${host && ip ? ` <span class="muted">${esc(ip)}</span>` : ""}` : '<span class="muted">–</span>';
  root.querySelector("#cluster-parts tbody").innerHTML = c.parts.map((p) => {
    const alive = p.state === "ALIVE";
    const title = [p.actor && `actor ${p.actor}`, p.pid !== null && `pid ${p.pid}`, p.node_id && `node ${p.node_id}`,
      p.generation ? `made again elsewhere ${p.generation}×` : ""].filter(Boolean).join(", ");
    return `<tr data-part="${esc(p.name)}" data-alive="${alive && p.node_alive !== false}" title="${esc(title)}">
      <td>${esc(p.name)}</td>
      <td data-node>${node(p.hostname, p.node_ip)}${p.node_alive === false ? ' <span class="pill bad" data-node-lost>node lost</span>' : ""}</td>
      <td><span class="pill ${alive ? "ok" : "bad"}" data-state="${esc(p.state || "")}">${esc(p.state || "unknown")}</span></td>
      <td class="num">${p.restarts ?? "–"}</td><td class="wrap">${esc(p.placement || "–")}</td></tr>`;
  }).join("") || `<tr><td colspan="5" class="muted">${c.error ? "not shown" : "no parts listed"}</td></tr>`;
  root.querySelector("#cluster-nodes tbody").innerHTML = c.nodes.map((n) => `<tr data-node-id="${esc(n.node_id)}" data-alive="${n.alive}" title="node ${esc(n.node_id)}">
      <td>${esc(n.hostname || n.node_id.slice(0, 8))}</td><td>${esc(n.ip || "–")}</td>
      <td>${n.head ? "head" : "worker"}${n.node_id === c.driver_node ? " · driver" : ""}</td>
      <td><span class="pill ${n.alive ? "ok" : "bad"}">${n.alive ? "alive" : "lost"}</span></td>
      <td class="wrap">${esc(Object.entries(n.resources).map(([k, v]) => `${k} ${num(v)}`).join(" · "))}</td></tr>`).join("")
    || `<tr><td colspan="5" class="muted">${c.error ? "not shown" : "no nodes listed"}</td></tr>`;
}

// -- runs side by side: the curves of runs beside this one, overlaid --------------------------
const OVERLAY_COLORS = ["#f0f0f0", "#ff8fd1", "#9be15d", "#f7d774", "#b48cff", "#ff5c6c", "#66e0e0", "#4cc2ff"];

export class CompareRuns {
  constructor(root, charts) {
    this.root = root;
    this.charts = charts;
    this.list = root.querySelector("#compare-list");
    this.loaded = false;
    root.addEventListener("toggle", () => { if (root.open && !this.loaded) this.load(); });
    this.list.addEventListener("change", (e) => {
      const box = e.target.closest("input[data-run]");
      if (box) this.toggle(box);
    });
  }

  async load() {
    this.loaded = true;
    this.list.innerHTML = '<span class="muted">listing…</span>';
    let r;
    try { r = await getJSON("/api/runs"); } catch (err) {
      this.loaded = false;
      this.list.innerHTML = `<span class="error">cannot list the runs: ${esc(err.detail || err)}</span>`;
      return;
    }
    this.list.innerHTML = r.runs.map((x, i) => `<label class="check" data-run="${esc(x.name)}">
        <input type="checkbox" data-run="${esc(x.name)}" data-color="${OVERLAY_COLORS[i % OVERLAY_COLORS.length]}">
        <i class="swatch" data-color="${OVERLAY_COLORS[i % OVERLAY_COLORS.length]}"></i>${esc(x.name)}
        <span class="muted">${ago(x.modified)} ago</span><span class="why"></span></label>`).join("")
      + (r.runs.length ? "" : `<span class="muted">no other run beside ${esc(r.current)} has a metrics.jsonl</span>`)
      + (r.truncated ? `<span class="muted">the ${r.limit} newest are listed</span>` : "");
    this.list.querySelectorAll("i[data-color]").forEach((el) => { el.style.background = el.dataset.color; });
  }

  async toggle(box) {
    const name = box.dataset.run;
    const why = box.closest("label").querySelector(".why");
    why.textContent = "";
    if (!box.checked) { this.charts.removeOverlay(name); return; }
    try {
      const resp = await getJSON(`/api/runs/${encodeURIComponent(name)}/series?max_points=2000`);
      if (box.checked) this.charts.setOverlay(name, box.dataset.color, resp);
    } catch (err) {
      box.checked = false;
      why.textContent = ` ${err instanceof ApiError ? err.detail : err}`;
      why.classList.add("error");
    }
  }
}

// -- the run's config ------------------------------------------------------------------------
function when(t) {
  if (!Number.isFinite(t)) return "–";
  const d = new Date(t * 1000);
  return `${d.toISOString().slice(0, 10)} ${clock(t)}`;
}

export async function loadConfig(root) {
  const c = await getJSON("/api/config");
  const text = root.querySelector("#config-text");
  text.textContent = c.config ? c.config.text : "";
  text.classList.toggle("hidden", !c.config);
  const note = root.querySelector("#config-note");
  note.textContent = c.config ? `RUN/config.yaml · ${bytes(c.config.size_bytes)} · modified ${ago(c.config.modified)} ago` : c.config_error;
  note.classList.toggle("error", !c.config && /not shown|cannot/.test(c.config_error || ""));
  const rows = [...c.history].reverse().map((e) => {
    const { time, action, command, overrides, ...rest } = e;
    const more = Object.keys(rest).length ? JSON.stringify(rest).slice(0, 300) : "";
    return `<tr><td class="num">${when(time)}</td><td>${esc(action ?? "–")}</td><td class="wrap mono">${esc(command ?? "")}</td>
      <td class="wrap mono">${esc(Array.isArray(overrides) ? overrides.join(" ") : overrides ?? "")}</td><td class="wrap mono">${esc(more)}</td></tr>`;
  });
  root.querySelector("#config-history tbody").innerHTML = rows.join("") || '<tr><td colspan="5" class="muted">no history (RUN/config_history.jsonl)</td></tr>';
  const hist = root.querySelector("#config-history-note");
  hist.textContent = c.history_error
    || `${c.history.length} entries${c.history_lines > c.history.length ? ` of ${c.history_lines} lines` : ""}${c.history_malformed ? `; ${c.history_malformed} malformed lines skipped` : ""}`;
  root.dataset.history = String(c.history.length);
}
