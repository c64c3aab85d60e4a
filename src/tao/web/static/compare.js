// The compare view: ReAct, CodeAct and Plan-and-Execute on one task, three live columns side by
// side, and under them the seed's §7.2 table filled from each run's run_finished: LLM calls
// (turns), what it ran - tool calls, code executions or plan steps -, tokens, seconds, answer.
// The counts are those of `tao compare` (tao/compare.py), so the page and the CLI agree.

import { api } from "./api.js";
import { el } from "./cards.js";
import { label, onLangChange, t } from "./i18n.js";
import { RunView } from "./render.js";
import { RunStream } from "./stream.js";

export const ARCHITECTURES = [["react", "ReAct", "tool_calls"], ["codeact", "CodeAct", "executions"],
  ["plan", "Plan-and-Execute", "steps"]];

// What the "actions" column counts: distinct plan steps started, code blocks run (top level), or
// the result's tool calls.
export function actions(agent, events, result) {
  if (agent === "plan") return new Set(events.filter((e) => e.type === "step_started").map((e) => e.step_id)).size;
  if (agent === "codeact") return events.filter((e) => e.type === "execution").length || result.tool_calls || 0;
  return result.tool_calls || 0;
}

export class Compare {
  constructor(root, onError) {
    this.root = root;
    this.onError = onError;
    this.streams = [];
    onLangChange(() => this.views && this.table());
  }

  async start(body) {
    this.stop();
    const { run_ids: ids } = await api("/api/compare", { method: "POST", body });
    this.views = {};
    const columns = el("div", { class: "compare-columns" });
    for (const [agent, name] of ARCHITECTURES) {
      const box = el("div", { class: "compare-run" });
      const col = el("section", { class: "compare-column", "data-agent": agent },
        el("h3", { text: name }), box);
      columns.append(col);
      const view = new RunView(box, { runId: ids[agent], agent, onError: this.onError });
      this.views[agent] = view;
      this.streams.push(new RunStream(ids[agent], {
        onEvent: (ev) => { if (view.handle(ev) && ev.type === "run_finished") this.table(); },
        onEnd: (end) => { view.finish(end.status); this.table(); },
      }));
    }
    this.tableBox = el("div", { class: "compare-table-box" });
    this.root.replaceChildren(columns, this.tableBox);
    this.table();
    return ids;
  }

  table() {
    const head = ["compare.architecture", "compare.llm_calls", "compare.actions", "compare.tokens",
      "compare.seconds", "compare.answer"].map((k) => label(el("th"), k));
    const rows = ARCHITECTURES.map(([agent, name, unit]) => {
      const view = this.views[agent];
      const r = view.result;
      if (!r) {
        return el("tr", { "data-agent": agent, class: "pending" }, el("th", { text: name }),
          ...[1, 2, 3, 4].map(() => el("td", { text: "…" })), el("td", {}, label(el("span"), "run.live")));
      }
      const u = r.usage || {};
      const answer = r.status === "done" ? r.answer ?? "" : `${r.status}: ${r.error || ""}`;
      return el("tr", { "data-agent": agent, "data-status": r.status },
        el("th", { text: name }),
        el("td", { "data-col": "turns", text: String(r.turns) }),
        el("td", { "data-col": "actions", text: `${actions(agent, view.events, r)} ${t(`unit.${unit}`)}` }),
        el("td", { "data-col": "tokens", text: `${u.estimated ? "≈" : ""}${u.total_tokens ?? 0} (${u.prompt_tokens ?? 0}+${u.completion_tokens ?? 0})` }),
        el("td", { "data-col": "seconds", text: Number(r.duration_s || 0).toFixed(2) }),
        el("td", { "data-col": "answer", class: r.status === "done" ? "final" : "is-error", text: answer }));
    });
    const table = el("table", { class: "compare-table" }, el("thead", {}, el("tr", {}, ...head)),
      el("tbody", {}, ...rows));
    this.tableBox.replaceChildren(label(el("h3"), "compare.title"), table);
  }

  stop() {
    for (const s of this.streams) s.close();
    this.streams = [];
  }
}
