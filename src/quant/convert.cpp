#include "quant/convert.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "quant/affine.h"
#include "quant/lloyd_max.h"
#include "quant/qmatrix.h"
#include "quant/quant_config.h"
#include "quant/turbo.h"

namespace dspark::quant {

namespace fs = std::filesystem;
using nlohmann::json;

std::string default_out_dir(const std::string& src_dir, const QuantSpec& s) {
  std::string d = src_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "-" + method_name(s.method) + std::to_string(s.bits) + "g" + std::to_string(s.group_size);
}

uint64_t module_rotation_seed(uint64_t seed, const std::string& module) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : module) h = (h ^ c) * 0x100000001b3ull;
  uint64_t z = seed ^ h;                // splitmix64 finalizer
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) >> 11;
}

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool float_dtype(formats::StDType t) {
  return t == formats::StDType::kF32 || t == formats::StDType::kF16 || t == formats::StDType::kBF16;
}

// One tensor of the output plan.
struct Item {
  std::string name;
  std::vector<int64_t> shape;
  const formats::StTensorInfo* info = nullptr;  // nullptr: lm_head rows taken from the target
  bool matrix = false;                          // a 2-D float `*.weight`: may be quantized
  QuantSpec spec;
};

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::error(path + ": not a JSON object");
  return j;
}

// Recipe: module -> spec (nullopt = false). Fields absent from an entry inherit `defaults`.
Result<std::map<std::string, std::optional<QuantSpec>>> read_recipe(const std::string& path, const QuantSpec& defaults) {
  auto j = read_json(path);
  if (!j) return j.status();
  std::map<std::string, std::optional<QuantSpec>> out;
  for (auto it = j->begin(); it != j->end(); ++it) {
    const std::string key = it.key(), module = module_of(key);
    const std::string where = path + ": recipe entry " + in_quotes(key);
    if (out.count(module)) return Status::error(where + " names a module that is already listed");
    if (it->is_boolean() && !it->get<bool>()) {
      out[module] = std::nullopt;
      continue;
    }
    if (!it->is_object()) return Status::error(where + " must be false or an object {method, bits, group_size}");
    QuantSpec s = defaults;
    s.rotation_block = 0;
    for (auto f = it->begin(); f != it->end(); ++f) {
      const std::string& k = f.key();
      if (k == "method" || k == "mode") {
        if (!f->is_string() || !method_from_name(f->get<std::string>(), &s.method))
          return Status::error(where + ": field '" + k + "' = " + f->dump() + " is not 'affine' or 'turbo'");
      } else if (k == "bits" || k == "group_size" || k == "rotation_block") {
        if (!f->is_number_integer() || f->get<int64_t>() < 0 || f->get<int64_t>() > 4096)
          return Status::error(where + ": field '" + k + "' = " + f->dump() + " is not a small positive integer");
        (k == "bits" ? s.bits : k == "group_size" ? s.group_size : s.rotation_block) = f->get<int>();
      } else {
        return Status::error(where + ": unknown field '" + k + "' (method, bits, group_size, rotation_block)");
      }
    }
    if (!s.quantized()) return Status::error(where + ": no method given and no default method");
    DSPARK_RETURN_IF_ERROR(check_spec(s, where));
    out[module] = s;
  }
  return out;
}

Result<std::vector<int32_t>> read_d2t(const formats::SafetensorsModel& st) {
  const formats::StTensorInfo* info = st.find("d2t");
  if (!info || info->shape.size() != 1 ||
      (info->dtype != formats::StDType::kI32 && info->dtype != formats::StDType::kI64))
    return Status::error(st.dir() + ": tensor 'd2t' must be a 1-D I32 or I64 tensor");
  const uint8_t* p = st.data(*info);
  std::vector<int32_t> d2t((size_t)info->shape[0]);
  for (size_t j = 0; j < d2t.size(); ++j) {
    if (info->dtype == formats::StDType::kI64) {
      int64_t v;
      std::memcpy(&v, p + j * 8, 8);
      d2t[j] = (int32_t)v;
    } else {
      std::memcpy(&d2t[j], p + j * 4, 4);
    }
  }
  return d2t;
}

