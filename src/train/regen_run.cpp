#include "train/regen_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/threadpool.h"
#include "train/regen_ids.h"

namespace dspark::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What plan_regen decided; run_regen works through it.
struct RegenPlan {
  RegenRunOptions opt;
  nlohmann::json settings;  // the settings that define the data (a rerun must repeat them)
  nlohmann::json manifest;  // the folder's manifest as found ({} for a new folder)
  fs::path dir, manifest_path;
  std::vector<RegenJob> jobs;  // every prompt that fits, in file order; shard s holds jobs [s*size, (s+1)*size)
  int64_t skipped_long = 0;    // prompts longer than max_prompt
  int64_t n_shards = 0;
  ShardLayout layout;
  int64_t n_vocab = 0;
  std::vector<bool> done;           // shard finished and verified
  std::vector<bool> left_out;       // covered by --skip-ids, or past --shards
  int64_t redone = 0;               // shards that failed verification (removed, to do again)
  std::vector<RegenJob> todo;       // the jobs of this run
  std::vector<IdsSeq> replay;       // known sequences (--from-ids, --prompt-text): replayed, not decoded
};

void RegenPlanDeleter::operator()(RegenPlan* p) const { delete p; }

namespace {

std::string shard_name(int64_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05lld.safetensors", (long long)i);
  return buf;
}

void note(const RegenEvents& ev, const std::string& line) {
  if (ev.note) ev.note(line);
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

Status check_taps(const std::vector<int>& taps, const model::ModelConfig& mc) {
  for (int t : taps)
    if (t < model::kTapEmbedding || t >= mc.n_layer - 1)
      return Status::error("--taps: layer " + std::to_string(t) + " out of range (-1 .. " + std::to_string(mc.n_layer - 2) +
                           " for this " + std::to_string(mc.n_layer) + "-layer target; the last layer is never tapped)");
  for (size_t i = 1; i < taps.size(); ++i)
    if (taps[i] <= taps[i - 1]) return Status::error("--taps must be strictly increasing");
  return Status::ok();
}

// An ids file (--from-ids, --skip-ids) of a run with the same prompts and generation settings.
Result<IdsFile> load_matching_ids(const std::string& path, int64_t n_vocab, const nlohmann::json& settings) {
  auto r = read_ids_file(path, n_vocab);
  if (!r) return r.status();
  nlohmann::json orig = nlohmann::json::parse(r->settings_json, nullptr, false);
  if (orig.is_discarded() || !orig.is_object()) return Status::error(path + ": metadata 'settings' is not JSON");
  for (const char* k : {"model", "prompts", "n_prompts", "max_new", "max_prompt_tokens", "sampled_share", "temp", "seed",
                        "shard_size", "chat_template"})
    if (orig.value(k, nlohmann::json()) != settings[k])
      return Status::error(path + ": setting '" + k + "' is " + orig.value(k, nlohmann::json()).dump() + ", this run has " +
                           settings[k].dump() + " (use the flags of the run that wrote the ids)");
  return r;
}

// The folder's manifest, if any, must carry this run's settings.
Status open_folder(RegenPlan& p) {
  std::error_code ec;
  fs::create_directories(p.dir, ec);
  if (ec) return Status::error(p.opt.out_dir + ": " + ec.message());
  if (!fs::exists(p.manifest_path)) return Status::ok();
  std::ifstream in(p.manifest_path);
  p.manifest = nlohmann::json::parse(in, nullptr, false);
  if (p.manifest.is_discarded() || !p.manifest.contains("settings"))
    return Status::error(p.manifest_path.string() + ": not a regen manifest (use a new --out)");
  if (p.manifest["settings"] != p.settings)
    return Status::error(p.opt.out_dir + " was generated with different settings (have " + p.manifest["settings"].dump() +
                         ", now " + p.settings.dump() + "); use a new --out, or the same flags to resume");
  return Status::ok();
}

// Chat-templated prompts in file order; too-long prompts are skipped (counted). The sampled share
// is chosen by prompt index and seed, so it is reproducible.
Status make_jobs(RegenPlan& p, const std::vector<PromptRecord>& prompts, const tokenizer::Tokenizer& tok,
                 const tokenizer::ChatTemplate& chat) {
  const RegenRunOptions& o = p.opt;
  for (const auto& pr : prompts) {
    auto text = tokenizer::render_chat(chat, {{"user", pr.text}}, true, false);
    if (!text) return Status::error(o.prompts_path + ":" + std::to_string(pr.line + 1) + ": " + text.message());
    RegenJob j;
    j.prompt_index = pr.line;
    j.prompt = tok.encode(*text, true, true);
    if ((int64_t)j.prompt.size() > o.max_prompt) {
      ++p.skipped_long;
      continue;
    }
    const uint64_t h = (uint64_t)pr.line * 0x9E3779B97F4A7C15ull ^ (uint64_t)o.seed * 0xBF58476D1CE4E5B9ull;
    const bool sampled = (double)((h >> 11) % 1000000) / 1e6 < o.sampled_share;
    j.temperature = sampled ? (float)o.temp : 0.0f;
    j.seed = h;
    p.jobs.push_back(std::move(j));
  }
  p.n_shards = ((int64_t)p.jobs.size() + o.shard_size - 1) / o.shard_size;
  return Status::ok();
}

int64_t shard_begin(const RegenPlan& p, int64_t s) { return s * p.opt.shard_size; }
int64_t shard_end(const RegenPlan& p, int64_t s) {
  return std::min<int64_t>((s + 1) * p.opt.shard_size, (int64_t)p.jobs.size());
}

// Finished shards are verified; one that fails is removed and done again.
void verify_shards(RegenPlan& p, const RegenEvents& ev) {
  p.done.assign(p.n_shards, false);
  for (int64_t s = 0; s < p.n_shards; ++s) {
    const fs::path path = p.dir / shard_name(s);
    if (fs::exists(path)) {
      auto sh = Shard::open(path.string(), p.n_vocab, true);
      if (sh && sh->n_seq() == shard_end(p, s) - shard_begin(p, s) && sh->layout().tap_ids == p.opt.taps &&
          sh->layout().top_k == p.opt.top_k) {
        p.done[s] = true;
      } else {
        note(ev, "redoing " + path.filename().string() + " (" +
                     (sh ? std::string("wrong sequence count or layout") : sh.message()) + ")");
        std::error_code ec;
        fs::remove(path, ec);
        ++p.redone;
      }
    }
    if (ev.progress) ev.progress("verify", (uint64_t)s + 1, (uint64_t)p.n_shards, "");
  }
}

// --skip-ids: a shard whose every prompt the file covers is that run's; --shards N: the shards past
// the first N wait for a later run.
void leave_out(RegenPlan& p, const std::set<int64_t>& skip_prompts, const RegenEvents& ev) {
  p.left_out.assign(p.n_shards, false);
  int64_t covered = 0, beyond = 0;
  for (int64_t s = 0; s < p.n_shards && !skip_prompts.empty(); ++s) {
    if (p.done[s]) continue;
    bool all = true;
    for (int64_t i = shard_begin(p, s); i < shard_end(p, s) && all; ++i) all = skip_prompts.count(p.jobs[i].prompt_index) > 0;
    if (all) {
      p.left_out[s] = true;
      ++covered;
    }
  }
  if (covered > 0) note(ev, std::to_string(covered) + " shards left out (covered by " + p.opt.skip_ids + ")");
  if (p.opt.max_shards > 0)
    for (int64_t s = p.opt.max_shards; s < p.n_shards; ++s)
      if (!p.done[s] && !p.left_out[s]) {
        p.left_out[s] = true;
        ++beyond;
      }
  if (beyond > 0)
    note(ev, std::to_string(beyond) + " shards past --shards " + std::to_string(p.opt.max_shards) + " left for a later run");
  for (int64_t s = 0; s < p.n_shards; ++s)
    if (!p.done[s] && !p.left_out[s])
      for (int64_t i = shard_begin(p, s); i < shard_end(p, s); ++i) p.todo.push_back(p.jobs[i]);
}

// --from-ids: the known sequences of the to-do shards; a shard with a sequence the file lacks is left
// for a later decode run.
Status plan_replay(RegenPlan& p, const IdsFile& ids, const RegenEvents& ev) {
  std::map<int64_t, const IdsSeq*> by_prompt;
  for (const auto& q : ids.seqs) by_prompt[q.prompt_index] = &q;
  std::vector<RegenJob> kept;
  int64_t missing_shards = 0;
  for (int64_t s = 0; s < p.n_shards; ++s) {
    if (p.done[s] || p.left_out[s]) continue;
    bool all = true;
    for (int64_t i = shard_begin(p, s); i < shard_end(p, s) && all; ++i) all = by_prompt.count(p.jobs[i].prompt_index) > 0;
    if (!all) {
      ++missing_shards;
      continue;
    }
    for (int64_t i = shard_begin(p, s); i < shard_end(p, s); ++i) {
      const RegenJob& j = p.jobs[i];
      const IdsSeq& q = *by_prompt[j.prompt_index];
      if (q.prompt_len != (int32_t)j.prompt.size() || !std::equal(j.prompt.begin(), j.prompt.end(), q.tokens.begin()) ||
          q.temperature != j.temperature)
        return Status::error(p.opt.from_ids + ": the sequence of prompt line " + std::to_string(j.prompt_index + 1) +
                             " does not start with this run's tokenized prompt (another tokenizer, template or prompts file?)");
      p.replay.push_back(q);
      kept.push_back(j);
    }
  }
  p.todo = std::move(kept);
  note(ev, "replaying " + std::to_string(p.replay.size()) + " sequences from " + p.opt.from_ids + "; " +
               std::to_string(missing_shards) + " shards not covered by it");
  return Status::ok();
}

// --prompt-text: every to-do prompt is a known sequence whose every position after BOS is an anchor.
void plan_prompt_text(RegenPlan& p) {
  for (const RegenJob& j : p.todo) {
    IdsSeq q;
    q.prompt_index = j.prompt_index;
    q.prompt_len = 1;       // BOS: every later position is an anchor
    q.temperature = -1.0f;  // text, not the target's own generation
    q.tokens = j.prompt;
    p.replay.push_back(std::move(q));
  }
}

Status update_manifest(RegenPlan& p, double tok_s) {
  nlohmann::json shards = nlohmann::json::array();
  int64_t seqs = 0, toks = 0, resp = 0;
  for (int64_t s = 0; s < p.n_shards; ++s) {
    if (!p.done[s]) continue;
    auto sh = Shard::open((p.dir / shard_name(s)).string(), 0, false);
    if (!sh) return sh.status();
    int64_t r = 0;
    for (int64_t q = 0; q < sh->n_seq(); ++q) r += sh->seq_len(q) - sh->prompt_len(q);
    shards.push_back({{"file", shard_name(s)}, {"sequences", sh->n_seq()}, {"tokens", sh->n_tokens()}, {"response_tokens", r}});
    seqs += sh->n_seq();
    toks += sh->n_tokens();
    resp += r;
  }
  nlohmann::json& m = p.manifest;
  m["format"] = "dspark-regen-manifest-v1";
  m["settings"] = p.settings;
  m["command"] = p.opt.command;
  if (!p.opt.from_ids.empty()) m["replayed_from_ids"] = fs::path(p.opt.from_ids).filename().string();
  if (!p.opt.skip_ids.empty()) m["continues_ids"] = fs::path(p.opt.skip_ids).filename().string();
  m["skipped_long_prompts"] = p.skipped_long;
  m["shards_total"] = p.n_shards;
  m["shards_done"] = (int64_t)shards.size();
  m["sequences"] = seqs;
  m["tokens"] = toks;
  m["response_tokens"] = resp;
  if (tok_s > 0) m["last_run_new_tokens_per_s"] = tok_s;
  m["shards"] = shards;
  return write_json_atomic(p.manifest_path, m);
}

}  // namespace

Result<std::vector<PromptRecord>> read_training_prompts(const RegenRunOptions& opt, const RegenEvents& ev) {
  auto train = read_prompt_file(opt.prompts_path);
  if (!train) return train.status();
  if (!opt.eval_path.empty()) {
    auto eval = read_prompt_file(opt.eval_path);
    if (!eval) return eval.status();
    DSPARK_RETURN_IF_ERROR(check_no_overlap(opt.prompts_path, *train, opt.eval_path, *eval));
  } else {
    note(ev, "warning: no evaluation prompt file to check overlap against (--eval-prompts)");
  }
  if (opt.n_prompts > 0 && (size_t)opt.n_prompts < train->size()) train->resize((size_t)opt.n_prompts);
  return train;
}

Result<RegenPlanPtr> plan_regen(const RegenRunOptions& opt, const std::vector<PromptRecord>& prompts,
                                const model::Model& model, const tokenizer::Tokenizer& tok,
                                const tokenizer::ChatTemplate& chat, const std::string& model_file,
                                const RegenEvents& events) {
  RegenPlanPtr p(new RegenPlan);
  p->opt = opt;
  const model::ModelConfig& mc = model.config();
  DSPARK_RETURN_IF_ERROR(check_taps(opt.taps, mc));
  p->n_vocab = mc.n_vocab;
  p->layout = ShardLayout{opt.taps, (int32_t)opt.top_k, mc.n_embd};
  // Gemma's template is recorded as "gemma3", the name data made before other templates existed carries.
  const std::string chat_setting = chat.family == tokenizer::ChatFamily::kGemma ? "gemma3" : tokenizer::chat_family_name(chat.family);
  p->settings = {{"model", model_file}, {"prompts", fs::path(opt.prompts_path).filename().string()},
                 {"n_prompts", (int64_t)prompts.size()}, {"taps", opt.taps}, {"top_k", opt.top_k},
                 {"max_new", opt.max_new}, {"max_prompt_tokens", opt.max_prompt}, {"sampled_share", opt.sampled_share},
                 {"temp", opt.temp}, {"seed", opt.seed}, {"shard_size", opt.shard_size}, {"chat_template", chat_setting}};
  IdsFile ids;  // --from-ids. Not a setting: replayed shards are byte for byte what decoding writes.
  if (!opt.from_ids.empty()) {
    auto r = load_matching_ids(opt.from_ids, mc.n_vocab, p->settings);
    if (!r) return r.status();
    ids = std::move(r.value());
  }
  std::set<int64_t> skip_prompts;  // --skip-ids: prompt indices another folder already holds
  if (!opt.skip_ids.empty()) {
    if (!opt.from_ids.empty()) return Status::error("--skip-ids and --from-ids exclude each other");
    auto r = load_matching_ids(opt.skip_ids, mc.n_vocab, p->settings);
    if (!r) return r.status();
    for (const auto& q : r->seqs) skip_prompts.insert(q.prompt_index);
  }
  if (opt.prompt_text) {
    if (!opt.from_ids.empty()) return Status::error("--prompt-text and --from-ids exclude each other");
    p->settings["prompt_text"] = true;
  }
  p->dir = opt.out_dir;
  p->manifest_path = p->dir / "manifest.json";
  DSPARK_RETURN_IF_ERROR(open_folder(*p));
  DSPARK_RETURN_IF_ERROR(make_jobs(*p, prompts, tok, chat));
  verify_shards(*p, events);
  leave_out(*p, skip_prompts, events);
  int64_t n_done = 0, n_left_out = 0;
  for (int64_t s = 0; s < p->n_shards; ++s) n_done += p->done[s], n_left_out += p->left_out[s];
  note(events, std::to_string(p->jobs.size()) + " prompts (" + std::to_string(p->skipped_long) + " skipped as longer than " +
                   std::to_string(opt.max_prompt) + " tokens), " + std::to_string(p->n_shards) + " shards: " +
                   std::to_string(n_done) + " done, " + std::to_string(p->n_shards - n_done - n_left_out) + " to do");
  if (!opt.from_ids.empty()) DSPARK_RETURN_IF_ERROR(plan_replay(*p, ids, events));
  if (opt.prompt_text) plan_prompt_text(*p);
  return p;
}

Result<RegenSummary> run_regen(RegenPlan& p, const model::Model& model, const tokenizer::Tokenizer& tok,
                               const RegenEvents& events) {
  RegenSummary sum;
  std::map<int64_t, int64_t> job_shard;  // prompt_index -> shard
  for (int64_t i = 0; i < (int64_t)p.jobs.size(); ++i) job_shard[p.jobs[i].prompt_index] = i / p.opt.shard_size;
  std::map<int64_t, std::vector<RegenSeq>> pending;  // finished sequences wait per shard until it is complete
  const auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto rate = [&] { return seconds() > 0 ? (double)sum.new_tokens / seconds() : 0.0; };
  auto progress = [&](uint64_t done, double tok_s) {
    if (!events.progress) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f new tok/s", tok_s);
    events.progress("regen", done, p.todo.size(), buf);
  };
  auto on_seq = [&](RegenSeq&& seq) -> Status {
    const int64_t s = job_shard[seq.prompt_index];
    ++sum.sequences;
    sum.new_tokens += (int64_t)seq.tokens.size() - seq.prompt_len;
    sum.prompt_tokens += seq.prompt_len;
    auto& v = pending[s];
    v.push_back(std::move(seq));
    if ((int64_t)v.size() < shard_end(p, s) - shard_begin(p, s)) return Status::ok();
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.prompt_index < b.prompt_index; });
    DSPARK_RETURN_IF_ERROR(write_shard((p.dir / shard_name(s)).string(), p.layout, v));
    pending.erase(s);
    p.done[s] = true;
    return update_manifest(p, rate());
  };
  ThreadPool pool(p.opt.threads);
  const RegenConfig rc{p.opt.taps, (int32_t)p.opt.top_k, (int32_t)p.opt.max_new, (int32_t)p.opt.batch};
  Status st = !p.opt.from_ids.empty() || p.opt.prompt_text
                  ? replay_sequences(model, rc, p.replay, &pool, [&](RegenSeq&& seq) -> Status {
                      DSPARK_RETURN_IF_ERROR(on_seq(std::move(seq)));
                      progress((uint64_t)sum.sequences, rate());
                      return Status::ok();
                    })
                  : regenerate(model, tok, rc, p.todo, &pool, on_seq, [&](const RegenCounters& c) {
                      sum.counters = c;  // tokens decoded so far, running sequences included
                      progress((uint64_t)c.sequences, seconds() > 0 ? (double)c.new_tokens / seconds() : 0.0);
                    });
  if (!st) return st;
  progress(p.todo.size(), rate());
  DSPARK_RETURN_IF_ERROR(update_manifest(p, rate()));
  sum.seconds = seconds();
  sum.new_tokens_per_s = rate();
  sum.shards_done = p.manifest["shards_done"].get<int64_t>();
  sum.shards_total = p.n_shards;
  sum.shards_redone = p.redone;
  sum.response_tokens_total = p.manifest["response_tokens"].get<int64_t>();
  return sum;
}

Result<IdsExport> export_regen_ids(const std::string& out_dir, const std::string& path) {
  const fs::path mpath = fs::path(out_dir) / "manifest.json";
  std::ifstream in(mpath);
  nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  if (!in || m.is_discarded() || !m.contains("settings") || !m.contains("shards"))
    return Status::error(mpath.string() + ": missing or not a regen manifest");
  std::vector<Shard> shards;
  for (const auto& e : m["shards"]) {
    auto sh = Shard::open((fs::path(out_dir) / e.value("file", "")).string(), 0, true);
    if (!sh) return sh.status();
    shards.push_back(std::move(sh.value()));
  }
  std::vector<const Shard*> ptrs;
  IdsExport ex;
  for (const auto& sh : shards) {
    ptrs.push_back(&sh);
    ex.tokens += sh.n_tokens();
    ex.sequences += sh.n_seq();
  }
  ex.shards = (int64_t)shards.size();
  DSPARK_RETURN_IF_ERROR(write_ids_file(path, m["settings"].dump(), ptrs));
  return ex;
}

}  // namespace dspark::train
