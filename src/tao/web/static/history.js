// Past runs (this session's and the journal's) and the replay of one: the events fetched once,
// then drawn step by step - step, play, all, or back to the start - through the same RunView
// as a live run, so a replay looks exactly like watching it happen.

import { api, runPath } from "./api.js";
import { el } from "./cards.js";
import { label, status as showStatus } from "./i18n.js";

function when(started) {
  if (started == null) return "";
  const d = typeof started === "number" ? new Date(started * 1000) : new Date(started);
  return Number.isNaN(d.getTime()) ? String(started) : d.toLocaleString();
}

export async function listRuns(table, onOpen) {
  const { runs } = await api("/api/runs");
  const body = table.querySelector("tbody");
  body.replaceChildren();
  if (!runs.length) {
    const td = el("td", { colSpan: 6 });
    body.append(el("tr", { class: "empty" }, label(td, "history.none")));
    return runs;
  }
  for (const run of runs) {
    const open = el("button", { type: "button", class: "open-run", i18n: "history.open" });
    open.onclick = () => onOpen(run);
    const tr = el("tr", { "data-run-id": run.run_id, "data-status": run.status || "" },
      el("td", { text: when(run.started) }), el("td", { text: run.agent || "" }),
      el("td", { text: run.model || "" }), el("td", { class: "task", text: run.task || "" }),
      el("td", { class: "status" }, showStatus(el("span"), run.status || ""), run.live ? " ●" : ""),
      el("td", {}, open));
    if (run.live) tr.classList.add("live");
    body.append(tr);
  }
  return runs;
}

export class Replay {
  constructor(bar, view, events) {
    this.bar = bar;
    this.view = view;
    this.events = events;
    this.i = 0;
    this.timer = null;
    const button = (key, cls, fn) => {
      const b = el("button", { type: "button", class: cls, i18n: key });
      b.onclick = fn;
      return b;
    };
    this.position = el("span", { class: "replay-position" });
    this.playButton = button("replay.play", "replay-play", () => this.toggle());
    bar.replaceChildren(label(el("strong"), "replay.title"),
      button("replay.restart", "replay-restart", () => this.restart()),
      button("replay.step", "replay-step", () => this.step()),
      this.playButton,
      button("replay.all", "replay-all", () => this.all()),
      this.position);
    bar.hidden = false;
    this.show();
  }

  show() {
    label(this.position, "replay.position", { i: this.i, n: this.events.length });
    this.bar.dataset.position = this.i;
  }

  // One step is one event, except that a turn's streamed tokens come along with the event that
  // follows them: nobody wants to click through a reply one token at a time.
  step() {
    if (this.i >= this.events.length) { this.pause(); return false; }
    let ev;
    do {
      ev = this.events[this.i++];
      this.view.handle(ev);
    } while (ev.type === "token" && this.i < this.events.length);
    if (this.i >= this.events.length) this.view.finish();
    this.show();
    return true;
  }

  all() {
    this.pause();
    while (this.step());
  }

  restart() {
    this.pause();
    this.view.reset();
    this.i = 0;
    this.show();
  }

  toggle() {
    if (this.timer) { this.pause(); return; }
    label(this.playButton, "replay.pause");
    this.timer = setInterval(() => { if (!this.step()) this.pause(); }, 350);
  }

  pause() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    label(this.playButton, "replay.play");
  }

  stop() {
    this.pause();
    this.bar.hidden = true;
  }
}

export async function fetchReplay(runId) {
  const { events } = await api(runPath(runId, "/replay"));
  return events;
}
