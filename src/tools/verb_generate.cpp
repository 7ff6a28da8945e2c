// dspark generate: stream a completion, then report prompt tokens, prefill and decode speed.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "generate/generate.h"
#include "runtime/drafter_mount.h"
#include "speculative/spec_decode.h"
#include "tokenizer/chat_template.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/sampler_flags.h"
#include "tools/spec_flags.h"
#include "runtime/loaded_model.h"
#include "runtime/registry.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

struct GenerateFlags {
  std::string model_spec = "gemma3-270m", cache, chat_template, prompt, prompt_file, backend, kernel_plan = "auto";
  int64_t n_predict = 128, threads = ThreadPool::default_threads(), n_ctx = 4096;
  SamplerFlags sf;
  bool chat = false, json = false, ignore_eos = false, verbose = false;
  std::vector<std::string> stops;
  SpecFlags spec_flags;
};

void add_generate_flags(Args& args, GenerateFlags* f) {
  add_model_flags(args, &f->model_spec, &f->cache, &f->chat_template);
  add_backend_flag(args, &f->backend, &f->kernel_plan);
  add_verbose_flag(args, &f->verbose);
  args.add("--prompt,-p", &f->prompt, "prompt text");
  args.add("--prompt-file,-f", &f->prompt_file, "read the prompt from a file");
  args.add_flag("--chat", &f->chat, "wrap the prompt in the model's chat template (one user turn)");
  args.add("--max-tokens,-n", &f->n_predict, "tokens to generate at most", 1, 1 << 20);
  add_sampler_flags(args, &f->sf);
  args.add_list("--stop", &f->stops, "stop string (repeatable); not included in the output");
  args.add_flag("--ignore-eos", &f->ignore_eos, "keep generating past end-of-sequence tokens");
  add_threads_flag(args, &f->threads);
  args.add("--ctx", &f->n_ctx, "context size in tokens", 16, 1 << 20);
  add_json_flag(args, &f->json, "print one JSON object instead of streaming text");
  add_spec_flags(args, &f->spec_flags);
}

