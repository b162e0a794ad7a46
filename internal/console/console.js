// The carmy console: the tools, a form per tool, the approvals, the
// caller's tasks and the recent executions, over the server's own HTTP
// API. Plain script, no framework, nothing fetched from elsewhere.
'use strict';

const state = {
  session: null,
  focus: new URLSearchParams(location.search).get('approval'),
  focused: false,
  refused: '', // why the link's one-time code was refused
};

// el makes an element: attributes (text sets textContent, on* handlers),
// then children (nodes or strings).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

const $ = (id) => document.getElementById(id);

function token() { return sessionStorage.getItem('carmy.token') || ''; }

// The console secret arrives once, in the URL: as itself (?token=) in the
// URL a server printed for the person who started it, or as a one-time
// code (?code=) in a link sent to an MCP client, which the page exchanges
// for the secret on its first load, so that the link, read later from a
// process list or a log, grants nothing. The secret is kept in this
// origin's storage, which no other origin (another port of this host
// included) can read, and sent in a header: never in a cookie, which
// browsers would hand to every port of the host. localStorage, so that an
// approval link opened in a new tab is already an approver's.
const secretKey = 'carmy.console';
function consoleSecret() { return localStorage.getItem(secretKey) || ''; }
const arrived = (function takeSecret() {
  const q = new URLSearchParams(location.search);
  const s = q.get('token');
  const code = q.get('code');
  if (s === null && code === null) return { code: null };
  if (s) localStorage.setItem(secretKey, s);
  q.delete('token');
  q.delete('code');
  const rest = q.toString();
  history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
  return { code };
})();

// exchange trades the link's one-time code for the console secret; a code
// used before or expired gets the server's explanation.
async function exchange() {
  if (!arrived.code) return '';
  const code = arrived.code;
  arrived.code = null;
  const { status, data } = await api('POST', '/console/exchange', JSON.stringify({ code }));
  if (status === 200 && data && data.secret) {
    localStorage.setItem(secretKey, data.secret);
    return '';
  }
  return (data && data.error && data.error.message) || ('This link cannot be used (' + status + ').');
}

// api calls the server: the token, if any, as a bearer token; the console
// secret, if any, in its header.
async function api(method, path, body) {
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (consoleSecret()) headers['X-Carmy-Console'] = consoleSecret();
  const init = { method, headers, credentials: 'same-origin' };
  if (method === 'POST') {
    headers['Content-Type'] = 'application/json';
    init.body = body === undefined ? '{}' : body;
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* not JSON */ }
  if (res.status === 401) needToken();
  return { status: res.status, data };
}

function notice(text) {
  const n = $('notice');
  n.textContent = text || '';
  n.hidden = !text;
}

// needToken asks for a bearer token. The server's 401 message is for API
// clients (which header to send); a person here needs the form instead.
function needToken() {
  $('token-form').hidden = false;
  notice(token()
    ? 'The server refused this token: enter another above. It is kept in this tab only.'
    : 'This server needs a bearer token: enter one above. It is kept in this tab only.');
}

// locked replaces the sections' "Loading…" when the session could not be
// read (status): nothing may be shown yet.
function locked(status) {
  const text = status === 401 ? 'Enter a bearer token above to see this.' : 'The console cannot load (' + status + ').';
  $('approvals').replaceChildren(el('p', { class: 'empty', text }));
  $('tools').replaceChildren(el('p', { class: 'empty', text }));
}

// Session ------------------------------------------------------------------

async function loadSession() {
  const { status, data } = await api('GET', '/console/session');
  if (status !== 200) return status;
  state.session = data;
  $('token-form').hidden = !data.authenticated;
  const who = data.principal ? data.principal : 'anonymous';
  $('who').textContent = 'Signed in as ' + who + (data.approver ? ' · may decide approvals' : ' · may not decide approvals');
  if (data.console && !data.approver && consoleSecret()) {
    // A secret of an earlier run of a server on this port.
    localStorage.removeItem(secretKey);
  }
  for (const id of ['tools-section', 'executions-section']) $(id).hidden = data.approvals_only;
  if (!data.authenticated && !data.approver) {
    notice(state.refused || whereToDecide());
  } else {
    notice('');
  }
  return 200;
}

