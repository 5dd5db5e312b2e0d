// The dashboard page: run status, live curves, episode browser and player, policies, controls.

import { ApiError, earlyJSON, getJSON, MIN_TOKEN_LENGTH, postJSON, retrying, subscribe, token } from "./api.js";
import { Charts, MARK_LEGEND, StoreCharts } from "./charts.js";
import { ago, bytes, clock, esc, int, num, pct, pctCI } from "./format.js";
import { Play } from "./play.js";
import { Player } from "./player.js";
import { CompareRuns, loadConfig, renderCluster, RobotPanel } from "./panels.js";

const $ = (sel) => document.querySelector(sel);
const state = { overview: null, page: 0, pageSize: 40, selected: null, episodesVersion: -1, runId: "" };
// the run's id (from the stream's hello or the first overview): image URLs carry it
let runIdKnown;
const runIdReady = new Promise((r) => { runIdKnown = r; });
function setRunId(id) {
  if (!id || id === state.runId) return;
  state.runId = id;
  runIdKnown(id);
}

// -- feedback ---------------------------------------------------------------------------------
let toastTimer;
function toast(text, kind = "") {
  const el = $("#toast");
  el.textContent = text;
  el.className = `hint ${kind}`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.textContent = ""; }, 6000);
}

// -- tabs -------------------------------------------------------------------------------------
function showTab(name) {
  document.querySelectorAll("#tabs button[data-tab]").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((s) => s.classList.toggle("active", s.id === `tab-${name}`));
  history.replaceState(null, "", `#${name}`);
  if (name === "run") { charts.drawAll(); storeCharts.drawAll(); }
  if (name === "episodes") { loadEpisodes(); player.drawTraces(); }
  if (name === "policies") loadPolicies();
  if (name === "config") loadConfig($("#tab-config")).catch(readFailed);
  if (name === "robot") robotPanel.show();
}
document.querySelectorAll("#tabs button[data-tab]").forEach((b) => (b.onclick = () => showTab(b.dataset.tab)));

// -- token and controls ---------------------------------------------------------------------
// The token lives in this tab's sessionStorage: once set, every control (E-STOP included) is sent
// at once, without a dialog. Who acts on what (worldsample.runlog.control.HANDLERS):
const HANDLERS = { pause: ["trainer"], resume: ["trainer"], estop: ["bridge", "trainer"], start_episode: ["bridge"], stop_episode: ["bridge"], label: ["trainer"] };
const UP_STATES = new Set(["starting", "running", "paused"]);
const ESTOP_ACK_S = 3; // an e-stop the bridge has not acknowledged after this long is an alarm

let asking = null; // one dialog at a time (several failed reads may ask together)
function askToken(why = "") {
  if (asking) return asking;
  asking = new Promise((resolve) => {
    const dlg = $("#token-dialog");
    $("#token-input").value = token.get();
    $("#token-why").textContent = why;
    $("#token-why").classList.toggle("hidden", !why);
    dlg.onclose = () => {
      if (dlg.returnValue === "ok") token.set($("#token-input").value.trim());
      tokenError("");
      renderToken();
      asking = null;
      resolve(token.get());
    };
    dlg.returnValue = "";
    dlg.showModal();
  });
  return asking;
}
function tokenError(text) {
  $("#token-error").textContent = text;
  $("#token-error").classList.toggle("hidden", !text);
}
// the server's tokens are at least MIN_TOKEN_LENGTH characters: a shorter one is a typo or a
// partial paste, said here instead of sending it (a wrong token costs back-off on the server)
$("#token-dialog form").addEventListener("submit", (e) => {
  if (e.submitter?.value === "cancel") return;
  const v = $("#token-input").value.trim();
  if (v && v.length < MIN_TOKEN_LENGTH) {
    e.preventDefault();
    tokenError(`Too short: the control token has at least ${MIN_TOKEN_LENGTH} characters (this has ${v.length}). Copy all of RUN/dashboard_token.`);
    $("#token-input").focus();
  }
});
$("#token-dialog button[value=cancel]").onclick = (e) => { e.preventDefault(); $("#token-dialog").close("cancel"); };
function renderToken() {
  const has = !!token.get();
  const b = $("#token-btn");
  b.textContent = has ? "Token ✓" : "Set token";
  b.classList.toggle("missing", !has);
  b.title = has ? "The control token is set for this tab: controls are sent at once" : "Set the control token now, so that E-STOP acts at once when needed";
}
$("#token-btn").onclick = () => askToken();
renderToken();

