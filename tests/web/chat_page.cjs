// chat_page.cjs: drives the chat page in headless chromium (puppeteer-core) against a
// running `tessera serve` that has one API key. Every check throws on failure; the exit
// status is the verdict. Checks, in order:
//  - GET / has the strict CSP; the page asks for the key, takes it (sessionStorage only,
//    never in a URL) and lists the model
//  - a prompt sent at temperature 0 streams an answer equal to `tessera generate` on the
//    prompt the server's plain chat template renders ("User: P\nAssistant:"), and to the
//    server's own non-streamed answer; the speed line shows TTFT and tok/s; screenshot
//  - regenerate gives the same greedy answer; edit puts the last user message back
//  - stop during a long answer (ignore_eos added to the page's request) aborts it and the
//    server counts it cancelled (/metrics), having generated far fewer than max_tokens
//  - a streamed answer and a user message full of HTML (<script>, <img onerror>) show as
//    text through the same Markdown renderer, which still makes code blocks and lists
//  - the turns of a conversation carry one X-Session-Id (nginx affinity), New chat a new one
//  - the speed line is the server's own timings (tok/s and TTFT of the usage chunk)
//  - copy buttons put a message's and a code block's text on the clipboard
//  - a chat survives a reload (localStorage, never the key) and can be deleted
//  - max_tokens is capped at the model's context_length
//  - the server panel shows running / waiting / KV blocks, the pool's size being the
//    server's tessera_kv_pool_blocks; no console errors
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const puppeteer = require(process.env.PUPPETEER_MODULE || 'puppeteer-core');

