#include "runtime/draft_quant.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "quant/convert.h"
#include "dspark/dspark_model.h"
#include "kernels/kernels.h"
#include "quant/quant_config.h"
#include "runtime/drafter_factory.h"
#include "runtime/drafter_smoke.h"
#include "runtime/registry.h"

namespace dspark::runtime {

namespace fs = std::filesystem;

namespace {

bool dir_writable(const fs::path& d) { return ::access(d.c_str(), W_OK) == 0; }

// The instruction set the target's backend runs (`--backend` reaches the drafter's format choice as it
// reaches the drafter's kernels: DSparkDrafter::load).
kernels::Isa backend_isa(const model::Model& target) { return target.backend().matmul_context(nullptr).isa; }

// Whether `isa` (the target backend's) reaches the level `name` (scalar < avx2 < avx512 < amx: AVX-512
// with usable AMX-INT8).
Result<bool> isa_has(kernels::Isa isa, const std::string& name, const std::string& where) {
  if (name == "scalar") return true;
  if (name == "avx2") return isa >= kernels::Isa::kAvx2;
  if (name == "avx512") return isa >= kernels::Isa::kAvx512;
  if (name == "amx") return isa >= kernels::Isa::kAvx512 && kernels::amx_available();
  return Status::error(where + ": field 'min_isa' must be scalar, avx2, avx512 or amx, got '" + name + "'");
}

// The matrices that get integer copies (fc, lm_head, the layers' projections: net::DSparkModel::load)
// are affine 4-bit with groups of a multiple of 32 (the checkpoint's default and every listed one),
// none kept dense: their Q4_1 copies hold them exactly (DraftMatrix::integer_copy), at half the
// bytes of the int8 ones. The other tensors stay as given whatever their form.
bool q4_1_holds_exactly(const quant::QuantConfig& qc) {
  auto fits = [](const quant::QuantSpec& s) {
    return s.method == quant::Method::kAffine && s.bits == 4 && s.group_size % 32 == 0;
  };
  if (!qc.present || !fits(qc.defaults)) return false;
  for (const auto& [name, spec] : qc.modules) {
    const bool copied = name == "fc" || name == "lm_head" || name.rfind("layers.", 0) == 0;
    if (copied && (!spec || !fits(*spec))) return false;
  }
  return true;
}

}  // namespace

Result<DraftQuantChoice> resolve_draft_quant(const std::string& dir, speculative::DraftQuant mode,
                                             const model::Model& target, const std::string& cache_dir,
                                             ThreadPool* pool, const std::string& recommendation, const NoteFn& note) {
  const DraftQuantChoice as_given{dir, 0, {}};
  if (mode == speculative::DraftQuant::kNone) return as_given;
  if (mode == speculative::DraftQuant::kInt8) return DraftQuantChoice{dir, 8, {}};
  if (mode == speculative::DraftQuant::kInt4) return DraftQuantChoice{dir, 4, {}};
  const std::string rec_path = recommendation.empty() ? find_in_drafters("quant_auto.json") : recommendation;
  if (rec_path.empty()) return as_given;
  std::ifstream in(rec_path);
  if (!in) return Status::error(rec_path + ": cannot open");
  const auto rec = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (rec.is_discarded() || !rec.contains("rung") || !rec["rung"].is_string())
    return Status::error(rec_path + ": expected {\"rung\": NAME, \"method\", \"bits\", \"group_size\"[, \"recipe\"][, \"min_isa\"]}");
  const std::string rung = rec["rung"].get<std::string>();
  if (rec.contains("min_isa")) {
    if (!rec["min_isa"].is_string()) return Status::error(rec_path + ": field 'min_isa' must be a string");
    auto has = isa_has(backend_isa(target), rec["min_isa"].get<std::string>(), rec_path);
    if (!has) return has.status();
    if (!*has) {
      // A checkpoint that is affine 4-bit throughout gets Q4_1 copies (exact, half the bytes of
      // int8); any other form, 8-bit copies.
      auto own = quant::read_quant_config((fs::path(dir) / "config.json").string());
      if (!own) return own.status();
      const bool q4 = q4_1_holds_exactly(*own);
      return DraftQuantChoice{dir, q4 ? 4 : 8,
                              "draft-quant auto: the target's backend has no " + rec["min_isa"].get<std::string>() +
                                  ", which the recommended 4-bit drafter format (" + rung + ", " + rec_path +
                                  ") needs to run fast; " + dir + " is loaded with " +
                                  (q4 ? "4-bit Q4_1 copies of its matmul weights (exact: it is affine 4-bit throughout)"
                                      : "8-bit copies of its matmul weights, the fastest here for its format") +
                                  " (--draft-quant none for the checkpoint as given)"};
    }
  }
  auto qc = quant::read_quant_config((fs::path(dir) / "config.json").string());
  if (!qc) return qc.status();
  if (qc->present) return as_given;  // already quantized
  quant::ConvertOptions opt;
  opt.src_dir = dir;
  opt.defaults.method = rec.value("method", "affine") == "turbo" ? quant::Method::kTurbo : quant::Method::kAffine;
  opt.defaults.bits = rec.value("bits", 4);
  opt.defaults.group_size = rec.value("group_size", 64);
  if (rec.contains("recipe") && rec["recipe"].is_string())
    opt.recipe_path = (fs::path(rec_path).parent_path() / rec["recipe"].get<std::string>()).string();
  DSPARK_RETURN_IF_ERROR(quant::check_spec(opt.defaults, rec_path + ": field 'method'/'bits'/'group_size'"));
  fs::path src = fs::path(dir);
  if (!src.has_filename()) src = src.parent_path();
  fs::path out = src.parent_path() / (src.filename().string() + "-auto-" + rung);
  if (!dir_writable(src.parent_path().empty() ? fs::path(".") : src.parent_path()))
    out = fs::path(cache_dir) / "drafters" / (src.filename().string() + "-auto-" + rung);
  std::error_code ec;
  if (fs::exists(out / "config.json", ec)) {
    notify(note, "draft-quant auto: using " + out.string() + " (" + rung + " of " + dir +
                     ", converted earlier; --draft-quant none for the original)");
    return DraftQuantChoice{out.string(), 0, {}};
  }
  fs::create_directories(out.parent_path(), ec);
  opt.out_dir = out.string();
  const kernels::QMatrix& embd = target.weights().output;  // the target's LM head
  opt.target_lm_head = &embd;
  opt.check = [&](const std::string& staging) -> Status {
    auto r = smoke_check_drafter(staging, target, pool);
    return r ? Status::ok() : Status::error("reload check of the converted drafter failed: " + r.message());
  };
  notify(note, "draft-quant auto: converting " + dir + " to " + rung + " (recommended rung for drafters, " + rec_path +
                   ") ...");
  auto rep = quant::quantize_checkpoint(opt);
  if (!rep) {  // best effort: a drafter the rung does not fit (shapes, formats) loads as given
    notify(note, "draft-quant auto: not converted (" + rep.message() + "); loading " + dir + " as given");
    return as_given;
  }
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, "%.2f MB -> %.2f MB, %.2f bpw", (double)rep->bytes_before / 1e6,
                (double)rep->bytes_after / 1e6, rep->bpw_quantized);
  notify(note, "draft-quant auto: wrote " + out.string() + " (" + sizes + "); reused next time");
  return DraftQuantChoice{out.string(), 0, {}};
}

