#include "serve/web_ui.h"

namespace dspark::serve {

const std::string_view kWebUiHtml = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dspark chat</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 0 auto; padding: 1rem; background: #fafafa; }
  header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 1.2rem; margin: 0; }
  #model { color: #555; font-size: .9rem; }
  #log { display: flex; flex-direction: column; gap: .6rem; margin: 1rem 0; }
  .msg { padding: .6rem .8rem; border-radius: .5rem; white-space: pre-wrap; line-height: 1.4; }
  .user { background: #dbeafe; align-self: flex-end; max-width: 85%; }
  .assistant { background: #fff; border: 1px solid #ddd; max-width: 95%; }
  .meta { font-size: .75rem; color: #666; margin-top: .3rem; font-family: ui-monospace, monospace; }
  .error { background: #fee2e2; }
  form { display: flex; gap: .5rem; }
  textarea { flex: 1; min-height: 3.5rem; font: inherit; padding: .5rem; }
  .opts { display: flex; gap: 1rem; font-size: .85rem; margin: .5rem 0; flex-wrap: wrap; align-items: center; }
  .opts input[type=number] { width: 5rem; }
</style>
</head>
<body>
<header><h1>dspark chat</h1><span id="model">loading...</span></header>
<div class="opts">
  <label>temperature <input id="temp" type="number" step="0.1" min="0" max="2" value="0"></label>
  <label>max tokens <input id="maxtok" type="number" min="1" value="256"></label>
  <label><input id="spec" type="checkbox" checked> speculative</label>
  <label>draft tokens <input id="gamma" type="number" min="0" max="64" value=""></label>
  <label>API key <input id="key" type="password" size="12"></label>
  <button id="clear" type="button">new chat</button>
</div>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let modelId = null, history = [];

function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const j = await r.json();
    if (!r.ok) throw new Error(j.error ? j.error.message : r.statusText);
    const m = j.data[0];
    modelId = m.id;
    const d = m.drafter;
    $("model").textContent = m.id + " | ctx " + m.context_length + " | drafter: " +
      (d ? d.kind + (d.path ? " (" + d.path + ")" : "") + ", " + d.num_draft_tokens + " draft tokens" : "none");
    if (!d) { $("spec").checked = false; $("spec").disabled = true; }
  } catch (e) { $("model").textContent = "cannot list models: " + e.message; }
}

function bubble(cls, text) {
  const div = document.createElement("div");
  div.className = "msg " + cls;
  div.textContent = text;
  $("log").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function describe(usage, timings, seconds) {
  const parts = [];
  const n = usage ? usage.completion_tokens : 0;
  const tps = timings && timings.predicted_per_second ? timings.predicted_per_second : n / seconds;
  parts.push(n + " tokens", tps.toFixed(1) + " tok/s");
  if (usage && usage.prompt_tokens_details) parts.push("prompt " + usage.prompt_tokens + " (cached " + usage.prompt_tokens_details.cached_tokens + ")");
  const s = usage && usage.speculation;
  if (s) {
    parts.push("tau " + s.tau.toFixed(2), "accepted " + s.accepted + "/" + s.drafted +
               (s.drafted ? " (" + (100 * s.accepted / s.drafted).toFixed(0) + "%)" : ""));
    if (s.accepted_by_pos && s.accepted_by_pos.length) parts.push("by position [" + s.accepted_by_pos.join(", ") + "]");
  }
  return parts.join(" | ");
}

async function send(text) {
  history.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  const body = { model: modelId, messages: history, stream: true, stream_options: { include_usage: true },
                 temperature: parseFloat($("temp").value || "0"), max_tokens: parseInt($("maxtok").value || "256") };
  const spec = { enabled: $("spec").checked };
  if ($("gamma").value !== "") spec.num_draft_tokens = parseInt($("gamma").value);
  if (!$("spec").disabled) body.speculative = spec;
  const t0 = performance.now();
  let answer = "", usage = null, timings = null;
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!r.ok) { const j = await r.json(); throw new Error(j.error ? j.error.message : r.statusText); }
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const c = j.choices && j.choices[0];
        if (c && c.delta && c.delta.content) { answer += c.delta.content; out.textContent = answer; }
        if (j.usage) usage = j.usage;        // the last chunk (choices: []), as stream_options asks
        if (j.timings) timings = j.timings;  // the chunk with the finish reason
      }
    }
    history.push({ role: "assistant", content: answer });
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = describe(usage, timings, (performance.now() - t0) / 1000);
    out.appendChild(meta);
  } catch (e) {
    out.classList.add("error");
    out.textContent = (answer ? answer + "\n" : "") + "error: " + e.message;
    history.pop();
  }
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text) return;
  $("input").value = "";
  $("send").disabled = true;
  send(text).finally(() => { $("send").disabled = false; $("input").focus(); });
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
});
$("clear").addEventListener("click", () => { history = []; $("log").innerHTML = ""; });
$("key").addEventListener("change", loadModel);
// A link can carry the first message: /?q=Hello&n=32 sends it once the model is known (also what
// the headless-browser test uses). body[data-state] becomes "done" when that answer has finished.
loadModel().then(() => {
  const params = new URLSearchParams(location.search);
  const q = params.get("q");
  if (params.get("n")) $("maxtok").value = params.get("n");
  if (q) send(q).finally(() => { document.body.dataset.state = "done"; });
});
</script>
</body>
</html>
)HTML";

}  // namespace dspark::serve
