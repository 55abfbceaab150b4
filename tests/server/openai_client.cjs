// openai_client.cjs: drives `tessera serve` with the official OpenAI Node client.
// usage: node openai_client.cjs BASE_URL EXPECTED_COMPLETION_TEXT
// Exit status 0 when every check passes; each failure is printed.
'use strict';
const OpenAI = require(process.env.OPENAI_MODULE);

const [baseURL, expected] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'sk-test', maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': ' + detail}`);
  if (!ok) failures++;
}

async function main() {
  const models = await client.models.list();
  const model = models.data[0].id;
  check('models.list', typeof model === 'string' && model.length > 0, JSON.stringify(models.data));

  const text = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  check('completions text equals tessera generate', text.choices[0].text === expected,
        JSON.stringify(text.choices[0].text) + ' vs ' + JSON.stringify(expected));
  check('completions usage', text.usage.completion_tokens === 20 && text.usage.prompt_tokens === 5,
        JSON.stringify(text.usage));
  check('completions finish_reason', text.choices[0].finish_reason === 'length', text.choices[0].finish_reason);

  const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  const content = chat.choices[0].message.content;
  check('chat message', chat.choices[0].message.role === 'assistant' && typeof content === 'string' && content.length > 0,
        JSON.stringify(chat.choices[0]));
  check('chat object', chat.object === 'chat.completion' && chat.id.length > 0, chat.object);

  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let streamed = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) streamed += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check('streamed chat equals non-streamed', streamed === content, JSON.stringify(streamed) + ' vs ' + JSON.stringify(content));
  check('stream finish and usage', finish !== null && usage && usage.completion_tokens === chat.usage.completion_tokens,
        JSON.stringify({ finish, usage, chunks }));

  try {
    await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 7 });
    check('bad temperature rejected', false, 'no error');
  } catch (e) {
    check('bad temperature rejected', e.status === 400 && /temperature/.test(e.message), `${e.status} ${e.message}`);
  }

  // response_format json_object: '}' (token 128 of stories260K) lifted closes the object
  // at once; the client's JSON.parse takes the content. models.retrieve finds the model.
  const json = await client.chat.completions.create({
    model, messages, max_tokens: 16, response_format: { type: 'json_object' }, logit_bias: { 128: 100 } });
  let parsed = null;
  try { parsed = JSON.parse(json.choices[0].message.content); } catch (e) { parsed = null; }
  check('json_object content parses', parsed !== null && typeof parsed === 'object' &&
        json.choices[0].finish_reason === 'stop', JSON.stringify(json.choices[0]));

  // response_format json_schema: the client's parse() fills message.parsed from the
  // content (it throws when finish_reason is length); a keyword outside the subset is a
  // 400 whose param points at it.
  const schema = { type: 'object', additionalProperties: false, required: ['mood', 'n'],
                   properties: { mood: { enum: ['happy', 'sad'] }, n: { type: 'integer', minimum: 0, maximum: 99 } } };
  const structured = await client.beta.chat.completions.parse({
    model, messages, max_tokens: 64, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'mood', schema, strict: true } } });
  const p = structured.choices[0].message.parsed;
  check('json_schema parsed by the client', p !== null && typeof p === 'object' && ['happy', 'sad'].includes(p.mood) &&
        Number.isInteger(p.n) && p.n >= 0 && p.n <= 99 && Object.keys(p).length === 2 &&
        structured.choices[0].finish_reason === 'stop', JSON.stringify(structured.choices[0]));
  try {
    await client.completions.create({ model, prompt: 'A list', max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } });
    check('json_schema keyword outside the subset rejected', false, 'no error');
  } catch (e) {
    check('json_schema keyword outside the subset rejected', e.status === 400 && /uniqueItems/.test(e.message) &&
          e.param === 'response_format.json_schema.schema.uniqueItems', `${e.status} ${e.param} ${e.message}`);
  }
  const one = await client.models.retrieve(model);
  check('models.retrieve', one.id === model && one.object === 'model', JSON.stringify(one));

  await toolRound(model);
}

// ---- tools: tool_choice required and named constrain the answer to valid calls, which the
// client parses; the calls and their results go back; the final answer is text.
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Get the weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'London', 'Tokyo'] },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a time zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
      required: ['zone'], additionalProperties: false } } },
];

// Whether args (a JSON text) is an object the tool's parameters schema accepts.
function validArgs(name, args) {
  const tool = tools.find((t) => t.function.name === name);
  if (!tool) return false;
  let v;
  try { v = JSON.parse(args); } catch (e) { return false; }
  const p = tool.function.parameters;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const k of Object.keys(v)) if (!(k in p.properties) || !p.properties[k].enum.includes(v[k])) return false;
  return p.required.every((k) => k in v);
}

function validCalls(calls) {
  return Array.isArray(calls) && calls.length >= 1 && calls.every((c) =>
    c.type === 'function' && /^call_[A-Za-z0-9]{24}$/.test(c.id) && validArgs(c.function.name, c.function.arguments)) &&
    new Set(calls.map((c) => c.id)).size === calls.length;
}

// A streamed chat's message: content and tool_calls put together from their deltas.
async function streamed(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let content = null, finish = null;
  const calls = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta.content) content = (content || '') + c.delta.content;
      for (const d of c.delta.tool_calls || []) {
        if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
        calls[d.index].function.arguments += d.function.arguments || '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { content, tool_calls: calls, finish };
}

const strip = (calls) => JSON.stringify(calls.map((c) => [c.function.name, c.function.arguments]));

async function toolRound(model) {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const base = { model, messages, tools, seed: 7 }; // max_tokens: the rest of the context

  const req = await client.chat.completions.create({ ...base, tool_choice: 'required' });
  const msg = req.choices[0].message;
  check('required: valid tool_calls', validCalls(msg.tool_calls), JSON.stringify(req.choices[0]));
  check('required: finish_reason tool_calls, content null',
        req.choices[0].finish_reason === 'tool_calls' && msg.content === null, JSON.stringify(req.choices[0]));

  const s = await streamed({ ...base, tool_choice: 'required' });
  check('required streamed: the same calls', validCalls(s.tool_calls) && strip(s.tool_calls) === strip(msg.tool_calls) &&
        s.finish === 'tool_calls' && s.content === null, JSON.stringify(s));

  const named = await client.chat.completions.create({
    ...base, tool_choice: { type: 'function', function: { name: 'get_time' } } });
  const nc = named.choices[0].message.tool_calls;
  check('named: one call of get_time', validCalls(nc) && nc.length === 1 && nc[0].function.name === 'get_time',
        JSON.stringify(named.choices[0]));
  const ns = await streamed({ ...base, tool_choice: { type: 'function', function: { name: 'get_time' } } });
  check('named streamed: the same call', strip(ns.tool_calls) === strip(nc) && ns.finish === 'tool_calls', JSON.stringify(ns));

  const single = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
  check('parallel_tool_calls false: one call', validCalls(single.choices[0].message.tool_calls) &&
        single.choices[0].message.tool_calls.length === 1, JSON.stringify(single.choices[0]));

  // The calls and a result for each go back; the answer is text (tool_choice auto).
  const round = [...messages, msg, ...msg.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"temp_c": 21}' }))];
  const fin = await client.chat.completions.create({ model, messages: round, tools, max_tokens: 20, temperature: 0 });
  check('round trip: a text answer', typeof fin.choices[0].message.content === 'string' &&
        ['stop', 'length'].includes(fin.choices[0].finish_reason) && !fin.choices[0].message.tool_calls, JSON.stringify(fin.choices[0]));
  const fs = await streamed({ model, messages: round, tools, max_tokens: 20, temperature: 0 });
  check('round trip streamed: the same text', fs.content === fin.choices[0].message.content && fs.tool_calls.length === 0,
        JSON.stringify(fs));

  for (const [name, params, param] of [
    ['unknown function', { tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    ['required without tools', { tool_choice: 'required' }, 'tool_choice'],
    ['bad tool name', { tools: [{ type: 'function', function: { name: 'a b' } }] }, 'tools[0].function.name'],
  ]) {
    try {
      await client.chat.completions.create({ model, messages, max_tokens: 5, ...params });
      check(name + ' refused', false, 'no error');
    } catch (e) {
      check(name + ' refused', e.status === 400 && e.param === param, `${e.status} ${e.param} ${e.message}`);
    }
  }
}

main().then(() => process.exit(failures ? 1 : 0), (e) => { console.log('FAIL exception: ' + e.stack); process.exit(1); });