template <class T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Quantizes w [rows, cols] with `spec`; appends the tensors of `module`; returns the NMSE.
double quantize_matrix(const std::string& module, const std::vector<float>& w, int64_t rows, int64_t cols,
                       const QuantSpec& spec, const std::vector<float>& levels, std::vector<formats::StWriteTensor>& out) {
  const int64_t rb = code_row_bytes(cols, spec.bits), ng = cols / spec.group_size;
  std::vector<uint8_t> codes((size_t)(rows * rb));
  std::vector<uint16_t> scales((size_t)(rows * ng)), biases(spec.method == Method::kAffine ? (size_t)(rows * ng) : 0);
  QuantMatrix q;
  q.spec = spec;
  q.n_rows = rows;
  q.n_cols = cols;
  if (spec.method == Method::kTurbo) {
    auto t = std::make_shared<TurboTables>();
    t->levels = levels;
    t->rot = make_rotation(cols, spec.rotation_block, spec.rotation_seed);
    q.turbo = t;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w.data() + r * cols;
    if (spec.method == Method::kAffine)
      affine_quantize_row(wr, cols, spec.bits, spec.group_size, &codes[(size_t)(r * rb)], &scales[(size_t)(r * ng)],
                          &biases[(size_t)(r * ng)]);
    else
      turbo_quantize_row(wr, q.turbo->rot, levels, spec.bits, spec.group_size, &codes[(size_t)(r * rb)],
                         &scales[(size_t)(r * ng)]);
  }
  q.codes = codes.data();
  q.scales = scales.data();
  q.biases = biases.empty() ? nullptr : biases.data();
  double err = 0, ref = 0;
  std::vector<float> row((size_t)cols);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(q, r, row.data(), kernels::Isa::kScalar);
    for (int64_t j = 0; j < cols; ++j) {
      const double a = w[(size_t)(r * cols + j)], d = a - row[(size_t)j];
      err += d * d;
      ref += a * a;
    }
  }
  out.push_back({module + ".weight", formats::StDType::kU32, {rows, cols * spec.bits / 32}, std::move(codes)});
  out.push_back({module + ".scales", formats::StDType::kBF16, {rows, ng}, to_bytes(scales)});
  if (spec.method == Method::kAffine) out.push_back({module + ".biases", formats::StDType::kBF16, {rows, ng}, to_bytes(biases)});
  return ref > 0 ? err / ref : 0.0;
}

Status write_json(const fs::path& path, const json& j) {
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) return Status::error(path.string() + ": write failed");
  return Status::ok();
}

}  // namespace

