// The page's words in Chinese and English. The strings are data (i18n.json), so a translation is
// an edit of one file; elements carry their key (data-i18n), so switching the language re-labels
// what is already on the page - a run being watched included - without rebuilding it.

const state = { lang: "zh", chosen: false, strings: { zh: {}, en: {} } };
const listeners = [];

export async function loadStrings() {
  const r = await fetch("/static/i18n.json");
  state.strings = await r.json();
}

export function lang() {
  return state.lang;
}

export function t(key, vars = {}) {
  const table = state.strings[state.lang] || {};
  const text = table[key] ?? state.strings.en?.[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
}

// An element whose text is the string `key` (with `vars`), and stays so across switches.
export function label(el, key, vars) {
  el.dataset.i18n = key;
  if (vars) el.dataset.i18nVars = JSON.stringify(vars);
  else delete el.dataset.i18nVars;
  el.textContent = t(key, vars);
  return el;
}

// A run's status ("done", "max_turns", ...) in words, or as it is when there are none for it.
export function status(el, value) {
  const key = `status.${value}`;
  if (t(key) !== key) return label(el, key);
  delete el.dataset.i18n;
  el.textContent = value ?? "";
  return el;
}

export function apply(root = document) {
  for (const el of root.querySelectorAll("[data-i18n]")) {
    const vars = el.dataset.i18nVars ? JSON.parse(el.dataset.i18nVars) : {};
    el.textContent = t(el.dataset.i18n, vars);
  }
  for (const el of root.querySelectorAll("[data-i18n-placeholder]")) {
    el.placeholder = t(el.dataset.i18nPlaceholder);
  }
  for (const el of root.querySelectorAll("[data-i18n-title]")) {
    el.title = t(el.dataset.i18nTitle);
  }
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  document.title = t("title");
}

// The language set on the page, or null before it is (the browser's own Accept-Language then
// goes to the server: that is how the page learns the default from /api/options).
export function chosenLang() {
  return state.chosen ? state.lang : null;
}

export function setLang(code) {
  state.lang = code === "en" ? "en" : "zh";
  state.chosen = true;
  try { localStorage.setItem("tao.lang", state.lang); } catch { /* private mode: not kept */ }
  apply();
  for (const fn of listeners) fn(state.lang);
}

// The language a visitor chose before, else the server's reading of Accept-Language.
export function initialLang(serverLang) {
  let saved = null;
  try { saved = localStorage.getItem("tao.lang"); } catch { /* none */ }
  return saved || serverLang || "zh";
}

export function onLangChange(fn) {
  listeners.push(fn);
}
