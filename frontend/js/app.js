// The Jobs single-page app: header ring and popover, dashboard cards, a trajectory's panel, Submissions, My Team,
// Clusters. Views draw at most once per animation frame, whatever the rate of updates.
import { AccountPage, signOut } from "./account.js";
import { ActivityPage } from "./activity.js";
import { param } from "./address.js";
import { app } from "./context.js";
import { Dashboard } from "./dashboard.js";
import { Freshness } from "./freshness.js";
import { unreadCount } from "./history.js";
import { installShortcuts } from "./keys.js";
import { Live } from "./live.js";
import { chooseFinishes, finished, historyOpen, mountNotices, setOpen as setHistoryOpen, stuck } from "./notices.js";
import { Panel } from "./panel.js";
import { Popover } from "./popover.js";
import { ringLabel } from "./rules.js";
import { WorkInHand } from "./inflight.js";
import { SubmissionsPage, taskMenu } from "./submissions.js";
import { addMemberButton, clusterKeys, memberCells, memberHead, wireTeamAdmin } from "./team_admin.js";
import { closeMenu, dialogOpen, esc, menuOpen } from "./ui.js";

const $ = (id) => document.getElementById(id);
let dirty = false;
const panel = new Panel($("panel"));
const popover = new Popover($("popover"), $("ring"), panel);
const dashboard = new Dashboard($("main"), panel);
let submissionsPage = null;
const accountPage = new AccountPage($("main"));
const activityPage = new ActivityPage($("main"));

function schedule() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(() => { dirty = false; draw(); });
}
app.schedule = schedule;

// For the browser tests: how often we drew.
window.gatewayStats = { draws: 0 };

function draw() {
  window.gatewayStats.draws++;
  drawRing();
  popover.draw();
  panel.draw();
  route();
}

const workInHand = new WorkInHand();

function drawRing() {
  const c = app.team.counts || { queued: 0, retrying: 0, running: 0, completed: 0, failed: 0 };
  const label = ringLabel(c);
  if ($("ring-label").textContent !== label) $("ring-label").textContent = label;
  // The tab says it too, for a person looking at another tab: "3 running - Jobs", and "(2) ..." while two
  // notifications wait unread under the bell.
  const unread = unreadCount();
  const title = `${unread ? `(${unread}) ` : ""}${label === "Jobs" ? "Jobs" : `${label} - Jobs`}`;
  if (document.title !== title) document.title = title;
  // Filled with the work in hand (./inflight.js), so it is full only when everything is done.
  $("ring-fill").setAttribute("stroke-dasharray", `${Math.round(workInHand.fill(app.team.summaries.values(), app.live.now()) * 100)} 100`);
}

// -- pages

