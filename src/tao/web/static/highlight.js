// A small Python highlighter for CodeAct's code blocks: keywords, builtins, strings, comments,
// numbers and the names a def/class introduces. One left-to-right scan with a sticky regex, so a
// '#' inside a string stays in the string; everything is escaped before it reaches innerHTML.

const KEYWORDS = new Set(("False None True and as assert async await break class continue def del " +
  "elif else except finally for from global if import in is lambda nonlocal not or pass raise " +
  "return try while with yield match case").split(" "));
const BUILTINS = new Set(("print len range sum min max abs round int float str list dict set tuple " +
  "sorted enumerate zip map filter open isinstance type any all reversed input").split(" "));

const TOKEN = new RegExp([
  /(#[^\n]*)/.source,                                                   // 1 comment
  /((?:[rRbBuUfF]{0,2})(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))/.source, // 2 string
  /(\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?j?\b)/.source,                 // 3 number
  /([A-Za-z_][A-Za-z0-9_]*)/.source,                                    // 4 name
  /(\s+|[^\sA-Za-z0-9_#'"]+|.)/.source,                                 // 5 anything else
].join("|"), "y");

export function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function highlightPython(code) {
  let out = "";
  let prev = "";
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < code.length) {
    const m = TOKEN.exec(code);
    if (!m) break;
    const [text, comment, string, number, name] = m;
    const e = escapeHtml(text);
    if (comment) out += `<span class="tok-comment">${e}</span>`;
    else if (string) out += `<span class="tok-string">${e}</span>`;
    else if (number) out += `<span class="tok-number">${e}</span>`;
    else if (name && KEYWORDS.has(name)) out += `<span class="tok-keyword">${e}</span>`;
    else if (name && (prev === "def" || prev === "class")) out += `<span class="tok-def">${e}</span>`;
    else if (name && BUILTINS.has(name)) out += `<span class="tok-builtin">${e}</span>`;
    else out += e;
    if (name || (text.trim() && !name)) prev = name || text.trim();
  }
  return out;
}
