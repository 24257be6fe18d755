/**
 * Fill a spec text's placeholders by the spec's neutral rule, the same in every language: `{name}` is the
 * value as plain text (a value that is no string: its JSON text), `{name:json}` the value's JSON text
 * (`JSON.stringify`; Python's `json.dumps(v, ensure_ascii=False)` writes the same), and `{{` / `}}` are
 * literal braces. (A stand-in for the runtime-wide helper of the spec's text rule.)
 */

export type FillValue = string | number | bigint | boolean | null;

const FIELD = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(:json)?\}/g;

/** `template` with each placeholder replaced by its value; a placeholder without a value throws. */
export function fill(template: string, values: Readonly<Record<string, FillValue>>): string {
  return template.replace(FIELD, (whole: string, name: string | undefined, json: string | undefined) => {
    if (name === undefined) return whole.charAt(0);
    if (!(name in values)) throw new Error(`text placeholder ${whole} has no value`);
    const value = values[name] ?? null;
    if (typeof value === "bigint") return String(value); // a token id past 2**53 (JSON has no bigint of its own)
    return json === undefined && typeof value === "string" ? value : JSON.stringify(value);
  });
}
