// openai_embed.cjs: the official OpenAI Node client's embeddings.create against
// `tessera serve` on an embedding model, float and base64, unchanged.
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
  const model = (await client.models.list()).data[0].id;
  const input = ['Once upon a time', 'there was a little cat'];

  // Without encoding_format the client asks for base64 and decodes it itself.
  const b64 = await client.embeddings.create({ model, input });
  const flt = await client.embeddings.create({ model, input, encoding_format: 'float' });
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
    await client.embeddings.create({ model, input: '' });
    check('empty input rejected', false, 'no error');
  } catch (e) {
    check('empty input rejected', e.status === 400 && e.param === 'input', `${e.status} ${e.message}`);
  }
}

main().then(() => process.exit(failures ? 1 : 0), (e) => { console.log('FAIL', e); process.exit(1); });
