// The TypeScript SDK's streamable-HTTP client for the scale-out test.
// Usage: AIMON_TOKEN=... node client.mjs NPM_DIR URL < calls.jsonl
// Each input line is {"name":..,"arguments":{..}}; each output line is the
// call's {"isError":..,"text":..}, or {"failed":"why"} when the call got no
// result (a replica killed under it), in the order of the calls.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const [npmDir, url] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(join(npmDir, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)));
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.AIMON_TOKEN}` } },
});
const client = new Client({ name: 'aimon-gw-scale-test', version: '1.0.0' });
await client.connect(transport);
const calls = [];
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim()) calls.push(JSON.parse(line));
}
// Four calls at a time; the answers in the order of the calls.
const out = new Array(calls.length);
let next = 0;
await Promise.all([0, 1, 2, 3].map(async () => {
  for (let i = next++; i < calls.length; i = next++) {
    try {
      const r = await client.callTool({ name: calls[i].name, arguments: calls[i].arguments });
      out[i] = { isError: !!r.isError, text: r.content?.[0]?.text ?? '' };
    } catch (e) {
      out[i] = { failed: String(e?.message ?? e) };
    }
  }
}));
process.stdout.write(out.map((v) => JSON.stringify(v) + '\n').join(''));
await client.close();
