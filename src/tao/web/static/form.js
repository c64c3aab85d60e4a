// The run form, built from /api/options: agent, model (an OpenAI-compatible endpoint shows its
// base URL / key / model fields), tool sets, the tools that need approval, task and max turns.
// read() checks what the user typed before anything is sent and says what to fix; the key field
// is emptied as soon as the request has gone, so the page never holds the key longer than that.

import { el } from "./cards.js";
import { label, t } from "./i18n.js";

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
    this.agent.replaceChildren(...options.agents.map((a) => el("option", { value: a, text: a })));
    this.model.replaceChildren(...options.models.map((m) =>
      el("option", { value: m.name, text: m.label || m.name })));
    this.model.onchange = () => this.showFields();
    this.showFields();
    this.buildTools(form.querySelector(".tools"), form.querySelector(".approve-boxes"));
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