// is a consumer (trainer, bridge) running? The trainer: the overview's own verdict
// (`trainer.running`, which also checks its process; `trainer.reason` says why not). The bridge:
// its entry in RUN/status.json as the overview reports it.
function consumer(ov, name) {
  if (name === "trainer") {
    const t = ov?.trainer;
    if (!t) return { up: false, why: "no trainer is running", reason: "the server does not say whether a trainer runs" };
    const reason = String(t.reason || "no trainer is running");
    return { up: !!t.running, why: t.running ? "" : reason.replace(/: nothing will act.*$/s, ""), reason: t.running ? "" : reason };
  }
  const s = ov?.services.find((x) => x.name === name || x.name.startsWith(`${name}-`));
  if (!s) return { up: false, why: `no ${name} is running` };
  if (s.stale) return { up: false, why: `the ${name} is stale (last heartbeat ${ago(s.heartbeat, ov.now)} ago)` };
  if (!UP_STATES.has(s.state)) return { up: false, why: `the ${name} is ${s.state}` };
  return { up: true, why: "" };
}

function nobodyActs(kind) {
  const down = (HANDLERS[kind] || []).map((n) => consumer(state.overview, n)).filter((c) => !c.up);
  return down.length && down.length === (HANDLERS[kind] || []).length ? down.map((c) => c.why).join(", ") : "";
}

async function control(path, body = {}) {
  const estop = path === "estop";
  if (!token.get() && !(await askToken(estop ? "E-STOP needs the control token. Save it and the e-stop is sent at once; it stays set for this tab." : ""))) {
    toast("no token: control not sent", "error");
    if (estop) showAlarm("estop-failed", "E-STOP NOT SENT: no control token. Use the robot's own stop.");
    return null;
  }
  try {
    // 429 (too many wrong tokens from this address lately): said, and sent again after Retry-After
    const cmd = await retrying(() => postJSON(`/api/control/${path}`, body), (s, err) => {
      toast(`${path} refused for now (${err.detail}): sending again in ${s} s`, "warn");
      if (estop) showAlarm("estop-failed", `E-STOP NOT YET SENT: the server asks to wait ${s} s (${err.detail}); retrying. Use the robot's own stop.`);
    });
    const idle = state.overview ? nobodyActs(cmd.kind) : "";
    toast(`${cmd.kind.replace("_", " ")} requested (${cmd.id.slice(0, 8)})${idle ? ` · ${idle}: nothing will act on it` : ""}`, idle ? "warn" : "good");
    if (estop) showAlarm("estop-failed", "");
    refreshOverview();
    return cmd;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      token.set("");
      renderToken();
      toast(`${err.detail}: set the token and try again`, "error");
    } else toast(String(err.detail || err), "error");
    if (estop) showAlarm("estop-failed", `E-STOP NOT SENT: ${err.detail || err}. Use the robot's own stop.`);
    return null;
  }
}
document.querySelectorAll("[data-control]").forEach((b) => {
  b.onclick = () => {
    const what = b.dataset.control;
    if (what === "estop") return control("estop", { reason: "dashboard e-stop button" });
    if (what === "episode/start" && !confirm("Start a real episode on the robot?")) return;
    return control(what);
  };
});