Result<ConvertReport> quantize_checkpoint(const ConvertOptions& opt) {
  std::error_code ec;
  const std::string src = opt.src_dir.empty() ? "./" : (opt.src_dir.back() == '/' ? opt.src_dir : opt.src_dir + "/");
  std::string out_dir = opt.out_dir;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  if (out_dir.empty()) return Status::error("no output directory given");
  if (fs::exists(out_dir, ec)) return Status::error(out_dir + ": output directory exists (refusing to overwrite)");
  DSPARK_RETURN_IF_ERROR(check_spec(opt.defaults, "default quantization"));
  if (!opt.defaults.quantized()) return Status::error("default quantization: no method given");

  // ---- plan: everything is checked before anything is written ----------------------------------
  const std::string cfg_file = src + "config.json";
  auto cfg = read_json(cfg_file);
  if (!cfg) return cfg.status();
  for (const char* k : {"quantization", "quantization_config"})
    if (cfg->contains(k) && !(*cfg)[k].is_null())
      return Status::error(cfg_file + ": field '" + std::string(k) + "' exists: the checkpoint is already quantized");
  auto st = formats::SafetensorsModel::open_dir(src);
  if (!st) return st.status();
  std::vector<Item> items;
  for (const std::string& name : st->tensor_names()) {
    if (ends_with(name, ".scales"))
      return Status::error(src + ": tensor " + in_quotes(name) + " exists: the checkpoint is already quantized");
    Item it;
    it.name = name;
    it.info = st->find(name);
    it.shape = it.info->shape;
    it.matrix = float_dtype(it.info->dtype) && it.shape.size() == 2 && ends_with(name, ".weight");
    items.push_back(std::move(it));
  }
  std::vector<int32_t> d2t;
  if (!st->find("lm_head.weight") && st->find("d2t")) {  // E3: materialize the draft LM head
    auto d = read_d2t(*st);
    if (!d) return d.status();
    d2t = std::move(d.value());
    const int64_t H = cfg->value("hidden_size", (int64_t)0);
    if (H <= 0) return Status::error(cfg_file + ": field 'hidden_size' is missing");
    Item it;
    it.name = "lm_head.weight";
    it.shape = {(int64_t)d2t.size(), H};
    it.matrix = true;
    items.push_back(std::move(it));
  }
  std::map<std::string, std::optional<QuantSpec>> recipe;
  if (!opt.recipe_path.empty()) {
    auto r = read_recipe(opt.recipe_path, opt.defaults);
    if (!r) return r.status();
    recipe = std::move(r.value());
  }
  for (const auto& [module, spec] : recipe) {
    const Item* hit = nullptr;
    for (const Item& it : items)
      if (module_of(it.name) == module && ends_with(it.name, ".weight")) hit = &it;
    if (!hit) {
      std::string known;
      for (const Item& it : items)
        if (it.matrix) known += (known.empty() ? "" : ", ") + module_of(it.name);
      return Status::error(opt.recipe_path + ": recipe entry " + in_quotes(module) + " is not a weight matrix of " + src +
                           " (matrices: " + known + ")");
    }
    if (!hit->matrix)
      return Status::error(opt.recipe_path + ": recipe entry " + in_quotes(module) + ": tensor " + in_quotes(hit->name) +
                           " is not a 2-D float matrix (shape " + formats::st_shape_string(hit->shape) + ")");
  }
  for (auto it = items.begin(); it != items.end();) {
    const std::string module = module_of(it->name);
    if (it->matrix) {
      auto r = recipe.find(module);
      const bool policy = module.rfind("confidence_head", 0) != 0;  // the confidence head stays dense
      if (r != recipe.end()) it->spec = r->second ? *r->second : QuantSpec{};
      else if (policy) it->spec = opt.defaults;
      it->spec.rotation_seed = 0;
      if (it->spec.method == Method::kTurbo) {
        if (it->spec.rotation_block == 0 || r == recipe.end()) it->spec.rotation_block = default_rotation_block(it->shape[1]);
        it->spec.rotation_seed = module_rotation_seed(opt.seed, module);
      } else {
        it->spec.rotation_block = 0;
      }
      DSPARK_RETURN_IF_ERROR(check_spec_shape(it->spec, it->shape[1], "tensor " + in_quotes(it->name)));
    }
    if (!it->info && !it->spec.quantized()) {  // lm_head kept dense: stays E3 (target rows)
      it = items.erase(it);
      continue;
    }
    if (!it->info) {
      const kernels::QMatrix* t = opt.target_lm_head;
      if (!t || !t->data)
        return Status::error(src + ": tensor 'lm_head.weight' is taken from the target (d2t rows, extension E3); give "
                             "the target model to write it quantized, or set \"lm_head\": false in a recipe");
      if (t->n_cols != it->shape[1])
        return Status::error("the target's output matrix has " + std::to_string(t->n_cols) + " columns, the drafter's "
                             "hidden_size is " + std::to_string(it->shape[1]));
      for (int32_t id : d2t)
        if (id < 0 || id >= t->n_rows)
          return Status::error(src + ": tensor 'd2t' entry " + std::to_string(id) + " is outside the target vocabulary");
    }
    ++it;
  }

  // ---- convert --------------------------------------------------------------------------------
  ConvertReport rep;
  rep.out_dir = out_dir;
  QuantConfig qc;
  qc.present = true;
  qc.defaults = opt.defaults;
  qc.defaults.rotation_block = 0;
  std::vector<formats::StWriteTensor> out;
  int64_t index = 0;
  for (const Item& it : items) {
    if (opt.progress) opt.progress(it.name, index++, (int64_t)items.size());
    TensorReport tr;
    tr.name = it.name;
    tr.shape = it.shape;
    tr.spec = it.spec;
    tr.source = it.info ? formats::st_dtype_name(it.info->dtype) : "target rows";
    tr.bytes_before = it.info ? it.info->n_bytes : 0;
    rep.bytes_before += tr.bytes_before;
    const size_t first = out.size();
    if (!it.spec.quantized()) {
      const uint8_t* p = st->data(*it.info);
      out.push_back({it.name, it.info->dtype, it.shape, std::vector<uint8_t>(p, p + it.info->n_bytes)});
      if (it.matrix) qc.modules[module_of(it.name)] = std::nullopt;
      rep.params_after += it.info->n_elements;
    } else {
      const int64_t rows = it.shape[0], cols = it.shape[1];
      std::vector<float> w;
      if (it.info) {
        auto v = st->read_f32(it.name, it.shape);
        if (!v) return v.status();
        w = std::move(v.value());
      } else {
        const kernels::QMatrix& t = *opt.target_lm_head;
        w.resize((size_t)(rows * cols));
        for (int64_t j = 0; j < rows; ++j)
          kernels::dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + (size_t)d2t[(size_t)j] * t.row_stride,
                                  w.data() + j * cols, cols);
        rep.lm_head_materialized = true;
      }
      for (size_t i = 0; i < w.size(); ++i)
        if (!std::isfinite(w[i]))
          return Status::error(src + ": tensor " + in_quotes(it.name) + " element " + std::to_string(i) + " is not finite");
      std::vector<float> levels;
      if (it.spec.method == Method::kTurbo) {
        if (!qc.turbo_codebooks.count(it.spec.bits)) qc.turbo_codebooks[it.spec.bits] = turbo_levels(it.spec.bits);
        levels = qc.turbo_codebooks[it.spec.bits];
      }
      tr.nmse = quantize_matrix(module_of(it.name), w, rows, cols, it.spec, levels, out);
      qc.modules[module_of(it.name)] = it.spec;
      rep.params_after += rows * cols;
      rep.params_quantized += rows * cols;
    }
    for (size_t i = first; i < out.size(); ++i) tr.bytes_after += out[i].bytes.size();
    rep.bytes_after += tr.bytes_after;
    rep.tensors.push_back(std::move(tr));
  }
  uint64_t qbytes = 0;
  for (const TensorReport& t : rep.tensors)
    if (t.spec.quantized()) qbytes += t.bytes_after;
  rep.bpw_quantized = rep.params_quantized ? 8.0 * (double)qbytes / (double)rep.params_quantized : 0.0;
  rep.bpw_model = rep.params_after ? 8.0 * (double)rep.bytes_after / (double)rep.params_after : 0.0;

  json cfg_out = cfg.value();
  cfg_out["quantization"] = quant_config_json(qc);
  cfg_out["quantization_config"] = cfg_out["quantization"];

  // ---- write: staging folder, check, rename ---------------------------------------------------
  const fs::path stage = fs::path(out_dir + ".staging-" + std::to_string(::getpid()));
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) return Status::error(stage.string() + ": " + ec.message());
  auto fail = [&](Status st) {
    std::error_code e2;
    fs::remove_all(stage, e2);
    return st;
  };
  if (Status s = formats::write_safetensors((stage / "model.safetensors").string(), out,
                                            {{"format", "mlx"}, {"dspark_quantized", "dspark quantize-drafter"}});
      !s)
    return fail(s);
  if (Status s = write_json(stage / "config.json", cfg_out); !s) return fail(s);
  for (const auto& e : fs::directory_iterator(src, ec)) {  // other files (README, ...) travel along
    const std::string f = e.path().filename().string();
    if (!e.is_regular_file() || f == "config.json" || f == "model.safetensors.index.json" || ends_with(f, ".safetensors"))
      continue;
    fs::copy_file(e.path(), stage / f, ec);
    if (ec) return fail(Status::error((stage / f).string() + ": " + ec.message()));
  }
  if (opt.check)
    if (Status s = opt.check(stage.string()); !s) return fail(s);
  if (fs::exists(out_dir, ec)) return fail(Status::error(out_dir + ": output directory appeared while converting"));
  fs::rename(stage, out_dir, ec);
  if (ec) return fail(Status::error(out_dir + ": " + ec.message()));
  return rep;
}

}  // namespace dspark::quant
