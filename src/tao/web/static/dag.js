// The plan's DAG as SVG: one node per step (by its id), an edge for every dependency - the
// step's depends_on and each $stepN its arguments or instruction name. Step events move a node
// through pending -> running -> done (or retrying / failed / skipped); steps whose dependencies
// are met run at once, and then several nodes are "running" together, which is the point of
// drawing it. A re-plan adds its steps to the same drawing: the finished ones keep their state.

import { t, label } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 190, H = 54, GAP_X = 60, GAP_Y = 18, PAD = 12;
const STATES = ["pending", "running", "done", "retrying", "failed", "skipped"];

function svg(tag, attrs = {}, parent = null) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

// `text` cut to about `width` narrow characters (a CJK character counts two), so it stays
// inside its node; the whole text is in the node's tooltip.
function fit(text, width) {
  let used = 0;
  for (let i = 0; i < text.length; i++) {
    used += text.charCodeAt(i) > 0x2e80 ? 2 : 1;
    if (used > width) return text.slice(0, Math.max(0, i - 1)) + "…";
  }
  return text;
}

// Every step id a step depends on: its depends_on and the $stepN references in what it runs.
export function dependencies(step) {
  const deps = new Set((step.depends_on || []).map(String));
  const text = JSON.stringify([step.args ?? {}, step.instruction ?? ""]);
  for (const m of text.matchAll(/\$(step\d+)/g)) deps.add(m[1]);
  deps.delete(step.id);
  return [...deps];
}

export class Dag {
  constructor(container) {
    this.container = container;
    this.steps = new Map();   // id -> step dict, in the order first seen
    this.state = new Map();   // id -> state
    this.info = new Map();    // id -> text for the node's tooltip (result, error)
    this.history = new Map(); // id -> every state it went through, in order
    this.maxRunning = 0;
    this.heading = label(document.createElement("h3"), "dag.title");
    this.counter = document.createElement("div");
    this.counter.className = "dag-running";
    this.root = svg("svg", { class: "dag", role: "img" });
    container.replaceChildren(this.heading, this.counter, this.root);
    container.hidden = true;
  }

  setPlan(steps) {
    for (const s of steps) {
      this.steps.set(s.id, s);
      if (!this.state.has(s.id)) {
        this.state.set(s.id, "pending");
        this.history.set(s.id, ["pending"]);
      }
    }
    this.container.hidden = false;
    this.draw();
  }

  mark(id, state, info) {
    if (!STATES.includes(state)) return;
    if (!this.steps.has(id)) this.steps.set(id, { id, description: "", depends_on: [] });
    this.state.set(id, state);
    const past = this.history.get(id) || [];
    if (past[past.length - 1] !== state) past.push(state);
    this.history.set(id, past);
    if (info !== undefined) this.info.set(id, info);
    this.draw();
  }

  running() {
    return [...this.state.values()].filter((s) => s === "running" || s === "retrying").length;
  }

  // Columns by depth (longest path from a root), rows in the order the plan lists the steps.
  layout() {
    const depth = new Map();
    const visit = (id, seen = new Set()) => {
      if (depth.has(id)) return depth.get(id);
      if (seen.has(id)) return 0; // a cycle the planner wrote: draw it rather than hang
      seen.add(id);
      const step = this.steps.get(id);
      const deps = step ? dependencies(step).filter((d) => this.steps.has(d)) : [];
      const d = deps.length ? 1 + Math.max(...deps.map((x) => visit(x, seen))) : 0;
      depth.set(id, d);
      return d;
    };
    const rows = [];
    const pos = new Map();
    for (const id of this.steps.keys()) {
      const d = visit(id);
      rows[d] = (rows[d] || 0) + 1;
      pos.set(id, { x: PAD + d * (W + GAP_X), y: PAD + (rows[d] - 1) * (H + GAP_Y) });
    }
    const width = PAD * 2 + Math.max(1, rows.length) * (W + GAP_X) - GAP_X;
    const height = PAD * 2 + Math.max(1, ...rows.filter(Boolean)) * (H + GAP_Y) - GAP_Y;
    return { pos, width, height };
  }

  draw() {
    const { pos, width, height } = this.layout();
    const root = this.root;
    root.replaceChildren();
    root.setAttribute("viewBox", `0 0 ${width} ${height}`);
    root.setAttribute("width", width);
    root.setAttribute("height", height);
    const defs = svg("defs", {}, root);
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }, marker);
    for (const [id, step] of this.steps) {
      const to = pos.get(id);
      for (const dep of dependencies(step)) {
        const from = pos.get(dep);
        if (!from) continue;
        const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
        const mid = (x1 + x2) / 2;
        svg("path", { class: `edge ${this.state.get(dep)}`, "data-from": dep, "data-to": id,
          d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`,
          "marker-end": "url(#arrow)" }, root);
      }
    }
    for (const [id, step] of this.steps) {
      const { x, y } = pos.get(id);
      const state = this.state.get(id) || "pending";
      const g = svg("g", { class: `node ${state}`, "data-step": id, "data-state": state,
        "data-history": (this.history.get(id) || [state]).join(" "),
        transform: `translate(${x},${y})` }, root);
      svg("rect", { width: W, height: H, rx: 8 }, g);
      const head = svg("text", { x: 10, y: 20, class: "node-id" }, g);
      head.textContent = fit(`${id}${step.tool ? " · " + step.tool : ""}`, 28);
      const badge = svg("text", { x: W - 10, y: 42, class: "node-state", "text-anchor": "end" }, g);
      badge.textContent = t(`state.${state}`);
      const desc = svg("text", { x: 10, y: 42, class: "node-desc" }, g);
      const d = step.description || step.instruction || "";
      desc.textContent = fit(d, 20);
      const title = svg("title", {}, g);
      title.textContent = [d, this.info.get(id)].filter(Boolean).join("\n→ ");
    }
    const n = this.running();
    this.maxRunning = Math.max(this.maxRunning, n);
    root.dataset.running = n;
    root.dataset.maxRunning = this.maxRunning;
    label(this.counter, "dag.running", { n });
  }
}
