#include "runtime/drafter_factory.h"

#include <algorithm>
#include <chrono>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/registry.h"
#include "speculative/drafter_dspark.h"
#include "speculative/drafter_model.h"
#include "speculative/drafter_ngram.h"
#include "speculative/drafter_suffix.h"

namespace dspark::runtime {

namespace fs = std::filesystem;

Result<std::string> detect_draft_kind(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string cfg = path + "/config.json";
    std::ifstream in(cfg);
    if (!in) return Status::error(path + ": a drafter directory needs a config.json");
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::error(cfg + ": not valid JSON");
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0] == "Gemma4DSparkModel")
      return std::string("dspark");
    return Status::error(cfg + ": architectures[0] is not \"Gemma4DSparkModel\" (unknown drafter architecture)");
  }
  if (fs::is_regular_file(path, ec)) {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    if (in.gcount() == 4 && std::string(magic, 4) == "GGUF") return std::string("draft-model");
    return Status::error(path + ": not a GGUF file and not a drafter directory");
  }
  return Status::error(path + ": no such drafter file or directory");
}

namespace {

// default_spec.json's optional "index" entry: the ids to build the spec's suffix index from.
Status read_index_recipe(const nlohmann::json& j, const std::string& file, const std::string& folder,
                         const std::string& cache_dir, ShippedSpec* s) {
  const nlohmann::json& ix = j["index"];
  if (!ix.is_object() || !ix.contains("ids") || !ix["ids"].is_array() || ix["ids"].empty() || !ix.contains("sha256") ||
      !ix["sha256"].is_string() || ix["sha256"].get<std::string>().size() != 64)
    return Status::error(file + ": \"index\" needs \"ids\" (shipped data files) and a 64-digit \"sha256\"");
  for (const auto& id : ix["ids"]) {
    const std::string rel = id.is_string() ? id.get<std::string>() : "";
    const std::string path = find_shipped("data", rel);
    if (rel.empty() || path.empty()) return Status::error(file + ": index: data/" + rel + " is not shipped with this build");
    s->index_ids.push_back(path);
  }
  s->index_sha256 = ix["sha256"].get<std::string>();
  s->config.suffix_index =
      (fs::path(cache_dir) / "indexes" / (folder + "-" + s->index_sha256.substr(0, 16) + ".sfx")).string();
  return Status::ok();
}

}  // namespace

Result<std::optional<ShippedSpec>> shipped_spec(const std::string& model_path, const std::string& cache_dir) {
  const std::string dir = default_drafter_dir(model_path);
  if (dir.empty()) return std::optional<ShippedSpec>{};
  ShippedSpec s;
  const std::string file = dir + "/default_spec.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    s.config.kind = "dspark";
    s.config.model = dir;
    // The cost-aware schedule from start-up costs: 1.07-1.10x the online-refined one for the copy
    // head and 1.02-1.07x for the shipped drafter at T 0 (docs/results/2026-12-04.md, session 15).
    s.config.schedule = speculative::DraftSchedule::kCostStatic;
    return std::optional<ShippedSpec>(s);
  }
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("spec") || !j["spec"].is_string())
    return Status::error(file + ": expected a JSON object with a string \"spec\" (key=value,...)");
  auto parsed = speculative::parse_spec(j["spec"].get<std::string>());
  if (!parsed) return Status::error(file + ": spec: " + parsed.message());
  s.config = *parsed;
  for (std::string* path : {&s.config.model, &s.config.suffix_index})
    if (!path->empty() && fs::path(*path).is_relative()) *path = (fs::path(dir) / *path).string();
  if (j.contains("index"))
    DSPARK_RETURN_IF_ERROR(read_index_recipe(j, file, fs::path(dir).filename().string(), cache_dir, &s));
  return std::optional<ShippedSpec>(s);
}

Result<int> planned_gamma(const speculative::SpecConfig& c) {
  std::string kind = c.kind;
  if (kind == "auto" && c.model.empty()) kind = "suffix";
  if (kind == "auto") {
    auto k = detect_draft_kind(c.model);
    if (!k) return k.status();
    kind = *k;
  }
  if (kind != "dspark") return c.gamma > 0 ? c.gamma : speculative::kDefaultGamma;
  auto cfg = net::read_dspark_config(c.model + "/config.json");
  if (!cfg) return cfg.status();
  const int block = (int)cfg->block_size;
  return c.gamma > 0 ? std::min(c.gamma, block) : block;
}

