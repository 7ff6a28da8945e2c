// dspark generate: stream a completion, then report prompt tokens, prefill and decode speed.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "generate/generate.h"
#include "runtime/drafter_mount.h"
#include "spec/spec_decode.h"
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

int verb_generate(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, chat_template, prompt, prompt_file;
  int64_t n_predict = 128, threads = ThreadPool::default_threads(), n_ctx = 4096;
  SamplerFlags sf;
  bool chat = false, json = false, ignore_eos = false, verbose = false;
  std::vector<std::string> stops;
  SpecFlags spec_flags;
  Args args("dspark generate --model M -p TEXT [--chat] [-n N] [--temp T] [--seed S] [--json]\n"
            "       [--draft-model PATH] [--draft-kind auto|ngram|draft-model|dspark] [--num-draft-tokens G]",
            "Generate a continuation of a prompt with the target model; text streams to stdout,\n"
            "speeds go to stderr (or everything as one JSON object with --json). With a drafter the\n"
            "output is the same (temperature 0) or identically distributed (temperature > 0), and the\n"
            "speculative telemetry is reported too.");
  std::string backend, kernel_plan = "auto";
  add_model_flags(args, &model_spec, &cache, &chat_template);
  add_backend_flag(args, &backend, &kernel_plan);
  add_verbose_flag(args, &verbose);
  args.add("--prompt,-p", &prompt, "prompt text");
  args.add("--prompt-file,-f", &prompt_file, "read the prompt from a file");
  args.add_flag("--chat", &chat, "wrap the prompt in the model's chat template (one user turn)");
  args.add("--max-tokens,-n", &n_predict, "tokens to generate at most", 1, 1 << 20);
  add_sampler_flags(args, &sf);
  args.add_list("--stop", &stops, "stop string (repeatable); not included in the output");
  args.add_flag("--ignore-eos", &ignore_eos, "keep generating past end-of-sequence tokens");
  add_threads_flag(args, &threads);
  args.add("--ctx", &n_ctx, "context size in tokens", 16, 1 << 20);
  add_json_flag(args, &json, "print one JSON object instead of streaming text");
  add_spec_flags(args, &spec_flags);
  if (Status st = args.parse(argc, argv, 2); !st) {
    std::fprintf(stderr, "dspark generate: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (Status st = check_spec_flags(spec_flags); !st) {
    std::fprintf(stderr, "dspark generate: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (!args.positional().empty()) {
    std::fprintf(stderr, "dspark generate: unexpected argument '%s'\n", args.positional()[0].c_str());
    return kExitBadInput;
  }
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) { std::fprintf(stderr, "dspark generate: cannot read prompt file %s\n", prompt_file.c_str()); return kExitBadInput; }
    prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (prompt.empty()) {
    std::fprintf(stderr, "dspark generate: no prompt (use -p TEXT or -f FILE)\n");
    return kExitBadInput;
  }
  auto lm = load_model(model_spec, cache, chat_template,
                       BackendFlags{backend, kernel_plan, (int)threads, model::SessionOptions{}.max_batch});
  if (!lm) { std::fprintf(stderr, "dspark generate: %s\n", lm.message().c_str()); return kExitBadInput; }
  if (verbose) std::fputs(runtime::kernel_report(*lm->model).c_str(), stderr);
  const model::ModelConfig& cfg = lm->model->config();
  if (n_ctx > cfg.n_ctx_train) {
    std::fprintf(stderr, "dspark generate: --ctx %lld exceeds the model's training context %lld\n",
                 (long long)n_ctx, (long long)cfg.n_ctx_train);
    return kExitBadInput;
  }

  std::vector<int32_t> ids;
  if (chat) {
    auto text = tokenizer::render_chat(lm->chat, {{"user", prompt}}, /*add_generation_prompt=*/true, /*include_bos=*/false);
    if (!text) { std::fprintf(stderr, "dspark generate: %s\n", text.message().c_str()); return kExitBadInput; }
    ids = lm->tok->encode(*text, /*add_special=*/true, /*parse_special=*/true);
  } else {
    ids = lm->tok->encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if ((int64_t)ids.size() + n_predict > n_ctx) {
    std::fprintf(stderr, "dspark generate: prompt is %zu tokens; with -n %lld it exceeds the context size %lld "
                 "(raise --ctx or lower -n)\n", ids.size(), (long long)n_predict, (long long)n_ctx);
    return kExitBadInput;
  }

  ThreadPool pool((int)threads);
  model::Session session(*lm->model, model::SessionOptions{.n_ctx = n_ctx, .max_batch = 512}, &pool);
  generate::GenerateParams params;
  params.max_tokens = (int32_t)n_predict;
  params.stop = stops;
  params.ignore_eos = ignore_eos;
  params.sampler = sf.config();
  generate::TextCallback on_text;
  if (!json) on_text = [](std::string_view t) { std::fwrite(t.data(), 1, t.size(), stdout); std::fflush(stdout); };
  // The flags' drafter, else the model's shipped one (drafters/<name>, with its PROVENANCE: all of
  // its block, cost-aware schedule), else plain decoding.
  const std::optional<spec::SpecConfig> want = effective_spec(spec_flags, lm->path, /*fallback_ngram=*/false);
  const bool shipped = want && !spec_flags.names_drafter();
  spec::SpecConfig mounted;
  Result<generate::GenerateResult> res = Status::error("not run");
  spec::SpecStats stats;
  nlohmann::json drafter_stats;
  if (want) {
    auto mount = runtime::mount_drafter(
        *want, {.n_ctx = n_ctx, .cache_dir = resolve_cache_dir(cache), .verify_ms = {}, .verbose = verbose}, *lm, &pool);
    if (!mount) { std::fprintf(stderr, "dspark generate: %s\n", mount.message().c_str()); return kExitBadInput; }
    mounted = (*mount)->config;
    spec::SpecParams sp{params, (*mount)->gamma(), (*mount)->bundle.governor};
    auto r = spec::generate_spec(*lm->model, session, *lm->tok, ids, sp, (*mount)->drafter(), on_text);
    if (!r) { std::fprintf(stderr, "\ndspark generate: %s\n", r.message().c_str()); return 1; }
    stats = r->stats;
    drafter_stats = (*mount)->drafter().stats();
    res = std::move(r->out);
  } else {
    res = generate::generate(*lm->model, session, *lm->tok, ids, params, on_text);
    if (!res) { std::fprintf(stderr, "\ndspark generate: %s\n", res.message().c_str()); return 1; }
  }

  if (json) {
    nlohmann::json j = {{"model", lm->path},
                        {"text", res->text},
                        {"tokens", res->tokens},
                        {"finish_reason", generate::finish_reason_name(res->finish)},
                        {"prompt_tokens", res->prompt_tokens},
                        {"gen_tokens", res->tokens.size()},
                        {"prefill_ms", res->prefill_ms},
                        {"decode_ms", res->decode_ms},
                        {"prefill_tok_s", res->prefill_tok_s()},
                        {"decode_tok_s", res->decode_tok_s()},
                        {"threads", threads},
                        {"peak_rss_bytes", peak_rss_bytes()}};
    if (want) {
      j["spec"] = stats.to_json();
      j["spec"]["drafter"] = drafter_stats;
      j["spec"]["drafter_path"] = mounted.model;
      j["spec"]["shipped_default"] = shipped;
      j["spec"]["schedule"] = spec::schedule_name(mounted.schedule);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr, "\n\nprompt tokens: %lld | generated: %zu (%s) | prefill: %.1f tok/s | decode: %.1f tok/s\n",
                 (long long)res->prompt_tokens, res->tokens.size(), generate::finish_reason_name(res->finish),
                 res->prefill_tok_s(), res->decode_tok_s());
    if (want)
      std::fprintf(stderr, "spec%s: %lld rounds (%lld plain by the governor), drafted %lld, accepted %lld (%.1f%%), "
                   "tau %.2f tokens/round | draft %.0f ms, verify %.0f ms, accept %.0f ms, commit %.0f ms\n",
                   shipped ? " (shipped drafter; --no-spec for plain decoding)" : "", (long long)stats.rounds,
                   (long long)stats.governor.plain_rounds, (long long)stats.drafted, (long long)stats.accepted,
                   100 * stats.acceptance_rate(), stats.tau(), stats.draft_ms, stats.verify_ms, stats.accept_ms,
                   stats.commit_ms);
  }
  return 0;
}

}  // namespace dspark::tools
