// The live connection: one websocket, many channels. Reconnects by itself with backoff and jitter (or after the
// delay a restarting node asks for), resumes every channel from its cursor, notices lost messages by their
// sequence, keeps the server clock's offset.

const RESUMABLE = new Set(["batch", "summary", "notice", "glow", "presence", "clusters"]);
// A job's or a group's fields at their default are left out of the wire (docs/protocol.md): put them back,
// so the views read every field as the protocol defines it.
const JOB_DEFAULTS = { attempts: 1, analysis_id: null, submission_id: null, frame: null, timestep: null, error: null,
  created_at: null, updated_at: null, started_at: null, finished_at: null, removed_at: null, removed_by: null,
  silent_since: null };
const GROUP_DEFAULTS = { frame: null, timestep: null, open: false };

export function withDefaults(m) {
  if (m.jobs) m.jobs = m.jobs.map((j) => ({ ...JOB_DEFAULTS, ...j }));
  if (m.groups) m.groups = m.groups.map((g) => ({ ...GROUP_DEFAULTS, ...g }));
  return m;
}

// Where a channel stands after a message: the browser's copy of gateway/core/follower.py, held equal to it by
// frontend/vectors/follower.json. Returns the verdict ("page", "apply", "duplicate", "gap", "resync"), or null
// for a message that has no position; after "gap" or "duplicate" the position is unchanged.
export function follow(sub, m) {
  if (m.type === "resync") { reset(sub); return "resync"; }
  if (m.type === "snapshot") {
    if (m.page !== 0 && m.page !== sub.nextPage) return "gap"; // a page was lost
    sub.seq = m.seq; sub.cursor = m.cursor; sub.ready = m.final; sub.nextPage = m.final ? null : m.page + 1;
    return "page";
  }
  if (!RESUMABLE.has(m.type)) return null;
  if (sub.seq !== null && m.seq !== sub.seq + 1) return m.seq <= sub.seq ? "duplicate" : "gap";
  sub.seq = m.seq; sub.cursor = m.cursor;
  return "apply";
}

// The cursor to resubscribe with after a reconnect: none while a snapshot's pages are still coming (resuming
// from a page's cursor would skip the pages after it), so the channel's snapshot starts again.
export function resumeCursor(sub) { return sub.nextPage === null ? sub.cursor : null; }
export function reset(sub) { sub.cursor = null; sub.seq = null; sub.ready = false; sub.nextPage = null; }

// A restarting node's close (1012) says in its reason how long this connection should wait before it comes back,
// each connection a different delay (docs/protocol.md, "Close codes"): gateway/core/restart.py's retry_after_ms.
export function retryAfterMs(reason) {
  const found = /(?:^|[\s;,(])retry_after_ms=(\d{1,9})(?:$|[\s;,)])/.exec(reason || "");
  return found ? Number(found[1]) : null;
}

export class Live {
  constructor(onStatus, onExpired = async () => {}, onChange = () => {}) {
    this.onStatus = onStatus; // "connecting" | "live" | "reconnecting"
    this.onExpired = onExpired; // the server closed with 4001: renew the session, then connect again
    this.onChange = onChange; // a message with news for a view arrived (the header's freshness)
    this.onPreferences = () => {}; // the person chose in Account, in this tab or another (a `preferences` message)
    this.channels = new Map(); // channel -> { handler, cursor, seq, ready }
    this.offset = 0; // server clock minus ours, in ms
    this.retry = 0;
    this.ws = null;
    this.pinger = null;
    this.stopped = false;
  }

  now() { return Date.now() + this.offset; }

  start() { if (this.stopped) return; this.onStatus("connecting"); this._connect(); }

  /** No more connections (signing out): the socket is closed and nothing connects again, even a start or a
   * reconnection still to come (a Sign out clicked before the app's first connect). */
  stop() { this.stopped = true; const ws = this.ws; this.ws = null; clearInterval(this.pinger); if (ws) ws.close(); }

  /** Connect again after `stop()`: the session was not ended after all. */
  resume() { this.stopped = false; this.start(); }

  subscribe(channel, handler) {
    this.channels.set(channel, { handler, cursor: null, seq: null, ready: false, nextPage: null });
    this._send({ type: "subscribe", channel });
  }

  unsubscribe(channel) {
    if (this.channels.delete(channel)) this._send({ type: "unsubscribe", channel });
  }

  _send(message) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message)); }

  _connect() {
    if (this.stopped) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = (this.ws = new WebSocket(`${scheme}://${location.host}/ws`)); // the session cookie goes along
    ws.onopen = () => {
      this.retry = 0;
      this.onStatus("live");
      for (const [channel, sub] of this.channels) {
        const message = { type: "subscribe", channel };
        const cursor = resumeCursor(sub);
        if (cursor) message.cursor = cursor; // resume: only what was missed, no snapshot
        this._send(message);
      }
      clearInterval(this.pinger);
      this.pinger = setInterval(() => this._send({ type: "ping" }), 15000);
    };
    ws.onmessage = (event) => this._receive(withDefaults(JSON.parse(event.data)));
    ws.onclose = async (event) => {
      clearInterval(this.pinger);
      if (this.ws !== ws) return;
      this.onStatus("reconnecting");
      if (event.code === 4001) { await this.onExpired(); this._connect(); return; }
      const asked = event.code === 1012 ? retryAfterMs(event.reason) : null;
      const delay = asked ?? Math.min(15000, 400 * 2 ** this.retry++) * (0.5 + Math.random());
      setTimeout(() => this._connect(), delay);
    };
  }

  _receive(m) {
    if (m.type === "pong") { this.offset = m.time - Date.now(); return; }
    if (m.type === "error") { console.warn("gateway:", m.code, m.message); return; }
    if (m.type === "preferences") { this.onPreferences(m); return; }
    const sub = this.channels.get(m.channel);
    if (!sub) return;
    const verdict = follow(sub, m);
    if (verdict === null) return;
    // A resync, or lost (or repeated) messages: load the channel again.
    if (verdict !== "page" && verdict !== "apply") { this._reload(m.channel, sub); return; }
    if (m.type === "snapshot" && m.page === 0) this.offset = m.time - Date.now();
    sub.handler(m);
    this.onChange();
  }

  _reload(channel, sub) {
    reset(sub);
    sub.handler({ type: "reset", channel });
    this._send({ type: "subscribe", channel });
  }
}