// whereToDecide tells a person without the console secret how to decide:
// never the path of the file that holds it, which any local program could
// read this page's session for.
function whereToDecide() {
  const s = state.session;
  if (s && s.approvals_only) {
    return 'This console belongs to the person at the MCP client: open the link the client showed (each link works once), or run "carmy approvals" in a terminal to approve or deny calls.';
  }
  return 'Read-only: to approve or deny calls, open the console link with its secret that the server printed when it started, or run "carmy approvals" in a terminal.';
}

// Tools --------------------------------------------------------------------

async function loadTools() {
  const { status, data } = await api('GET', '/tools');
  const box = $('tools');
  box.replaceChildren();
  if (status !== 200) {
    box.append(el('p', { class: 'empty', text: 'The tools cannot be listed (' + status + ').' }));
    return;
  }
  if (data.length === 0) box.append(el('p', { class: 'empty', text: 'No tools.' }));
  for (const t of data) box.append(toolCard(t));
}

function toolCard(t) {
  const hints = [];
  if (t.confirmation === 'required') hints.push(['needs approval', 'warn']);
  // The list holds only what the caller may call: these it holds.
  if (t.requires) hints.push(['requires ' + t.requires.join(' '), '']);
  if (t.idempotent) hints.push(['idempotent', '']);
  if (t.parallel_safe) hints.push(['parallel-safe', '']);
  if (typeof t.timeout_ms === 'number') hints.push(['timeout ' + duration(t.timeout_ms), '']);
  const form = el('form', { class: 'call', 'data-tool': t.name, novalidate: true });
  const root = buildRoot(t.input_schema);
  const result = el('div', { class: 'result', 'aria-live': 'polite' });
  form.append(root.node, el('div', { class: 'form-errors' }),
    el('button', { type: 'submit', text: 'Call ' + t.name }));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); call(t, form, root, result); });
  return el('article', { class: 'tool', id: 'tool-' + t.name },
    el('h3', {}, el('code', { text: t.name }), ' ',
      el('span', { class: 'badge effect-' + t.effect, text: t.effect }),
      ...hints.map(([h, c]) => el('span', { class: 'hint ' + c, text: h }))),
    el('p', { class: 'desc', text: t.description || '(no description)' }),
    form, result,
    el('details', { class: 'schemas' }, el('summary', { text: 'Schemas' }),
      el('h4', { text: 'Input' }), el('pre', { text: JSON.stringify(t.input_schema, null, 2) }),
      el('h4', { text: 'Output' }), el('pre', { text: JSON.stringify(t.output_schema, null, 2) })));
}

// call calls a tool with the form's input, or with body, the input of a
// call made again once approved.
async function call(t, form, root, result, body) {
  clearErrors(form);
  result.replaceChildren();
  if (body === undefined) {
    let input;
    try {
      input = root.get();
    } catch (e) {
      showErrors(form, [{ path: e.path || '', message: e.message }]);
      return;
    }
    body = encode(input === undefined ? {} : input);
  }
  const { status, data } = await api('POST', '/tools/' + encodeURIComponent(t.name), body);
  if (status === 200) {
    result.append(el('p', { class: 'ok' }, 'Done: execution ', el('code', { text: data.execution_id }),
      data.replayed ? ' (replayed)' : ''), el('pre', { class: 'output', text: JSON.stringify(data.output, null, 2) }));
  } else {
    const e = (data && data.error) || { code: String(status), message: 'HTTP ' + status };
    const p = el('p', { class: 'fail' }, el('strong', { text: e.code }), ': ' + e.message);
    // A refusal by policy names the policies that decided it, so the
    // person can tell which rule to ask about.
    const policies = e.details && e.details.policy;
    if (Array.isArray(policies) && policies.length) p.append(el('span', { class: 'policy', text: ' (policy ' + policies.join(', ') + ')' }));
    result.append(p);
    if (e.details && e.details.approval_id) {
      await inlineApproval(e.details.approval_id, result, () => call(t, form, root, result, body));
      refresh();
    }
    if (e.fields) showErrors(form, e.fields);
  }
  refreshExecutions();
}