Result<std::shared_ptr<const speculative::SuffixIndex>> open_suffix_index(const std::string& path, const LoadedModel& target) {
  return speculative::SuffixIndex::open_shared(path, target.tok->n_vocab(), speculative::tokenizer_fingerprint(*target.tok));
}

namespace {

// Retrieval kinds of a DSpark drafter's copy head (DSparkOptions::index): share buckets and their
// prior acceptance, before a request's own outcomes refine them.
constexpr double kIndexShareEdges[] = {0.1, 0.3, 0.6};
constexpr double kIndexPrior[] = {0.25, 0.4, 0.6};
// Answer-cache kinds (serve's answers already served, speculative/answer_cache.h): prior acceptance of a
// continuation by how many context tokens agree with the pool: 3, 4-7, 8-15, 16+ (a repeated question
// agrees for the whole prompt tail stored before its answer, AnswerCacheConfig::lead_in). The last
// two reach Drafter::kSureAcceptance: such copies are drafted even in rounds the governor made plain.
constexpr int kCacheMatchEdges[] = {3, 4, 8, 16};
constexpr double kCachePrior[] = {0.35, 0.5, 0.75, 0.9};

Result<DrafterBundle> open_ngram(const speculative::SpecConfig& c, const DrafterRuntime&, const LoadedModel&, ThreadPool*) {
  DrafterBundle b;
  b.kind = "ngram";
  b.gamma = c.gamma > 0 ? c.gamma : speculative::kDefaultGamma;
  b.drafter = std::make_unique<speculative::NgramDrafter>();
  return b;
}

Result<DrafterBundle> open_suffix(const speculative::SpecConfig& c, const DrafterRuntime&, const LoadedModel& target,
                                  ThreadPool*) {
  auto ix = open_suffix_index(c.suffix_index, target);
  if (!ix) return ix.status();
  DrafterBundle b;
  b.kind = "suffix";
  b.gamma = c.gamma > 0 ? c.gamma : speculative::kDefaultGamma;
  speculative::SuffixDrafterConfig cfg;
  cfg.query.min_prob = c.suffix_min_prob;
  cfg.tree_width = c.tree;
  b.drafter = std::make_unique<speculative::SuffixDrafter>(std::move(ix).value(), cfg);
  return b;
}

Result<DrafterBundle> open_draft_model(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                       ThreadPool* pool) {
  auto lm = load_model(c.model, "");
  if (!lm) return Status::error("draft model: " + lm.message());
  DSPARK_RETURN_IF_ERROR(speculative::check_same_vocab(*target.tok, *lm->tok));
  DrafterBundle b;
  b.kind = "draft-model";
  b.gamma = c.gamma > 0 ? c.gamma : speculative::kDefaultGamma;
  b.draft_model = std::make_unique<LoadedModel>(std::move(lm).value());
  b.drafter = std::make_unique<speculative::ModelDrafter>(*b.draft_model->model,
                                                   model::SessionOptions{.n_ctx = rt.n_ctx, .max_batch = 512}, pool);
  return b;
}

// Every DSpark drafter is loaded here (the registry's dspark row and open_dspark_probe).
Result<std::unique_ptr<speculative::DSparkDrafter>> load_dspark(const std::string& dir, const model::Model& target,
                                                                const speculative::DSparkOptions& opt, ThreadPool* pool) {
  return speculative::DSparkDrafter::load(dir, target, opt, pool);
}

Result<DrafterBundle> open_dspark(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                  ThreadPool* pool) {
  speculative::DSparkOptions dopt;
  dopt.threshold = (float)c.threshold;
  dopt.ctx_reserve = rt.n_ctx;
  dopt.schedule = c.cost_schedule();
  dopt.backbone_gate = c.schedule == speculative::DraftSchedule::kCostGated;
  dopt.static_costs = c.schedule == speculative::DraftSchedule::kCostStatic;
  dopt.verify_ms = rt.verify_ms;  // also used for the governor's calibration below
  dopt.copy_bits = speculative::copy_bits_of_quant(c.quant);  // auto is resolved first (runtime/draft_quant.h)
  auto d = load_dspark(c.model, *target.model, dopt, pool);  // gamma = block_size
  if (!d) return d.status();
  const int block = (*d)->gamma();
  if (c.gamma > block)
    notify(rt.note, "warning: num-draft-tokens " + std::to_string(c.gamma) + " exceeds the drafter's block_size " +
                        std::to_string(block) + "; using " + std::to_string(block));
  else if (c.gamma > 0 && c.gamma < block)
    dopt.gamma = c.gamma;
  const net::DSparkConfig& cfg = (*d)->model().config();
  dopt.copy = c.copy_forced() || (c.copy == speculative::CopyMode::kAuto && cfg.copy_head);
  dopt.copy_only = c.copy == speculative::CopyMode::kOnly;
  dopt.copy_first = c.copy == speculative::CopyMode::kFirst;
  dopt.copy_cfg.max_ngram = cfg.copy_max_ngram;
  dopt.copy_cfg.min_ngram = cfg.copy_min_ngram;
  dopt.copy_cfg.prior_acceptance = cfg.copy_prior_acceptance;
  dopt.copy_cfg.prior_acceptance_sampled = cfg.copy_prior_acceptance_sampled;
  dopt.copy_cfg.prior_weight = cfg.copy_prior_weight;
  dopt.copy_cfg.cache_match_edges.assign(std::begin(kCacheMatchEdges), std::end(kCacheMatchEdges));
  dopt.copy_cfg.cache_prior.assign(std::begin(kCachePrior), std::end(kCachePrior));
  if (!c.suffix_index.empty()) {
    if (c.copy == speculative::CopyMode::kOff)
      return Status::error("suffix-index: a DSpark drafter consults the index in its copy head, which draft-copy off turns off");
    auto ix = open_suffix_index(c.suffix_index, target);
    if (!ix) return ix.status();
    dopt.copy = true;
    dopt.index = std::move(ix).value();
    dopt.index_query.min_prob = c.suffix_min_prob;
    dopt.copy_cfg.index_share_edges.assign(std::begin(kIndexShareEdges), std::end(kIndexShareEdges));
    dopt.copy_cfg.index_prior.assign(std::begin(kIndexPrior), std::end(kIndexPrior));
  }
  if (dopt.gamma != 0 || dopt.copy) {
    d = speculative::DSparkDrafter::create((*d)->shared_model(), dopt, pool);
    if (!d) return d.status();
  }
  // The cost-aware schedule of sampled requests decides from constants: time the backbone once
  // (a drafter created with a known draft_ms, e.g. per serve slot, skips this).
  // The governor's constants for sampled requests need it too.
  if ((dopt.schedule || c.governor) && dopt.draft_ms <= 0 && !dopt.verify_ms.empty()) (*d)->calibrate_draft_ms();
  DrafterBundle b;
  b.kind = "dspark";
  b.governor.draft_ms = (*d)->options().draft_ms;
  b.gamma = (*d)->gamma();
  b.drafter = std::move(d).value();
  return b;
}

const DrafterKind kKinds[] = {
    {"ngram", "prompt lookup over the context (no weights)", false, open_ngram},
    {"suffix", "prompt lookup, then a suffix index over the target's own answers (suffix-index=PATH)", false,
     open_suffix},
    {"draft-model", "a smaller GGUF model with the target's vocabulary", true, open_draft_model},
    {"dspark", "a DSpark checkpoint (DeepSpec format) reading the target's hidden states", true, open_dspark},
};

}  // namespace

