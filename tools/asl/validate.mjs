// Validate many Amazon States Language documents in one node process with AWS's
// language service (amazon-states-language-service, behind the AWS Toolkit) and with
// asl-validator, and print their diagnostics as JSON.
//
// Usage:
//   node tools/asl/validate.mjs --tools <dir> [--fresh-ajv] [file.asl.json ...]
//   node tools/asl/validate.mjs --tools <dir> [--fresh-ajv] < documents.json
//
// <dir> is the folder `npm ci` installed into (.venv/tools/asl). With files, each is
// validated as written. Without, stdin holds [{"name": "...", "definition": {...}}, ...]
// and each definition is validated as pretty-printed JSON (so line numbers mean something).
//
// Output (stdout): [{"name", "language_service": [diag...], "asl_validator": [diag...]}]
// in input order. A diagnostic is {"message", "code", "line", "column", "severity"}
// (line and column 1-based; asl-validator has no positions, its messages name the path).
// Exit status: 0 when the run completed (diagnostics or not), 2 on a usage or tool error.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

function fail(message) {
  process.stderr.write(`validate.mjs: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const files = [];
  let tools = null;
  let sharedAjv = true;
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === "--tools") {
      tools = argv[i + 1];
      i += 1;
    } else if (argv[i] === "--fresh-ajv") {
      sharedAjv = false;
    } else {
      files.push(argv[i]);
    }
  }
  if (!tools) fail("--tools <dir> is required (the folder `make asl-tools` installs into)");
  return { tools: resolve(tools), files, sharedAjv };
}

// asl-validator builds a new Ajv instance and compiles all of its JSON schemas on every
// call (about half a second each), which would make a corpus of hundreds of documents take
// minutes. Its options, schemas and formats are the same on every call, so one instance is
// shared: the first construction is kept and later ones return it, with the keywords that
// its format plugin adds on each call (already defined) left as they are. Everything else
// (formats, validate, errors) is the library's own. `--fresh-ajv` turns this off; the tests
// show both modes give the same diagnostics.
function shareAjv(requireTool) {
  const requireFromValidator = createRequire(requireTool.resolve("asl-validator"));
  const ajvModule = requireFromValidator("ajv");
  const Ajv = ajvModule.default;
  let shared = null;
  let sharedOptions = null;
  const optionsKey = (options) =>
    JSON.stringify({ ...options, schemas: (options.schemas ?? []).map((s) => s.$id) });
  function SharedAjv(options = {}) {
    if (shared === null) {
      shared = new Ajv(options);
      sharedOptions = optionsKey(options);
      return shared;
    }
    if (optionsKey(options) !== sharedOptions) return new Ajv(options);
    return new Proxy(shared, {
      get(target, property) {
        if (property === "addKeyword") {
          return (definition) => {
            const names = [definition.keyword].flat();
            return names.every((name) => target.getKeyword(name))
              ? target
              : target.addKeyword(definition);
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }
  ajvModule.default = SharedAjv;
}

function readStdin() {
  try {
    return readFileSync(0, "utf8");
  } catch (err) {
    fail(`cannot read stdin: ${err.message}`);
  }
  return "";
}

// Both packages are CommonJS; they are required from the tool folder, not from this
// script's folder, so the committed driver runs against the pinned install.
const { tools, files, sharedAjv } = parseArgs(process.argv.slice(2));
const requireTool = createRequire(join(tools, "package.json"));
let aslService;
let aslValidator;
let TextDocument;
try {
  if (sharedAjv) shareAjv(requireTool);
  aslService = requireTool("amazon-states-language-service");
  aslValidator = requireTool("asl-validator");
  ({ TextDocument } = requireTool("vscode-languageserver-textdocument"));
} catch (err) {
  fail(`the ASL tools are not installed in ${tools} (run \`make asl-tools\`): ${err.message}`);
}

const SEVERITY = { 1: "error", 2: "warning", 3: "information", 4: "hint" };
const languageService = aslService.getLanguageService({});

async function languageServiceDiagnostics(name, text) {
  const document = TextDocument.create(`file:///${encodeURIComponent(name)}`, "json", 1, text);
  const jsonDocument = languageService.parseJSONDocument(document);
  const diagnostics = await languageService.doValidation(document, jsonDocument);
  return diagnostics.map((d) => ({
    message: d.message,
    code: d.code ?? null,
    line: d.range.start.line + 1,
    column: d.range.start.character + 1,
    severity: SEVERITY[d.severity] ?? "error",
  }));
}

function aslValidatorDiagnostics(text) {
  let definition;
  try {
    definition = JSON.parse(text);
  } catch (err) {
    return [{ message: `not JSON: ${err.message}`, code: "PARSE", severity: "error" }];
  }
  // The validator writes QueryLanguage into the states it reads: give it its own copy.
  const { errors } = aslValidator(structuredClone(definition));
  return errors.map((e) => ({
    message: e.Message,
    code: e["Error code"] ?? null,
    severity: "error",
  }));
}

async function main() {
  let documents;
  if (files.length > 0) {
    documents = files.map((file) => ({ name: file, text: readFileSync(file, "utf8") }));
  } else {
    let parsed;
    try {
      parsed = JSON.parse(readStdin());
    } catch (err) {
      fail(`stdin is not JSON: ${err.message}`);
    }
    if (!Array.isArray(parsed)) fail('stdin must be [{"name": ..., "definition": ...}, ...]');
    documents = parsed.map((doc, index) => ({
      name: String(doc.name ?? `document-${index}`),
      text: JSON.stringify(doc.definition, null, 2),
    }));
  }
  const results = [];
  for (const { name, text } of documents) {
    results.push({
      name,
      language_service: await languageServiceDiagnostics(name, text),
      asl_validator: aslValidatorDiagnostics(text),
    });
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((err) => fail(err.stack ?? String(err)));