function clearErrors(form) {
  for (const n of form.querySelectorAll('.field-error')) n.remove();
  for (const n of form.querySelectorAll('.invalid')) n.classList.remove('invalid');
  form.querySelector('.form-errors').replaceChildren();
}

// showErrors puts each of carmy's field errors next to the field its path
// names; the others go above the button.
function showErrors(form, fields) {
  const byPath = new Map();
  for (const n of form.querySelectorAll('[data-path]')) byPath.set(n.dataset.path, n);
  for (const f of fields) {
    const at = byPath.get(f.path);
    const msg = el('div', { class: 'field-error', role: 'alert', text: (at ? '' : (f.path ? f.path + ': ' : '')) + f.message });
    if (at) {
      at.classList.add('invalid');
      at.append(msg);
    } else {
      form.querySelector('.form-errors').append(msg);
    }
  }
}

// Forms from schemas -------------------------------------------------------

const ident = /^[A-Za-z_][A-Za-z0-9_]*$/;

// join makes carmy's path of a member: items[2].sku, tags["a.b"].
function join(base, name) {
  if (!ident.test(name)) return base + '[' + JSON.stringify(name) + ']';
  return base ? base + '.' + name : name;
}

function resolve(s, root) {
  for (let i = 0; s && s.$ref && i < 32; i++) {
    const name = decodeURIComponent(s.$ref.replace(/^#\/\$defs\//, '')).replace(/~1/g, '/').replace(/~0/g, '~');
    s = root.$defs && root.$defs[name];
  }
  return s || {};
}

function types(s) {
  return Array.isArray(s.type) ? s.type : (s.type ? [s.type] : []);
}

function buildRoot(schema) {
  const s = resolve(schema, schema);
  if (s.properties && Object.keys(s.properties).length === 0) {
    return { node: el('p', { class: 'empty', text: 'This tool takes no input.' }), get: () => ({}) };
  }
  return objectFields(s, schema, '', true, 0);
}

// objectFields builds the members of an object; get returns the object, or
// undefined for an optional one left empty.
function objectFields(s, root, path, required, depth) {
  const box = el('div', { class: 'members' });
  const members = [];
  const req = new Set(s.required || []);
  for (const [name, sub] of Object.entries(s.properties || {})) {
    const f = field(sub, root, join(path, name), name, req.has(name), depth + 1);
    members.push([name, f]);
    box.append(f.node);
  }
  return {
    node: box,
    get() {
      const out = {};
      let any = false;
      for (const [name, f] of members) {
        const v = f.get();
        if (v !== undefined) { out[name] = v; any = true; }
      }
      return any || required ? out : undefined;
    },
  };
}

// blankable is the schema of a value that may also be left blank: carmy
// writes an optional value with rules (omitempty) as anyOf its empty value
// (0, "", no items) and the rules, and a nullable one as anyOf it and null.
// It returns the value's schema, with the annotations and the type (null
// included) of the whole; undefined for any other schema. A blank field
// leaves the value out.
function blankable(s, root) {
  if (!Array.isArray(s.anyOf) || s.anyOf.length !== 2 || s.oneOf || s.allOf) return undefined;
  const isNull = (x) => types(x).length === 1 && types(x)[0] === 'null';
  const isEmpty = (x) => (Array.isArray(x.enum) && x.enum.length === 1 && x.enum[0] === 0) ||
    x.maxLength === 0 || x.maxItems === 0 || x.maxProperties === 0;
  const [a, b] = s.anyOf.map((x) => resolve(x, root));
  let value, other;
  if (isNull(b) || isEmpty(b)) [value, other] = [a, b];
  else if (isNull(a) || isEmpty(a)) [value, other] = [b, a];
  else return undefined;
  const vt = types(value).filter((x) => x !== 'null');
  // A value of null or of an object is a form of its own, not a field.
  if (value.anyOf || vt.length !== 1 || (isNull(other) && (vt[0] === 'object' || vt[0] === 'array'))) return undefined;
  const merged = Object.assign({}, value);
  for (const k of ['title', 'description', 'default', 'examples']) if (s[k] !== undefined) merged[k] = s[k];
  merged.type = isNull(other) || types(s).includes('null') ? [vt[0], 'null'] : vt[0];
  merged.blankable = true;
  return merged;
}

// field builds the input of one value with its label, help and the place
// for its errors.
function field(schema, root, path, label, required, depth) {
  const s = blankable(resolve(schema, root), root) || resolve(schema, root);
  const ts = types(s);
  const nullable = ts.includes('null');
  const t = ts.filter((x) => x !== 'null')[0];
  const wrap = el('div', { class: 'field', 'data-path': path });
  const id = 'f' + Math.random().toString(36).slice(2);
  const head = el('label', { for: id }, label, required ? el('span', { class: 'req', title: 'required', text: ' *' }) : null);
  let inner;
  if (depth > 6 || !t || s.anyOf || s.oneOf || s.allOf) inner = jsonInput(id, path, required);
  else if (t === 'object' && s.properties) {
    const obj = objectFields(s, root, path, required, depth);
    inner = { node: el('fieldset', { id }, obj.node), get: obj.get };
  } else if (t === 'object') inner = jsonInput(id, path, required);
  else if (t === 'array') inner = arrayInput(s, root, path, required, depth, id);
  else if (s.enum) inner = enumInput(s, id, required);
  else if (t === 'boolean') inner = boolInput(id, required);
  else if (t === 'integer' || t === 'number') inner = numberInput(s, t, id, required);
  else inner = textInput(s, id, required);
  wrap.append(head);
  if (s.description || schema.description) wrap.append(el('small', { class: 'help', text: s.description || schema.description }));
  let isNull = null;
  if (nullable) {
    isNull = el('input', { type: 'checkbox', class: 'null' });
    isNull.addEventListener('change', () => inner.node.classList.toggle('disabled', isNull.checked));
    wrap.append(el('label', { class: 'null-label' }, isNull, ' null'));
  }
  wrap.append(inner.node);
  return {
    node: wrap,
    get() {
      if (isNull && isNull.checked) return null;
      return inner.get();
    },
  };
}

// duration writes milliseconds as Go does a time.Duration: 1h30m, 45s,
// 1.5s, 250ms.
function duration(ms) {
  if (ms < 1000) return ms + 'ms';
  let s = ms / 1000;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s = Math.round((s - m * 60) * 1000) / 1000;
  return (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + (s || !(h || m) ? s + 's' : '');
}

// DURATION_PATTERN is the pattern of a time.Duration field's schema (Go's
// syntax, as time.ParseDuration reads it): such a field is described in
// words, not by its regular expression.
const DURATION_PATTERN = "^[-+]?(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$";

// textHint is a text field's placeholder: what to type, in words.
function textHint(s) {
  if (s.pattern === DURATION_PATTERN) return 'a duration, e.g. 1h30m';
  if (s.format === 'date-time') return 'a date and time, e.g. 2026-01-02T15:04:05Z';
  if (s.format === 'date') return 'a date, e.g. 2026-01-02';
  if (s.format === 'email') return 'an email address';
  if (s.format === 'uri') return 'a URL, e.g. https://example.com/';
  if (s.format) return s.format;
  if (s.pattern) return 'text matching ' + s.pattern;
  return '';
}

function textInput(s, id, required) {
  const kind = s.format === 'date-time' ? 'datetime' : (s.format === 'email' ? 'email' : 'text');
  const input = el('input', { id, type: 'text', 'data-kind': kind, placeholder: textHint(s) });
  return { node: input, get: () => (input.value === '' && !required ? undefined : input.value) };
}

// numberInput keeps the digits as typed, so that an integer beyond 2^53
// reaches the server exact; text that is not a number goes as a string, for
// the server to name the problem at the field.
function numberInput(s, t, id, required) {
  const hint = [];
  if (s.minimum !== undefined) hint.push('≥ ' + s.minimum);
  if (s.maximum !== undefined) hint.push('≤ ' + s.maximum);
  if (s.exclusiveMinimum !== undefined) hint.push('> ' + s.exclusiveMinimum);
  if (s.exclusiveMaximum !== undefined) hint.push('< ' + s.exclusiveMaximum);
  if (s.blankable && !required) hint.push('or blank');
  const input = el('input', { id, type: 'text', inputmode: t === 'integer' ? 'numeric' : 'decimal', placeholder: t + (hint.length ? ' ' + hint.join(', ') : '') });
  return {
    node: input,
    get() {
      const v = input.value.trim();
      if (v === '') return undefined;
      return /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/.test(v) ? new RawNumber(v) : v;
    },
  };
}

// RawNumber is a number written as typed, for JSON.stringify.
class RawNumber {
  constructor(text) { this.text = text; }
  toJSON() { return '\u0000num:' + this.text; }
}

function boolInput(id, required) {
  if (required) {
    const input = el('input', { id, type: 'checkbox' });
    return { node: input, get: () => input.checked };
  }
  const sel = el('select', { id }, el('option', { value: '', text: '(unset)' }), el('option', { value: 'true', text: 'true' }), el('option', { value: 'false', text: 'false' }));
  return { node: sel, get: () => (sel.value === '' ? undefined : sel.value === 'true') };
}

function enumInput(s, id, required) {
  const sel = el('select', { id }, el('option', { value: '', text: required ? '(choose)' : '(unset)' }),
    ...s.enum.map((v) => el('option', { value: JSON.stringify(v), text: String(v) })));
  return { node: sel, get: () => (sel.value === '' ? undefined : JSON.parse(sel.value)) };
}

// arrayInput adds and removes items at the end only, so that an item's
// path, which carmy's errors name, never changes.
function arrayInput(s, root, path, required, depth, id) {
  const list = el('ol', { class: 'items', start: 0 });
  const items = [];
  const add = el('button', { type: 'button', class: 'add', text: '+ add item' });
  const drop = el('button', { type: 'button', class: 'remove', text: '− remove last' });
  add.addEventListener('click', () => {
    const f = field(s.items || {}, root, path + '[' + items.length + ']', '[' + items.length + ']', true, depth + 1);
    items.push(f);
    list.append(el('li', {}, f.node));
  });
  drop.addEventListener('click', () => {
    if (items.length === 0) return;
    items.pop();
    list.lastChild.remove();
  });
  return {
    node: el('div', { class: 'array', id }, list, add, ' ', drop),
    get() {
      if (items.length === 0 && !required) return undefined;
      return items.map((f) => { const v = f.get(); return v === undefined ? null : v; });
    },
  };
}

function jsonInput(id, path, required) {
  const area = el('textarea', { id, rows: 3, placeholder: 'JSON' });
  return {
    node: area,
    get() {
      if (area.value.trim() === '') return undefined;
      try {
        return JSON.parse(area.value);
      } catch (e) {
        const err = new Error('is not valid JSON: ' + e.message);
        err.path = path;
        throw err;
      }
    },
  };
}

// encode writes an input as JSON, numbers as typed.
function encode(v) {
  return JSON.stringify(v).replace(/"\\u0000num:([^"]*)"/g, '$1');
}

// Approvals ------------------------------------------------------------------

function age(iso) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  return Math.floor(s / 3600) + ' h ago';
}

// texts keeps the text of the approvals shown, by id: an approval's input
// never changes, and the list carries none, so each is fetched once.
const texts = new Map();

// withText adds to an approval of the list the text of its input, fetched
// with the approval itself.
async function withText(a) {
  if (!texts.has(a.id)) {
    const { status, data } = await api('GET', '/approvals/' + encodeURIComponent(a.id));
    if (status !== 200) return { ...a, text: '(the input cannot be shown: HTTP ' + status + ')' };
    texts.set(a.id, data.text);
  }
  return { ...a, text: texts.get(a.id) };
}

async function loadApprovals() {
  const { status, data } = await api('GET', '/approvals?status=pending&limit=50');
  const box = $('approvals');
  if (status === 403 && state.session && state.session.approvals_only) {
    box.replaceChildren(el('p', { class: 'empty', text: whereToDecide() }));
    return;
  }
  if (status !== 200) {
    box.replaceChildren(el('p', { class: 'empty', text: 'Approvals cannot be listed (' + status + ').' }));
    return;
  }
  const list = data.slice();
  if (state.focus && !list.some((a) => a.id === state.focus)) {
    const one = await api('GET', '/approvals/' + encodeURIComponent(state.focus));
    if (one.status === 200) list.unshift(one.data);
  }
  for (const id of texts.keys()) if (!list.some((a) => a.id === id)) texts.delete(id);
  const shown = await Promise.all(list.map((a) => (a.text === undefined ? withText(a) : a)));
  box.replaceChildren();
  if (shown.length === 0) box.append(el('p', { class: 'empty', text: 'No call waits for approval.' }));
  for (const a of shown) box.append(approvalCard(a));
  if (state.focus && !state.focused) {
    const f = document.getElementById('approval-' + state.focus);
    if (f) { f.scrollIntoView({ block: 'center' }); state.focused = true; }
  }
}

// inlineApproval shows the approval a call waits for under the call, with
// approve and deny for those who may decide it; once approved, the call is
// made again, and runs.
async function inlineApproval(id, box, again) {
  const { status, data } = await api('GET', '/approvals/' + encodeURIComponent(id));
  if (status !== 200) return;
  box.append(approvalCard(data, async (what) => {
    const ok = await decide(id, what);
    if (ok && what === 'approve') await again();
    else if (ok) { box.replaceChildren(); await inlineApproval(id, box, again); }
  }));
}

// approvalCard shows an approval; the input is the server's text, shown as
// it is: the server made it from the canonical form, with exact numbers
// and every character that could disguise text escaped.
function approvalCard(a, onDecide) {
  const mine = a.may_decide;
  const act = onDecide || (async (what) => { await decide(a.id, what); refresh(); });
  const card = el('article', { class: 'approval status-' + a.status + (a.id === state.focus && !onDecide ? ' focus' : ''), id: (onDecide ? 'inline-approval-' : 'approval-') + a.id },
    el('h3', {}, el('code', { text: a.tool }), ' ', el('span', { class: 'badge status', text: a.status })),
    el('dl', {},
      el('dt', { text: 'Requested by' }), el('dd', { class: 'requester', text: a.principal || 'anonymous' }),
      el('dt', { text: 'Asked' }), el('dd', { text: age(a.created) + ' · expires ' + new Date(a.expires).toLocaleTimeString() }),
      a.approver ? el('dt', { text: 'Decided by' }) : null, a.approver ? el('dd', { text: a.approver }) : null,
      el('dt', { text: 'Approval' }), el('dd', {}, el('code', { text: a.id }))),
    el('h4', { text: 'Input (canonical form: exactly what will run)' }),
    el('pre', { class: 'input', text: a.text }));
  if (a.status === 'pending') {
    if (mine) {
      card.append(el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'approve', text: 'Approve', onclick: () => act('approve') }),
        el('button', { type: 'button', class: 'deny', text: 'Deny', onclick: () => act('deny') })));
    } else if (state.session && state.session.principal === a.principal && state.session.approver) {
      card.append(el('p', { class: 'empty', text: 'You made this call: another person decides it (a caller never decides its own call).' }));
    } else if (state.session && state.session.console) {
      card.append(el('p', { class: 'empty where', text: 'You may not decide this approval here. ' + whereToDecide() }));
    } else {
      card.append(el('p', { class: 'empty', text: 'You may not decide this approval: deciding needs the permission approve:' + a.tool + ' or approve:*, and a caller never decides its own call.' }));
    }
  }
  return card;
}