std::span<const DrafterKind> drafter_kinds() { return kKinds; }

Status check_drafter_kind(const std::string& kind) {
  std::string names = "auto";
  for (const DrafterKind& k : kKinds) {
    if (kind == k.name) return Status::ok();
    names += std::string(", ") + k.name;
  }
  if (kind == "auto") return Status::ok();
  return Status::error("draft-kind: '" + kind + "' is not one of " + names);
}

Result<std::unique_ptr<speculative::DSparkDrafter>> open_dspark_probe(const std::string& dir, const model::Model& target,
                                                                      const DSparkProbe& p, ThreadPool* pool) {
  speculative::DSparkOptions opt;
  opt.gamma = p.gamma;
  opt.threshold = p.threshold;
  opt.report_confidence = p.report_confidence;
  opt.copy_bits = p.copy_bits;
  opt.ctx_reserve = p.n_ctx;
  return load_dspark(dir, target, opt, pool);
}

Result<DrafterBundle> make_drafter(const speculative::SpecConfig& c, const DrafterRuntime& rt, const LoadedModel& target,
                                   ThreadPool* pool) {
  DSPARK_RETURN_IF_ERROR(speculative::check_spec(c));
  std::string kind = c.kind;
  if (kind == "auto" && c.model.empty() && !c.suffix_index.empty()) kind = "suffix";
  if (kind == "auto") {
    auto k = detect_draft_kind(c.model);
    if (!k) return k.status();
    kind = *k;
  }
  for (const DrafterKind& k : kKinds) {
    if (kind != k.name) continue;
    if (kind != "dspark" && c.copy_forced())
      return Status::error(std::string("draft-copy ") + speculative::copy_mode_name(c.copy) +
                           " needs a DSpark drafter (the copy head is part of its sequential stage)");
    if (k.needs_model && c.model.empty()) return Status::error("draft-kind " + kind + " needs draft-model=PATH");
    if (!c.suffix_index.empty() && kind != "suffix" && kind != "dspark")
      return Status::error("suffix-index: " + c.model + " is a " + kind + " drafter; the index goes with draft-kind suffix or dspark");
    auto b = k.open(c, rt, target, pool);
    if (b) {
      b->governor.enabled = c.governor;
      b->governor.by_class = c.governor_by_class;
      b->governor.sure_drafts = c.sure_drafts;
      b->governor.verify_ms = rt.verify_ms;
    }
    return b;
  }
  return check_drafter_kind(kind);  // not registered: the error lists the kinds
}

