// The run form, built from /api/options: agent, model (an OpenAI-compatible endpoint shows its
// base URL / key / model fields), tool sets, the tools that need approval, task and max turns;
// tao.toml's named agents (each with whom it hands over to), a session to continue (its
// earlier runs listed under it) and a typed output given as a JSON Schema.
// read() checks what the user typed before anything is sent and says what to fix; the key field
// is emptied as soon as the request has gone, so the page never holds the key longer than that.

import { api } from "./api.js";
import { el } from "./cards.js";
import { label, status as showStatus, t } from "./i18n.js";

export class RunForm {
  constructor(form, options) {
    this.form = form;
    this.options = options;
    const q = (name) => form.querySelector(`[name="${name}"]`);
    this.agent = q("agent");
    this.model = q("model");
    this.task = q("task");
    this.maxTurns = q("max_turns");
    this.approveText = q("approve_text");
    this.openai = form.querySelector(".openai-fields");
    this.baseUrl = q("base_url");
    this.apiKey = q("api_key");
    this.modelId = q("model_id");
    this.session = q("session");
    this.schema = q("output_schema");
    this.agentNote = form.querySelector(".agent-note");
    this.sessionRuns = form.querySelector(".session-runs");
    this.named = new Map((options.named || []).map((n) => [n.name, n]));
    this.agent.replaceChildren(...options.agents.map((a) => {
      const n = this.named.get(a); // tao.toml's agent: its name, architecture and handoffs
      const text = n ? `${a} (${n.agent}${n.handoffs.length ? " → " + n.handoffs.join(", ") : ""})` : a;
      return el("option", { value: a, text });
    }));
    this.agent.addEventListener("change", () => this.showAgent());
    this.showAgent();
    this.onOpenRun = null; // set by the page: open one of the session's earlier runs
    // listed as the name is typed (a pause of 300 ms), below the fields: nothing above them moves
    let typing = null;
    this.session.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.listSession(), 300);
    });
    this.session.addEventListener("change", () => { clearTimeout(typing); this.listSession(); });
    this.model.replaceChildren(...options.models.map((m) =>
      el("option", { value: m.name, text: m.label || m.name })));
    this.model.onchange = () => this.showFields();
    this.showFields();
    this.buildTools(form.querySelector(".tools"), form.querySelector(".approve-boxes"));
  }

  // What a named agent is: its description and whom it may hand the conversation to.
  showAgent() {
    const n = this.named.get(this.agent.value);
    this.agentNote.hidden = !n;
    if (n) {
      this.agentNote.replaceChildren(label(el("span"), n.handoffs.length ? "form.named_handoffs"
        : "form.named", { agent: n.agent, handoffs: n.handoffs.join(", ") }),
      n.description ? ` — ${n.description}` : "");
    }
  }

  // The session's earlier runs (this browser's), newest first, each openable.
  async listSession() {
    const name = this.session.value.trim();
    const list = this.sessionRuns.querySelector("ul");
    list.replaceChildren();
    this.sessionRuns.hidden = !name;
    if (!name) return;
    let runs = [];
    try { ({ runs } = await api(`/api/runs?session_name=${encodeURIComponent(name)}`)); } catch { runs = []; }
    if (!runs.length) { list.append(el("li", { i18n: "form.session_new" })); return; }
    for (const run of runs) {
      const open = el("button", { type: "button", class: "open-run", i18n: "history.open" });
      open.onclick = () => this.onOpenRun?.(run);
      list.append(el("li", { "data-run-id": run.run_id }, `${run.task} · `,
        showStatus(el("span"), run.status || ""), open));
    }
  }

  needs() {
    const m = this.options.models.find((x) => x.name === this.model.value);
    return m?.needs || [];
  }

  showFields() {
    this.openai.hidden = this.needs().length === 0;
  }

  // One "needs approval" box per tool name the picked sets give (a name two sets share, such as
  // calculate, once); the boxes of sets not picked are hidden and not sent. A coding run has the
  // workspace's tools whether or not that set is ticked. The free field is for the sets whose
  // tools the server cannot list before they run (an MCP server's).
  buildTools(box, approveBox) {
    box.replaceChildren();
    approveBox.replaceChildren();
    this.approveBoxes = new Map(); // tool name -> {label, input, sets}
    for (const tool of this.options.tools) {
      const input = el("input", { type: "checkbox", name: "tools", value: tool.name,
        checked: tool.name === "calculators" });
      input.onchange = () => this.showApprovals();
      const name = el("span", { class: "toolset-name", title: tool.name });
      if (tool.label) name.textContent = tool.label;
      else if (t(`toolset.${tool.name}`) !== `toolset.${tool.name}`) label(name, `toolset.${tool.name}`);
      else name.textContent = tool.name; // an MCP server: its own spec string
      box.append(el("label", { class: "check" }, input, " ", name));
      for (const toolName of tool.tools || []) {
        if (!this.approveBoxes.has(toolName)) {
          const a = el("input", { type: "checkbox", name: "approve", value: toolName });
          const l = el("label", { class: "check approve-check" }, a, ` ${toolName}`);
          approveBox.append(l);
          this.approveBoxes.set(toolName, { label: l, input: a, sets: new Set() });
        }
        this.approveBoxes.get(toolName).sets.add(tool.name);
      }
    }
    this.agent.addEventListener("change", () => this.showApprovals());
    this.showApprovals();
  }

  pickedSets(withAgent = true) {
    const sets = new Set([...this.form.querySelectorAll('input[name="tools"]:checked')].map((i) => i.value));
    if (withAgent && this.agent.value === "code") sets.add("workspace");
    return sets;
  }

  showApprovals() {
    const sets = this.pickedSets();
    for (const { label: l, input, sets: from } of this.approveBoxes.values()) {
      l.hidden = ![...from].some((s) => sets.has(s));
      if (l.hidden) input.checked = false; // what is not shown is not sent
    }
    const unlisted = this.options.tools.some((x) => sets.has(x.name) && !x.tools);
    this.approveText.hidden = !unlisted;
    if (!unlisted) this.approveText.value = "";
  }

  // The request body, or an Error whose message is what to fix.
  read({ withAgent = true } = {}) {
    const task = this.task.value.trim();
    if (!task) throw new Error(t("error.task_empty"));
    const turns = Number(this.maxTurns.value);
    if (!Number.isInteger(turns) || turns < 1 || turns > 100) throw new Error(t("error.max_turns"));
    const model = { name: this.model.value };
    if (this.needs().length) {
      model.base_url = this.baseUrl.value.trim();
      model.api_key = this.apiKey.value;
      model.model = this.modelId.value.trim();
      if (!model.base_url || !model.api_key || !model.model) throw new Error(t("error.openai_fields"));
    }
    const checked = (name) => [...this.form.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
    const typed = this.approveText.hidden ? "" : this.approveText.value;
    const sets = this.pickedSets(withAgent); // compare runs no coding agent: not its tools
    const boxed = checked("approve").filter((n) => [...this.approveBoxes.get(n).sets].some((x) => sets.has(x)));
    const approve = [...boxed,
      ...typed.split(/[,，\s]+/).map((s) => s.trim()).filter(Boolean)];
    const body = { model, tools: checked("tools"), task, max_turns: turns, approve: [...new Set(approve)] };
    if (withAgent) body.agent = this.agent.value;
    if (withAgent && this.form.querySelector('[name="checklist"]').checked) body.checklist = true;
    const session = this.session.value.trim();
    if (session && withAgent) body.session = session;
    const schema = this.schema.value.trim();
    if (schema) {
      let parsed;
      try { parsed = JSON.parse(schema); } catch { parsed = null; }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error(t("error.output_schema"));
      body.output_schema = parsed;
    }
    return body;
  }

  // Called once the request is on its way: the key is the server's now, not the page's.
  sent() {
    this.apiKey.value = "";
  }

  summary(body) {
    return `${body.agent || ""} · ${body.model.name === "openai" ? body.model.model : body.model.name}`;
  }
}