// decide sends a decision: JSON, from this page only.
async function decide(id, what) {
  const { status, data } = await api('POST', '/approvals/' + encodeURIComponent(id) + '/' + what);
  if (status !== 200) notice((data && data.error && data.error.message) || ('HTTP ' + status));
  return status === 200;
}

// Executions -----------------------------------------------------------------

async function refreshExecutions() {
  if (state.session && state.session.approvals_only) return;
  const { status, data } = await api('GET', '/console/executions');
  if (status !== 200) return;
  const body = $('executions').tBodies[0];
  body.replaceChildren();
  if (data.length === 0) body.append(el('tr', {}, el('td', { colspan: 6, class: 'empty', text: 'None yet.' })));
  for (const e of data) {
    body.append(el('tr', { class: e.code === 'ok' ? 'ok' : 'fail' },
      el('td', { text: new Date(e.time).toLocaleTimeString() }),
      el('td', {}, el('code', { text: e.tool })),
      el('td', { text: e.principal || 'anonymous' }),
      el('td', {}, el('span', { class: 'badge code', text: e.code })),
      el('td', { text: e.duration_ms.toFixed(1) + ' ms' }),
      el('td', { text: e.replayed ? 'yes' : '' })));
  }
}

// Tasks ------------------------------------------------------------------------