// Flags that need no model: the drafter flags, no stray arguments, a prompt (-p or -f).
Status check_generate_flags(const Args& args, GenerateFlags& f) {
  DSPARK_RETURN_IF_ERROR(check_spec_flags(f.spec_flags));
  if (!args.positional().empty()) return Status::error("unexpected argument '" + args.positional()[0] + "'");
  if (!f.prompt_file.empty()) {
    std::ifstream in(f.prompt_file, std::ios::binary);
    if (!in) return Status::error("cannot read prompt file " + f.prompt_file);
    f.prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (f.prompt.empty()) return Status::error("no prompt (use -p TEXT or -f FILE)");
  return Status::ok();
}

// The prompt's token ids (chat-templated with --chat), checked against the context size.
Result<std::vector<int32_t>> encode_prompt(const GenerateFlags& f, const LoadedModel& lm) {
  if (f.n_ctx > lm.model->config().n_ctx_train)
    return Status::error("--ctx " + std::to_string(f.n_ctx) + " exceeds the model's training context " +
                         std::to_string(lm.model->config().n_ctx_train));
  std::vector<int32_t> ids;
  if (f.chat) {
    auto text = tokenizer::render_chat(lm.chat, {{"user", f.prompt}}, /*add_generation_prompt=*/true, /*include_bos=*/false);
    if (!text) return text.status();
    ids = lm.tok->encode(*text, /*add_special=*/true, /*parse_special=*/true);
  } else {
    ids = lm.tok->encode(f.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if ((int64_t)ids.size() + f.n_predict > f.n_ctx)
    return Status::error("prompt is " + std::to_string(ids.size()) + " tokens; with -n " + std::to_string(f.n_predict) +
                         " it exceeds the context size " + std::to_string(f.n_ctx) + " (raise --ctx or lower -n)");
  return ids;
}

struct GenerateRun {
  generate::GenerateResult out;
  std::optional<speculative::SpecConfig> want;  // the drafter asked for (none: plain decoding)
  bool shipped = false;                  // the model's shipped drafter, not one the flags named
  speculative::SpecConfig mounted;
  speculative::SpecStats stats;
  nlohmann::json drafter_stats;
  std::string kind;  // the mounted drafter's kind
};

// The flags' drafter, else the model's shipped default (runtime::shipped_spec, with its PROVENANCE),
// else plain decoding. *bad_input: the drafter could not be mounted.
Result<GenerateRun> run_generate(const GenerateFlags& f, const LoadedModel& lm, const std::vector<int32_t>& ids,
                                 bool* bad_input) {
  ThreadPool pool((int)f.threads);
  model::Session session(*lm.model, model::SessionOptions{.n_ctx = f.n_ctx, .max_batch = 512}, &pool);
  generate::GenerateParams params;
  params.max_tokens = (int32_t)f.n_predict;
  params.stop = f.stops;
  params.ignore_eos = f.ignore_eos;
  params.sampler = f.sf.config();
  generate::TextCallback on_text;
  if (!f.json) on_text = [](std::string_view t) { std::fwrite(t.data(), 1, t.size(), stdout); std::fflush(stdout); };
  GenerateRun run;
  auto want = effective_spec(f.spec_flags, lm, resolve_cache_dir(f.cache), /*fallback_ngram=*/false);
  *bad_input = !want;
  if (!want) return want.status();
  run.want = *want;
  run.shipped = run.want && !f.spec_flags.names_drafter();
  if (!run.want) {
    auto res = generate::generate(*lm.model, session, *lm.tok, ids, params, on_text);
    if (!res) return res.status();
    run.out = std::move(res).value();
    return run;
  }
  auto mount = runtime::mount_drafter(
      *run.want, {.n_ctx = f.n_ctx, .cache_dir = resolve_cache_dir(f.cache), .verify_ms = {}, .verbose = f.verbose, .note = print_note}, lm,
      &pool);
  *bad_input = !mount;
  if (!mount) return mount.status();
  run.mounted = (*mount)->config;
  run.kind = (*mount)->kind();
  speculative::SpecParams sp{params, (*mount)->gamma(), (*mount)->bundle.governor};
  auto r = speculative::generate_spec(*lm.model, session, *lm.tok, ids, sp, (*mount)->drafter(), on_text);
  if (!r) return r.status();
  run.stats = r->stats;
  run.drafter_stats = (*mount)->drafter().stats();
  run.out = std::move(r->out);
  return run;
}

void print_generate(const GenerateFlags& f, const LoadedModel& lm, const GenerateRun& run) {
  const generate::GenerateResult& res = run.out;
  const speculative::SpecStats& stats = run.stats;
  if (f.json) {
    nlohmann::json j = {{"model", lm.path}, {"text", res.text}, {"tokens", res.tokens},
                        {"finish_reason", generate::finish_reason_name(res.finish)},
                        {"prompt_tokens", res.prompt_tokens}, {"gen_tokens", res.tokens.size()},
                        {"prefill_ms", res.prefill_ms}, {"decode_ms", res.decode_ms},
                        {"prefill_tok_s", res.prefill_tok_s()}, {"decode_tok_s", res.decode_tok_s()},
                        {"threads", f.threads}, {"peak_rss_bytes", peak_rss_bytes()}};
    if (run.want) {
      j["spec"] = stats.to_json();
      j["spec"]["drafter"] = run.drafter_stats;
      j["spec"]["drafter_kind"] = run.kind;
      j["spec"]["drafter_path"] = run.mounted.model;
      if (!run.mounted.suffix_index.empty()) j["spec"]["suffix_index"] = run.mounted.suffix_index;
      j["spec"]["shipped_default"] = run.shipped;
      j["spec"]["schedule"] = speculative::schedule_name(run.mounted.schedule);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::fprintf(stderr, "\n\nprompt tokens: %lld | generated: %zu (%s) | prefill: %.1f tok/s | decode: %.1f tok/s\n",
               (long long)res.prompt_tokens, res.tokens.size(), generate::finish_reason_name(res.finish),
               res.prefill_tok_s(), res.decode_tok_s());
  if (run.want)
    std::fprintf(stderr, "spec%s: %lld rounds (%lld plain by the governor), drafted %lld, accepted %lld (%.1f%%), "
                 "tau %.2f tokens/round | draft %.0f ms, verify %.0f ms, accept %.0f ms, commit %.0f ms\n",
                 run.shipped ? " (shipped drafter; --no-spec for plain decoding)" : "", (long long)stats.rounds,
                 (long long)stats.governor.plain_rounds, (long long)stats.drafted, (long long)stats.accepted,
                 100 * stats.acceptance_rate(), stats.tau(), stats.draft_ms, stats.verify_ms, stats.accept_ms,
                 stats.commit_ms);
}

}  // namespace

int verb_generate(int argc, char** argv) {
  GenerateFlags f;
  Args args("dspark generate --model M -p TEXT [--chat] [-n N] [--temp T] [--seed S] [--json]\n"
            "       [--draft-model PATH] [--draft-kind auto|ngram|draft-model|dspark] [--num-draft-tokens G]",
            "Generate a continuation of a prompt with the target model; text streams to stdout,\n"
            "speeds go to stderr (or everything as one JSON object with --json). With a drafter the\n"
            "output is the same (temperature 0) or identically distributed (temperature > 0), and the\n"
            "speculative telemetry is reported too.");
  add_generate_flags(args, &f);
  const VerbError fail{"generate"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (Status st = check_generate_flags(args, f); !st) return fail(st.message());
  auto lm = load_model(f.model_spec, f.cache, f.chat_template,
                       BackendFlags{f.backend, f.kernel_plan, (int)f.threads, model::SessionOptions{}.max_batch, print_note, {}});
  if (!lm) return fail(lm.message());
  if (f.verbose) std::fputs(runtime::kernel_report(*lm->model).c_str(), stderr);
  auto ids = encode_prompt(f, *lm);
  if (!ids) return fail(ids.message());
  bool bad_drafter = false;
  auto run = run_generate(f, *lm, *ids, &bad_drafter);
  if (!run) {
    if (bad_drafter) return fail(run.message());
    std::fprintf(stderr, "\n");  // after the streamed text
    return fail(run.message(), 1);
  }
  print_generate(f, *lm, *run);
  return 0;
}

}  // namespace dspark::tools
