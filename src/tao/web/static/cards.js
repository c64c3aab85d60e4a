// The parts of a run view that talk back or sum up: the approval card (Approve / Reject with a
// reason / Edit the JSON arguments, answered through the approvals endpoint), the statistics of
// run_finished, and the files a coding run wrote.

import { api, apiText, runPath } from "./api.js";
import { label, status as showStatus, t } from "./i18n.js";

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k === "i18n") label(e, v);
    else if (k.startsWith("data-") || k.startsWith("aria-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

export const json = (v) => JSON.stringify(v, null, 2);

// A card for one gated call. `interactive` is false when replaying: the buttons are then absent,
// since nobody is waiting for them.
export function approvalCard(runId, ev, interactive, onError) {
  const card = el("div", { class: "approval-card", "data-call-id": ev.call_id, "data-tool": ev.tool });
  card.append(el("div", { class: "approval-title", i18n: "approval.title" }),
    el("div", { class: "approval-tool", text: ev.tool }),
    el("pre", { class: "approval-args", text: json(ev.arguments) }),
    ev.reason ? el("div", { class: "approval-reason", text: ev.reason }) : null);
  if (!interactive) return card;
  const reason = el("input", { class: "reject-reason", type: "text" });
  reason.dataset.i18nPlaceholder = "approval.reason";
  reason.placeholder = t("approval.reason");
  const editor = el("textarea", { class: "edit-args", rows: 4, hidden: true, spellcheck: false });
  editor.value = json(ev.arguments);
  const sendEdit = el("button", { type: "button", class: "send-edit", hidden: true, i18n: "approval.send_edit" });
  const problem = el("div", { class: "approval-error", hidden: true });
  const approve = el("button", { type: "button", class: "approve", i18n: "approval.approve" });
  const reject = el("button", { type: "button", class: "reject", i18n: "approval.reject" });
  const edit = el("button", { type: "button", class: "edit", i18n: "approval.edit" });
  const buttons = [approve, reject, edit, sendEdit];
  const answer = async (body) => {
    buttons.forEach((b) => { b.disabled = true; });
    problem.hidden = true;
    try {
      await api(runPath(runId, "/approvals"), { method: "POST", body: { call_id: ev.call_id, ...body } });
      card.classList.add("answered");
    } catch (e) {
      buttons.forEach((b) => { b.disabled = false; });
      problem.hidden = false;
      problem.textContent = e.message;
      onError?.(e);
    }
  };
  approve.onclick = () => answer({ verdict: "approve" });
  reject.onclick = () => answer({ verdict: "reject", reason: reason.value.trim() });
  edit.onclick = () => { editor.hidden = false; sendEdit.hidden = false; editor.focus(); };
  sendEdit.onclick = () => {
    let args;
    try {
      args = JSON.parse(editor.value);
      if (!args || typeof args !== "object" || Array.isArray(args)) throw new Error("{ ... }");
    } catch (e) { // the user's typo: say so here, send nothing, keep what they typed
      problem.hidden = false;
      label(problem, "approval.bad_json", { error: e.message });
      return;
    }
    answer({ verdict: "edit", arguments: args });
  };
  card.append(el("div", { class: "approval-buttons" }, approve, reject, reason, edit),
    editor, sendEdit, problem);
  return card;
}

export function markDecided(card, ev) {
  card.classList.add("decided", ev.verdict);
  card.dataset.verdict = ev.verdict;
  for (const b of card.querySelectorAll("button, input, textarea")) b.disabled = true;
  const note = el("div", { class: "approval-verdict" });
  note.dataset.i18n = "approval.decided";
  note.dataset.i18nVars = JSON.stringify({ verdict: t(`verdict.${ev.verdict}`) });
  note.textContent = t("approval.decided", { verdict: t(`verdict.${ev.verdict}`) });
  card.append(note);
}

export function stats(container, result) {
  const u = result.usage || {};
  const rows = [
    ["stats.status", result.status, "status"],
    ["stats.turns", result.turns, "turns"],
    ["stats.tool_calls", result.tool_calls, "tool_calls"],
    ["stats.tokens", `${u.estimated ? "≈" : ""}${u.total_tokens ?? 0} (${u.prompt_tokens ?? 0}+${u.completion_tokens ?? 0})`, "tokens"],
    ["stats.seconds", Number(result.duration_s || 0).toFixed(2), "seconds"],
  ];
  const dl = el("dl", { class: "stats-list", "data-kind": "stats" });
  for (const [key, value, name] of rows) {
    const dd = el("dd", { "data-stat": name, text: String(value) });
    if (name === "status") showStatus(dd, value);
    dl.append(el("dt", { i18n: key }), dd);
  }
  container.replaceChildren(el("h3", { i18n: "stats.title" }), dl);
  container.hidden = false;
}

// The coding run's workspace: a list of files, and the one clicked shown as text.
export async function files(container, runId) {
  let listing;
  try { listing = await api(runPath(runId, "/files")); } catch { return; } // not a coding run
  const list = el("ul", { class: "file-list" });
  const viewer = el("pre", { class: "file-view", hidden: true });
  for (const f of listing.files || []) {
    const a = el("a", { href: "#", class: "file", text: `${f.path} (${f.size} B)`, "data-path": f.path });
    a.onclick = async (e) => {
      e.preventDefault();
      const path = f.path.split("/").map(encodeURIComponent).join("/");
      try {
        viewer.textContent = await apiText(runPath(runId, `/files/${path}`));
      } catch (err) { viewer.textContent = err.message; }
      viewer.hidden = false;
      viewer.dataset.path = f.path;
    };
    list.append(el("li", {}, a));
  }
  if (!list.children.length) list.append(el("li", { class: "empty", i18n: "files.none" }));
  container.replaceChildren(el("h3", { i18n: "files.title" }), list, viewer);
  container.hidden = false;
}
