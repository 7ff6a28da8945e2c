#include "dspark/dspark_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dspark::net {

const char* markov_head_type_name(MarkovHeadType t) {
  switch (t) {
    case MarkovHeadType::kVanilla: return "vanilla";
    case MarkovHeadType::kGated: return "gated";
    case MarkovHeadType::kRnn: return "rnn";
  }
  return "unknown";
}

namespace {

using nlohmann::json;

// Field readers; every failure names the file and the field.
class Fields {
 public:
  Fields(const json& j, const std::string& file) : j_(j), file_(file) {}

  Status fail(const std::string& field, const std::string& what) const {
    return Status::error(file_ + ": field '" + field + "' " + what);
  }

  Status integer(const json& obj, const std::string& field, int64_t* out, bool required, int64_t min_value) const {
    auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) return required ? fail(field, "is missing") : Status::ok();
    if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
      return fail(field, "= " + it->dump() + " is not an integer");
    const int64_t v = it->is_number_integer() ? it->get<int64_t>() : (int64_t)it->get<double>();
    if (v < min_value) return fail(field, "= " + std::to_string(v) + " must be >= " + std::to_string(min_value));
    *out = v;
    return Status::ok();
  }
  Status integer(const std::string& field, int64_t* out, bool required, int64_t min_value) const {
    return integer(j_, field, out, required, min_value);
  }

  Status number(const json& obj, const std::string& field, double* out, bool required) const {
    auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) return required ? fail(field, "is missing") : Status::ok();
    if (!it->is_number()) return fail(field, "= " + it->dump() + " is not a number");
    *out = it->get<double>();
    if (!std::isfinite(*out)) return fail(field, "is not finite");
    return Status::ok();
  }

  Status boolean(const std::string& field, bool* out, bool required) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return required ? fail(field, "is missing") : Status::ok();
    if (!it->is_boolean()) return fail(field, "= " + it->dump() + " is not a boolean");
    *out = it->get<bool>();
    return Status::ok();
  }

  Status string(const std::string& field, std::string* out, bool required) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return required ? fail(field, "is missing") : Status::ok();
    if (!it->is_string()) return fail(field, "= " + it->dump() + " is not a string");
    *out = it->get<std::string>();
    return Status::ok();
  }

 private:
  const json& j_;
  const std::string& file_;
};

Status parse_rope(const json& j, const Fields& f, DSparkConfig* c) {
  // rope_parameters.full_attention, else rope_parameters, else flat keys (docs/DSPARK-CHECKPOINT.md §2).
  const json* src = &j;
  std::string prefix;
  auto rp = j.find("rope_parameters");
  if (rp != j.end() && rp->is_object()) {
    auto fa = rp->find("full_attention");
    if (fa != rp->end() && fa->is_object()) {
      src = &*fa;
      prefix = "rope_parameters.full_attention.";
    } else if (rp->contains("rope_theta") || rp->contains("partial_rotary_factor")) {
      src = &*rp;
      prefix = "rope_parameters.";
    }
  }
  double theta = 1e6, factor = 1.0;
  auto num = [&](const char* key, double* out) -> Status {
    auto it = src->find(key);
    if (it == src->end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return f.fail(prefix + key, "= " + it->dump() + " is not a number");
    *out = it->get<double>();
    return Status::ok();
  };
  DSPARK_RETURN_IF_ERROR(num("rope_theta", &theta));
  DSPARK_RETURN_IF_ERROR(num("partial_rotary_factor", &factor));
  if (!(theta > 0) || !std::isfinite(theta)) return f.fail(prefix + "rope_theta", "must be > 0");
  if (!(factor > 0 && factor <= 1)) return f.fail(prefix + "partial_rotary_factor", "must be in (0, 1]");
  c->rope_theta = theta;
  c->partial_rotary_factor = factor;
  c->n_rot = (int64_t)std::floor(factor * (double)c->head_dim / 2.0);  // Python int(factor * hd // 2)
  return Status::ok();
}

}  // namespace