// -- alarms: loud, under the top bar, one line per reason ------------------------------------
const alarms = new Map();
function showAlarm(key, text) {
  if (text) alarms.set(key, text); else alarms.delete(key);
  const el = $("#alarm");
  el.innerHTML = [...alarms.entries()].map(([k, t]) => `<div data-alarm="${esc(k)}">${esc(t)}</div>`).join("");
  el.classList.toggle("hidden", !alarms.size);
}

function renderSafety(ov) {
  const bridge = consumer(ov, "bridge");
  let text = "";
  if (!bridge.up) text = `${bridge.why[0].toUpperCase()}${bridge.why.slice(1)}: E-STOP is written to the run but nothing on this run stops the arm. Use the robot's own stop.`;
  else if (ov.robot && !ov.robot.connected) text = "The bridge reports the robot disconnected: E-STOP may not reach it.";
  else if (ov.robot?.obs_age_s > 2) text = `The robot's newest observation is ${num(ov.robot.obs_age_s, 1)} s old: the bridge may be stuck.`;
  showAlarm("bridge", text);
  const es = $('button[data-control="estop"]');
  es.classList.toggle("nobridge", !bridge.up);
  es.title = bridge.up ? "Emergency stop: the bridge stops the arm" : `Emergency stop: ${bridge.why}, so nothing stops the arm`;
  // the newest e-stop (this tab's or another's): acknowledged by the bridge in time?
  const last = ov.recent_controls.find((c) => c.kind === "estop");
  const pending = last && !last.acks.some((a) => a.consumer === "bridge") && ov.now - last.time > ESTOP_ACK_S && ov.now - last.time < 600;
  showAlarm("estop-ack", pending ? `E-STOP requested at ${clock(last.time)} has not been acknowledged by the bridge after ${Math.round(ov.now - last.time)} s.` : "");
  // pause, resume and labels act only while a trainer runs (trainer.running); else its reason
  const trainer = consumer(ov, "trainer");
  for (const b of document.querySelectorAll('button[data-control="pause"], button[data-control="resume"], #label-success, #label-failure')) {
    b.classList.toggle("inert", !trainer.up);
    const what = b.dataset.control || (b.id === "label-success" ? "label this episode a success" : "label this episode a failure");
    b.title = trainer.up ? `${what[0].toUpperCase()}${what.slice(1)}` : `${trainer.reason} (${what}: the request is written and waits for a trainer)`;
  }
  $("#trainer-note").textContent = trainer.up ? "" : trainer.reason;
  $("#trainer-note").classList.toggle("hidden", trainer.up);
}

function ackCells(ov, c) {
  const acks = c.acks.map((a) => `<span class="pill ${a.result === "done" ? "ok" : "muted"}">${esc(a.consumer)}: ${esc(a.result)}</span>`);
  for (const name of HANDLERS[c.kind] || []) {
    if (c.acks.some((a) => a.consumer === name)) continue;
    const who = consumer(ov, name);
    if (who.up) acks.push(`<span class="muted">${esc(name)}: pending</span>`);
    else acks.push(`<span class="pill bad" data-inert="${esc(name)}">${esc(who.why)}: nothing will act</span>`);
  }
  return acks.join(" ") || '<span class="muted">–</span>';
}

