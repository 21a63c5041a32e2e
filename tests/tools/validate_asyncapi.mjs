// Parse an AsyncAPI document with the reference parser; print each diagnostic as a JSON line.
// Exit 1 when any has error severity (0), 2 when the document could not be read.
import { Parser } from '@asyncapi/parser';
import { readFileSync } from 'node:fs';

let text;
try {
  text = readFileSync(process.argv[2] ?? 0, 'utf8');
} catch (err) {
  console.error(String(err));
  process.exit(2);
}
const { diagnostics } = await new Parser().parse(text);
for (const d of diagnostics) {
  console.log(JSON.stringify({ severity: d.severity, code: d.code, message: d.message, path: d.path.join('.') }));
}
process.exit(diagnostics.some((d) => d.severity === 0) ? 1 : 0);
