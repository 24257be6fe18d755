// harmonygen's JSON Schema -> TypeScript step: reads {"bundle", "name"} as JSON on stdin, writes one
// TypeScript module on stdout. json-schema-to-typescript (pinned in package.json, installed with `npm ci`)
// does the work; this file only fixes its options so the output depends on the input alone.
import { compile } from "json-schema-to-typescript";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { bundle, name } = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const code = await compile({ ...bundle, title: name }, name, {
  bannerComment: "",
  additionalProperties: false,
  unreachableDefinitions: true,
  declareExternallyReferenced: true,
  strictIndexSignatures: true,
  enableConstEnums: false,
  format: true,
  style: { printWidth: 120, singleQuote: false, trailingComma: "all", semi: true },
});
process.stdout.write(code);
