// openai_embed.cjs: the official OpenAI Node client's embeddings.create against
// `tessera serve` serving an embedding model ("embed") beside a chat model ("chat"): float
// and base64, unchanged, and a chat completion running alongside.
// usage: node openai_embed.cjs BASE_URL
// Exit status 0 when every check passes; each failure is printed.
'use strict';
const OpenAI = require(process.env.OPENAI_MODULE);

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'sk-test', maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': ' + detail}`);
  if (!ok) failures++;
}
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

async function main() {
  const model = 'embed';
  const input = ['Once upon a time', 'there was a little cat'];

  // Without encoding_format the client asks for base64 and decodes it itself; a chat
  // completion of the other model runs at the same time.
  const [b64, flt, chat] = await Promise.all([
    client.embeddings.create({ model, input }),
    client.embeddings.create({ model, input, encoding_format: 'float' }),
    client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 }),
  ]);
  check('chat beside embeddings', chat.choices[0].message.content.length > 0 && chat.model === 'chat',
        JSON.stringify(chat.choices[0]));
  check('list of two', b64.object === 'list' && b64.data.length === 2 && flt.data.length === 2,
        JSON.stringify(b64).slice(0, 200));
  const a = b64.data[0].embedding, f = flt.data[0].embedding;
  check('base64 decoded to floats', Array.isArray(a) && a.length === 64 && typeof a[0] === 'number',
        typeof a);
  check('float and base64 agree', a.every((x, i) => Math.abs(x - f[i]) < 1e-7), `${a[0]} vs ${f[0]}`);
  check('unit norm', Math.abs(norm(f) - 1) < 1e-5, norm(f));
  check('inputs differ', Math.abs(flt.data[1].embedding[0] - f[0]) > 1e-6, 'same vector');
  check('usage', flt.usage.prompt_tokens > 2 && flt.usage.total_tokens === flt.usage.prompt_tokens,
        JSON.stringify(flt.usage));
  check('index order', flt.data[0].index === 0 && flt.data[1].index === 1, 'indices');

  const short = await client.embeddings.create({ model, input: input[0], dimensions: 16, encoding_format: 'float' });
  check('dimensions', short.data[0].embedding.length === 16 && Math.abs(norm(short.data[0].embedding) - 1) < 1e-5,
        short.data[0].embedding.length);
  const ids = await client.embeddings.create({ model, input: [[1, 300, 301], [1, 42]], encoding_format: 'float' });
  check('token ids', ids.data.length === 2 && ids.usage.prompt_tokens === 5, JSON.stringify(ids.usage));

  try {
    await client.embeddings.create({ model: 'chat', input: 'hello' });
    check('chat model refuses embeddings', false, 'no error');
  } catch (e) {
    check('chat model refuses embeddings', e.status === 400 && e.code === 'model_not_embedding', `${e.status} ${e.message}`);
  }
  try {
    await client.embeddings.create({ model, input: '' });
    check('empty input rejected', false, 'no error');
  } catch (e) {
    check('empty input rejected', e.status === 400 && e.param === 'input', `${e.status} ${e.message}`);
  }
}

main().then(() => process.exit(failures ? 1 : 0), (e) => { console.log('FAIL', e); process.exit(1); });
