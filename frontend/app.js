// A first, minimal live view of the team's jobs: counts, trajectories, a trajectory's jobs by frame.
import { buckets, colour, ringLabel } from "./rules.js";

const params = new URLSearchParams(location.search);
if (params.has("token")) {
  sessionStorage.setItem("token", params.get("token"));
  history.replaceState(null, "", location.pathname);
}
const token = sessionStorage.getItem("token");
const $ = (id) => document.getElementById(id);
const ICON = { running: "▶", queued: "…", retrying: "↻", completed: "✓", failed: "✗", neutral: "•", empty: "" };
const state = { counts: null, trajectories: new Map(), open: null, jobs: new Map(), seq: {}, glowing: new Set() };
let ws = null, team = null, retry = 0, dirty = false;

function render() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(() => { dirty = false; draw(); });
}

function draw() {
  const c = state.counts || { queued: 0, retrying: 0, running: 0, completed: 0, failed: 0 };
  const b = buckets(c);
  $("ring").textContent = ringLabel(c);
  $("counts").innerHTML = [["Queued", b.queued], ["Running", b.running], ["Done", b.done], ["Failed", b.failed]]
    .map(([k, v]) => `<div><b>${v}</b>${k}</div>`).join("");
  const list = [...state.trajectories.values()].sort((a, b) => (b.updated_at || "").localeCompare(a.updated_at || ""));
  $("trajectories").innerHTML = list.map((t) => `
    <li role="treeitem" aria-expanded="${state.open === t.id}" class="${state.glowing.has(t.id) ? "glow" : ""}">
      <div class="row" data-id="${t.id}" tabindex="0">
        <span class="name ${colour(t.status)}">${ICON[t.status] || ""} ${esc(t.name)}</span>
        <span>${t.completed}/${t.total}</span>
        <span class="quiet">${t.status}</span>
      </div>
      ${state.open === t.id ? framesHtml() : ""}
    </li>`).join("");
}

function framesHtml() {
  const jobs = [...state.jobs.values()].filter((j) => !j.removed_at)
    .sort((a, b) => (a.frame ?? -1) - (b.frame ?? -1) || a.id - b.id).slice(0, 300);
  return `<ul class="frames">${jobs.map((j) => `
    <li><span class="${colour(j.status)}">${ICON[j.status] || ""} ${j.frame === null ? "General" : "Frame " + j.frame}</span>
    <span>${esc(j.name)}</span><span class="quiet">${j.status}</span>
    ${j.error ? `<span class="error">${esc(j.error)}</span>` : ""}</li>`).join("")}</ul>`;
}

const esc = (s) => String(s).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[ch]));

function toast(text, level) {
  const el = document.createElement("div");
  el.className = `toast ${level}`;
  el.setAttribute("role", "status");
  el.textContent = text;
  $("toasts").append(el);
  setTimeout(() => el.remove(), 5000);
}

function send(msg) { if (ws && ws.readyState === 1) ws.send(JSON.stringify(msg)); }

function onMessage(m) {
  if (m.type === "error") { console.warn(m); return; }

  if (m.type === "pong") return;
  if (m.type === "resync") { send({ type: "subscribe", channel: m.channel }); return; }
  if (m.seq !== undefined && m.type !== "snapshot" && state.seq[m.channel] !== undefined && m.seq !== state.seq[m.channel] + 1) {
    send({ type: "subscribe", channel: m.channel }); // lost something: reload the channel
    return;
  }
  if (m.seq !== undefined) state.seq[m.channel] = m.seq;
  if (m.type === "notice") { toast(m.title, m.level); return; }
  if (m.type === "glow") {
    state.glowing.add(m.trajectory_id);
    setTimeout(() => { state.glowing.delete(m.trajectory_id); render(); }, 3500);
    render();
    return;
  }
  if (m.channel === `team:${team}`) {
    if (m.type === "snapshot") state.trajectories.clear();
    state.counts = m.counts;
    for (const t of m.trajectories || []) t.total ? state.trajectories.set(t.id, t) : state.trajectories.delete(t.id);
  } else if (m.channel === `trajectory:${state.open}`) {
    if (m.type === "snapshot" && m.page === 0) state.jobs.clear();
    for (const j of m.jobs || []) {
      const seen = state.jobs.get(j.id);
      if (!seen || j.version > seen.version) state.jobs.set(j.id, j);
    }
  }
  render();
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${scheme}://${location.host}/ws?token=${encodeURIComponent(token)}`);
  ws.onopen = () => {
    retry = 0; $("conn").textContent = ""; state.seq = {};
    send({ type: "subscribe", channel: `team:${team}` });
    if (state.open) send({ type: "subscribe", channel: `trajectory:${state.open}` });
  };
  ws.onmessage = (e) => onMessage(JSON.parse(e.data));
  ws.onclose = () => {
    $("conn").textContent = "reconnecting…";
    const delay = Math.min(10000, 500 * 2 ** retry++) * (0.5 + Math.random());
    setTimeout(connect, delay);
  };
}

$("trajectories").addEventListener("click", (e) => {
  const row = e.target.closest(".row");
  if (!row) return;
  const id = Number(row.dataset.id);
  if (state.open) send({ type: "unsubscribe", channel: `trajectory:${state.open}` });
  delete state.seq[`trajectory:${state.open}`];
  state.jobs.clear();
  state.open = state.open === id ? null : id;
  if (state.open) send({ type: "subscribe", channel: `trajectory:${state.open}` });
  render();
});

async function start() {
  if (!token) { $("team").textContent = "Open the link that `gateway demo` printed (it carries a token)."; return; }
  const me = await (await fetch("/api/me", { headers: { Authorization: `Bearer ${token}` } })).json();
  if (!me.teams || !me.teams.length) { $("team").textContent = me.message || "No team"; return; }
  team = me.teams[0].id;
  $("team").textContent = me.teams[0].name;
  connect();
  render();
}
start();