// -- overview ---------------------------------------------------------------------------------
function renderOverview(ov) {
  state.overview = ov;
  setRunId(ov.run_id);
  try { renderSafety(ov); } catch (err) { console.error("safety view:", err); } // first: the alarms
  try { robotPanel.update(ov); } catch (err) { console.error("robot panel:", err); }
  try { renderDamaged(ov.damaged || []); } catch (err) { console.error("damaged list:", err); }
  try { renderCluster($("#cluster-panel"), ov.cluster ?? null); } catch (err) { console.error("cluster view:", err); }
  $("#run-name").textContent = ov.run;
  const phase = $("#phase");
  phase.textContent = ov.paused && ov.phase !== "paused" ? `${ov.phase} · paused` : ov.phase;
  phase.className = `badge ${ov.robot?.estop ? "estopped" : ov.paused ? "paused" : ov.phase}`;
  const robot = $("#robot");
  if (!ov.robot) { robot.textContent = "no bridge"; robot.className = "pill muted"; }
  else if (ov.robot.estop) { robot.textContent = "E-STOP"; robot.className = "pill bad"; }
  else if (ov.robot.connected) {
    const hz = ov.robot.control_hz ? ` ${num(ov.robot.control_hz, 1)} Hz` : "";
    robot.textContent = `connected${hz}`; robot.className = "pill ok";
  } else { robot.textContent = "disconnected"; robot.className = "pill bad"; }
  $("#kpi-step").textContent = int(ov.learner_step);
  $("#kpi-real").textContent = int(ov.real_steps);
  $("#kpi-policy").textContent = ov.policy_version === null ? "–" : `v${ov.policy_version}`;
  $("#kpi-wm").textContent = ov.wm_version === null ? (ov.world_model ? "ckpt" : "–") : `v${ov.wm_version}`;
  $("#kpi-episodes").textContent = int(ov.groups.reduce((a, g) => a + g.episodes, 0));

  const aside = {};
  for (const d of ov.damaged || []) aside[d.group] = (aside[d.group] || 0) + 1;
  $("#groups-table tbody").innerHTML = ov.groups.length ? ov.groups.map((g) => `<tr>
      <td>${esc(g.name)}${aside[g.name] ? ` <span class="pill bad" data-damaged-count="${aside[g.name]}" title="episodes set aside as damaged: see the Episodes tab">${aside[g.name]} damaged</span>` : ""}</td><td class="num">${int(g.episodes)}</td><td class="num">${int(g.steps)}</td>
      <td class="num">${pct(g.success_rate)}</td><td class="num">${num(g.mean_return)}</td><td class="num">${int(g.interventions)}</td>
      <td>${esc(g.cameras.join(", ") || "–")}${g.image_size ? ` <span class="muted">${g.image_size[0]}×${g.image_size[1]}</span>` : ""}</td>
      <td>${g.writer_active ? '<span class="pill ok">active</span>' : '<span class="muted">–</span>'}</td></tr>`).join("")
    : '<tr><td colspan="8" class="muted">no episodes stored yet</td></tr>';

  $("#services-table tbody").innerHTML = ov.services.length ? ov.services.map((s) => `<tr>
      <td>${esc(s.name)}</td><td><span class="pill ${s.stale ? "bad" : s.state === "running" ? "ok" : "muted"}">${s.stale ? "stale" : esc(s.state)}</span></td>
      <td class="num">${ago(s.heartbeat, ov.now)}</td><td class="wrap">${esc(s.detail)}</td></tr>`).join("")
    : '<tr><td colspan="4" class="muted">no service has reported (no RUN/status.json)</td></tr>';
  $("#status-source").textContent = ov.status_source === "derived"
    ? "status derived from the store; services write RUN/status.json when they run"
    : `status from RUN/status.json · metrics ${int(ov.metrics.rows)} rows${ov.metrics.malformed ? `, ${ov.metrics.malformed} malformed skipped` : ""}`;

  $("#control-table tbody").innerHTML = ov.recent_controls.length ? ov.recent_controls.map((c) => {
    const what = c.kind === "label" ? `label ${esc(c.group)}/${c.episode} ${c.success ? "success" : "failure"}` : c.kind.replace("_", " ");
    return `<tr data-kind="${esc(c.kind)}"><td class="num">${clock(c.time)}</td><td>${c.kind === "estop" ? '<b class="bad-mark">E-STOP</b>' : what}</td><td class="wrap">${ackCells(ov, c)}</td></tr>`;
  }).join("") : '<tr><td colspan="3" class="muted">none</td></tr>';
}

async function refreshOverview() {
  try { renderOverview(await getJSON("/api/run")); } catch (err) { readFailed(err); }
}

