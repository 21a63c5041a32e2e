// How fresh the screen is, said in the header: "live" (its tooltip: how long ago the newest change arrived), or
// "reconnecting: showing 20:16:04" (when the screen was last known current) while the socket is down, with rows and
// counts drawn visibly stale (body[data-live]); back to live by itself when the socket is.
import { ago, setAttr, setText, timeOfDay } from "./ui.js";

export class Freshness {
  constructor(el, now = () => Date.now()) {
    this.el = el;
    this.now = now; // the server's clock
    this.status = "connecting";
    this.currentAt = null; // the last moment the screen was known current (server clock, ms)
    this.newestAt = null; // when the newest change arrived (server clock, ms)
  }

  /** The connection's status: "connecting" | "live" | "reconnecting". */
  set(status) {
    if (status === "reconnecting" && this.status === "live") this.currentAt = this.now();
    this.status = status;
    document.body.dataset.live = status;
    this.draw();
  }

  /** A change arrived on a live connection. */
  changed() {
    this.newestAt = this.now();
  }

  /** The words and tooltip for now (called every second: an age moves on). */
  draw() {
    const el = this.el;
    if (this.status === "live") {
      setText(el, "live");
      const newest = this.newestAt === null ? "no change yet" : `newest change ${ago(new Date(this.newestAt).toISOString(), this.now())}`;
      setAttr(el, "title", `Live: changes appear as they happen (${newest})`);
    } else if (this.status === "reconnecting") {
      const at = this.currentAt ?? this.newestAt;
      const words = at === null ? "reconnecting…" : `reconnecting: showing ${timeOfDay(at, { seconds: true })}`;
      if (el.textContent !== words) {
        // On a narrow screen only the time shows (the dot says not live): the header keeps its rows.
        const [lead, time] = at === null ? [words, ""] : ["reconnecting: showing ", timeOfDay(at, { seconds: true })];
        el.replaceChildren(Object.assign(document.createElement("span"), { className: "conn-lead", textContent: lead }), time);
      }
      setAttr(el, "title", "Not live: what is shown is as it was then; it catches up by itself once the connection is back");
    } else {
      setText(el, "connecting…");
      setAttr(el, "title", null);
    }
  }
}
