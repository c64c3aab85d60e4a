// One run drawn from its events: the chain (one element per event, in seq order, each with
// data-kind and data-seq so the order can be read off the DOM), the plan's DAG, the approval
// cards, the statistics and the files. Live events and a replay go through the same handle(),
// which drops an event whose seq it has drawn already - the guard around every reconnect.

import { Dag } from "./dag.js";
import { highlightPython } from "./highlight.js";
import { label, onLangChange, status } from "./i18n.js";
import { approvalCard, el, files, json, markDecided, stats } from "./cards.js";

const WORKSPACE_TOOLS = /^(write_file|append_file|edit_file|apply_patch|delete_file|run_command|run|make_dir)/;

export class RunView {
  constructor(root, { runId, agent = "", interactive = true, onError } = {}) {
    this.root = root;
    this.runId = runId;
    this.agent = agent;
    this.interactive = interactive;
    this.onError = onError;
    this.reset();
    onLangChange(() => this.dag.steps.size && this.dag.draw());
  }

  reset() {
    this.seen = new Set();
    this.events = [];
    this.streams = new Map(); // turn (or nested step) -> the <li> its tokens stream into
    this.cards = new Map();   // call_id -> approval card
    this.result = null;
    this.done = false;
    this.speaker = ""; // the agent whose events these are (a handoff changes it)
    this.root.classList.add("run-view");
    this.root.dataset.runId = this.runId || "";
    this.root.dataset.status = "running";
    this.chain = el("ol", { class: "chain", "aria-live": "polite" });
    this.dagBox = el("div", { class: "dag-wrap" });
    this.statsBox = el("div", { class: "stats", hidden: true });
    this.filesBox = el("div", { class: "files", hidden: true });
    this.root.replaceChildren(el("div", { class: "run-body" }, this.chain,
      el("aside", { class: "side" }, this.dagBox, this.statsBox, this.filesBox)));
    this.dag = new Dag(this.dagBox);
  }

  // Draw one event; false when it was drawn before (same seq).
  handle(ev) {
    if (typeof ev.seq === "number") {
      if (this.seen.has(ev.seq)) return false;
      this.seen.add(ev.seq);
    }
    this.events.push(ev);
    const item = this.draw(ev);
    if (item) {
      item.dataset.kind ||= ev.type;
      if (this.speaker && !item.dataset.agent) item.dataset.agent = this.speaker;
      if (typeof ev.seq === "number") item.dataset.seq = ev.seq;
      if (!item.isConnected) this.chain.append(item);
    }
    this.root.dataset.events = this.events.length;
    return true;
  }

  // The run is over (its run_finished, or the stream's end - whichever comes first).
  finish(status) {
    if (status) this.root.dataset.status = status;
    if (this.done) return;
    this.done = true;
    for (const li of this.streams.values()) li.open = false;
    if (this.agent === "code") this.refreshFiles();
  }

  refreshFiles() {
    if (this.runId) files(this.filesBox, this.runId);
  }

  entry(kindKey, body, cls = "") {
    const li = el("li", { class: `ev ${cls}`.trim() });
    if (kindKey) li.append(label(el("span", { class: "ev-label" }), kindKey));
    if (body) li.append(body);
    return li;
  }

  text(s, cls = "ev-text") {
    return el("div", { class: cls, text: s ?? "" });
  }

  // Tokens of one turn stream into one collapsible box, each piece its own <span data-seq>.
  tokens(ev, key) {
    let box = this.streams.get(key);
    if (!box) {
      box = el("details", { class: "tokens", open: true });
      box.append(label(el("summary"), "kind.tokens"), el("pre", { class: "stream" }));
      this.streams.set(key, box);
      this.chain.append(el("li", { class: "ev stream-item", "data-kind": "tokens" }, box));
    }
    const piece = el("span", { class: "tok", text: ev.text ?? "" });
    piece.dataset.seq = ev.seq;
    piece.dataset.kind = "token";
    box.querySelector("pre").append(piece);
    return null; // the span is the event's element
  }

  closeStream(turn) {
    const box = this.streams.get(turn);
    if (box) box.open = false;
  }

