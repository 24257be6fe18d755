/**
 * Every string literal of the TypeScript runtime's sources, for tests/test_facts_once.py, which holds them against
 * the facts the IR defines (one fact list and one policy for both languages). Reads the sources with the
 * TypeScript compiler's parser; prints one JSON object a line: file, line, value, and whether the literal stands
 * where a JSON field's name stands (an object key, a subscript, the left of `in`, the key argument of a map's
 * `get`/`has`/`set`/`delete`, or an element of an array literal a `for … of` walks), and whether it belongs to a
 * library's API instead (a Node event name: the first argument of `on`/`once`/`off`/`emit`). Comments are not
 * literals.
 *
 *     node literals.js FILE...
 */

import { readFileSync } from "node:fs";

import ts from "typescript";

const KEY_METHODS = new Set(["get", "has", "set", "delete"]);
const EVENT_METHODS = new Set(["on", "once", "off", "emit", "addListener", "removeListener"]);

function isLibraryArgument(node: ts.Node): boolean {
  const parent = node.parent;
  return (
    ts.isCallExpression(parent) &&
    parent.arguments[0] === node &&
    ts.isPropertyAccessExpression(parent.expression) &&
    EVENT_METHODS.has(parent.expression.name.text)
  );
}

function isFieldPosition(node: ts.Node): boolean {
  const parent = node.parent;
  if (ts.isPropertyAssignment(parent) && parent.name === node) return true;
  if (ts.isElementAccessExpression(parent) && parent.argumentExpression === node) return true;
  if (ts.isBinaryExpression(parent) && parent.operatorToken.kind === ts.SyntaxKind.InKeyword && parent.left === node) return true;
  if (ts.isCallExpression(parent) && parent.arguments[0] === node && ts.isPropertyAccessExpression(parent.expression)) {
    return KEY_METHODS.has(parent.expression.name.text);
  }
  if (ts.isArrayLiteralExpression(parent) && ts.isForOfStatement(parent.parent) && parent.parent.expression === parent) return true;
  return false;
}

function literals(file: string): object[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
  const out: object[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      const inImport = ts.isImportDeclaration(node.parent) || ts.isExportDeclaration(node.parent) || ts.isExternalModuleReference(node.parent);
      if (!inImport) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        out.push({ file, line, value: node.text, field: isFieldPosition(node), library: isLibraryArgument(node) });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

for (const file of process.argv.slice(2)) for (const literal of literals(file)) process.stdout.write(JSON.stringify(literal) + "\n");