Result<DraftQuantChoice> resolve_draft_quant_for(const std::string& kind, const std::string& path,
                                                 speculative::DraftQuant mode, const model::Model& target,
                                                 const std::string& cache_dir, ThreadPool* pool, const NoteFn& note) {
  const DraftQuantChoice as_given{path, 0, {}};
  if (path.empty() || (kind != "auto" && kind != "dspark" && !kind.empty())) return as_given;
  auto k = detect_draft_kind(path);
  if (!k || *k != "dspark") return as_given;  // errors are reported by make_drafter
  if (mode == speculative::DraftQuant::kInt8) return DraftQuantChoice{path, 8, {}};
  if (mode == speculative::DraftQuant::kInt4) return DraftQuantChoice{path, 4, {}};
  if (mode == speculative::DraftQuant::kNone) {
    // A quantized checkpoint as given, on a CPU without AMX: ~2x slower per draft than its int8 copies
    // (docs/results/2026-12-03.md and docs/results/2026-12-04.md), so an A/B of it is not what generate / serve mount.
    auto qc = quant::read_quant_config((fs::path(path) / "config.json").string());
    if (!qc || !qc->present || (backend_isa(target) >= kernels::Isa::kAvx512 && kernels::amx_available()))
      return as_given;
    return DraftQuantChoice{path, 0,
                            path + " is a quantized checkpoint, loaded as given (draft-quant none); without AMX it "
                                   "drafts ~2x slower than the 8-bit copies generate and serve mount (draft-quant=int8)"};
  }
  // Only a drafter that loads against this target is converted (make_drafter reports the rest).
  const model::ModelConfig& tc = target.config();
  net::TargetTables tables;
  tables.embed = target.weights().token_embd;
  tables.lm_head = target.weights().output;
  tables.n_vocab = tc.n_vocab;
  tables.n_embd = tc.n_embd;
  if (!net::DSparkModel::load(path, net::target_shape(tc), &tables)) return as_given;
  return resolve_draft_quant(path, mode, target, cache_dir, pool, "", note);
}

}  // namespace dspark::runtime