  draw(ev) {
    switch (ev.type) {
      case "run_started": {
        this.agent ||= ev.agent;
        this.root.dataset.agent ||= ev.agent;
        this.speaker = ev.agent; // after a handoff: the agent that takes over
        const li = this.entry("kind.run_started", el("span", { class: "speaker", text: ev.agent }));
        li.append(this.text(`${ev.model}${ev.sandbox ? " · " + ev.sandbox : ""} — ${ev.task}`));
        return li;
      }
      case "turn_started": {
        const li = el("li", { class: "ev turn", "data-turn": ev.turn });
        li.append(label(el("span", { class: "ev-label" }), "kind.turn", { turn: ev.turn }));
        return li;
      }
      case "token": case "token_delta":
        return this.tokens(ev, ev.turn);
      case "model_retry": {
        const box = this.streams.get(ev.turn);
        box?.querySelectorAll(".tok").forEach((s) => s.classList.add("void"));
        return this.entry("kind.model_retry", this.text(`#${ev.attempt}: ${ev.reason}`), "warn");
      }
      case "thought":
        this.closeStream(ev.turn);
        return this.entry("kind.thought", this.text(ev.text));
      case "action": {
        this.closeStream(ev.turn);
        const c = ev.call || {};
        const li = this.entry("kind.action", el("span", { class: "tool-name", text: c.name }));
        li.dataset.callId = c.id;
        li.append(el("pre", { class: "args", text: json(c.arguments ?? {}) }));
        if (c.parse_error) li.append(this.text(c.parse_error, "ev-text error-text"));
        return li;
      }
      case "observation": {
        const li = this.entry("kind.observation", el("span", { class: "tool-name", text: ev.name }),
          ev.is_error ? "is-error" : "");
        li.dataset.callId = ev.call_id;
        li.append(el("pre", { class: "obs", text: ev.content }));
        if (this.agent === "code" && WORKSPACE_TOOLS.test(ev.name)) this.refreshFiles();
        return li;
      }
      case "final_answer":
        this.closeStream(ev.turn);
        return this.entry("kind.final_answer", this.text(ev.text), "final");
      case "code": {
        this.closeStream(ev.turn);
        const code = el("code", { class: "language-python" });
        code.innerHTML = highlightPython(ev.code ?? "");
        return this.entry("kind.code", el("pre", { class: "code" }, code));
      }
      case "execution": {
        const li = this.entry("kind.execution", null, ev.error || ev.killed_reason ? "is-error" : "");
        if (ev.stdout) li.append(el("pre", { class: "stdout", text: ev.stdout }));
        if (ev.stderr) li.append(el("pre", { class: "stderr", text: ev.stderr }));
        if (ev.error) li.append(el("pre", { class: "traceback", text: ev.error }));
        if (ev.killed_reason) li.append(this.text(ev.killed_reason, "ev-text error-text"));
        return li;
      }
      case "error":
        return this.entry("kind.error", this.text(ev.message), ev.recoverable ? "warn" : "is-error");
      case "checklist": { // what the user will check, written before the first turn
        this.closeStream(ev.turn);
        if (!(ev.items || []).length) return null; // the reply listed nothing
        const list = el("ol", { class: "checklist" });
        for (const item of ev.items || []) list.append(el("li", { text: item }));
        return this.entry("kind.checklist", list);
      }
      case "checked": // the project checked after an attempt (--attempts): passed, or what failed
        return this.entry("kind.checked", this.text(ev.text), (ev.problems || []).length ? "warn" : "");
      case "plan_created": case "replanned":
        this.closeStream(ev.turn);
        this.dag.setPlan(ev.steps || []);
        return this.entry(`kind.${ev.type}`, el("pre", { class: "plan",
          text: (ev.steps || []).map((s) => `${s.id}: ${s.description || s.instruction || ""}`).join("\n")
            + (ev.answer ? `\n→ ${ev.answer}` : "") }));
      case "step_started":
        this.dag.mark(ev.step_id, "running");
        return this.step(ev, `${ev.tool || "agent"} ${JSON.stringify(ev.args ?? {})}${ev.attempt > 1 ? ` (#${ev.attempt})` : ""}`);
      case "step_finished":
        this.dag.mark(ev.step_id, "done", ev.result);
        return this.step(ev, `→ ${ev.result} (${Number(ev.duration_s || 0).toFixed(2)} s)`);
      case "step_retried":
        this.dag.mark(ev.step_id, "retrying", ev.error);
        return this.step(ev, `#${ev.attempt}: ${ev.error}`, "warn");
      case "step_failed":
        this.dag.mark(ev.step_id, "failed", ev.error);
        return this.step(ev, ev.error, "is-error");
      case "step_skipped":
        this.dag.mark(ev.step_id, "skipped", ev.reason);
        return this.step(ev, ev.reason);
      case "approval_requested": {
        const card = approvalCard(this.runId, ev, this.interactive && !this.result, this.onError);
        this.cards.set(ev.call_id, card);
        return this.entry("kind.approval_requested", card, "approval");
      }
      case "approval_decided": {
        const card = this.cards.get(ev.call_id);
        if (card) markDecided(card, ev);
        return this.entry("kind.approval_decided", this.text(`${ev.tool}: ${ev.verdict}${ev.reason ? " — " + ev.reason : ""}`));
      }
      case "handed_off": { // another agent speaks from here on (its own run_started follows)
        this.root.classList.add("chained"); // every step now says which agent it is
        this.root.dataset.speakers = [...new Set([...(this.root.dataset.speakers || "").split(" ").filter(Boolean), ev.source, ev.target])].join(" ");
        const li = this.entry("kind.handed_off", el("span", { class: "speaker", text: ev.source }));
        li.append(" → ", el("span", { class: "speaker", text: ev.target }));
        if (ev.reason) li.append(this.text(ev.reason));
        li.dataset.agent = ev.source;
        return li;
      }
      case "run_finished": {
        if (ev.result && ev.result.handoff) {  // this agent's part ends; the run goes on
          return this.entry("kind.run_finished", this.text(`→ ${ev.result.handoff}`));
        }
        this.result = ev.result || {};
        stats(this.statsBox, this.result);
        this.finish(this.result.status);
        for (const card of this.cards.values()) card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        const li = this.entry("kind.run_finished", null, this.result.status === "done" ? "final" : "is-error");
        li.append(status(el("span", { class: "run-end-status" }), this.result.status));
        if (this.result.error) li.append(this.text(this.result.error, "ev-text error-text"));
        if (this.result.output !== undefined && this.result.output !== null) {
          // the typed result (output_type / the form's JSON Schema), validated: pretty JSON
          li.append(label(el("div", { class: "ev-label typed-label" }), "kind.output"),
            el("pre", { class: "typed-output", text: json(this.result.output) }));
        }
        return li;
      }
      case "nested":
        return this.nested(ev);
      default:
        return this.entry("kind.event", el("pre", { text: json(ev) }));
    }
  }

  step(ev, detail, cls = "") {
    const li = this.entry(`kind.${ev.type}`, el("span", { class: "step-id", text: ev.step_id }), cls);
    li.dataset.step = ev.step_id;
    li.append(this.text(detail));
    return li;
  }

  // A sub-agent's event (a step agent, an agent used as a tool): one indented line under its
  // step; its tokens stream into a box of their own.
  nested(ev) {
    const inner = ev.event || {};
    if (inner.type === "token") {
      const li = this.tokens({ ...inner, seq: ev.seq }, `nested:${ev.step_id}:${inner.turn}`);
      return li;
    }
    const summary = inner.text ?? inner.content ?? inner.message ?? inner.code
      ?? (inner.call ? `${inner.call.name} ${JSON.stringify(inner.call.arguments)}` : inner.type);
    const li = this.entry(`kind.${inner.type}`, el("span", { class: "step-id", text: ev.step_id }), "nested");
    li.dataset.innerKind = inner.type;
    li.dataset.step = ev.step_id;
    li.append(this.text(String(summary)));
    return li;
  }
}