async function readFailed(err) {
  if (err instanceof ApiError && err.status === 429) {
    toast(`the server asks to wait${err.retryAfter ? ` ${err.retryAfter} s` : ""}: ${err.detail}`, "warn");
  } else if (err instanceof ApiError && err.status === 401) {
    toast("this dashboard needs the token to read: set it", "error");
    if (await askToken()) location.reload();
  } else console.error(err);
}

// -- events -----------------------------------------------------------------------------------
function addEvents(items, prepend = true) {
  try { charts.addEvents(items); } catch (err) { console.error("event markers:", err); }
  const log = $("#events");
  const html = items.map((e) => `<div class="${esc(e.level)}"><span class="t">${clock(e.time)}</span><span class="k">${esc(e.kind)}</span>${esc(e.source ? `[${e.source}] ` : "")}${esc(e.message)}</div>`);
  if (prepend) log.insertAdjacentHTML("afterbegin", html.reverse().join(""));
  else log.innerHTML = html.join("");
  while (log.children.length > 500) log.lastChild.remove();
  if (!log.children.length) log.innerHTML = '<div class="muted">no events yet (RUN/events.jsonl)</div>';
}

// -- episodes ---------------------------------------------------------------------------------
function episodeQuery() {
  const q = new URLSearchParams({ offset: state.page * state.pageSize, limit: state.pageSize });
  const g = $("#f-group").value, s = $("#f-success").value, d = $("#f-domain").value.trim(), p = $("#f-policy").value.trim();
  if (g) q.set("group", g);
  if (s) q.set("success", s);
  if (d) q.set("domain", d);
  if (/^\d+$/.test(p)) q.set("policy_version", p);
  return q;
}

async function loadEpisodes() {
  let page;
  try { page = await getJSON(`/api/episodes?${episodeQuery()}`); } catch (err) { return readFailed(err); }
  const now = Date.now() / 1000;
  $("#episodes-table tbody").innerHTML = page.items.map((e) => `<tr data-group="${esc(e.group)}" data-episode="${e.episode}"
      class="${state.selected === `${e.group}/${e.episode}` ? "selected" : ""}">
      <td>${esc(e.group)}</td><td class="num">${e.episode}</td><td class="num">${e.length}</td><td class="num">${num(e.episode_return)}</td>
      <td>${e.success ? '<span class="ok-mark">✓</span>' : '<span class="bad-mark">✗</span>'}</td>
      <td>${e.label === true || e.label === false ? `<span class="label-mark ${e.label ? "ok-mark" : "bad-mark"}" data-label="${e.label}" title="the operator marked it a ${e.label ? "success" : "failure"} (recorded: ${e.success ? "success" : "failure"})">${e.label ? "✓" : "✗"} marked</span>` : ""}</td>
      <td class="num">${e.interventions || ""}</td><td class="num">${e.policy_version ?? ""}</td><td>${esc(e.domain)}</td>
      <td class="num">${ago(e.wall_time_end, now)}</td></tr>`).join("") || '<tr><td colspan="10" class="muted">no episodes match</td></tr>';
  const last = Math.min(page.total, page.offset + page.items.length);
  $("#page-info").textContent = page.total ? `${page.offset + 1}–${last} of ${page.total}` : "0";
  $("#page-prev").disabled = state.page === 0;
  $("#page-next").disabled = last >= page.total;
  if (!state.selected && page.items.length) selectEpisode(page.items[0].group, page.items[0].episode);
}
$("#episodes-table tbody").onclick = (e) => {
  const tr = e.target.closest("tr[data-group]");
  if (tr) selectEpisode(tr.dataset.group, +tr.dataset.episode);
};
$("#page-prev").onclick = () => { state.page = Math.max(0, state.page - 1); loadEpisodes(); };
$("#page-next").onclick = () => { state.page += 1; loadEpisodes(); };
for (const id of ["#f-group", "#f-success", "#f-domain", "#f-policy"]) $(id).onchange = () => { state.page = 0; loadEpisodes(); };

