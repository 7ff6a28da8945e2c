// dspark regen: the target answers the training prompts (batched decode), writing shards of token
// ids, tapped hidden rows and top-k next-token distributions for drafter training (src/train/).
// Resumable: each shard is written atomically and verified by checksum on restart; a shard that
// is missing or fails verification is regenerated. A manifest records settings, counts and the
// command.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "tokenizer/chat_template.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/loaded_model.h"
#include "core/progress.h"
#include "runtime/registry.h"
#include "tools/verbs.h"
#include "train/prompts.h"
#include "train/regen.h"
#include "train/regen_ids.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


std::string shard_name(int64_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05lld.safetensors", (long long)i);
  return buf;
}

Status write_json_atomic(const fs::path& path, const nlohmann::json& j) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return Status::error(tmp.string() + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::error(path.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace

int verb_regen(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, chat_template, prompts_path, eval_path, out_dir, taps_s = "1,4,7,10,13,16";
  int64_t top_k = 32, max_new = 256, batch = 32, seed = 1, max_prompt = 768, n_prompts = 0, shard_size = 64,
          max_shards = 0;
  int64_t threads = ThreadPool::default_threads();
  double share = 0.25, temp = 0.7;
  bool json = false;
  Args args("dspark regen --prompts TRAIN.jsonl --out DIR [--taps 1,4,7,10,13,16] [--top-k 32] [--batch 32]",
            "The target answers each training prompt (the model's chat template, first turn): greedy, or sampled\n"
            "at --temp for a --sampled-share of prompts (chosen by prompt index, reproducible). Writes\n"
            "DIR/shard-NNNNN.safetensors (tokens, tapped residual rows as bf16, target top-k next-token\n"
            "distributions) and DIR/manifest.json. Kill it any time: a rerun with the same flags verifies\n"
            "finished shards and continues. Refuses prompts that repeat an evaluation prompt\n"
            "(--eval-prompts, default: spec_bench_dev.jsonl beside the training file, else data/spec_bench_dev.jsonl).");
  add_model_flags(args, &model_spec, &cache, &chat_template);
  args.add("--prompts", &prompts_path, "training prompts JSONL (required)");
  args.add("--eval-prompts", &eval_path, "evaluation prompts that must not overlap");
  args.add("--out,-o", &out_dir, "output folder (required)");
  args.add("--taps", &taps_s, "target layers to record (-1 = embedding)");
  args.add("--top-k", &top_k, "distribution entries per position", 1, 4096);
  args.add("--max-new", &max_new, "response token limit", 1, 8192);
  args.add("--max-prompt-tokens", &max_prompt, "skip longer prompts", 8, 32768);
  args.add("--batch,-b", &batch, "sequences decoded together", 1, 1024);
  args.add("--sampled-share", &share, "fraction of prompts answered by sampling", 0.0, 1.0);
  args.add("--temp", &temp, "sampling temperature of the sampled share", 0.01, 5.0);
  args.add("--seed", &seed, "selects the sampled prompts and seeds their sampling", 0, INT64_MAX);
  args.add("--n-prompts", &n_prompts, "use only the first N prompts (0 = all)", 0, INT64_MAX);
  args.add("--shard-size", &shard_size, "prompts per shard", 1, 1 << 20);
  args.add("--shards", &max_shards, "work only on the first N shards (0 = all): a smaller dataset of the same\n"
           "settings, e.g. to compare tap layers; a later run without it continues into the rest", 0, INT64_MAX);
  add_threads_flag(args, &threads);
  std::string export_ids, from_ids, skip_ids;
  bool prompt_text = false;
  args.add_flag("--prompt-text", &prompt_text, "distillation on the prompts themselves: no responses; every chat-templated\n"
                "prompt is run teacher-forced (prefill speed) and each position after BOS gets its taps and the\n"
                "target's distribution. Sequences are marked as text (temperature -1): training masks slots past\n"
                "the first token that leaves the target's own greedy path; they are never held out");
  args.add("--export-ids", &export_ids, "write the token ids of every finished shard of --out to FILE and stop\n"
           "(no generation; the file is small enough to keep, see --from-ids)");
  args.add("--from-ids", &from_ids, "rebuild shards from an --export-ids file by teacher-forced target forwards\n"
           "(prefill speed) instead of decoding; --taps / --top-k may differ from the original run");
  args.add("--skip-ids", &skip_ids, "leave out the shards an --export-ids file of the same settings covers: this\n"
           "folder then continues that run without first rebuilding its shards (export this folder's ids\n"
           "later; --from-ids replays both files into one folder)");
  add_json_flag(args, &json, "print a JSON summary on stdout");
  auto fail = [](const std::string& m, int code = kExitBadInput) {
    std::fprintf(stderr, "dspark regen: %s\n", m.c_str());
    return code;
  };
  if (Status st = args.parse(argc, argv, 2); !st) return fail(st.message());
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (out_dir.empty()) return fail("--out is required");
  if (!export_ids.empty()) {  // export mode: no model, no prompts
    const fs::path mpath = fs::path(out_dir) / "manifest.json";
    std::ifstream in(mpath);
    nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    if (!in || m.is_discarded() || !m.contains("settings") || !m.contains("shards"))
      return fail(mpath.string() + ": missing or not a regen manifest");
    std::vector<train::Shard> shards;
    for (const auto& e : m["shards"]) {
      auto sh = train::Shard::open((fs::path(out_dir) / e.value("file", "")).string(), 0, true);
      if (!sh) return fail(sh.message());
      shards.push_back(std::move(sh.value()));
    }
    std::vector<const train::Shard*> ptrs;
    int64_t toks = 0, seqs = 0;
    for (const auto& sh : shards) {
      ptrs.push_back(&sh);
      toks += sh.n_tokens();
      seqs += sh.n_seq();
    }
    if (Status st = train::write_ids_file(export_ids, m["settings"].dump(), ptrs); !st) return fail(st.message(), 1);
    std::printf("regen: wrote %lld sequences (%lld tokens) of %zu shards to %s\n", (long long)seqs, (long long)toks,
                shards.size(), export_ids.c_str());
    return 0;
  }
  if (prompts_path.empty()) return fail("--prompts is required");
  auto taps = parse_int_list(taps_s, "--taps");
  if (!taps) return fail(taps.message());

  auto train = train::read_prompt_file(prompts_path);
  if (!train) return fail(train.message());
  if (eval_path.empty()) {
    const fs::path guess = fs::path(prompts_path).parent_path() / "spec_bench_dev.jsonl";
    if (fs::exists(guess)) eval_path = guess.string();
    else if (fs::exists(default_prompt_file())) eval_path = default_prompt_file();
  }
  if (!eval_path.empty()) {
    auto eval = train::read_prompt_file(eval_path);
    if (!eval) return fail(eval.message());
    if (Status st = train::check_no_overlap(prompts_path, *train, eval_path, *eval); !st) return fail(st.message());
  } else {
    std::fprintf(stderr, "dspark regen: warning: no evaluation prompt file to check overlap against (--eval-prompts)\n");
  }
  if (n_prompts > 0 && (size_t)n_prompts < train->size()) train->resize((size_t)n_prompts);

  auto lm = load_model(model_spec, cache, chat_template);
  if (!lm) return fail(lm.message());
  const model::ModelConfig& mc = lm->model->config();
  for (int t : *taps)
    if (t < model::kTapEmbedding || t >= mc.n_layer - 1)
      return fail("--taps: layer " + std::to_string(t) + " out of range (-1 .. " + std::to_string(mc.n_layer - 2) +
                  " for this " + std::to_string(mc.n_layer) + "-layer target; the last layer is never tapped)");
  for (size_t i = 1; i < taps->size(); ++i)
    if ((*taps)[i] <= (*taps)[i - 1]) return fail("--taps must be strictly increasing");

  // Settings that define the data; a rerun must repeat them exactly. (Gemma's template is recorded
  // as "gemma3", the name data made before other templates existed carries.)
  const std::string chat_setting =
      lm->chat.family == tokenizer::ChatFamily::kGemma ? "gemma3" : tokenizer::chat_family_name(lm->chat.family);
  nlohmann::json settings = {{"model", fs::path(lm->path).filename().string()},
                             {"prompts", fs::path(prompts_path).filename().string()},
                             {"n_prompts", (int64_t)train->size()}, {"taps", *taps}, {"top_k", top_k},
                             {"max_new", max_new}, {"max_prompt_tokens", max_prompt}, {"sampled_share", share},
                             {"temp", temp}, {"seed", seed}, {"shard_size", shard_size}, {"chat_template", chat_setting}};
  // A replay (or a run that continues another) must use the ids of a run with the same prompts and
  // generation settings.
  auto load_ids = [&](const std::string& path) -> Result<train::IdsFile> {
    auto r = train::read_ids_file(path, mc.n_vocab);
    if (!r) return r.status();
    nlohmann::json orig = nlohmann::json::parse(r->settings_json, nullptr, false);
    if (orig.is_discarded() || !orig.is_object()) return Status::error(path + ": metadata 'settings' is not JSON");
    for (const char* k : {"model", "prompts", "n_prompts", "max_new", "max_prompt_tokens", "sampled_share", "temp",
                          "seed", "shard_size", "chat_template"})
      if (orig.value(k, nlohmann::json()) != settings[k])
        return Status::error(path + ": setting '" + k + "' is " + orig.value(k, nlohmann::json()).dump() +
                             ", this run has " + settings[k].dump() + " (use the flags of the run that wrote the ids)");
    return r;
  };
  train::IdsFile ids;
  if (!from_ids.empty()) {
    auto r = load_ids(from_ids);
    if (!r) return fail(r.message());
    ids = std::move(r.value());
    // Not a setting: replayed shards are byte for byte what decoding writes, so one folder may hold
    // both and a decode run may continue a replayed one.
  }
  std::set<int64_t> skip_prompts;  // --skip-ids: prompt indices another folder already holds
  if (!skip_ids.empty()) {
    if (!from_ids.empty()) return fail("--skip-ids and --from-ids exclude each other");
    auto r = load_ids(skip_ids);
    if (!r) return fail(r.message());
    for (const auto& q : r->seqs) skip_prompts.insert(q.prompt_index);
  }
  if (prompt_text) {
    if (!from_ids.empty()) return fail("--prompt-text and --from-ids exclude each other");
    settings["prompt_text"] = true;
  }
  const fs::path dir(out_dir), manifest_path = dir / "manifest.json";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(out_dir + ": " + ec.message());
  nlohmann::json manifest;
  if (fs::exists(manifest_path)) {
    std::ifstream in(manifest_path);
    manifest = nlohmann::json::parse(in, nullptr, false);
    if (manifest.is_discarded() || !manifest.contains("settings"))
      return fail(manifest_path.string() + ": not a regen manifest (use a new --out)");
    if (manifest["settings"] != settings)
      return fail(out_dir + " was generated with different settings (have " + manifest["settings"].dump() + ", now " +
                  settings.dump() + "); use a new --out, or the same flags to resume");
  }
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i) command += ' ';
    command += argv[i];
  }

  // Jobs: chat-templated prompts, in file order; too-long prompts are skipped (counted).
  std::vector<train::RegenJob> jobs;
  int64_t skipped = 0;
  for (const auto& p : *train) {
    auto text = tokenizer::render_chat(lm->chat, {{"user", p.text}}, true, false);
    if (!text) return fail(prompts_path + ":" + std::to_string(p.line + 1) + ": " + text.message());
    train::RegenJob j;
    j.prompt_index = p.line;
    j.prompt = lm->tok->encode(*text, true, true);
    if ((int64_t)j.prompt.size() > max_prompt) { ++skipped; continue; }
    const uint64_t h = (uint64_t)p.line * 0x9E3779B97F4A7C15ull ^ (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
    const bool sampled = (double)((h >> 11) % 1000000) / 1e6 < share;
    j.temperature = sampled ? (float)temp : 0.0f;
    j.seed = h;
    jobs.push_back(std::move(j));
  }
  const int64_t n_shards = ((int64_t)jobs.size() + shard_size - 1) / shard_size;

  // Verify existing shards; everything else is to do.
  const train::ShardLayout layout{*taps, (int32_t)top_k, mc.n_embd};
  std::vector<bool> done(n_shards, false);
  int64_t n_done = 0, redo = 0;
  {
    ProgressBar vbar("verify", (uint64_t)n_shards, " shards");
    for (int64_t s = 0; s < n_shards; ++s) {
      const fs::path p = dir / shard_name(s);
      if (fs::exists(p)) {
        auto sh = train::Shard::open(p.string(), mc.n_vocab, true);
        const int64_t want = std::min<int64_t>(shard_size, (int64_t)jobs.size() - s * shard_size);
        if (sh && sh->n_seq() == want && sh->layout().tap_ids == *taps && sh->layout().top_k == top_k) {
          done[s] = true;
          ++n_done;
        } else {
          std::fprintf(stderr, "\ndspark regen: redoing %s (%s)\n", p.filename().c_str(),
                       sh ? "wrong sequence count or layout" : sh.message().c_str());
          fs::remove(p, ec);
          ++redo;
        }
      }
      vbar.update((uint64_t)s + 1);
    }
  }
  // --skip-ids: a shard whose every prompt the file covers is that run's, not this folder's.
  std::vector<bool> skipped_shard(n_shards, false);
  int64_t n_skipped_shards = 0;
  if (!skip_prompts.empty())
    for (int64_t s = 0; s < n_shards; ++s) {
      if (done[s]) continue;
      bool all = true;
      for (int64_t i = s * shard_size; i < std::min<int64_t>((s + 1) * shard_size, (int64_t)jobs.size()) && all; ++i)
        all = skip_prompts.count(jobs[i].prompt_index) > 0;
      if (all) {
        skipped_shard[s] = true;
        ++n_skipped_shards;
      }
    }
  if (n_skipped_shards > 0)
    std::fprintf(stderr, "dspark regen: %lld shards left out (covered by %s)\n", (long long)n_skipped_shards,
                 skip_ids.c_str());
  // --shards N: the shards past the first N wait for a later run.
  int64_t n_beyond = 0;
  if (max_shards > 0)
    for (int64_t s = max_shards; s < n_shards; ++s)
      if (!done[s] && !skipped_shard[s]) {
        skipped_shard[s] = true;
        ++n_skipped_shards;
        ++n_beyond;
      }
  if (n_beyond > 0)
    std::fprintf(stderr, "dspark regen: %lld shards past --shards %lld left for a later run\n", (long long)n_beyond,
                 (long long)max_shards);
  std::vector<train::RegenJob> todo;
  for (int64_t s = 0; s < n_shards; ++s)
    if (!done[s] && !skipped_shard[s])
      for (int64_t i = s * shard_size; i < std::min<int64_t>((s + 1) * shard_size, (int64_t)jobs.size()); ++i)
        todo.push_back(jobs[i]);
  std::fprintf(stderr, "dspark regen: %zu prompts (%lld skipped as longer than %lld tokens), %lld shards: %lld done, %lld to do\n",
               jobs.size(), (long long)skipped, (long long)max_prompt, (long long)n_shards, (long long)n_done,
               (long long)(n_shards - n_done - n_skipped_shards));

  // Finished sequences wait per shard until the shard is complete.
  std::map<int64_t, int64_t> job_shard;  // prompt_index -> shard
  for (int64_t i = 0; i < (int64_t)jobs.size(); ++i) job_shard[jobs[i].prompt_index] = i / shard_size;
  std::map<int64_t, std::vector<train::RegenSeq>> pending;
  int64_t run_seqs = 0, run_new = 0, run_prompt = 0;
  train::RegenCounters last_counters;
  auto update_manifest = [&](double tok_s) -> Status {
    nlohmann::json shards = nlohmann::json::array();
    int64_t seqs = 0, toks = 0, resp = 0;
    for (int64_t s = 0; s < n_shards; ++s) {
      if (!done[s]) continue;
      auto sh = train::Shard::open((dir / shard_name(s)).string(), 0, false);
      if (!sh) return sh.status();
      int64_t r = 0;
      for (int64_t q = 0; q < sh->n_seq(); ++q) r += sh->seq_len(q) - sh->prompt_len(q);
      shards.push_back({{"file", shard_name(s)}, {"sequences", sh->n_seq()}, {"tokens", sh->n_tokens()}, {"response_tokens", r}});
      seqs += sh->n_seq();
      toks += sh->n_tokens();
      resp += r;
    }
    manifest["format"] = "dspark-regen-manifest-v1";
    manifest["settings"] = settings;
    manifest["command"] = command;
    if (!from_ids.empty()) manifest["replayed_from_ids"] = fs::path(from_ids).filename().string();
    if (!skip_ids.empty()) manifest["continues_ids"] = fs::path(skip_ids).filename().string();
    manifest["skipped_long_prompts"] = skipped;
    manifest["shards_total"] = n_shards;
    manifest["shards_done"] = (int64_t)shards.size();
    manifest["sequences"] = seqs;
    manifest["tokens"] = toks;
    manifest["response_tokens"] = resp;
    if (tok_s > 0) manifest["last_run_new_tokens_per_s"] = tok_s;
    manifest["shards"] = shards;
    return write_json_atomic(manifest_path, manifest);
  };

  // Replay: the known sequences of the to-do shards; a shard with a sequence the ids file lacks is
  // left for a later decode run.
  std::vector<train::IdsSeq> replay;
  if (!from_ids.empty()) {
    std::map<int64_t, const train::IdsSeq*> by_prompt;
    for (const auto& q : ids.seqs) by_prompt[q.prompt_index] = &q;
    std::vector<train::RegenJob> kept;
    int64_t missing_shards = 0;
    for (int64_t s = 0; s < n_shards; ++s) {
      if (done[s] || skipped_shard[s]) continue;
      const int64_t lo = s * shard_size, hi = std::min<int64_t>((s + 1) * shard_size, (int64_t)jobs.size());
      bool all = true;
      for (int64_t i = lo; i < hi && all; ++i) all = by_prompt.count(jobs[i].prompt_index) > 0;
      if (!all) { ++missing_shards; continue; }
      for (int64_t i = lo; i < hi; ++i) {
        const train::IdsSeq& q = *by_prompt[jobs[i].prompt_index];
        if (q.prompt_len != (int32_t)jobs[i].prompt.size() ||
            !std::equal(jobs[i].prompt.begin(), jobs[i].prompt.end(), q.tokens.begin()) ||
            q.temperature != jobs[i].temperature)
          return fail(from_ids + ": the sequence of prompt line " + std::to_string(jobs[i].prompt_index + 1) +
                      " does not start with this run's tokenized prompt (another tokenizer, template or prompts file?)");
        replay.push_back(q);
        kept.push_back(jobs[i]);
      }
    }
    todo = std::move(kept);
    std::fprintf(stderr, "dspark regen: replaying %zu sequences from %s; %lld shards not covered by it\n", replay.size(),
                 from_ids.c_str(), (long long)missing_shards);
  }

  if (prompt_text) {
    for (const train::RegenJob& j : todo) {
      train::IdsSeq q;
      q.prompt_index = j.prompt_index;
      q.prompt_len = 1;         // BOS: every later position is an anchor
      q.temperature = -1.0f;    // text, not the target's own generation
      q.tokens = j.prompt;
      replay.push_back(std::move(q));
    }
  }

  ThreadPool pool((int)threads);
  train::RegenConfig rc{*taps, (int32_t)top_k, (int32_t)max_new, (int32_t)batch};
  ProgressBar bar("regen", (uint64_t)todo.size(), " seqs");
  const auto t0 = Clock::now();
  auto rate = [&] {
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    return sec > 0 ? (double)run_new / sec : 0.0;
  };
  auto on_seq = [&](train::RegenSeq&& seq) -> Status {
        const int64_t s = job_shard[seq.prompt_index];
        ++run_seqs;
        run_new += (int64_t)seq.tokens.size() - seq.prompt_len;
        run_prompt += seq.prompt_len;
        auto& v = pending[s];
        v.push_back(std::move(seq));
        const int64_t want = std::min<int64_t>(shard_size, (int64_t)jobs.size() - s * shard_size);
        if ((int64_t)v.size() < want) return Status::ok();
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.prompt_index < b.prompt_index; });
        DSPARK_RETURN_IF_ERROR(train::write_shard((dir / shard_name(s)).string(), layout, v));
        pending.erase(s);
        done[s] = true;
        return update_manifest(rate());
  };
  Status st = !from_ids.empty() || prompt_text
      ? train::replay_sequences(*lm->model, rc, replay, &pool, [&](train::RegenSeq&& seq) -> Status {
          DSPARK_RETURN_IF_ERROR(on_seq(std::move(seq)));
          bar.update((uint64_t)run_seqs);
          return Status::ok();
        })
      : train::regenerate(*lm->model, *lm->tok, rc, todo, &pool, on_seq, [&](const train::RegenCounters& c) {
        last_counters = c;
        char buf[64];
        // Tokens decoded so far (running sequences included), not only finished ones.
        const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        std::snprintf(buf, sizeof buf, "%.0f new tok/s", sec > 0 ? (double)c.new_tokens / sec : 0.0);
        bar.set_suffix(buf);
        bar.update((uint64_t)c.sequences);
      });
  if (!st) return fail(st.message(), 1);
  bar.update(todo.size());
  if (Status m = update_manifest(rate()); !m) return fail(m.message(), 1);
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (json) {
    nlohmann::json j = {{"out", out_dir}, {"sequences_run", run_seqs}, {"new_tokens_run", run_new},
                        {"prompt_tokens_run", run_prompt}, {"seconds", sec}, {"new_tokens_per_s", rate()},
                        {"shards_done", manifest["shards_done"]}, {"shards_total", n_shards},
                        {"shards_redone", redo}, {"response_tokens_total", manifest["response_tokens"]},
                        {"time_ms", {{"prefill", last_counters.prefill_ms}, {"decode_forward", last_counters.step_ms},
                                     {"distributions_sampling", last_counters.post_ms}}}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("regen: %lld sequences, %lld new tokens in %.1f s (%.0f new tok/s); %s now holds %lld/%lld shards\n",
                (long long)run_seqs, (long long)run_new, sec, rate(), out_dir.c_str(),
                (long long)manifest["shards_done"].get<int64_t>(), (long long)n_shards);
  }
  return 0;
}

}  // namespace dspark::tools
