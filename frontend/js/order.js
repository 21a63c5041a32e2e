// Nothing moves under the pointer: lists keep their order while a person is aiming at them.
//
// A view asks `held()` whether its list may reorder now: not while the pointer is over it, nor while its keyboard
// focus is in it, nor while a menu or a dialog is open (or what else it names). Meanwhile rows keep their places
// and only change in place; new ones wait, announced ("2 new, show"), and the order catches up when the pointer
// leaves, or at once when the person asks.
import { dialogOpen, menuOpen } from "./ui.js";

/** Tracks the pointer and keyboard focus over an element; `onLeave` runs when neither is there any more. */
export class Aim {
  constructor(el, onLeave) {
    this.el = el;
    this.pointer = false;
    el.addEventListener("pointerenter", () => { this.pointer = true; });
    el.addEventListener("pointerleave", () => { this.pointer = false; onLeave(); });
    el.addEventListener("focusout", () => setTimeout(onLeave));
  }

  /** The pointer is over it, or keyboard focus (visibly) is in it. */
  active() {
    if (this.pointer) return true;
    const focused = document.activeElement;
    return Boolean(focused && this.el.contains(focused) && focused.matches(":focus-visible"));
  }
}

/** Whether lists may reorder now: not while `aims` are active, a menu or a dialog is open, or `also()` holds. */
export function holding(aims, also = () => false) {
  return menuOpen() || dialogOpen() || also() || aims.some((a) => a && a.active());
}

/** The order a list shows: the latest order, unless held, when the shown order stays and new ids wait. */
export class StableOrder {
  constructor() {
    this.shown = null; // ids in the order shown
    this.waiting = 0; // ids not shown yet (announced)
  }

  /** `latest`: ids in the order they should be; `held`: keep the shown order. Returns the ids to show (held, ids
   * gone meanwhile stay in their place until the order catches up). */
  next(latest, held) {
    if (!held || this.shown === null || !this.shown.length) { // an empty list has no places to keep
      this.shown = latest.slice();
      this.waiting = 0;
      return this.shown;
    }
    const shown = new Set(this.shown);
    this.waiting = latest.reduce((n, id) => n + (shown.has(id) ? 0 : 1), 0);
    return this.shown;
  }

  /** The person asked to see the new ones now. */
  release() { this.shown = null; this.waiting = 0; }
}

export const newsText = (n) => `${n} new, show`;
