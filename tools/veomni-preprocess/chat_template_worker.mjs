// veomni-preprocess's chat-template worker: renders a model's Jinja chat template with @huggingface/jinja, one JSON
// request line in, one JSON answer line out (started by libcommon/data/chat_template_worker.cc).
//
// Usage: node chat_template_worker.mjs NODE_MODULES_DIR (the folder that holds @huggingface/jinja).
// First line: {"template": TEXT, "globals": {...}} -> {"ok": true, "generation": BOOL} or {"fatal": MESSAGE}.
// Then each line: {"conversations": [{"messages": [...], "tools": [...] | null, "kwargs": {...},
//                                     "renders": [[COUNT, ADD_GENERATION_PROMPT], ...]}, ...]}
//   -> {"results": [{"texts": [...], "generation": [[BEGIN, END], ...]} | {"error": MESSAGE}, ...]}
// Render i is the template on messages[:COUNT]. "generation" holds, for render 0, the UTF-8 byte spans that
// {% generation %} ... {% endgeneration %} enclose (only when the template has such blocks).
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const kGenerationStart = "\u0000veomni-generation-start\u0000";
const kGenerationEnd = "\u0000veomni-generation-end\u0000";

function answer(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

async function loadJinja(modulesDir) {
  const entry = join(modulesDir, "@huggingface", "jinja", "dist", "index.js");
  try {
    return (await import(pathToFileURL(entry).href)).Template;
  } catch (error) {
    throw new Error(`cannot load @huggingface/jinja (${entry}): ${error.message}`);
  }
}

// transformers' {% generation %} blocks become markers in the output. The replacement keeps the tag's whitespace
// control: the opening `if` carries the tag's left `-`, the closing `endif` its right `-` (and trim_blocks).
function markGeneration(source) {
  let found = false;
  const mark = (variable) => (_, left, right) => {
    found = true;
    return `{%${left} if true %}{{ ${variable} }}{% endif ${right}%}`;
  };
  const marked = source
    .replace(/{%(-?)\s*generation\s*(-?)%}/g, mark("__veomni_generation_start__"))
    .replace(/{%(-?)\s*endgeneration\s*(-?)%}/g, mark("__veomni_generation_end__"));
  return { marked, found };
}

// The text without markers and the byte spans between start and end markers.
function splitGeneration(text) {
  const spans = [];
  let out = "";
  let bytes = 0;
  let open = -1;
  const pattern = new RegExp(`${kGenerationStart}|${kGenerationEnd}`, "g");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    const piece = text.slice(last, match.index);
    out += piece;
    bytes += Buffer.byteLength(piece, "utf8");
    last = match.index + match[0].length;
    if (match[0] === kGenerationStart) {
      open = bytes;
    } else if (open >= 0) {
      spans.push([open, bytes]);
      open = -1;
    }
  }
  out += text.slice(last);
  return { text: out, spans };
}

function renderConversation(template, globals, conversation, generation) {
  const texts = [];
  let spans = [];
  for (const [count, addGenerationPrompt] of conversation.renders) {
    const context = {
      ...globals,
      ...(conversation.kwargs ?? {}),
      messages: conversation.messages.slice(0, count),
      tools: conversation.tools ?? null,
      documents: null,
      add_generation_prompt: addGenerationPrompt,
      __veomni_generation_start__: kGenerationStart,
      __veomni_generation_end__: kGenerationEnd,
    };
    let text = template.render(context);
    if (generation) {
      const split = splitGeneration(text);
      text = split.text;
      if (texts.length === 0) spans = split.spans;
    }
    texts.push(text);
  }
  return { texts, generation: spans };
}

async function main() {
  const modulesDir = process.argv[2] ?? "";
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  let template = null;
  let globals = {};
  let generation = false;
  for await (const line of lines) {
    const request = JSON.parse(line);
    if (template === null) {
      try {
        const Template = await loadJinja(modulesDir);
        const { marked, found } = markGeneration(request.template);
        template = new Template(marked);
        globals = request.globals ?? {};
        generation = found;
        answer({ ok: true, generation });
      } catch (error) {
        answer({ fatal: error.message });
        return;
      }
      continue;
    }
    const results = request.conversations.map((conversation) => {
      try {
        return renderConversation(template, globals, conversation, generation);
      } catch (error) {
        return { error: error.message };
      }
    });
    answer({ results });
  }
}

main().catch((error) => {
  answer({ fatal: error.message });
  process.exitCode = 3;
});