// episodes the store's readers set aside as damaged (not in the list above): shown, marked, with why
function renderDamaged(items) {
  const box = $("#damaged-list");
  box.classList.toggle("hidden", !items.length);
  $("#damaged-count").textContent = String(items.length);
  $("#damaged-list tbody").innerHTML = items.map((d) => d.episode === null
    ? `<tr class="damaged" data-damaged="${esc(d.group)}"><td>${esc(d.group)}</td><td class="num">all</td><td class="wrap">group not opened: ${esc(d.reason)}</td></tr>`
    : `<tr class="damaged" data-damaged="${esc(d.group)}/${d.episode}" data-group="${esc(d.group)}" data-episode="${d.episode}"><td>${esc(d.group)}</td><td class="num">${d.episode}</td><td class="wrap">⚠ ${esc(d.reason)}</td></tr>`).join("");
}
$("#damaged-list tbody").onclick = (e) => {
  const tr = e.target.closest("tr[data-group]");
  if (tr) selectEpisode(tr.dataset.group, +tr.dataset.episode);
};

const player = new Player($("#player"), { runId: () => state.runId });
new Play($("#player"), player); // play in the world model from the player's episode and step
async function selectEpisode(group, episode) {
  state.selected = `${group}/${episode}`;
  document.querySelectorAll("#episodes-table tbody tr").forEach((tr) => tr.classList.toggle("selected", `${tr.dataset.group}/${tr.dataset.episode}` === state.selected));
  $("#label-success").disabled = $("#label-failure").disabled = false;
  // image URLs name the run (cached per run): wait briefly for its id on a fresh page
  await Promise.race([runIdReady, new Promise((r) => setTimeout(r, 3000))]);
  try { await player.load(group, episode); } catch (err) { toast(`cannot load ${group}/${episode}: ${err.detail || err}`, "error"); }
}
for (const [id, ok] of [["#label-success", true], ["#label-failure", false]]) {
  $(id).onclick = () => {
    if (!state.selected) return;
    const [group, episode] = state.selected.split("/");
    control("label", { group, episode: +episode, success: ok, reason: "labelled in the dashboard" });
  };
}

// -- policies ---------------------------------------------------------------------------------
// a rate as a bar and its interval as whiskers (positions set through CSSOM: the page's CSP has no inline styles)
function ciBar(rate, lo, hi) {
  if (rate === null || rate === undefined) return "";
  const ci = lo === null || lo === undefined ? "" : `<span class="ci" data-l="${(100 * lo).toFixed(1)}" data-r="${(100 * hi).toFixed(1)}"></span>`;
  return `<div class="cibar" title="${pctCI(rate, lo, hi)}"><span class="track"></span><span class="fill" data-w="${(100 * rate).toFixed(1)}"></span>${ci}</div>`;
}
function placeBars(root) {
  root.querySelectorAll(".cibar .fill").forEach((el) => { el.style.width = `${el.dataset.w}%`; });
  root.querySelectorAll(".cibar .ci").forEach((el) => { el.style.left = `${el.dataset.l}%`; el.style.width = `${el.dataset.r - el.dataset.l}%`; });
}