const arg = (name) => {
  const i = process.argv.indexOf('--' + name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error('missing --' + name);
  return process.argv[i + 1];
};
const base = arg('url'), key = arg('key'), outDir = arg('out');
const auth = { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' };

function check(cond, what) {
  if (!cond) throw new Error('FAILED: ' + what);
  console.log('ok - ' + what);
}
const squash = (s) => s.replace(/\s+/g, ' ').trim();

async function metric(name) {
  const text = await (await fetch(base + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + '{') || l.startsWith(name + ' '));
  if (!line) throw new Error('no metric ' + name);
  return Number(line.split(/\s+/).pop());
}

async function setField(page, sel, value) {
  await page.$eval(sel, (e) => { e.value = ''; });
  await page.type(sel, String(value));
}

async function lastAssistant(page, state) {
  await page.waitForSelector(`.msg.assistant:last-of-type[data-state="${state}"]`,
                             { timeout: 30000 });
  return page.evaluate(() => {
    const m = window.tessera.messages[window.tessera.messages.length - 1];
    return { raw: m.content, shown: m.body.innerText, speed: document.getElementById('speed').textContent };
  });
}

async function main() {
  const prompt = 'Once upon a time';
  const maxTokens = 40;
  // The reference: greedy `tessera generate` on what the plain template renders.
  const rendered = 'User: ' + prompt + '\nAssistant:';
  const gen = JSON.parse(execFileSync(arg('tessera'), ['generate', '-m', arg('model'), '-p', rendered,
    '-n', String(maxTokens), '--json'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const expected = gen[0].text.slice(rendered.length);
  check(expected.trim().length > 0, 'tessera generate gives a continuation');
  const whole = await (await fetch(base + '/v1/chat/completions', { method: 'POST', headers: auth,
    body: JSON.stringify({ messages: [{ role: 'user', content: prompt }], temperature: 0,
                           max_tokens: maxTokens }) })).json();
  check(whole.choices[0].message.content === expected,
        'the non-streamed API answer equals tessera generate on the rendered prompt');

  const browser = await puppeteer.launch({
    executablePath: arg('chromium'), headless: true, userDataDir: arg('profile'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 800 });
    const problems = [], urls = [];
    page.on('console', (m) => {
      // The key-less /v1/models at start is answered 401 on purpose.
      if (m.type() === 'error' && !/status of 401/.test(m.text())) problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(String(e)));
    const sessions = [], bodies = []; // X-Session-Id and body of each chat request
    page.on('request', (r) => {
      urls.push(r.url());
      if (r.method() === 'POST' && r.url().endsWith('/v1/chat/completions')) {
        sessions.push(r.headers()['x-session-id']);
        bodies.push(JSON.parse(r.postData()));
      }
    });
    await browser.defaultBrowserContext().overridePermissions(base,
      ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
    const clipboard = () => page.evaluate(() => navigator.clipboard.readText());

    const resp = await page.goto(base + '/', { waitUntil: 'load' });
    const csp = resp.headers()['content-security-policy'] || '';
    check(resp.status() === 200 && /script-src 'self'/.test(csp) && /default-src 'none'/.test(csp),
          'GET / is the page, with a same-origin Content-Security-Policy');
    await page.waitForFunction(() => /API key/.test(document.getElementById('notice').textContent));
    check(await page.$eval('#key-box', (e) => !e.hidden), 'the page asks for the API key');
    await page.type('#key', key);
    await page.keyboard.press('Tab'); // change event
    await page.waitForFunction(() => document.body.dataset.ready === 'true' &&
                               document.getElementById('model').options.length > 0);
    const models = await page.$$eval('#model option', (os) => os.map((o) => o.value));
    check(models.includes('stories260K'), 'the model picker lists stories260K');
    await page.select('#model', 'stories260K');

    // A greedy answer, streamed.
    await setField(page, '#temperature', 0);
    await setField(page, '#max_tokens', maxTokens);
    await page.type('#prompt', prompt);
    await page.click('#send');
    const a1 = await lastAssistant(page, 'done');
    check(a1.raw === expected, 'the streamed answer equals tessera generate (temperature 0)');
    check(squash(a1.shown) === squash(expected), 'the page shows that text');
    check(/time to first token \d+ ms/.test(a1.speed) && /[\d.]+ tok\/s/.test(a1.speed),
          'the speed line shows TTFT and tok/s: ' + a1.speed);
    const timings = await page.evaluate(() => window.tessera.last.timings);
    check(timings && a1.speed.includes(timings.tokens_per_second.toFixed(1) + ' tok/s') &&
          a1.speed.includes(Math.round(timings.time_to_first_token_ms) + ' ms'),
          'tok/s and TTFT are the server\'s timings: ' + JSON.stringify(timings));
    // KV blocks: "used / pool", the pool's size the server's tessera_kv_pool_blocks.
    const kvShown = await page.waitForFunction(() => {
      const m = /^(\d+) \/ (\d+)$/.exec(document.getElementById('m-kv').textContent);
      return m && Number(m[2]) > 0 && m[0];
    }, { timeout: 10000 }).then((h) => h.jsonValue()).catch(async () =>
      'never a pool size: ' + await page.$eval('#m-kv', (e) => e.textContent));
    const pool = await metric('tessera_kv_pool_blocks');
    check(pool > 0 && new RegExp('^\\d+ / ' + pool + '$').test(kvShown),
          `the KV figure shows the pool of ${pool} blocks (tessera_kv_pool_blocks): ${kvShown}`);

    // Copy: the message's button puts its whole text on the clipboard.
    await page.click('.msg.assistant > button.copy');
    await page.waitForSelector('.msg.assistant > button.copy[data-copied]');
    check(await clipboard() === expected, 'the copy button copies the answer');
    check(!(await page.$eval('.msg.assistant', (e) => e.innerText)).includes('Cop'),
          'the copy button\'s label is no part of the message text');
    const shot = path.join(outDir, 'chat_page.png');
    await page.screenshot({ path: shot });
    check(fs.statSync(shot).size > 1000, 'screenshot written to ' + shot);

    await page.evaluate(() => { window.__firstAnswer = window.tessera.messages[1].node; });
    await page.click('#regen');
    await page.waitForFunction(() => window.tessera.messages.length === 2 &&
                               window.tessera.messages[1].node !== window.__firstAnswer);
    const a2 = await lastAssistant(page, 'done');
    check(a2.raw === expected && (await page.$$('.msg')).length === 2,
          'regenerate replaces the answer with the same greedy text');
    check(/^[0-9a-f]{24}$/.test(sessions[0]) && sessions[1] === sessions[0],
          'the turns of one conversation carry one X-Session-Id');

    // The chat is kept in this browser: after a reload it is back, with its X-Session-Id.
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => document.body.dataset.ready === 'true' &&
                               window.tessera.messages.length === 2);
    const restored = await page.evaluate(() => ({
      msgs: window.tessera.messages.map((m) => [m.role, m.content]),
      session: window.tessera.session,
      titles: [...document.querySelectorAll('#chats li .open')].map((b) => b.textContent),
    }));
    check(restored.msgs[0][0] === 'user' && restored.msgs[0][1] === prompt &&
          restored.msgs[1][1] === expected && restored.session === sessions[0] &&
          restored.titles.length === 1 && restored.titles[0] === prompt,
          'the chat survives a reload: ' + JSON.stringify(restored.titles));
    await page.select('#model', 'stories260K');
    await setField(page, '#temperature', 0);
    await page.click('#edit');
    check(await page.$eval('#prompt', (e) => e.value) === prompt &&
          (await page.$$('.msg')).length === 0, 'edit puts the last user message back');

    // Stop a long answer: the page's request gains ignore_eos so it cannot end by itself.
    const cancelledBefore = await metric('tessera_engine_requests_cancelled_total');
    const generatedBefore = await metric('tessera_engine_generated_tokens_total');
    await page.setRequestInterception(true);
    const rewrite = (r) => {
      if (r.isInterceptResolutionHandled()) return;
      if (r.method() === 'POST' && r.url().endsWith('/v1/chat/completions')) {
        const body = JSON.parse(r.postData());
        body.ignore_eos = true;
        r.continue({ postData: JSON.stringify(body) });
      } else {
        r.continue();
      }
    };
    page.on('request', rewrite);
    const longTokens = 1900;
    await setField(page, '#max_tokens', longTokens);
    // Stop is clicked from inside the page as soon as the first text shows: a click from
    // here could come after the whole answer on a loaded machine (~700 tok/s).
    await page.evaluate(() => {
      const log = document.getElementById('log');
      const seen = new MutationObserver(() => {
        const body = log.querySelector('.msg.assistant .body');
        if (body && body.textContent.length > 0) {
          seen.disconnect();
          document.getElementById('stop').click();
        }
      });
      seen.observe(log, { childList: true, subtree: true, characterData: true });
    });
    await page.click('#send');
    await page.waitForFunction(() => {
      const m = window.tessera.messages;
      return m.length === 2 && m[1].node.dataset.state !== 'streaming';
    }, { timeout: 30000 });
    const a3 = await lastAssistant(page, 'stopped').catch(async (e) => {
      throw new Error(e.message + '; the answer ended ' + await page.$eval('#speed', (x) => x.textContent));
    });
    check(/stopped/.test(a3.speed), 'stop ends the stream: ' + a3.speed);
    let cancelled = cancelledBefore;
    for (let i = 0; i < 100 && cancelled === cancelledBefore; i++) {
      await new Promise((r) => setTimeout(r, 100));
      cancelled = await metric('tessera_engine_requests_cancelled_total');
    }
    check(cancelled === cancelledBefore + 1, 'the server cancelled the stopped request (/metrics)');
    const made = (await metric('tessera_engine_generated_tokens_total')) - generatedBefore;
    check(made < longTokens, `the server stopped generating (${made} of ${longTokens} tokens)`);
    page.off('request', rewrite);

    // max_tokens past the model's context is capped at it, and the request then leaves
    // max_tokens to the server (the room the context has left).
    const ctx = (await (await fetch(base + '/v1/models', { headers: auth })).json())
      .data.find((m) => m.id === 'stories260K').context_length;
    await setField(page, '#max_tokens', 999999);
    await page.keyboard.press('Tab');
    check(await page.$eval('#max_tokens', (e) => e.value) === String(ctx),
          `max_tokens is capped at the model's context (${ctx})`);

    // HTML in model output and in a user message stays text.
    const evil = 'Hi <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">';
    const pieces = [evil, '\n\n```html\n<script>alert(1)</script>\n```\n\n',
                    '- one **bold** <b>not bold</b>\n- two `x<y>`\n\n1. first\n2. second'];
    // The usage chunk carries the server's timings: the speed line shows them, whatever
    // the (here instant) arrival of the chunks.
    const usage = { choices: [], usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
                    timings: { time_to_first_token_ms: 7.4, generation_ms: 20, tokens_per_second: 100 } };
    const sse = pieces.map((p) => 'data: ' + JSON.stringify({ choices: [{ index: 0,
      delta: { content: p }, finish_reason: null }] }) + '\n\n').join('') +
      'data: ' + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) +
      '\n\ndata: ' + JSON.stringify(usage) + '\n\ndata: [DONE]\n\n';
    const fake = (r) => {
      if (r.isInterceptResolutionHandled()) return;
      if (r.method() === 'POST' && r.url().endsWith('/v1/chat/completions'))
        r.respond({ status: 200, contentType: 'text/event-stream', body: sse });
      else
        r.continue();
    };
    page.on('request', fake);
    await page.click('#clear');
    await page.type('#prompt', '<script>window.__pwned = 3</script><b>user</b>');
    await page.click('#send');
    const a4 = await lastAssistant(page, 'done');
    page.off('request', fake);
    check(a4.speed === 'time to first token 7 ms · 100.0 tok/s · 3 tokens · stop',
          'the speed line is the usage chunk\'s timings: ' + a4.speed);
    check(!('max_tokens' in bodies[bodies.length - 1]),
          'a max_tokens at the context is left to the server: ' + JSON.stringify(bodies[bodies.length - 1]));
    // A stream cut before [DONE] (a replica killed behind nginx) shows as an error.
    const cut = (r) => {
      if (r.isInterceptResolutionHandled()) return;
      if (r.method() === 'POST' && r.url().endsWith('/v1/chat/completions'))
        r.respond({ status: 200, contentType: 'text/event-stream', body: sse.split('data: [DONE]')[0]
                    .replace(/data: \{[^\n]*"finish_reason":"stop"[^\n]*\n\n/, '') });
      else
        r.continue();
    };
    page.on('request', cut);
    await page.type('#prompt', 'cut');
    await page.click('#send');
    const a5 = await lastAssistant(page, 'error');
    page.off('request', cut);
    await page.setRequestInterception(false);
    check(/ended before the answer did/.test(a5.shown) && a5.raw.startsWith('Hi <script>'),
          'a stream cut before [DONE] is marked as an error, its text kept');
    await page.evaluate(() => { // back to the <script> conversation for the checks below
      const ms = window.tessera.messages;
      for (const m of ms.splice(2)) m.node.remove();
    });
    const dom = await page.evaluate(() => ({
      pwned: window.__pwned,
      bad: document.querySelectorAll('#log script, #log img, #log b').length,
      user: document.querySelector('.msg.user .body').textContent,
      code: [...document.querySelectorAll('.msg.assistant pre code')].map((c) => c.textContent),
      ul: [...document.querySelectorAll('.msg.assistant ul > li')].map((l) => l.textContent),
      ol: document.querySelectorAll('.msg.assistant ol > li').length,
      strong: [...document.querySelectorAll('.msg.assistant strong')].map((s) => s.textContent),
    }));
    check(sessions.length === 5 && sessions[3] !== sessions[0] && sessions[2] === sessions[0],
          'a cleared conversation gets a new X-Session-Id');
    check(dom.pwned === undefined && dom.bad === 0, 'no script, img or b element made from text');
    check(a4.shown.includes('<script>window.__pwned = 1</script>') && a4.shown.includes('onerror='),
          'model output with <script> shows as text');
    check(dom.user === '<script>window.__pwned = 3</script><b>user</b>',
          'a user message with <script> shows as text');
    check(dom.code.length === 1 && dom.code[0] === '<script>alert(1)</script>',
          'a fenced code block keeps its HTML as text');
    check(dom.ul.length === 2 && dom.ul[0] === 'one bold <b>not bold</b>' && dom.ul[1] === 'two x<y>' &&
          dom.ol === 2 && dom.strong.includes('bold'), 'lists, bold and inline code render');
    await page.click('.msg.assistant pre > button.copy');
    await page.waitForSelector('.msg.assistant pre > button.copy[data-copied]');
    check(await clipboard() === '<script>alert(1)</script>', 'a code block\'s copy button copies its code');

    await page.screenshot({ path: path.join(outDir, 'chat_page_markdown.png') });
    const panel = await page.$eval('#server', (e) => e.innerText);
    check(/running\s+\d+/.test(panel) && /waiting\s+\d+/.test(panel) && /\d+ \/ \d+/.test(panel),
          'the server panel shows running, waiting and KV blocks');
    check(urls.length > 0 && urls.every((u) => !u.includes(key)), 'the key is never in a URL');
    const stored = await page.evaluate(() => [sessionStorage.getItem('tessera.api_key'),
                                              Object.keys(localStorage),
                                              Object.values(localStorage).join('')]);
    check(stored[0] === key && stored[1].join() === 'tessera.chats' && !stored[2].includes(key),
          'the key is in sessionStorage only; localStorage holds the chats: ' + stored[1]);

    // Delete: the chat leaves the list and the storage, and stays gone after a reload.
    const before = await page.$$eval('#chats li', (ls) => ls.map((l) => l.dataset.id));
    check(before.length >= 1, 'the chats are listed: ' + before.length);
    await page.click(`#chats li[data-id="${before[0]}"] .delete`);
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => document.body.dataset.ready === 'true');
    const after = await page.evaluate(() => ({
      listed: [...document.querySelectorAll('#chats li')].map((l) => l.dataset.id),
      kept: JSON.parse(localStorage.getItem('tessera.chats') || '[]').map((c) => c.id),
    }));
    check(!after.listed.includes(before[0]) && !after.kept.includes(before[0]) &&
          after.listed.length === before.length - 1, 'a deleted chat is gone, after a reload too');
    check(problems.length === 0, 'no console errors: ' + problems.join(' | '));
  } finally {
    await browser.close();
  }
}

main().then(() => console.log('chat page: all checks passed'), (e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
