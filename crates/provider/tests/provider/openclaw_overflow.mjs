// Prints OpenClaw's verdict on each error text read from stdin (a JSON
// array): is it a context overflow, as the embedded runner decides for an
// assistant error? classifyFailoverReason names a reason; "context_overflow"
// is an overflow, any other reason is not; with no reason, Pi's
// isContextOverflow or isLikelyContextOverflowError decides.
// Usage: node openclaw_overflow.mjs OPENCLAW_NODE_MODULES < texts.json
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const dist = join(modules, "openclaw", "dist");
const chunk = readdirSync(dist).find((f) => f.endsWith(".mjs") && readFileSync(join(dist, f), "utf8").includes("function isLikelyContextOverflowError("));
const source = readFileSync(join(dist, chunk), "utf8");
const alias = (name) => new RegExp(`\\b${name} as (\\w+)`).exec(source)[1];
const classify = await import(pathToFileURL(join(dist, chunk)).href);
const runtime = await import(pathToFileURL(join(modules, "@openclaw", "ai", "dist", "internal", "runtime.mjs")).href);
const isLikely = classify[alias("isLikelyContextOverflowError")];
const reason = classify[alias("classifyFailoverReason")];
const texts = JSON.parse(readFileSync(0, "utf8"));
const verdicts = texts.map((text) => {
  const r = reason(text);
  if (r === "context_overflow") return true;
  if (r) return false;
  return runtime.isContextOverflow({ role: "assistant", stopReason: "error", errorMessage: text, content: [], usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }) || isLikely(text);
});
console.log(JSON.stringify(verdicts));