Result<DSparkConfig> parse_dspark_config(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(file + ": not valid JSON");
  if (!j.is_object()) return Status::error(file + ": top level is not a JSON object");
  Fields f(j, file);
  DSparkConfig c;

  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
    return f.fail("architectures", "is missing or not a list of strings");
  if ((*arch)[0].get<std::string>() != "Gemma4DSparkModel")
    return f.fail("architectures", "[0] = '" + (*arch)[0].get<std::string>() + "' is not 'Gemma4DSparkModel'");

  DSPARK_RETURN_IF_ERROR(f.integer("hidden_size", &c.hidden_size, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("num_attention_heads", &c.n_heads, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("global_head_dim", &c.head_dim, true, 2));
  DSPARK_RETURN_IF_ERROR(f.integer("num_global_key_value_heads", &c.n_kv_heads, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("intermediate_size", &c.intermediate_size, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("vocab_size", &c.vocab_size, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("num_hidden_layers", &c.n_layers, true, 1));
  DSPARK_RETURN_IF_ERROR(f.integer("num_target_layers", &c.n_target_layers, true, 1));
  if (c.head_dim % 2 != 0) return f.fail("global_head_dim", "= " + std::to_string(c.head_dim) + " must be even");
  if (c.n_heads % c.n_kv_heads != 0)
    return f.fail("num_global_key_value_heads", "= " + std::to_string(c.n_kv_heads) +
                                                    " does not divide num_attention_heads = " + std::to_string(c.n_heads));

  bool k_eq_v = false;
  DSPARK_RETURN_IF_ERROR(f.boolean("attention_k_eq_v", &k_eq_v, true));
  if (!k_eq_v) return f.fail("attention_k_eq_v", "= false is not supported (no v_proj path; V is derived from k_proj)");

  std::string act;
  DSPARK_RETURN_IF_ERROR(f.string("hidden_activation", &act, true));
  if (act != "gelu_pytorch_tanh") return f.fail("hidden_activation", "= '" + act + "' is not supported (gelu_pytorch_tanh only)");

  double eps = 1e-6;
  DSPARK_RETURN_IF_ERROR(f.number(j, "rms_norm_eps", &eps, true));
  if (!(eps > 0)) return f.fail("rms_norm_eps", "must be > 0");
  c.rms_eps = (float)eps;

  double softcap = 0;
  DSPARK_RETURN_IF_ERROR(f.number(j, "final_logit_softcapping", &softcap, false));
  if (softcap < 0) return f.fail("final_logit_softcapping", "must be >= 0 or null");
  c.softcap = (float)softcap;

  DSPARK_RETURN_IF_ERROR(f.integer("block_size", &c.block_size, true, 1));
  int64_t mask = 0;
  DSPARK_RETURN_IF_ERROR(f.integer("mask_token_id", &mask, true, 0));
  if (mask >= c.vocab_size)
    return f.fail("mask_token_id", "= " + std::to_string(mask) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
  c.mask_token_id = (int32_t)mask;

  auto taps = j.find("target_layer_ids");
  if (taps == j.end() || !taps->is_array() || taps->empty()) return f.fail("target_layer_ids", "is missing or empty");
  for (const auto& t : *taps) {
    if (!t.is_number_integer()) return f.fail("target_layer_ids", "has a non-integer entry " + t.dump());
    const int64_t id = t.get<int64_t>();
    if (id < -1 || id > c.n_target_layers - 2)
      return f.fail("target_layer_ids", "entry " + std::to_string(id) + " is outside {-1} U [0, num_target_layers - 2 = " +
                                            std::to_string(c.n_target_layers - 2) + "]");
    if (!c.target_layer_ids.empty() && id <= c.target_layer_ids.back())
      return f.fail("target_layer_ids", "= " + taps->dump() + " is not strictly increasing");
    c.target_layer_ids.push_back((int)id);
  }

  DSPARK_RETURN_IF_ERROR(f.integer("markov_rank", &c.markov_rank, false, 0));
  std::string mtype = "vanilla";
  DSPARK_RETURN_IF_ERROR(f.string("markov_head_type", &mtype, false));
  if (mtype == "vanilla") c.markov_type = MarkovHeadType::kVanilla;
  else if (mtype == "gated") c.markov_type = MarkovHeadType::kGated;
  else if (mtype == "rnn") c.markov_type = MarkovHeadType::kRnn;
  else return f.fail("markov_head_type", "= '" + mtype + "' is not supported (vanilla, gated or rnn)");

  DSPARK_RETURN_IF_ERROR(f.boolean("enable_confidence_head", &c.confidence, false));
  DSPARK_RETURN_IF_ERROR(f.boolean("confidence_head_with_markov", &c.confidence_with_markov, false));
  if (c.markov_rank == 0) c.confidence_with_markov = false;

  DSPARK_RETURN_IF_ERROR(parse_rope(j, f, &c));

  c.draft_vocab_size = c.vocab_size;
  if (j.contains("draft_vocab_size") && !j["draft_vocab_size"].is_null()) {
    DSPARK_RETURN_IF_ERROR(f.integer("draft_vocab_size", &c.draft_vocab_size, true, 1));
    if (c.draft_vocab_size > c.vocab_size)
      return f.fail("draft_vocab_size", "= " + std::to_string(c.draft_vocab_size) + " exceeds vocab_size = " +
                                            std::to_string(c.vocab_size));
    c.has_draft_vocab_size = true;
  }
  // dspark extension: Sequential Temperature Scaling of the confidences (docs/TRAINING.md, STS), fitted by
  // `dspark train-drafter` on held-out rollouts: c_k = σ(z_k / T_k).
  if (j.contains("dspark_sts_temperatures") && !j["dspark_sts_temperatures"].is_null()) {
    const auto& t = j["dspark_sts_temperatures"];
    if (!t.is_array() || (int64_t)t.size() > c.block_size)
      return f.fail("dspark_sts_temperatures", "must be an array of at most block_size numbers");
    for (const auto& v : t) {
      if (!v.is_number() || !(v.get<double>() > 0.0))
        return f.fail("dspark_sts_temperatures", "has an entry that is not a positive number: " + v.dump());
      c.sts_temperatures.push_back(v.get<float>());
    }
  }
  // dspark extension: the copy head (prompt lookup in the sequential stage, dspark/copy_head.h).
  if (j.contains("dspark_copy_head") && !j["dspark_copy_head"].is_null()) {
    const auto& h = j["dspark_copy_head"];
    auto get = [&](const char* key, int* out) -> Status {
      if (!h.contains(key)) return Status::ok();
      // (integers only; prior_* are read below)
      if (!h[key].is_number_integer() || h[key].get<int64_t>() < 1 || h[key].get<int64_t>() > 16)
        return f.fail(std::string("dspark_copy_head.") + key, "must be an integer in [1, 16]");
      *out = (int)h[key].get<int64_t>();
      return Status::ok();
    };
    if (!h.is_object()) return f.fail("dspark_copy_head", "must be an object {max_ngram, min_ngram}");
    DSPARK_RETURN_IF_ERROR(get("max_ngram", &c.copy_max_ngram));
    DSPARK_RETURN_IF_ERROR(get("min_ngram", &c.copy_min_ngram));
    if (c.copy_min_ngram > c.copy_max_ngram)
      return f.fail("dspark_copy_head", "min_ngram exceeds max_ngram");
    auto priors = [&](const char* key, std::vector<double>* out) -> Status {
      if (!h.contains(key)) return Status::ok();
      const auto& pa = h[key];
      const std::string field = std::string("dspark_copy_head.") + key;
      if (!pa.is_array() || (int64_t)pa.size() != c.copy_max_ngram + 1)
        return f.fail(field, "must be an array of max_ngram + 1 numbers (drafter, n = 1..)");
      for (const auto& v : pa) {
        if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() <= 1.0))
          return f.fail(field, "has an entry outside [0, 1]: " + v.dump());
        out->push_back(v.get<double>());
      }
      return Status::ok();
    };
    DSPARK_RETURN_IF_ERROR(priors("prior_acceptance", &c.copy_prior_acceptance));
    DSPARK_RETURN_IF_ERROR(priors("prior_acceptance_sampled", &c.copy_prior_acceptance_sampled));
    if (h.contains("prior_weight")) {
      if (!h["prior_weight"].is_number() || !(h["prior_weight"].get<double>() > 0.0))
        return f.fail("dspark_copy_head.prior_weight", "must be a positive number");
      c.copy_prior_weight = h["prior_weight"].get<double>();
    }
    c.copy_head = true;
  }
  // dspark extension E6: prompt-lookup guesses as the block's inputs.
  if (j.contains("dspark_lookup_input") && !j["dspark_lookup_input"].is_null()) {
    const auto& h = j["dspark_lookup_input"];
    if (!h.is_object()) return f.fail("dspark_lookup_input", "must be an object {max_ngram, min_ngram}");
    for (const auto& [key, out] : {std::pair{"max_ngram", &c.lookup_max_ngram}, std::pair{"min_ngram", &c.lookup_min_ngram}}) {
      if (!h.contains(key)) return f.fail(std::string("dspark_lookup_input.") + key, "is missing");
      if (!h[key].is_number_integer() || h[key].get<int64_t>() < 1 || h[key].get<int64_t>() > 16)
        return f.fail(std::string("dspark_lookup_input.") + key, "must be an integer in [1, 16]");
      *out = (int)h[key].get<int64_t>();
    }
    if (c.lookup_min_ngram > c.lookup_max_ngram) return f.fail("dspark_lookup_input", "min_ngram exceeds max_ngram");
  }
  return c;
}

Result<DSparkConfig> read_dspark_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open (a DSpark drafter directory needs config.json)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_dspark_config(ss.str(), path);
}

}  // namespace dspark::net
