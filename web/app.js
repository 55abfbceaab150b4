// app.js: the chat page: model picker, the conversation streamed over SSE, Markdown built
// from DOM text nodes (model text never goes through innerHTML), copy buttons, chats kept
// in localStorage (never the key), settings, the API key (sessionStorage, sent as a Bearer
// header, never in a URL), the speed line from the server's own timings and the server
// panel.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY_STORE = 'tessera.api_key';
const CHATS_STORE = 'tessera.chats';
const METRICS_EVERY_MS = 2000;
const TITLE_CHARS = 60;

// The conversation without the system prompt: {role, content, node}. Exposed for the
// browser test and the console.
// contexts: each model's context length (from /v1/models), which caps max_tokens.
const state = { messages: [], controller: null, busy: false, last: null, session: newSession(),
                contexts: {} };
window.tessera = state;

// A conversation's id, sent as X-Session-Id: behind nginx (scripts/cluster.sh) its turns
// land on one replica, whose prefix cache holds the conversation so far.
function newSession() {
  const b = crypto.getRandomValues(new Uint8Array(12)); // randomUUID needs a secure context
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

function authHeaders(extra) {
  const h = Object.assign({}, extra);
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

function notice(text, isError) {
  $('notice').textContent = text;
  $('notice').className = isError ? 'error' : '';
}

// Copies text to the clipboard (a hidden textarea where the Clipboard API is refused) and
// marks the button copied or failed.
async function copyText(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch (e) {
    const t = el('textarea', 'offscreen');
    t.value = text;
    document.body.append(t);
    t.select();
    try { ok = document.execCommand('copy'); } catch (e2) { ok = false; }
    t.remove();
  }
  button.dataset.copied = ok ? 'yes' : 'no';
  button.title = ok ? 'copied' : 'copy failed';
}

// A copy button; its label comes from style.css, so it is not part of a message's text.
function copyButton(label, text) {
  const b = el('button', 'copy');
  b.type = 'button';
  b.title = label;
  b.setAttribute('aria-label', label);
  b.addEventListener('click', () => copyText(text(), b));
  return b;
}

// ---- Markdown: fenced code, headings, lists, paragraphs; inline code, strong, em.

// Appends s to into, with `code`, **strong** and *em* as elements; all text is text nodes.
function inline(into, s) {
  const re = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*/g;
  let last = 0;
  let m;
  while ((m = re.exec(s))) {
    if (m.index > last) into.append(document.createTextNode(s.slice(last, m.index)));
    const tag = m[1] !== undefined ? 'code' : m[2] !== undefined ? 'strong' : 'em';
    const e = el(tag);
    e.textContent = m[1] ?? m[2] ?? m[3];
    into.append(e);
    last = re.lastIndex;
  }
  if (last < s.length) into.append(document.createTextNode(s.slice(last)));
}

function inlineLines(into, lines) {
  lines.forEach((line, i) => {
    if (i) into.append(el('br'));
    inline(into, line);
  });
}

// Replaces into's children with text rendered as Markdown. An unclosed code fence (the
// answer is still streaming) runs to the end.
function renderMarkdown(into, text) {
  const out = document.createDocumentFragment();
  const lines = text.split('\n');
  let para = [];
  let list = null;
  const flush = () => {
    if (para.length) {
      const p = el('p');
      inlineLines(p, para);
      out.append(p);
      para = [];
    }
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+.#-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      list = null;
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
      const pre = el('pre');
      const c = el('code');
      if (fence[2]) c.dataset.lang = fence[2];
      c.textContent = code.join('\n');
      pre.append(copyButton('copy code', () => c.textContent), c);
      out.append(pre);
      continue;
    }
    if (!line.trim()) {
      flush();
      list = null;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const number = /^\s*(\d{1,9})[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      list = null;
      const h = el('h' + Math.min(6, heading[1].length + 2));
      inline(h, heading[2]);
      out.append(h);
    } else if (bullet || number) {
      flush();
      const ordered = !!number;
      if (!list || list.ordered !== ordered) {
        list = { ordered, node: el(ordered ? 'ol' : 'ul') };
        if (ordered && number[1] !== '1') list.node.start = Number(number[1]);
        out.append(list.node);
      }
      const li = el('li');
      inline(li, ordered ? number[2] : bullet[1]);
      list.node.append(li);
    } else if (list && /^\s/.test(line)) {
      const li = list.node.lastChild; // an indented line continues the list item
      li.append(el('br'));
      inline(li, line.trim());
    } else {
      list = null;
      para.push(line);
    }
  }
  flush();
  into.replaceChildren(out);
}

// ---- the conversation

function addMessage(role, content) {
  const node = el('div', 'msg ' + role);
  const who = el('div', 'who');
  who.textContent = role;
  const body = el('div', 'body');
  const m = { role, content, node, body };
  node.append(copyButton('copy message', () => m.content), who, body);
  $('log').append(node);
  renderMarkdown(body, content);
  state.messages.push(m);
  node.scrollIntoView({ block: 'end' });
  return m;
}

function dropFrom(index) {
  for (const m of state.messages.splice(index)) m.node.remove();
}

// ---- chats kept in localStorage: [{id, title, updated, messages: [{role, content}]}],
// newest first. The id is the conversation's X-Session-Id.

function loadChats() {
  try {
    const v = JSON.parse(localStorage.getItem(CHATS_STORE) || '[]');
    return Array.isArray(v) ? v.filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages)) : [];
  } catch (e) {
    return []; // unreadable: start afresh rather than fail the page
  }
}