function renderVersions(t) {
  const rows = t.versions.map((v) => {
    const e = v.evaluation, o = v.online;
    return `<tr data-version="${esc(v.name)}"><td>${esc(v.name)}</td>
      <td class="num">${e ? int(e.evaluations) : "–"}</td>
      <td class="num">${e ? `${int(e.successes)}/${int(e.episodes)}` : "–"}</td>
      <td class="num eval-ci">${e ? pctCI(e.success_rate, e.ci_low, e.ci_high) : "–"}</td><td>${e ? ciBar(e.success_rate, e.ci_low, e.ci_high) : ""}</td>
      <td class="num">${o ? `${int(o.successes)}/${int(o.episodes)}${o.labelled ? ` (${int(o.labelled)} labelled)` : ""}` : "–"}</td>
      <td class="num online-ci">${o ? pctCI(o.success_rate, o.ci_low, o.ci_high) : "–"}</td><td>${o ? ciBar(o.success_rate, o.ci_low, o.ci_high) : ""}</td>
      <td class="num">${o ? `${(100 * o.intervention_share).toFixed(0)} %` : "–"}</td></tr>`;
  }).join("");
  $("#versions-table tbody").innerHTML = rows
    || '<tr><td colspan="9" class="muted">no evaluations with counts and no online episodes with a policy version yet</td></tr>';
  placeBars($("#versions-table"));
  const notes = [];
  if (t.rate_only_rows) notes.push(`${t.rate_only_rows} evaluation rows carry a rate only (no episode counts): not shown`);
  if (t.skipped_rows) notes.push(`${t.skipped_rows} evaluation rows skipped: ${t.skipped_reasons.join("; ")}`);
  if (t.damaged_episodes) notes.push(`${t.damaged_episodes} damaged ${t.online_group} episodes not counted`);
  if (t.truncated) notes.push("only the newest versions are listed");
  notes.push("evaluations repeat the same held-out starts: the newest evaluation of a version is shown, not pooled");
  $("#versions-note").textContent = notes.join(" · ");
}

async function loadPolicies() {
  let p;
  try { p = await getJSON("/api/policies"); } catch (err) { return readFailed(err); }
  renderVersions(p.versions);
  const best = Math.max(...p.comparison.map((r) => r.success_rate ?? -1));
  $("#comparison-table tbody").innerHTML = p.comparison.map((r) => `<tr>
      <td>${r.success_rate === best && best >= 0 ? "<b>" + esc(r.policy) + "</b>" : esc(r.policy)}</td><td class="muted">${esc(r.source)}</td>
      <td class="num">${int(r.episodes)}</td><td class="num">${pctCI(r.success_rate, r.ci_low, r.ci_high)}</td>
      <td>${ciBar(r.success_rate, r.ci_low, r.ci_high)}</td>
      <td class="num">${num(r.mean_return)}</td><td class="num">${num(r.mean_length, 1)}</td><td class="num">${num(r.interventions_per_episode, 2)}</td></tr>`).join("")
    || '<tr><td colspan="8" class="muted">no episodes or reports yet</td></tr>';
  placeBars($("#comparison-table"));
  $("#policies-table tbody").innerHTML = p.policies.map((x) => `<tr><td>${esc(x.name)}</td><td class="wrap">${esc(x.files.join(", "))}</td>
      <td class="num">${bytes(x.size_bytes)}</td><td class="num">${ago(x.modified)}</td><td class="wrap mono">${esc(JSON.stringify(x.meta).slice(0, 160))}</td></tr>`).join("")
    || '<tr><td colspan="5" class="muted">no policies published yet</td></tr>';
  $("#reports-table tbody").innerHTML = p.reports.map((x) => `<tr><td>${esc(x.name)}</td><td class="num">${ago(x.modified)}</td>
      <td class="wrap mono">${esc(Object.entries(x.summary).map(([k, v]) => `${k}=${typeof v === "number" ? num(v) : v}`).join("  ").slice(0, 200))}</td></tr>`).join("")
    || '<tr><td colspan="3" class="muted">no evaluation reports yet</td></tr>';
}

// -- curves -----------------------------------------------------------------------------------
const charts = new Charts($("#charts"), $("#charts-empty"));
const storeCharts = new StoreCharts($("#store-charts"));
$("#x-axis").onchange = () => charts.setOptions({ xMode: $("#x-axis").value });
$("#smoothing").oninput = () => {
  $("#smoothing-val").textContent = (+$("#smoothing").value).toFixed(2);
  charts.setOptions({ smoothing: +$("#smoothing").value });
};
$("#metric-filter").oninput = () => charts.filter($("#metric-filter").value);
new CompareRuns($("#compare"), charts); // overlays the curves of runs beside this one
let resizeFrame = 0;
window.addEventListener("resize", () => {
  if (!resizeFrame) resizeFrame = requestAnimationFrame(() => { resizeFrame = 0; charts.drawAll(); storeCharts.drawAll(); });
});
$("#mark-legend").innerHTML = MARK_LEGEND.map((m) => `<span><i data-color="${m.color}"></i>${esc(m.what)}</span>`).join("");
$("#mark-legend").querySelectorAll("[data-color]").forEach((el) => { el.style.background = el.dataset.color; });

