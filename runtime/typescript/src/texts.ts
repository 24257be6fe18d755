/**
 * Fill the spec's texts: the placeholder rule written in spec/harmony/format.json's `texts`.
 *
 * `{name}` inserts the value as plain text (a string as is, any other value as its JSON text: an integer in
 * decimal, `null`, `true`); `{name:json}` its JSON text
 * (`JSON.stringify`); `{name:pyrepr}`, allowed only in the texts the drop-in API copies from openai-harmony,
 * Python's `repr` of a string (the rule is written beside it in the spec); `{{` and `}}` are literal braces.
 */

const FIELD = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::(json|pyrepr))?\}/g;

/** `template` with each placeholder replaced by its value, under the spec's placeholder rule. */
export function fill(template: string, values: Readonly<Record<string, unknown>>): string {
  return template.replace(FIELD, (whole: string, name: string | undefined, form: string | undefined) => {
    if (name === undefined) return whole.charAt(0);
    if (!(name in values)) throw new Error(`the text's placeholder ${whole} has no value`);
    const value = values[name];
    if (form === undefined && typeof value === "string") return value;
    if (typeof value === "bigint") return String(value); // a token id past 2**53: its digits
    if (form === "pyrepr") return typeof value === "string" ? pyrepr(value) : String(value);
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v)) ?? "null";
  });
}

const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
const SHORT: Readonly<Record<string, string>> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** The spec's `pyrepr` form of a string: single quotes unless it has a single quote and no double quote. */
export function pyrepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === quote) out += "\\" + ch;
    else if (SHORT[ch] !== undefined) out += SHORT[ch];
    else if (ch === " " || !NOT_PRINTABLE.test(ch)) out += ch;
    else out += code < 0x100 ? "\\x" + hex(code, 2) : code < 0x10000 ? "\\u" + hex(code, 4) : "\\U" + hex(code, 8);
  }
  return out + quote;
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, "0");
}