function storeChats(chats) {
  try {
    if (chats.length) localStorage.setItem(CHATS_STORE, JSON.stringify(chats));
    else localStorage.removeItem(CHATS_STORE);
  } catch (e) {
    notice('cannot keep the chat in this browser: ' + e.message, true);
  }
  renderChats(chats);
}

// Saves the conversation on screen (failed answers left out) as the newest chat.
function saveChat() {
  const messages = state.messages.filter((m) => !m.failed)
    .map((m) => ({ role: m.role, content: m.content }));
  const chats = loadChats().filter((c) => c.id !== state.session);
  if (messages.length) {
    const first = messages.find((m) => m.role === 'user');
    const title = (first ? first.content : messages[0].content).trim().slice(0, TITLE_CHARS);
    chats.unshift({ id: state.session, title: title || '(empty)', updated: Date.now(), messages });
  }
  storeChats(chats);
}

function openChat(id) {
  const chat = loadChats().find((c) => c.id === id);
  if (state.busy || !chat) return;
  dropFrom(0);
  state.session = chat.id;
  for (const m of chat.messages)
    if ((m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string')
      addMessage(m.role, m.content).node.dataset.state = 'done';
  $('speed').textContent = '';
  renderChats(loadChats());
  updateButtons();
}

function deleteChat(id) {
  if (state.busy && id === state.session) return;
  if (id === state.session) newChat();
  storeChats(loadChats().filter((c) => c.id !== id));
}

function newChat() {
  if (state.busy) return;
  dropFrom(0);
  state.session = newSession();
  $('speed').textContent = '';
  renderChats(loadChats());
  updateButtons();
}

function renderChats(chats) {
  const list = el('ul');
  for (const c of chats) {
    const li = el('li', c.id === state.session ? 'current' : '');
    li.dataset.id = c.id;
    const open = el('button', 'open');
    open.type = 'button';
    open.textContent = c.title;
    open.addEventListener('click', () => openChat(c.id));
    const del = el('button', 'delete');
    del.type = 'button';
    del.textContent = '×';
    del.title = 'delete this chat';
    del.setAttribute('aria-label', 'delete chat ' + c.title);
    del.addEventListener('click', () => deleteChat(c.id));
    li.append(open, del);
    list.append(li);
  }
  $('chats').replaceChildren(list);
}

function lastUserIndex() {
  for (let i = state.messages.length - 1; i >= 0; i--) if (state.messages[i].role === 'user') return i;
  return -1;
}

function updateButtons() {
  const hasUser = lastUserIndex() >= 0;
  $('send').disabled = state.busy;
  $('stop').disabled = !state.busy;
  $('regen').disabled = state.busy || !hasUser;
  $('edit').disabled = state.busy || !hasUser;
}

function numberField(id, integer) {
  const v = $(id).value.trim();
  if (v === '') return undefined;
  const n = integer ? parseInt(v, 10) : parseFloat(v);
  return Number.isFinite(n) ? n : undefined;
}

function requestBody() {
  const messages = [];
  const system = $('system').value;
  if (system.trim()) messages.push({ role: 'system', content: system });
  for (const m of state.messages) if (!m.failed) messages.push({ role: m.role, content: m.content });
  const body = { model: $('model').value || undefined, messages, stream: true,
                 stream_options: { include_usage: true } };
  const fields = { temperature: false, max_tokens: true, top_p: false };
  for (const [name, integer] of Object.entries(fields)) {
    const v = numberField(name, integer);
    if (v !== undefined) body[name] = v;
  }
  // Up to the whole context: the server then answers until the context is full.
  const ctx = state.contexts[$('model').value];
  if (ctx && body.max_tokens >= ctx) delete body.max_tokens;
  return body;
}

// Keeps the max_tokens field within the chosen model's context.
function capMaxTokens() {
  const ctx = state.contexts[$('model').value];
  const f = $('max_tokens');
  if (!ctx) {
    f.removeAttribute('max');
    return;
  }
  f.max = String(ctx);
  const v = numberField('max_tokens', true);
  if (v !== undefined && v > ctx) f.value = String(ctx);
}

// The speed line: time to first token and tok/s from the server's "timings" (its own
// clock; chunk arrival here says how the stream was buffered, not how fast it was made).
function showSpeed(s) {
  const parts = [];
  const t = s.timings;
  if (t && typeof t.time_to_first_token_ms === 'number')
    parts.push('time to first token ' + Math.round(t.time_to_first_token_ms) + ' ms');
  if (t && typeof t.tokens_per_second === 'number')
    parts.push(t.tokens_per_second.toFixed(1) + ' tok/s');
  parts.push(s.tokens + ' tokens');
  if (s.finish) parts.push(s.finish);
  $('speed').textContent = parts.join(' · ');
}

// Reads an SSE body, calling onData with each event's parsed JSON until [DONE]; false
// when the body ended without [DONE] (a proxy or the server dropped the stream).
async function readEvents(resp, onData) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n/g, '\n');
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const data = buf.slice(0, k).split('\n').filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart()).join('\n');
      buf = buf.slice(k + 2);
      if (data === '[DONE]') return true;
      if (data) onData(JSON.parse(data));
    }
  }
}