async function loadStoreCurves() {
  const items = [];
  try {
    for (let offset = 0; offset < 5000; offset += 500) {
      const page = await getJSON(`/api/episodes?order=oldest&limit=500&offset=${offset}`);
      items.push(...page.items);
      if (items.length >= page.total) break;
    }
  } catch (err) { return readFailed(err); }
  storeCharts.update(items);
}

// -- live updates -----------------------------------------------------------------------------
function setLive(on, why = "") {
  $("#live").className = `live ${on ? "on" : "off"}`;
  $("#live-text").textContent = on ? "live" : "reconnecting";
  $("#live").title = why || "live updates";
  robotPanel.setLive(on);
}

// Each part loads on its own: a failure in one (a chart, a bad file) never stops the others.
async function loadMetrics(live) {
  const root = document.documentElement.dataset;
  // first paint: the frame after the charts in view were drawn, in ms from the start of navigation;
  // all drawn: every chart of the open sections (those out of view are drawn right after)
  const painted = () => requestAnimationFrame(() => setTimeout(() => { root.firstPaintMs ||= String(Math.round(performance.now())); }, 0));
  try {
    const early = window.worldsampleEarly || {};
    const series = await earlyJSON("series", early.seriesPath || "/api/metrics/series?max_points=400");
    // the events (markers) usually arrived first: wait for them briefly rather than draw twice
    await Promise.race([live.events, new Promise((r) => setTimeout(r, 50))]);
    painted(); // registered before drawing, so that it runs before the charts out of view are drawn
    // once every open chart is drawn: the series again, at about three points per pixel column
    charts.onIdle = () => {
      if (charts.refined) { root.fullDrawnMs ||= String(Math.round(performance.now())); return; }
      if (root.allDrawnMs) return;
      root.allDrawnMs = String(Math.round(performance.now()));
      getJSON(early.fullSeriesPath || "/api/metrics/series?max_points=2000").then((full) => charts.refine(full), (err) => console.warn("full series:", err));
    };
    charts.load(series);
  } catch (err) {
    painted();
    $("#charts-empty").textContent = `could not load the metrics: ${err.detail || err}`;
    $("#charts-empty").classList.remove("hidden");
    readFailed(err);
  }
  live.loaded = true;
  for (const rows of live.pending.splice(0)) charts.addRows(rows);
}

async function loadEvents() {
  try { addEvents((await earlyJSON("events", "/api/events?limit=300")).items, false); } catch (err) {
    $("#events").innerHTML = `<div class="error">could not load the events: ${esc(err.detail || err)}</div>`;
    readFailed(err);
  }
}

const robotPanel = new RobotPanel($("#robot-panel"), { runId: () => runIdReady, consumer, showAlarm });

function start() {
  const live = { pending: [], loaded: false };
  subscribe("/api/stream", {
    hello: (h) => { state.episodesVersion = h.episodes_version; setRunId(h.run_id); },
    overview: renderOverview,
    metrics: (m) => (live.loaded ? charts.addRows(m.rows) : live.pending.push(m.rows)),
    events: (e) => addEvents(e.items),
    episodes: () => {
      loadStoreCurves();
      robotPanel.newestChanged();
      if ($("#tab-episodes").classList.contains("active")) loadEpisodes();
    },
    resync: () => location.reload(),
    unauthorized: readFailed,
  }, setLive);
  showTab((location.hash || "#run").slice(1).replace(/[^a-z]/g, "") || "run");
  live.events = loadEvents();
  loadMetrics(live);
  refreshOverview();
  loadStoreCurves();
}
start();
