// api_clients.cjs: drives `tessera serve`'s /v1/responses with the official OpenAI Node
// client (responses.create), /v1/messages with the official Anthropic Node client
// (messages.create, messages.stream, messages.countTokens), unchanged, and vLLM's
// prompt_logprobs through the OpenAI client's completions.create. Each answer is compared with the chat
// completion the same request stands for: both APIs run the chat path.
// usage: node api_clients.cjs BASE_URL   (OPENAI_MODULE, ANTHROPIC_MODULE: the packages)
// Exit status 0 when every check passes; each failure is printed.
'use strict';
const OpenAI = require(process.env.OPENAI_MODULE);
const AnthropicModule = require(process.env.ANTHROPIC_MODULE);
const Anthropic = AnthropicModule.default || AnthropicModule.Anthropic || AnthropicModule;

const [baseURL] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'sk-test', maxRetries: 0, timeout: 60000 });
const anthropic = new Anthropic({ baseURL, apiKey: 'sk-test', maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': ' + detail}`);
  if (!ok) failures++;
}

// The weather tool of every tool check, and whether a call's arguments fit it.
const weatherSchema = {
  type: 'object', additionalProperties: false, required: ['city', 'unit'],
  properties: { city: { type: 'string', enum: ['Paris', 'London', 'Tokyo'] },
                unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } } };
function validWeather(args) {
  let v = args;
  if (typeof v === 'string') { try { v = JSON.parse(v); } catch (e) { return false; } }
  return v !== null && typeof v === 'object' && Object.keys(v).length === 2 &&
    weatherSchema.properties.city.enum.includes(v.city) && weatherSchema.properties.unit.enum.includes(v.unit);
}

async function chatText(model, messages, max_tokens) {
  const c = await openai.chat.completions.create({ model, messages, max_tokens, temperature: 0 });
  return c.choices[0];
}

async function expectError(name, fn, test) {
  try {
    await fn();
    check(name, false, 'no error');
  } catch (e) {
    check(name, test(e), `${e.status} ${JSON.stringify(e.error)} ${e.message}`);
  }
}

// ---- /v1/responses

async function responses(model) {
  const input = 'Tell me a story about a cat.';
  const resp = await openai.responses.create({ model, input, instructions: 'You tell stories.',
                                               max_output_tokens: 20, temperature: 0 });
  const chat = await chatText(model, [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: input }], 20);
  check('responses: text equals the chat completion', resp.output_text === chat.message.content && resp.output_text.length > 0,
        JSON.stringify(resp.output_text) + ' vs ' + JSON.stringify(chat.message.content));
  check('responses: object, status, usage', resp.object === 'response' && /^resp_/.test(resp.id) &&
        resp.status === (chat.finish_reason === 'length' ? 'incomplete' : 'completed') &&
        resp.usage.output_tokens === 20 && resp.usage.input_tokens > 0 &&
        resp.usage.total_tokens === resp.usage.input_tokens + 20 &&
        resp.usage.input_tokens_details.cached_tokens >= 0 && resp.usage.output_tokens_details.reasoning_tokens === 0 &&
        resp.output.length === 1 && resp.output[0].type === 'message' && resp.output[0].role === 'assistant',
        JSON.stringify(resp));
  if (resp.status === 'incomplete')
    check('responses: incomplete for max_output_tokens, the message item too',
          resp.incomplete_details.reason === 'max_output_tokens' && resp.output[0].status === 'incomplete',
          JSON.stringify(resp));

  // Streamed: the events in OpenAI's order, numbered; the deltas make the same text.
  const stream = await openai.responses.create({ model, input, instructions: 'You tell stories.',
                                               max_output_tokens: 20, temperature: 0, stream: true });
  const types = [];
  let deltas = '', done = null, last = null, seqOk = true;
  for await (const ev of stream) {
    if (ev.sequence_number !== types.length) seqOk = false;
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    if (ev.type === 'response.output_text.done') done = ev.text;
    last = ev;
  }
  const want = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];
  check('responses streamed: event order', seqOk && want.every((t, i) => types[i] === t) &&
        types.includes('response.output_text.delta') && types.indexOf('response.output_text.done') < types.indexOf('response.output_item.done') &&
        ['response.completed', 'response.incomplete'].includes(types[types.length - 1]), JSON.stringify(types));
  check('responses streamed: the same text', deltas === resp.output_text && done === deltas &&
        last.response.output[0].content[0].text === deltas && last.response.usage.output_tokens === 20,
        JSON.stringify({ deltas, done }));

  // A function tool, forced: a function_call item whose arguments fit its parameters.
  const tools = [{ type: 'function', name: 'get_weather', description: 'Get the weather for a city',
                   parameters: weatherSchema, strict: true }];
  const ask = 'What is the weather in Paris?';
  const called = await openai.responses.create({ model, input: ask, tools, tool_choice: 'required',
                                                 parallel_tool_calls: false, temperature: 0 });
  const fc = called.output.find((o) => o.type === 'function_call');
  check('responses tool: a valid function_call item', fc && fc.name === 'get_weather' && /^call_/.test(fc.call_id) &&
        validWeather(fc.arguments) && called.status === 'completed', JSON.stringify(called.output));

  const sc = await openai.responses.create({ model, input: ask, tools, tool_choice: 'required',
                                             parallel_tool_calls: false, temperature: 0, stream: true });
  let args = '', argsDone = null, item = null;
  for await (const ev of sc) {
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.function_call_arguments.done') argsDone = ev.arguments;
    if (ev.type === 'response.output_item.done' && ev.item.type === 'function_call') item = ev.item;
  }
  check('responses tool streamed: the same call', fc && args === fc.arguments && argsDone === args &&
        item && item.name === 'get_weather' && item.arguments === args, JSON.stringify({ args, argsDone, item }));

  // The call and its output go back as items; the answer is text.
  if (fc) {
    const round = await openai.responses.create({ model, tools, max_output_tokens: 16, temperature: 0, input: [
      { role: 'user', content: [{ type: 'input_text', text: ask }] },
      { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
      { type: 'function_call_output', call_id: fc.call_id, output: '{"temp_c": 21}' }] });
    const chat2 = await openai.chat.completions.create({ model, tools: [{ type: 'function', function: {
      name: 'get_weather', description: 'Get the weather for a city', parameters: weatherSchema, strict: true } }],
      max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: ask },
        { role: 'assistant', content: null, tool_calls: [{ id: fc.call_id, type: 'function', function: { name: fc.name, arguments: fc.arguments } }] },
        { role: 'tool', tool_call_id: fc.call_id, content: '{"temp_c": 21}' }] });
    check('responses round trip: the chat answer', round.output_text === chat2.choices[0].message.content &&
          !round.output.some((o) => o.type === 'function_call'), JSON.stringify([round.output_text, chat2.choices[0].message.content]));
  }

  // text.format json_schema: the text parses and fits.
  const js = await openai.responses.create({ model, input, max_output_tokens: 64, temperature: 0,
    text: { format: { type: 'json_schema', name: 'weather', schema: weatherSchema, strict: true } } });
  check('responses text.format json_schema', validWeather(js.output_text), js.output_text);

  for (const [name, params, param] of [
    ['previous_response_id refused', { previous_response_id: 'resp_1' }, 'previous_response_id'],
    ['store true refused', { store: true }, 'store'],
    ['hosted tool refused', { tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    ['bad schema keyword named', { text: { format: { type: 'json_schema', name: 'x',
      schema: { type: 'object', properties: { a: { type: 'strin' } } } } } }, 'text.format.schema.properties.a.type'],
  ]) {
    await expectError('responses: ' + name, () => openai.responses.create({ model, input, max_output_tokens: 4, ...params }),
                      (e) => e.status === 400 && e.param === param);
  }
}

// ---- /v1/messages

async function messages(model) {
  const system = 'You tell stories.';
  const content = 'Tell me a story about a dog.';
  const msg = await anthropic.messages.create({ model, system, max_tokens: 20, temperature: 0,
                                                messages: [{ role: 'user', content }] });
  const chat = await chatText(model, [{ role: 'system', content: system }, { role: 'user', content }], 20);
  const text = msg.content.length === 1 && msg.content[0].type === 'text' ? msg.content[0].text : null;
  check('messages: text equals the chat completion', text === chat.message.content && text.length > 0,
        JSON.stringify(msg.content) + ' vs ' + JSON.stringify(chat.message.content));
  check('messages: type, role, stop_reason, usage', msg.type === 'message' && msg.role === 'assistant' &&
        msg.stop_reason === (chat.finish_reason === 'length' ? 'max_tokens' : 'end_turn') &&
        msg.usage.output_tokens === 20 && msg.usage.input_tokens > 0, JSON.stringify(msg));

  // Streamed with create(stream: true): the raw events; and with stream(): the SDK puts
  // the message together from them.
  const raw = await anthropic.messages.create({ model, system: [{ type: 'text', text: system }], max_tokens: 20,
                                               temperature: 0, stream: true, messages: [{ role: 'user', content }] });
  const types = [];
  let deltas = '', stop = null;
  for await (const ev of raw) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') deltas += ev.delta.text;
    if (ev.type === 'message_delta') stop = ev.delta.stop_reason;
  }
  check('messages streamed: events and text', types[0] === 'message_start' && types[1] === 'content_block_start' &&
        types.slice(-3).join() === 'content_block_stop,message_delta,message_stop' && deltas === text && stop === msg.stop_reason,
        JSON.stringify({ types, deltas }));

  // A tool round trip, streamed: tool_choice any forces a tool_use block whose input fits
  // input_schema; its result goes back in a tool_result block; the answer is text.
  const tools = [{ name: 'get_weather', description: 'Get the weather for a city', input_schema: weatherSchema }];
  const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const st = anthropic.messages.stream({ model, max_tokens: 1000, temperature: 0, tools,
                                         tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: ask });
  let jsonDeltas = '';
  st.on('inputJson', (d) => { jsonDeltas += d; });
  const fin = await st.finalMessage();
  const use = fin.content.find((b) => b.type === 'tool_use');
  check('messages tool streamed: a valid tool_use block', use && use.name === 'get_weather' && validWeather(use.input) &&
        fin.stop_reason === 'tool_use' && typeof use.id === 'string' && use.id.length > 0 &&
        JSON.stringify(JSON.parse(jsonDeltas)) === JSON.stringify(use.input), JSON.stringify({ fin, jsonDeltas }));
  // The same with create(stream: true): the raw tool_use block and its input_json_delta.
  const rawTool = await anthropic.messages.create({ model, max_tokens: 1000, temperature: 0, tools, stream: true,
                                                   tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: ask });
  let started = null, partial = '', rawStop = null;
  for await (const ev of rawTool) {
    if (ev.type === 'content_block_start' && ev.content_block.type === 'tool_use') started = ev.content_block;
    if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') partial += ev.delta.partial_json;
    if (ev.type === 'message_delta') rawStop = ev.delta.stop_reason;
  }
  check('messages tool create(stream): tool_use start and input_json_delta', started && use &&
        typeof started.id === 'string' && started.id.length > 0 && started.name === 'get_weather' && validWeather(partial) &&
        JSON.stringify(JSON.parse(partial)) === JSON.stringify(use.input) && rawStop === 'tool_use',
        JSON.stringify({ started, partial, rawStop }));
  const whole = await anthropic.messages.create({ model, max_tokens: 1000, temperature: 0, tools,
                                                  tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: ask });
  const wuse = whole.content.find((b) => b.type === 'tool_use');
  check('messages tool: the same call whole', use && wuse && JSON.stringify(wuse.input) === JSON.stringify(use.input) &&
        whole.stop_reason === 'tool_use', JSON.stringify(whole));
  if (use) {
    const round = [...ask, { role: 'assistant', content: fin.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] }];
    const back = anthropic.messages.stream({ model, max_tokens: 16, temperature: 0, tools, messages: round });
    const answer = await back.finalMessage();
    const chat2 = await openai.chat.completions.create({ model, max_tokens: 16, temperature: 0,
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Get the weather for a city', parameters: weatherSchema } }],
      messages: [{ role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(use.input) } }] },
        { role: 'tool', tool_call_id: use.id, content: '21 degrees' }] });
    const atext = answer.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    check('messages tool round trip: the chat answer', atext === chat2.choices[0].message.content &&
          ['end_turn', 'max_tokens'].includes(answer.stop_reason), JSON.stringify([answer, chat2.choices[0]]));
  }

  // stop_sequences end the text before the sequence.
  const stopped = await anthropic.messages.create({ model, max_tokens: 20, temperature: 0, stop_sequences: [text.slice(3, 6)],
                                                    system, messages: [{ role: 'user', content }] });
  check('messages stop_sequences', stopped.content[0].text === text.slice(0, text.indexOf(text.slice(3, 6))) &&
        stopped.stop_reason === 'stop_sequence' && stopped.stop_sequence === text.slice(3, 6),
        JSON.stringify([stopped, text.slice(3, 6)]));
  const stStop = anthropic.messages.stream({ model, max_tokens: 20, temperature: 0, stop_sequences: [text.slice(3, 6)],
                                             system, messages: [{ role: 'user', content }] });
  const stStopped = await stStop.finalMessage();
  check('messages stop_sequences streamed', stStopped.stop_reason === 'stop_sequence' &&
        stStopped.stop_sequence === text.slice(3, 6) && stStopped.content[0].text === stopped.content[0].text,
        JSON.stringify(stStopped));

  // count_tokens: the prompt /v1/messages renders, system and tools included.
  const counted = await anthropic.messages.countTokens({ model, system, messages: [{ role: 'user', content }] });
  check('messages countTokens: usage.input_tokens of the same request', counted.input_tokens === msg.usage.input_tokens,
        JSON.stringify([counted, msg.usage]));
  const countedTools = await anthropic.messages.countTokens({ model, system, tools, messages: [{ role: 'user', content }] });
  check('messages countTokens: tools count', countedTools.input_tokens > counted.input_tokens, JSON.stringify(countedTools));

  await expectError('messages: max_tokens required, in Anthropic\'s error shape',
    () => anthropic.messages.create({ model, messages: [{ role: 'user', content }] }),
    (e) => e.status === 400 && e.error && e.error.type === 'error' && e.error.error.type === 'invalid_request_error' &&
           /max_tokens/.test(e.error.error.message));
  await expectError('messages: an image block refused',
    () => anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] }),
    (e) => e.status === 400 && /messages\[0\]\.content\[0\]/.test(e.error.error.message));
  await expectError('messages: unknown model is a not_found_error',
    () => anthropic.messages.create({ model: 'claude-nope', max_tokens: 4, messages: [{ role: 'user', content }] }),
    (e) => e.status === 404 && e.error.error.type === 'not_found_error');
}

// ---- vLLM's prompt_logprobs through the OpenAI client (an extra body field)

async function promptLogprobs(model) {
  const prompt = 'Once upon a time';
  const c = await openai.completions.create({ model, prompt, max_tokens: 2, prompt_logprobs: 2 });
  const list = c.choices[0].prompt_logprobs;
  const entriesOk = Array.isArray(list) && list.length === c.usage.prompt_tokens && list[0] === null &&
    list.slice(1).every((e) => Object.keys(e).length >= 2 && Object.keys(e).length <= 3 &&
      Object.entries(e).every(([id, v]) => /^[0-9]+$/.test(id) && v.logprob <= 0 && v.rank >= 1 &&
                                          typeof v.decoded_token === 'string'));
  check('completions prompt_logprobs: vLLM\'s list', entriesOk, JSON.stringify(list));
  await expectError('completions prompt_logprobs over 20 refused',
    () => openai.completions.create({ model, prompt, max_tokens: 2, prompt_logprobs: 21 }),
    (e) => e.status === 400 && e.param === 'prompt_logprobs');
}

async function main() {
  const models = await openai.models.list();
  const model = models.data[0].id;
  await responses(model);
  await messages(model);
  await promptLogprobs(model);
}

main().then(() => process.exit(failures ? 1 : 0), (e) => { console.log('FAIL exception: ' + e.stack); process.exit(1); });