function route() {
  const page = location.pathname === "/submissions" ? "/submissions" : location.hash.replace("#", "") || "/";
  for (const a of document.querySelectorAll("header nav a")) {
    const here = a.dataset.page === page || (a.dataset.page === "/" && !["/submissions", "/team", "/activity", "/clusters", "/account"].includes(page));
    if (here) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  if (page === "/submissions") {
    if (!submissionsPage) {
      submissionsPage = new SubmissionsPage($("main"), (row, opener) => {
        if (row && row.trajectory_id) panel.open(row.trajectory_id, row.title, { submission: row.id, taskMenu, opener });
      });
    }
    return submissionsPage.render();
  }
  if (page === "/team") return drawTeamPage();
  if (page === "/clusters") return drawClustersPage();
  if (page === "/account") return accountPage.render();
  if (page === "/activity") return activityPage.render();
  dashboard.draw();
}

let drawn = "";
function replace(main, page, html) {
  if (main.dataset.page === page && drawn === html) return; // unchanged: nothing under the pointer is redrawn
  main.dataset.page = page;
  drawn = html;
  main.innerHTML = html;
}

let members = null;
let myRole = ""; // the person's role in the team: owners and admins see the pages' controls (team_admin.js)
async function drawTeamPage() {
  const main = $("main");
  if (main.dataset.page !== "team" && members === null) {
    members = [];
    const answer = await (await fetch(`/api/teams/${app.teamId}/members`)).json();
    members = answer.members || [];
    myRole = answer.role || "";
  }
  const online = new Set(app.team.presence ? app.team.presence.users : []);
  replace(main, "team", `<h1>My Team</h1>${app.me.single_user ? "" : `<p>${online.size} / ${members.length} online</p>`}${addMemberButton(myRole)}
    <div class="table-scroll"><table><caption class="visually-hidden">Members of the team</caption><thead><tr><th scope="col">Member</th><th scope="col">Status</th>${memberHead(myRole)}</tr></thead>
    <tbody>${members.map((m) => `<tr><td>${esc(m.name)}</td><td>${app.me.single_user ? "" : online.has(m.id) ? "● online" : "○ offline"}</td>${memberCells(m, myRole)}</tr>`).join("")}</tbody></table></div>`);
}

let keyed = null; // the team's clusters as their managers see them (GET /api/teams/{id}/clusters)
async function loadClusters() {
  const answer = await fetch(`/api/teams/${app.teamId}/clusters`).then((r) => r.json()).catch(() => ({}));
  keyed = answer.clusters || [];
  myRole = answer.role || myRole;
  schedule();
}
wireTeamAdmin($("main"), {
  members: () => members || [],
  clusters: () => keyed || [],
  changed: (what) => {
    if (what === "members") { members = null; $("main").dataset.page = ""; } else loadClusters();
    schedule();
  },
});

function drawClustersPage() {
  const main = $("main");
  if (app.me.local) { replace(main, "clusters", `<h1>Clusters</h1><p class="quiet">Not available when the app runs locally.</p>`); return; }
  if (keyed === null) { keyed = []; loadClusters(); }
  const s = app.team.clusters;
  const rows = s ? s.clusters.map((c) => `<tr><td>${esc(c.name)}</td><td class="${c.cpu >= 85 ? "cpu-high red" : ""}">${c.cpu}%</td>
    <td>${c.memory}%</td><td>${c.disk}%</td><td>${c.network} MB/s</td><td>${c.live ? "live" : "silent"}</td></tr>`).join("") : "";
  replace(main, "clusters", `<h1>Clusters</h1><div class="table-scroll" tabindex="0" role="region" aria-label="The team's clusters"><table><caption class="visually-hidden">The team's clusters</caption>
    <thead><tr><th scope="col">Cluster</th><th scope="col">CPU</th><th scope="col">Memory</th><th scope="col">Disk</th>
    <th scope="col">Network</th><th scope="col">Reporting</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="6" class="quiet">No cluster reports metrics</td></tr>`}</tbody></table></div>${clusterKeys(keyed, myRole)}`);
}

/** What the address says is open (a reload or a shared link): the popover and its search, a trajectory's panel. */
function restoreView() {
  const id = Number(param("panel"));
  if (Number.isSafeInteger(id) && id > 0) {
    const known = app.team.summaries.get(id) || dashboard.listed(id);
    panel.openById(id, known && known.name, { tab: param("tab") === "analyses" ? "analyses" : "jobs", opener: $("ring") });
  }
  if (param("jobs") === "open") popover.setOpen(true);
}

// -- signing in

const SIGN_IN_NOTES = {
  ended: "Your session has ended: sign in again.",
  expired: "That sign-in link has expired or was revoked.",
  out: "You have signed out.",
};

/** Signed out (or never signed in): the header keeps only the product's name, the page says what happened. */
async function signIn() {
  const main = $("main");
  document.body.classList.add("signed-out"); // no team, ring, bell or pages to go to: nothing is live here
  const note = SIGN_IN_NOTES[new URLSearchParams(location.search).get("signin")];
  const said = note ? `<p class="sign-in-note" role="status">${note}</p>` : "";
  const users = await fetch("/api/sign-in/users");
  if (!users.ok) {
    main.innerHTML = `<section class="sign-in-page"><h1>Sign in</h1>${said}
      <p>Open the link with your token (<code>/?token=…</code>) to sign in.</p></section>`;
    return;
  }
  const list = (await users.json()).users;
  // Only the demo answers this list: anyone may act as any member there, and the page says so.
  main.innerHTML = `<section class="sign-in-page"><h1>Sign in to the demo</h1>${said}
    <p class="quiet">This is the demo's picker: choose a member to act as them. A real deployment signs each
    person in with a link of their own.</p>
    <div class="picker" role="group" aria-label="The demo's members">${list.map((u) => `<button type="button" data-user="${u.id}">${esc(u.name)}</button>`).join("")}</div></section>`;
  main.addEventListener("click", async (e) => {
    const b = e.target.closest("[data-user]");
    if (!b) return;
    await fetch("/api/sign-in", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ user_id: Number(b.dataset.user) }) });
    location.reload();
  });
}

// -- wiring

/** At narrow widths the pages and Sign out open from a menu button; a choice, Escape or a click outside closes it.
 * Wired as the page loads: the button shows from the first paint, and a tap on it while the app still read who
 * the person is did nothing. */
function wireNav() {
  const header = document.querySelector("header");
  const setNav = (open) => { header.classList.toggle("nav-open", open); $("nav-toggle").setAttribute("aria-expanded", String(open)); };
  $("nav-toggle").addEventListener("click", () => setNav(!header.classList.contains("nav-open")));
  $("nav-sheet").addEventListener("click", (e) => { if (e.target.closest("a")) setNav(false); });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && header.classList.contains("nav-open")) { setNav(false); $("nav-toggle").focus(); }
  });
  document.addEventListener("click", (e) => { if (!e.target.closest("header")) setNav(false); });
}

function wire() {
  $("ring").addEventListener("click", () => popover.setOpen(!popover.isOpen));
  // A click on the ring before now (./early.js): the popover it asked for opens now.
  const early = window.jobsEarly || { ring: false };
  early.ready = true;
  if (early.ring && !popover.isOpen) popover.setOpen(true);
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape" || dialogOpen()) return; // a dialog handles its own Escape
    if (menuOpen()) { closeMenu(true); return; }
    if (historyOpen()) { setHistoryOpen(false); return; }
    if (popover.isOpen) { popover.setOpen(false); $("ring").focus(); return; }
    if (panel.isOpen && (panel.el.contains(document.activeElement) || document.activeElement === document.body)) panel.close();
  });
  document.addEventListener("click", (e) => {
    // The path, not the target: a click may have redrawn (detached) the element it landed on.
    const inside = (sel) => e.composedPath().some((n) => n instanceof Element && n.matches(sel));
    if (!inside(".menu") && !inside("[aria-haspopup='menu']")) closeMenu(); // a menu button's click opened it
    if (popover.isOpen && !inside("#popover") && !inside("#ring") && !inside(".menu") && !inside("dialog")) popover.setOpen(false);
  });
  document.addEventListener("menuclosed", schedule); // lists held while it was open catch up
  // Shortcuts (keys.js): `?` lists them; `/` and a move key with no row focused reach the list in front.
  installShortcuts(() => {
    if (panel.isOpen && panel.el.contains(document.activeElement)) return panel.list();
    if (popover.isOpen) return { search: popover.el.querySelector("input[name=find]"), rows: () => [...popover.el.querySelectorAll("[data-head]")] };
    const main = $("main");
    const rows = { submissions: "[data-sub]", dash: "[data-card]" }[main.dataset.page];
    if (!rows) return null;
    return { search: main.querySelector("input[name=q]"), rows: () => [...main.querySelectorAll(rows)].filter((r) => r.offsetParent !== null) };
  });
  $("team-switch").addEventListener("change", (e) => { localStorage.setItem("team", e.target.value); location.reload(); });
  window.addEventListener("hashchange", () => { popover.setOpen(false); schedule(); });
  setInterval(() => { app.freshness?.draw(); schedule(); }, 1000); // ages keep moving with the server's clock
}

// -- the session: renewed before its token expires, without a reload

let renewal = null, sessionEnds = 0;
function scheduleRenewal(expiresAt, serverNow) {
  clearTimeout(renewal);
  // No later expiry: the session has reached its maximum age. When it ends the socket closes (4001), the
  // renewal then is refused, and the person signs in again.
  if (expiresAt <= sessionEnds) return;
  sessionEnds = expiresAt;
  const lifetime = expiresAt - serverNow; // both from the server's clock: a skewed browser clock does not matter
  renewal = setTimeout(renewSession, Math.max(1000, lifetime * 0.8));
}

async function renewSession() {
  if (app.leaving) return; // signing out: that page, not "session ended"
  const response = await fetch("/api/session/renew", { method: "POST" }).catch(() => null);
  // Expired, revoked or past its maximum age: sign in again.
  if (app.leaving) return;
  if (response && response.status === 401) { location.assign("/?signin=ended"); return; }
  if (!response || !response.ok) { // rate limited or unreachable: the session is still good, try again shortly
    const wait = Number(response && response.headers.get("Retry-After")) || 5;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    return renewSession();
  }
  const body = await response.json();
  scheduleRenewal(body.expires_at, body.time);
}

async function start() {
  const response = await fetch("/api/me");
  if (!response.ok) return signIn();
  const me = (app.me = await response.json());
  $("sign-out").hidden = false; // signed in: on every page, even without a team
  $("sign-out").addEventListener("click", signOut);
  if (!me.teams.length) { $("main").textContent = "You are not a member of any team."; return; }
  const saved = Number(localStorage.getItem("team"));
  app.teamId = me.teams.some((t) => t.id === saved) ? saved : me.teams[0].id;
  $("team-switch").innerHTML = me.teams.map((t) => `<option value="${t.id}" ${t.id === app.teamId ? "selected" : ""}>${esc(t.name)}</option>`).join("");
  if (me.local) $("nav-clusters").hidden = true;
  const freshness = (app.freshness = new Freshness($("conn"), () => (app.live ? app.live.now() : Date.now())));
  app.live = new Live((status) => freshness.set(status), renewSession, () => freshness.changed());
  app.live.onPreferences = (m) => { chooseFinishes(m.finishes); schedule(); }; // chosen in another tab: holds here now
  scheduleRenewal(me.expires_at, me.time);
  // Who the members are, before the first rows are drawn (USER); the dashboard reads its cards itself.
  const members = await fetch(`/api/teams/${app.teamId}/members`).then((r) => r.json());
  for (const m of members.members || []) app.memberNames.set(m.id, m.name);
  for (const c of members.clusters || []) app.clusterNames.set(c.id, c.name); // a job row names its cluster
  let restored = false;
  app.live.subscribe(`team:${app.teamId}`, (m) => {
    app.team.apply(m);
    if (m.type === "notice") finished(m); // every finish of the team: the person's own are told (notices.js)
    if (m.type === "summary" || m.type === "snapshot") stuck(m.trajectories); // their jobs running longer than usual
    if (m.type === "glow") setTimeout(schedule, 3600);
    if (!restored && m.type === "snapshot") { restored = true; restoreView(); }
    schedule();
  });
  if (app.leaving) return; // Sign out was clicked while the members were read: connect no more
  app.live.start();
  window.gatewayLive = app.live;
  window.gatewayApp = app; // for the browser tests: the team's state as the views read it
  wire();
  mountNotices({
    ring: $("ring"),
    open: (id, name) => panel.open(id, name, { opener: $("bell") }),
    panelId: () => panel.id,
    opening: () => popover.setOpen(false),
  });
  schedule();
}

wireNav();
start();