std::vector<double> measure_verify_ms(const model::Model& model, int n_max, ThreadPool* pool) {
  using Clock = std::chrono::steady_clock;
  model::Session s(model, model::SessionOptions{.n_ctx = 128 + n_max + 8, .max_batch = 512}, pool);
  // Arbitrary token ids inside the vocabulary (SmolLM2 has 49,152; ids past it made every forward
  // fail and the roll-back abort).
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<int32_t> ctx(128);
  for (size_t i = 0; i < ctx.size(); ++i) ctx[i] = (int32_t)((1000 + (int64_t)i * 7919) % n_vocab);
  const model::ForwardOptions all{model::LogitsMode::kAll, {}};
  // One 128-token prefill; each timed forward is rolled back (KV trim) so the next starts from the
  // same 128-token context. The session is sized for these forwards, so they cannot fail.
  Status st = model.forward(s, ctx, model::ForwardOptions{model::LogitsMode::kNone, {}});
  DSPARK_CHECK(st.is_ok());
  auto time_n = [&](int n) {
    std::vector<int32_t> toks(ctx.begin(), ctx.begin() + n);
    const auto t0 = Clock::now();
    Status fs = model.forward(s, toks, all);
    DSPARK_CHECK(fs.is_ok());
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    s.kv().trim(n);
    return ms;
  };
  // Every n is measured: the curve is not linear on this engine. One warm-up pass over every size,
  // then kRounds passes that interleave the sizes (a slow stretch of a shared machine then hits
  // all sizes alike instead of a few), median per size. Zen 4, Gemma 3, start-up tables of
  // separate `dspark ab` runs (2026-12-03): timing each size in a block of 3 gave verify(1) 13.7,
  // 7.9, 8.2 ms and verify(8) / verify(1) 1.4-2.9; interleaved, 10.3, 7.9, 10.8, 9.4 and 1.6-2.6.
  constexpr int kRounds = 5;
  for (int n = 1; n <= n_max; ++n) time_n(n);
  std::vector<std::vector<double>> t((size_t)n_max + 1);
  for (int r = 0; r < kRounds; ++r)
    for (int n = 1; n <= n_max; ++n) t[(size_t)n].push_back(time_n(n));
  std::vector<double> v((size_t)n_max + 1, 0.0);
  for (int n = 1; n <= n_max; ++n) {
    std::sort(t[(size_t)n].begin(), t[(size_t)n].end());
    v[(size_t)n] = t[(size_t)n][kRounds / 2];
  }
  // A forward over more tokens never costs less: the non-decreasing least-squares fit (pool
  // adjacent violators), which averages a noisy spike instead of carrying it to every larger n.
  std::vector<std::pair<double, int>> blocks;  // (mean, count)
  for (int n = 1; n <= n_max; ++n) {
    blocks.push_back({v[(size_t)n], 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].first > blocks.back().first) {
      auto [m2, c2] = blocks.back();
      blocks.pop_back();
      auto& [m1, c1] = blocks.back();
      m1 = (m1 * c1 + m2 * c2) / (c1 + c2);
      c1 += c2;
    }
  }
  size_t n = 1;
  for (const auto& [m, c] : blocks)
    for (int i = 0; i < c; ++i) v[n++] = m;
  return v;
}

}  // namespace dspark::runtime
