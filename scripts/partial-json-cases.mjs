// Regenerates crates/provider/tests/data/partial_json.jsonl: for every prefix
// of the sample documents below, the value Pi's parseStreamingJson gives
// (JSON.parse, else the partial-json package, else {}), printed with
// JSON.stringify. Run with the partial-json package Pi depends on (0.1.7):
//   node scripts/partial-json-cases.mjs PATH/TO/node_modules/partial-json > crates/provider/tests/data/partial_json.jsonl
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { parse } = require(process.argv[2]);
const samples = [
  '{"path": "src/main.rs", "offset": 10, "limit": -2.5e3}',
  '{"command":"ls -la \\"dir\\" && echo \\u00e9t\\u00e9","timeout":true,"env":null,"x":false}',
  '{"edits":[{"oldText":"a\\nb","newText":"c"},{"oldText":"","newText":"d"}],"n":[1,2,[3]]}',
  '  {"nested": {"deep": {"list": [true, false, null, "ü🚀"]}}, "empty": {}, "arr": []}  ',
  '[1, "two", {"three": 3}]',
];
const streaming = (text) => {
  if (!text || text.trim() === "") return {};
  try { return JSON.parse(text); } catch {}
  try { return parse(text) ?? {}; } catch { return {}; }
};
for (const sample of samples) {
  const units = Array.from(sample);
  for (let n = 0; n <= units.length; n++) {
    const prefix = units.slice(0, n).join("");
    console.log(JSON.stringify({ input: prefix, value: JSON.stringify(streaming(prefix)) }));
  }
}
