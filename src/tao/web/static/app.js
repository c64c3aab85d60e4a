// The workbench page: wires the form, the run view, compare and history together. Watching a
// run live and replaying a past one draw through the same RunView; only where the events come
// from differs (RunStream or Replay).

import { api, runPath } from "./api.js";
import { Compare } from "./compare.js";
import { RunForm } from "./form.js";
import { fetchReplay, listRuns, Replay } from "./history.js";
import { apply, initialLang, label, loadStrings, setLang, status as showStatus, t } from "./i18n.js";
import { RunView } from "./render.js";
import { RunStream } from "./stream.js";

const $ = (sel) => document.querySelector(sel);
const current = { stream: null, replay: null, view: null, runId: null, form: null };

function showError(e) {
  const box = $("#error");
  if (!e) { box.hidden = true; return; }
  box.textContent = t("error.prefix") + (e.message || String(e));
  box.hidden = false;
}

function tab(name) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === name);
  for (const page of document.querySelectorAll(".tab-page")) page.hidden = page.id !== `tab-${name}`;
  if (name === "history") refreshHistory();
}

function stopCurrent() {
  current.stream?.close();
  current.replay?.stop();
  current.stream = current.replay = null;
  $("#reconnect-note").hidden = true;
}

function newView(runId, meta, interactive) {
  stopCurrent();
  current.runId = runId;
  $("#run-title").textContent = meta.title || `${meta.agent || ""} · ${meta.model || ""} — ${meta.task || ""}`;
  const box = $("#run");
  box.replaceChildren();
  const view = new RunView(box, { runId, agent: meta.agent, interactive, onError: showError });
  current.view = view;
  return view;
}

function setStatus(status) {
  const s = $("#run-status");
  s.dataset.status = status;
  if (status === "running") label(s, "run.live");
  else showStatus(s, status);
  $("#cancel-button").hidden = status !== "running";
  // a run that ended in an error (the model's process died), was cancelled or cut off goes on
  // from its journal: the same run, what it had done served again, the rest live
  $("#resume-button").hidden = !["error", "cancelled", "interrupted"].includes(status);
}

export function watch(runId, meta) {
  const view = newView(runId, meta, true);
  window.history.replaceState(null, "", `#run=${encodeURIComponent(runId)}`); // a reload comes back
  setStatus("running");
  tab("run");
  current.stream = new RunStream(runId, {
    onEvent: (ev) => {
      view.handle(ev);
      if (ev.type === "run_finished") setStatus(ev.result?.status || "done");
    },
    onEnd: (end) => {
      view.finish(end.status || view.result?.status);
      current.form?.listSession(); // the session's list now holds this run
      setStatus(end.status || view.result?.status || "done");
      $("#reconnect-note").hidden = true;
    },
    onState: (state) => { $("#reconnect-note").hidden = state !== "reconnecting"; },
  });
}

async function replay(run, { all = false } = {}) {
  const events = await fetchReplay(run.run_id);
  const view = newView(run.run_id, run, false);
  window.history.replaceState(null, "", `#run=${encodeURIComponent(run.run_id)}`);
  setStatus(run.status || "");
  tab("run");
  current.replay = new Replay($("#replay-bar"), view, events);
  if (all) current.replay.all();
}

async function refreshHistory() {
  try {
    await listRuns($("#history"), async (run) => {
      try { if (run.live) watch(run.run_id, run); else await replay(run); } catch (e) { showError(e); }
    });
  } catch (e) { showError(e); }
}

// After a reload (#run=ID): the run watched before, live again from its first event, or replayed.
async function reopen() {
  const id = new URLSearchParams(location.hash.slice(1)).get("run");
  if (!id) return;
  try {
    const { runs } = await api("/api/runs");
    const run = runs.find((r) => r.run_id === id);
    if (!run) return;
    if (run.live) watch(run.run_id, run);
    else await replay(run, { all: true });
  } catch (e) { showError(e); }
}

async function main() {
  await loadStrings();
  let options;
  try {
    options = await api("/api/options");
  } catch (e) {
    setLang(initialLang("zh"));
    showError(e);
    return;
  }
  const code = initialLang(options.lang);
  $("#lang").value = code;
  setLang(code);
  $("#lang").onchange = (e) => setLang(e.target.value);
  const form = new RunForm($("#run-form"), options);
  current.form = form;
  form.onOpenRun = async (run) => {
    try { if (run.live) watch(run.run_id, run); else await replay(run); } catch (e) { showError(e); }
  };
  const compare = new Compare($("#compare"), showError);
  for (const b of document.querySelectorAll(".tab")) b.onclick = () => tab(b.dataset.tab);

  $("#run-form").onsubmit = async (e) => {
    e.preventDefault();
    showError(null);
    let body;
    try { body = form.read(); } catch (err) { showError(err); return; }
    const pending = api("/api/runs", { method: "POST", body });
    form.sent();
    try {
      const { run_id: runId } = await pending;
      watch(runId, { agent: body.agent, title: `${form.summary(body)} — ${body.task}` });
    } catch (err) { showError(err); }
  };
  $("#compare-button").onclick = async () => {
    showError(null);
    let body;
    try { body = form.read({ withAgent: false }); } catch (err) { showError(err); return; }
    const pending = compare.start(body);
    form.sent();
    tab("compare");
    try { await pending; } catch (err) { showError(err); }
  };
  $("#cancel-button").onclick = async () => {
    if (!current.runId) return;
    try { await api(runPath(current.runId, "/cancel"), { method: "POST" }); } catch (err) { showError(err); }
  };
  $("#resume-button").onclick = async () => {
    if (!current.runId) return;
    showError(null);
    const runId = current.runId, title = $("#run-title").textContent;
    let key = null; // an endpoint's key is never journaled: the form's, if it has one
    try { key = form.read().model?.api_key || null; } catch { key = null; }
    try {
      await api(runPath(runId, "/resume"), { method: "POST", body: key ? { api_key: key } : {} });
      watch(runId, { agent: current.view?.agent, title });
    } catch (err) { showError(err); }
  };
  $("#history-refresh").onclick = refreshHistory;
  await reopen();
  apply();
  document.body.dataset.ready = "1"; // the page is wired: tests and users may start
}

main().catch(showError);