// refreshTasks lists the caller's newest tasks: calls that outlive their
// request, with their progress, and the approval a waiting one needs.
async function refreshTasks() {
  const { status, data } = await api('GET', '/tasks?limit=20');
  if (status !== 200) return;
  const body = $('tasks').tBodies[0];
  body.replaceChildren();
  if (data.tasks.length === 0) body.append(el('tr', {}, el('td', { colspan: 5, class: 'empty', text: 'None yet.' })));
  for (const t of data.tasks) {
    body.append(el('tr', { class: 'task ' + t.status, 'data-id': t.id },
      el('td', { text: new Date(t.created_at).toLocaleTimeString() }),
      el('td', {}, el('code', { text: t.tool })),
      el('td', {}, el('span', { class: 'badge code', text: t.status.replace('_', ' ') })),
      el('td', { class: 'progress', text: progressText(t.progress) }),
      el('td', { class: 'outcome' }, taskOutcome(t))));
  }
}

function progressText(p) {
  if (!p) return '';
  const done = p.total ? p.done + ' of ' + p.total : String(p.done);
  return p.message ? done + ' · ' + p.message : done;
}

function taskOutcome(t) {
  if (t.status === 'input_required' && t.approval_url) return el('a', { href: t.approval_url, text: 'waits for approval ' + t.approval_id });
  if (t.error) return el('span', { class: 'error', text: t.error.code + ': ' + t.error.message });
  if (t.status === 'completed') return el('code', { text: JSON.stringify(t.output).slice(0, 80) });
  return '';
}

// Start ------------------------------------------------------------------------

async function refresh() {
  await Promise.all([loadApprovals(), refreshTasks(), refreshExecutions()]);
}

async function start() {
  delete document.body.dataset.ready;
  if (arrived.code) state.refused = await exchange();
  const status = await loadSession();
  if (status === 200) {
    if (!state.session.approvals_only) await loadTools();
    await refresh();
    document.body.dataset.ready = 'true';
  } else {
    locked(status);
    document.body.dataset.ready = 'locked';
  }
}

$('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem('carmy.token', $('token').value.trim());
  $('token').value = '';
  start();
});
$('forget').addEventListener('click', () => { sessionStorage.removeItem('carmy.token'); location.reload(); });
setInterval(() => { if (state.session) refresh(); }, 2000);
start();