async function errorText(resp) {
  try {
    const j = await resp.json();
    if (j && j.error && j.error.message) return resp.status + ': ' + j.error.message;
  } catch (e) { /* not JSON */ }
  return 'HTTP ' + resp.status;
}

// Streams the answer to the conversation so far into a new assistant message.
async function generate() {
  const body = requestBody();
  const m = addMessage('assistant', '');
  m.node.dataset.state = 'streaming';
  const s = { tokens: 0, finish: '', timings: null };
  state.last = s;
  state.busy = true;
  state.controller = new AbortController();
  updateButtons();
  $('speed').textContent = 'waiting for the first token…';
  let frame = 0; // one repaint per animation frame, however many tokens arrive
  const paint = () => {
    frame = 0;
    renderMarkdown(m.body, m.content);
    m.node.scrollIntoView({ block: 'end' });
  };
  let error = null;
  try {
    const resp = await fetch('v1/chat/completions', {
      method: 'POST',
      headers: authHeaders({ 'Content-Type': 'application/json', 'X-Session-Id': state.session }),
      body: JSON.stringify(body), signal: state.controller.signal, cache: 'no-store',
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    const whole = await readEvents(resp, (ev) => {
      if (ev.error) throw new Error(ev.error.message || 'server error');
      const choice = ev.choices && ev.choices[0];
      const piece = choice && choice.delta && choice.delta.content;
      if (piece) {
        s.tokens++;
        m.content += piece;
        if (!frame) frame = requestAnimationFrame(paint);
      }
      if (choice && choice.finish_reason) s.finish = choice.finish_reason;
      if (ev.usage) s.tokens = ev.usage.completion_tokens;
      if (ev.timings) s.timings = ev.timings;
      showSpeed(s);
    });
    if (!whole) throw new Error('the stream ended before the answer did; regenerate to retry');
    m.node.dataset.state = 'done';
  } catch (e) {
    if (e.name === 'AbortError') {
      s.finish = 'stopped';
      m.node.dataset.state = 'stopped';
    } else {
      state.controller.abort(); // closes the stream if the error came inside it
      m.failed = !m.content; // a partial answer stays in the conversation
      m.node.dataset.state = 'error';
      error = e.message;
    }
  }
  if (frame) cancelAnimationFrame(frame);
  paint();
  if (error) {
    const p = el('p', 'error');
    p.textContent = error;
    m.body.append(p);
  }
  showSpeed(s);
  state.busy = false;
  state.controller = null;
  updateButtons();
  saveChat();
}

function send(ev) {
  ev.preventDefault();
  const text = $('prompt').value;
  if (state.busy || !text.trim()) return;
  $('prompt').value = '';
  addMessage('user', text);
  saveChat();
  generate();
}

function regenerate() {
  const i = lastUserIndex();
  if (state.busy || i < 0) return;
  dropFrom(i + 1);
  generate();
}

function editLast() {
  const i = lastUserIndex();
  if (state.busy || i < 0) return;
  $('prompt').value = state.messages[i].content;
  dropFrom(i);
  saveChat();
  updateButtons();
  $('prompt').focus();
}

// ---- models, key, server panel

async function loadModels() {
  let resp;
  try {
    resp = await fetch('v1/models', { headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    notice('cannot reach the server', true);
    return;
  }
  // The key field shows once the server asks for a key (or one is stored).
  $('key-box').hidden = resp.status !== 401 && !sessionStorage.getItem(KEY_STORE);
  $('key-box').classList.toggle('needed', resp.status === 401);
  if (resp.status === 401) {
    notice(sessionStorage.getItem(KEY_STORE) ? 'the API key was refused'
                                              : 'this server needs an API key', true);
    $('key').focus();
    return;
  }
  if (!resp.ok) {
    notice(await errorText(resp), true);
    return;
  }
  const list = await resp.json();
  const select = $('model');
  const keep = select.value;
  select.replaceChildren();
  for (const m of list.data || []) {
    if (m.context_length > 0) state.contexts[m.id] = m.context_length;
    const o = el('option');
    o.value = m.id;
    o.textContent = m.id + (m.context_length ? ' (' + m.context_length + ' ctx)' : '');
    select.append(o);
  }
  if (keep && [...select.options].some((o) => o.value === keep)) select.value = keep;
  capMaxTokens();
  notice(select.options.length ? '' : 'the server has no model', !select.options.length);
  document.body.dataset.ready = 'true';
}

// Parses Prometheus text into [{name, labels, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

let lastGenerated = null;

async function pollMetrics() {
  if (document.hidden) return;
  let resp;
  try {
    resp = await fetch('metrics', { headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    return;
  }
  if (!resp.ok) {
    $('m-running').textContent = resp.status === 401 ? 'needs a key' : 'HTTP ' + resp.status;
    return;
  }
  const model = $('model').value;
  const rows = parseMetrics(await resp.text());
  const sum = (name, more) => rows
    .filter((x) => x.name === name && (!model || x.labels.model === model) && (!more || more(x)))
    .reduce((a, x) => a + x.value, 0);
  $('m-running').textContent = sum('tessera_running_sequences');
  $('m-waiting').textContent = sum('tessera_queue_depth');
  $('m-kv').textContent = sum('tessera_kv_blocks', (x) => x.labels.state === 'used') + ' / ' +
    sum('tessera_kv_pool_blocks');
  const now = performance.now();
  const generated = sum('tessera_engine_generated_tokens_total');
  if (lastGenerated && lastGenerated.model === model) {
    const rate = (generated - lastGenerated.n) / ((now - lastGenerated.t) / 1000);
    $('m-toks').textContent = rate.toFixed(1);
  }
  lastGenerated = { model, n: generated, t: now };
}

function init() {
  $('key').value = sessionStorage.getItem(KEY_STORE) || '';
  $('key').addEventListener('change', () => {
    const v = $('key').value.trim();
    if (v) sessionStorage.setItem(KEY_STORE, v);
    else sessionStorage.removeItem(KEY_STORE);
    loadModels();
    pollMetrics();
  });
  $('composer').addEventListener('submit', send);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => state.controller && state.controller.abort());
  $('regen').addEventListener('click', regenerate);
  $('edit').addEventListener('click', editLast);
  $('clear').addEventListener('click', newChat);
  $('model').addEventListener('change', () => { lastGenerated = null; capMaxTokens(); pollMetrics(); });
  $('max_tokens').addEventListener('change', capMaxTokens);
  const chats = loadChats();
  renderChats(chats);
  if (chats.length) openChat(chats[0].id); // the newest chat, as it was left
  updateButtons();
  loadModels();
  pollMetrics();
  setInterval(pollMetrics, METRICS_EVERY_MS);
}

window.tesseraRenderMarkdown = renderMarkdown;
init();
