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
}

main().then(() => process.exit(failures ? 1 : 0), (e) => { console.log('FAIL exception: ' + e.stack); process.exit(1); });
