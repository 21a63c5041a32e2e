// Parse an AsyncAPI document with the reference parser; print each diagnostic as a JSON line, then, when the
// document parsed, one line with what the parser read in it: {"document": {version, operations}}.
// Exit 1 when any diagnostic is an error (severity 0) or a warning (1), 2 when the file could not be read.
import { Parser } from '@asyncapi/parser';
import { readFileSync } from 'node:fs';

const LEVELS = ['error', 'warning', 'information', 'hint'];

let text;
try {
  text = readFileSync(process.argv[2] ?? 0, 'utf8');
} catch (err) {
  console.error(String(err));
  process.exit(2);
}
const { document, diagnostics } = await new Parser().parse(text);
for (const d of diagnostics) {
  const line = { severity: d.severity, level: LEVELS[d.severity], code: d.code, message: d.message };
  console.log(JSON.stringify({ ...line, path: d.path.join('.') }));
}
if (document) {
  const operations = Object.fromEntries(
    document.operations().all().map((op) => [
      op.id(),
      {
        action: op.action(),
        addresses: op.channels().all().map((c) => c.address()),
        messages: op.messages().all().map((m) => m.name()),
      },
    ]),
  );
  console.log(JSON.stringify({ document: { version: document.version(), operations } }));
}
process.exit(diagnostics.some((d) => d.severity <= 1) ? 1 : 0);
