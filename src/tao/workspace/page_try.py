"""``try_page``: a web page of the workspace used the way the task's user would use it.

The page check (``page``) only opens a page: a to-do list whose Remove button throws, or a
converter that shows nothing, opens without an error. So the coder can also click, type and
press keys, and read what the page then shows - the interaction check a person makes before
calling a page done.

No browser driver is needed: the steps run inside the page. The workspace is copied into a
temporary folder, a small script that performs the steps after ``load`` is added to the copy
of the page, and the same confined Chromium as the page check opens it (a fresh profile, every
request sent to a dead proxy, a time limit; ``file://`` pages cannot read other files). What
each step left on the page, and what a script threw during it, comes back in the ``<pre>``
the script writes, which ``--dump-dom`` prints.

Steps, split by ``;`` or one a line (one line in brackets is what a small model writes
without pasting a file in): ``click TEXT`` (the button, link
or element whose text is TEXT), ``type N TEXT`` (into the N-th visible input box, from 1),
``press KEY`` (``Enter``, ``ArrowUp``, ``a``: to the focused element, else the document) and
``wait MS``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import page as page_check

MAX_STEPS = 20
MAX_WAIT_MS = 5000
MAX_COPY_BYTES = 64 << 20
_TEXT_CHARS = 300
_MARKER = re.compile(r"^\s*(?:[-*]|\d+[.)、])\s*")
_OUT = re.compile(r'<pre id="__tao_steps__">(.*?)</pre>', re.DOTALL)

DRIVER = r"""
<script>
(() => {
  const steps = %s;
  const out = [], errors = [];
  let step = null, alerts = [];
  // a dialog would hold the page until the time runs out: what it says is noted instead
  window.alert = (m) => { alerts.push(String(m)); };
  window.confirm = (m) => { alerts.push(String(m)); return true; };
  window.prompt = (m, d) => { alerts.push(String(m)); return d === undefined ? '' : String(d); };
  window.addEventListener('error', (e) => {
    const where = (e.filename || '').split('/').pop();
    const message = e.message || String(e.error);
    errors.push({step, text: (where ? where + ':' + e.lineno + ': ' : '') +
                 (message.startsWith('Uncaught') ? message : 'Uncaught ' + message)});
  });
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const text = () => (document.body ? document.body.innerText : '').replace(/\s+/g, ' ').trim();
  const digest = (s) => { let h = 0; for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return s.length + ':' + h; };
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim().toLowerCase();
  const find = (label) => {
    const want = norm(label);
    const all = [...document.querySelectorAll('button, a, input[type=button], input[type=submit], [role=button], [onclick]')].filter(visible);
    const named = (el) => norm(el.innerText || el.value || el.getAttribute('aria-label'));
    return all.find((el) => named(el) === want) || all.find((el) => named(el).includes(want)) ||
      [...document.querySelectorAll('body *')].filter(visible).find((el) => el.children.length === 0 && norm(el.innerText) === want);
  };
  const act = (s) => {
    if (s.op === 'click') {
      const el = find(s.arg);
      if (!el) return 'no_button';
      el.click();
    } else if (s.op === 'type') {
      const el = [...document.querySelectorAll('input, textarea, [contenteditable=true]')].filter(visible)[s.n - 1];
      if (!el) return 'no_input';
      el.focus();
      if (el.isContentEditable) el.textContent = s.arg; else el.value = s.arg;
      el.dispatchEvent(new Event('input', {bubbles: true}));
      el.dispatchEvent(new Event('change', {bubbles: true}));
    } else if (s.op === 'typeeach') {  // every visible box, a different number each
      const boxes = [...document.querySelectorAll('input:not([type=button]):not([type=submit]):not([type=checkbox]):not([type=radio]), textarea')].filter(visible);
      if (!boxes.length) return 'no_input';
      boxes.slice(0, 6).forEach((el, i) => {
        el.focus();
        el.value = String([7, 3, 5, 2, 4, 6][i]);
        el.dispatchEvent(new Event('input', {bubbles: true}));
        el.dispatchEvent(new Event('change', {bubbles: true}));
      });
    } else if (s.op === 'clickeach') {  // every visible button there now, once, in page order
      const buttons = [...document.querySelectorAll('button, input[type=button], input[type=submit], [role=button]')].filter(visible).slice(0, 12);
      if (!buttons.length) return 'no_button';
      const before = digest(text());
      let changed = false;  // after any one click: a counter's +1 then its reset end where they began
      for (const el of buttons) {
        if (el.isConnected) el.click();
        changed = changed || digest(text()) !== before;
      }
      return changed ? 'changed' : 'same';
    } else if (s.op === 'press') {
      const el = document.activeElement && document.activeElement !== document.body ? document.activeElement : document;
      for (const type of ['keydown', 'keypress', 'keyup'])
        el.dispatchEvent(new KeyboardEvent(type, {key: s.arg, code: s.arg, bubbles: true, cancelable: true}));
      if (s.arg === 'Enter' && el.form) el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit();
    }
    return '';
  };
  const next = (i) => {
    if (i >= steps.length) {
      const pre = document.createElement('pre');
      pre.id = '__tao_steps__';
      pre.textContent = JSON.stringify({out, errors});
      document.documentElement.appendChild(pre);
      return;
    }
    step = i;
    let said = '';
    try { said = act(steps[i]); } catch (e) { errors.push({step: i, text: 'Uncaught ' + e, caught: true}); }
    setTimeout(() => { const t = text(); out.push({said, text: t.slice(0, %d), sum: digest(t), alerts}); alerts = []; next(i + 1); },
               steps[i].op === 'wait' ? steps[i].ms : 150);
  };
  window.addEventListener('load', () => setTimeout(() => { step = null; next(0); }, 300));
})();
</script>
"""


class StepError(ValueError):
    """A steps text the tool cannot run: ``key`` names the workspace text, ``values`` fill it."""

    def __init__(self, key: str, **values: object):
        super().__init__(key)
        self.key, self.values = key, values


def parse(text: str) -> list[dict[str, Any]]:
    """The steps of ``text``, one a line (blank lines and ``#`` comments skipped)."""
    steps: list[dict[str, Any]] = []
    for number, raw in enumerate(re.split(r"[\n;；]", text), 1):
        line = _MARKER.sub("", raw).strip()  # "1. click Add", "- click Add"
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op, rest = op.lower(), rest.strip().strip("\"'“”「」")
        if op in ("click", "点击"):
            if not rest:
                raise StepError("step_empty", line=number, step=line)
            steps.append({"op": "click", "arg": rest, "line": line})
        elif op in ("type", "输入"):
            n, _, what = rest.partition(" ")
            if not n.isdigit() or int(n) < 1 or not what.strip():  # "type 5": which box, what?
                raise StepError("step_type", line=number, step=line)
            steps.append({"op": "type", "n": int(n), "arg": what.strip().strip("\"'“”「」"),
                          "line": line})
        elif op in ("press", "按键", "按"):
            if not rest:
                raise StepError("step_empty", line=number, step=line)
            steps.append({"op": "press", "arg": rest, "line": line})
        elif op in ("wait", "等待"):
            if not rest.isdigit() or not 0 < int(rest) <= MAX_WAIT_MS:
                raise StepError("step_wait", line=number, step=line, cap=MAX_WAIT_MS)
            steps.append({"op": "wait", "ms": int(rest), "line": line})
        else:
            raise StepError("step_unknown", line=number, step=line)
        if len(steps) > MAX_STEPS:
            raise StepError("step_many", cap=MAX_STEPS)
    if not steps:
        raise StepError("step_none")
    return steps


def try_steps(root: Path, page: str, steps: list[dict[str, Any]], *, timeout: float = 60
              ) -> dict[str, Any] | None:
    """Run ``steps`` on a copy of ``root/page``: ``{"out": [{"said", "text"}...], "errors":
    [{"step", "text"}...]}``, or ``None`` without Chromium (or when it printed no result)."""
    exe = page_check.chromium()
    if exe is None:
        return None
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    if size > MAX_COPY_BYTES:
        raise StepError("step_big", size=size, cap=MAX_COPY_BYTES)
    with tempfile.TemporaryDirectory(prefix="tao-try-") as tmp:
        copy = Path(tmp) / "site"
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        target = copy / page
        source = target.read_text(encoding="utf-8", errors="replace")
        plain = [{k: v for k, v in s.items() if k != "line"} for s in steps]
        driver = DRIVER % (json.dumps(plain, ensure_ascii=False).replace("</", "<\\/"),
                           _TEXT_CHARS)
        at = source.lower().rfind("</body>")
        target.write_text(source[:at] + driver + source[at:] if at >= 0 else source + driver,
                          encoding="utf-8")
        budget = 1000 + sum(s.get("ms", 150) for s in steps) + 300
        proc = page_check.run_chromium(exe, target, copy, virtual_ms=budget, timeout=timeout)
        if proc is None or not (m := _OUT.search(proc.stdout)):
            return None
        result: dict[str, Any] = json.loads(html.unescape(m.group(1)))
        logged = page_check.uncaught(proc.stderr, copy, page)
    # the page's error events say when (which step); the log says what, with file and line
    for error, said in zip([e for e in result["errors"] if not e.get("caught")], logged):
        error["text"] = said
    return result


def worded(page: str, plan: list[dict[str, Any]], done: dict[str, Any],
           say: Callable[..., str]) -> str:
    """The observation: each step and what the page then showed, what threw during it (and
    before the first), and what to do next; ``say`` words it in the workspace's language."""
    lines = [say("try_header", page=page)]
    lines += [say("try_error", error=e["text"][:300])
              for e in done["errors"] if e["step"] is None][:3]
    for i, (step, out) in enumerate(zip(plan, done["out"]), 1):
        key = {"no_button": "try_no_button", "no_input": "try_no_input"}.get(out["said"],
                                                                            "try_step")
        lines.append(say(key, n=i, step=step["line"], shown=out["text"] or say("try_blank")))
        if out.get("alerts"):
            lines.append(say("try_alert", said=" | ".join(out["alerts"])[:200]))
        lines += [say("try_error", error=e["text"][:300])
                  for e in done["errors"] if e["step"] == i - 1][:3]
    lines.append(say("try_errors" if done["errors"] else "try_ok"))
    return "\n".join(lines)
