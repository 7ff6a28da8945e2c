#include "tools/drafter_factory.h"

#include <algorithm>
#include <chrono>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "spec/drafter_dspark.h"
#include "spec/drafter_model.h"
#include "spec/drafter_ngram.h"

namespace dspark::tools {

namespace fs = std::filesystem;

Status check_draft_copy_mode(const std::string& mode) {
  if (mode == "auto" || mode == "on" || mode == "off" || mode == "only" || mode == "first") return Status::ok();
  return Status::error("--draft-copy must be auto, on, off, only or first, got '" + mode + "'");
}

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

Result<DrafterBundle> make_drafter(const DrafterOptions& opt, const LoadedModel& target, ThreadPool* pool) {
  if (opt.gamma < 0) return Status::error("--num-draft-tokens must be >= 0");
  if (!(opt.threshold >= 0.0 && opt.threshold <= 1.0))
    return Status::error("--draft-threshold must be in [0, 1], got " + std::to_string(opt.threshold));
  std::string kind = opt.kind;
  if (kind == "auto") {
    if (opt.path.empty()) return Status::error("--draft-kind auto needs --draft-model PATH (or use --draft-kind ngram)");
    auto k = detect_draft_kind(opt.path);
    if (!k) return k.status();
    kind = *k;
  }
  DrafterBundle b;
  b.kind = kind;
  b.gamma = opt.gamma;
  if (kind != "dspark" && (opt.copy == "on" || opt.copy == "only" || opt.copy == "first"))
    return Status::error("--draft-copy " + opt.copy + " needs a DSpark drafter (the copy head is part of its sequential stage)");
  if (kind == "ngram") {
    if (!opt.path.empty()) std::fprintf(stderr, "warning: --draft-kind ngram ignores --draft-model\n");
    b.drafter = std::make_unique<spec::NgramDrafter>();
    return b;
  }
  if (opt.path.empty()) return Status::error("--draft-kind " + kind + " needs --draft-model PATH");
  if (kind == "draft-model") {
    auto lm = load_model(opt.path, "");
    if (!lm) return Status::error("draft model: " + lm.message());
    DSPARK_RETURN_IF_ERROR(spec::check_same_vocab(*target.tok, *lm->tok));
    b.draft_model = std::make_unique<LoadedModel>(std::move(lm).value());
    b.drafter = std::make_unique<spec::ModelDrafter>(*b.draft_model->model,
                                                     model::SessionOptions{.n_ctx = opt.n_ctx, .max_batch = 512}, pool);
    return b;
  }
  if (kind == "dspark") {
    spec::DSparkOptions dopt;
    dopt.threshold = (float)opt.threshold;
    dopt.ctx_reserve = opt.n_ctx;
    dopt.schedule = opt.schedule;
    dopt.verify_ms = opt.verify_ms;
    DSPARK_RETURN_IF_ERROR(check_draft_copy_mode(opt.copy));
    auto d = spec::DSparkDrafter::load(opt.path, *target.model, dopt, pool);  // gamma = block_size
    if (!d) return d.status();
    const int block = (*d)->gamma();
    if (opt.gamma > block)
      std::fprintf(stderr, "warning: --num-draft-tokens %d exceeds the drafter's block_size %d; using %d\n", opt.gamma,
                   block, block);
    else if (opt.gamma > 0 && opt.gamma < block)
      dopt.gamma = opt.gamma;
    const spec::DSparkConfig& cfg = (*d)->model().config();
    dopt.copy = opt.copy == "on" || opt.copy == "only" || opt.copy == "first" || (opt.copy == "auto" && cfg.copy_head);
    dopt.copy_only = opt.copy == "only";
    dopt.copy_first = opt.copy == "first";
    dopt.copy_cfg.max_ngram = cfg.copy_max_ngram;
    dopt.copy_cfg.min_ngram = cfg.copy_min_ngram;
    dopt.copy_cfg.prior_acceptance = cfg.copy_prior_acceptance;
    dopt.copy_cfg.prior_weight = cfg.copy_prior_weight;
    if (dopt.gamma != 0 || dopt.copy) {
      d = spec::DSparkDrafter::create((*d)->shared_model(), dopt, pool);
      if (!d) return d.status();
    }
    // The cost-aware schedule of sampled requests decides from constants: time the backbone once
    // (a drafter created with a known draft_ms, e.g. per serve slot, skips this).
    if (dopt.schedule && dopt.draft_ms <= 0 && !dopt.verify_ms.empty()) (*d)->calibrate_draft_ms();
    b.gamma = (*d)->gamma();
    b.drafter = std::move(d).value();
    return b;
  }
  return Status::error("unknown --draft-kind '" + kind + "' (auto, ngram, draft-model, dspark)");
}

std::vector<double> measure_verify_ms(const model::Gemma3Model& model, int n_max, ThreadPool* pool) {
  using Clock = std::chrono::steady_clock;
  model::Session s(model, model::SessionOptions{.n_ctx = 128 + n_max + 8, .max_batch = 512}, pool);
  std::vector<int32_t> ctx(128);
  for (size_t i = 0; i < ctx.size(); ++i) ctx[i] = 1000 + (int32_t)(i * 7919 % 200000);
  const model::ForwardOptions all{model::LogitsMode::kAll, {}};
  // One 128-token prefill; each timed forward is rolled back (KV trim) so the next starts from the
  // same 128-token context.
  (void)model.forward(s, ctx, model::ForwardOptions{model::LogitsMode::kNone, {}});
  auto time_n = [&](int n) {
    std::vector<double> t;
    std::vector<int32_t> toks(ctx.begin(), ctx.begin() + n);
    for (int r = 0; r < 4; ++r) {  // the first run warms this shape up and is not counted
      const auto t0 = Clock::now();
      (void)model.forward(s, toks, all);
      if (r > 0) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      s.kv().trim(n);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // Every n is measured: the curve is not linear on this engine (the AMX path starts at 8 rows).
  std::vector<double> v((size_t)n_max + 1, 0.0);
  for (int n = 1; n <= n_max; ++n) v[(size_t)n] = time_n(n);
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

}  // namespace dspark::tools
