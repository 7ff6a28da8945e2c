// A quantized drafter computes exactly what its quantized weights say: the forward of a quantized
// checkpoint (affine / turbo kernels) against the same forward over its dequantized weights written
// as a dense f32 checkpoint; the Markov fast path stays exact on quantized W2; loader errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "quant/bind.h"
#include "quant/convert.h"
#include "kernels/packed.h"
#include "speculative/drafter_dspark.h"
#include "tiny_drafter.h"

namespace dspark::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// max |quantized - dequantized-f32| <= kTolQuantVsDequant * (1 + max |dequantized|) over hidden rows
// and logits: the two paths differ only in f32 accumulation order (and the turbo rotation of x).
// Measured <= 4.6e-7 over the five recipes below.
constexpr double kTolQuantVsDequant = 5e-6;
// int8 matmul copies against the checkpoint's own weights: Q8_0 rounding of weights and activations
// (relative step 1/254 per 32 values), through one layer. Measured on the tiny drafter: hidden
// 1.9e-3, logits 7.8e-4 (2026-12-02).
constexpr double kTolInt8VsCheckpoint = 1e-2;
// Q4_1 copies of a 4-bit affine checkpoint against that checkpoint: the copies hold its weights
// exactly (its codes, scale and bias per 32), so only the Q8_0 rounding of activations differs, as
// for the int8 copies (kTolInt8VsCheckpoint). Measured on the tiny drafter (2026-12-04), affine4g32
// / g64: hidden 2.2e-3 / 2.3e-3, logits 1.8e-3 / 2.1e-3; the int8 copies of the same checkpoints,
// which also round its weights to 8 bits, 3.6e-3 / 3.4e-3 and 3.0e-3 / 2.9e-3.
constexpr double kTolInt4VsA4BitCheckpoint = kTolInt8VsCheckpoint;

class QuantForward : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("dspark_qfwd_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    dense_ = (tmp_ / "dense").string();
    ASSERT_TRUE(testing::write_tiny_drafter(dense_, shape_, 5).is_ok());
  }
  void TearDown() override { fs::remove_all(tmp_); }

  Result<ConvertReport> convert(const std::string& name, QuantSpec spec, const std::string& recipe = "") {
    ConvertOptions o;
    o.src_dir = dense_;
    o.out_dir = (tmp_ / name).string();
    o.defaults = spec;
    o.target_lm_head = &table_.q;
    if (!recipe.empty()) {
      o.recipe_path = (tmp_ / (name + ".recipe.json")).string();
      std::ofstream(o.recipe_path) << recipe;
    }
    return quantize_checkpoint(o);
  }

  // The dense f32 twin of a quantized checkpoint: every quantized module dequantized (original basis).
  std::string write_dequantized(const std::string& qdir) {
    const std::string out = qdir + "-deq";
    fs::create_directories(out);
    auto st = formats::SafetensorsModel::open_dir(qdir + "/");
    EXPECT_TRUE(st.is_ok()) << st.message();
    auto qc = read_quant_config(qdir + "/config.json");
    EXPECT_TRUE(qc.is_ok()) << qc.message();
    std::set<std::string> used;
    std::vector<std::unique_ptr<uint8_t[]>> owned;
    MatrixBinder binder(*st, *qc, qdir, qdir + "/config.json", used, owned);
    std::vector<formats::StWriteTensor> ts;
    for (const auto& [module, spec] : qc->modules) {
      if (!spec) continue;
      const formats::StTensorInfo* s = st->find(module + ".scales");
      const formats::StTensorInfo* w = st->find(module + ".weight");
      const int64_t rows = s->shape[0], cols = w->shape[1] * 32 / spec->bits;
      DraftMatrix m;
      EXPECT_TRUE(binder.bind(module + ".weight", rows, cols, &m).is_ok());
      formats::StWriteTensor t{module + ".weight", formats::StDType::kF32, {rows, cols}, {}};
      t.bytes.resize((size_t)(rows * cols * 4));
      for (int64_t r = 0; r < rows; ++r) m.dequantize_row(r, reinterpret_cast<float*>(t.bytes.data()) + r * cols, kernels::detect_isa());
      ts.push_back(std::move(t));
    }
    for (const std::string& name : st->tensor_names())
      if (!used.count(name)) {
        const formats::StTensorInfo* i = st->find(name);
        const uint8_t* p = st->data(*i);
        ts.push_back({name, i->dtype, i->shape, std::vector<uint8_t>(p, p + i->n_bytes)});
      }
    EXPECT_TRUE(formats::write_safetensors(out + "/model.safetensors", ts).is_ok());
    std::ifstream in(qdir + "/config.json");
    json cfg = json::parse(in);
    cfg.erase("quantization");
    cfg.erase("quantization_config");
    std::ofstream(out + "/config.json") << cfg.dump(1);
    return out;
  }

  struct Run {
    std::vector<int32_t> tokens;
    std::vector<float> hidden, logits;  // [γ, H], [γ, V_d] Markov-corrected rows
  };
  Run run(const std::string& dir, bool fast_path, int copy_bits = 0) {
    speculative::DSparkOptions opt;
    opt.markov_fast_path = fast_path;
    opt.copy_bits = copy_bits;
    auto d = speculative::DSparkDrafter::load(dir, testing::tiny_target(shape_), &table_.tables, opt, nullptr);
    EXPECT_TRUE(d.is_ok()) << d.message();
    if (!d.is_ok()) return {};
    speculative::DSparkDrafter& dr = **d;
    const int64_t n = 6, H = shape_.H;
    std::vector<std::vector<float>> taps(shape_.taps.size(), std::vector<float>((size_t)(n * H)));
    Rng rng(21);
    speculative::TapRows rows;
    for (auto& t : taps) {
      for (float& x : t) x = (float)testing::tiny_normal(rng);
      rows.taps.push_back(t.data());
    }
    rows.n_rows = n;
    rows.n_embd = H;
    const std::vector<int32_t> prompt = {2, 7, 9, 11, 13, 15};
    EXPECT_TRUE(dr.begin(prompt, rows).is_ok());
    speculative::DraftResult out;
    EXPECT_TRUE(dr.draft({.pending = 17, .pos = n, .max_n = (int)shape_.block, .sampler = {}, .rng = nullptr}, &out).is_ok());
    Run r;
    r.tokens = out.tokens;
    r.hidden.assign(dr.last_hidden(), dr.last_hidden() + shape_.block * H);
    const int64_t vd = dr.model().draft_vocab();
    for (int k = 0; k < dr.last_slots(); ++k)
      if (const float* s = dr.last_logits(k)) r.logits.insert(r.logits.end(), s, s + vd);
    return r;
  }

  static double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double mx = 0, d = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      mx = std::max(mx, (double)std::fabs(b[i]));
      d = std::max(d, (double)std::fabs(a[i] - b[i]));
    }
    return d / (1 + mx);
  }

  testing::TinyDrafterShape shape_;
  testing::TinyTable table_{shape_, 9};
  fs::path tmp_;
  std::string dense_;
};

TEST_F(QuantForward, QuantizedForwardEqualsDequantizedDenseForward) {
  struct Case {
    const char* name;
    QuantSpec spec;
    std::string recipe;
  };
  const Case cases[] = {
      {"affine4g32", {Method::kAffine, 4, 32}, ""},
      {"affine8g64", {Method::kAffine, 8, 64}, ""},
      {"affine3g128", {Method::kAffine, 3, 128}, R"({"markov_head.markov_w1": {"group_size": 64},
                                                    "markov_head.markov_w2": {"bits": 2, "group_size": 32}})"},
      {"turbo4g32", {Method::kTurbo, 4, 32}, ""},
      {"turbo2g64", {Method::kTurbo, 2, 64}, R"({"fc": {"method": "affine", "bits": 5}, "lm_head": {"bits": 3}})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto rep = convert(c.name, c.spec, c.recipe);
    ASSERT_TRUE(rep.is_ok()) << rep.message();
    EXPECT_TRUE(rep->lm_head_materialized);
    const std::string q = (tmp_ / c.name).string();
    const Run a = run(q, false), b = run(write_dequantized(q), false);
    ASSERT_FALSE(a.hidden.empty());
    EXPECT_LT(max_rel_diff(a.hidden, b.hidden), kTolQuantVsDequant);
    ASSERT_EQ(a.logits.size(), (size_t)(shape_.block * shape_.n_draft_vocab));
    EXPECT_LT(max_rel_diff(a.logits, b.logits), kTolQuantVsDequant);
    // The exact Markov fast path (w2 row norms of the dequantized rows) picks the same tokens.
    EXPECT_EQ(run(q, true).tokens, a.tokens);
  }
}

TEST_F(QuantForward, Int8MatmulsTrackTheCheckpointForward) {
  // --draft-quant int8: fc and the layers' matrices become Q8_0 copies (packed where the CPU has
  // the packed kernel); gather tables, the Markov head and the target's LM head rows stay.
  speculative::DSparkOptions opt;
  opt.copy_bits = 8;
  auto d = speculative::DSparkDrafter::load(dense_, testing::tiny_target(shape_), &table_.tables, opt, nullptr);
  ASSERT_TRUE(d.is_ok()) << d.message();
  const net::DSparkWeights& w = (*d)->model().weights();
  EXPECT_EQ(w.fc.describe(), "Q8_0");
  EXPECT_EQ(w.layers[0].w_down.describe(), "Q8_0");
  EXPECT_EQ(w.layers[0].wq.dense_matrix().packed != nullptr, kernels::pack_supported(DType::Q8_0, kernels::detect_isa()));
  EXPECT_EQ(w.markov_w2.describe(), "BF16");
  const Run a = run(dense_, false, 8), b = run(dense_, false, 0);
  ASSERT_FALSE(a.hidden.empty());
  EXPECT_LT(max_rel_diff(a.hidden, b.hidden), kTolInt8VsCheckpoint);
  EXPECT_LT(max_rel_diff(a.logits, b.logits), kTolInt8VsCheckpoint);
  EXPECT_EQ(run(dense_, true, 8).tokens, a.tokens);  // the fast path stays exact (W2 unchanged)
  // A quantized checkpoint's int8 copy is made from its dequantized rows: the same Q8_0 weights as
  // its dense f32 twin's, so the two backbones agree bitwise (the logits differ only through the
  // Markov head, which stays quantized: kernel accumulation order, as above).
  auto rep = convert("turbo4g32", {Method::kTurbo, 4, 32});
  ASSERT_TRUE(rep.is_ok()) << rep.message();
  const std::string q = (tmp_ / "turbo4g32").string();
  const Run c = run(q, false, 8), e = run(write_dequantized(q), false, 8);
  EXPECT_EQ(c.hidden, e.hidden);
  EXPECT_LT(max_rel_diff(c.logits, e.logits), kTolQuantVsDequant);
}

TEST_F(QuantForward, Int4CopiesTrackA4BitCheckpoint) {
  // --draft-quant int4: the same matrices as int8, held as Q4_1 (packed where the CPU has the
  // packed kernel). From a 4-bit affine checkpoint the copies keep its codes, scales and biases:
  // every row dequantizes to the checkpoint's own row, bit for bit.
  for (auto [name, spec] : {std::pair<const char*, QuantSpec>{"affine4g32", {Method::kAffine, 4, 32}},
                            {"affine4g64", {Method::kAffine, 4, 64}}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(convert(name, spec).is_ok());
    const std::string q = (tmp_ / name).string();
    speculative::DSparkOptions opt;
    auto given = speculative::DSparkDrafter::load(q, testing::tiny_target(shape_), &table_.tables, opt, nullptr);
    opt.copy_bits = 4;
    auto d = speculative::DSparkDrafter::load(q, testing::tiny_target(shape_), &table_.tables, opt, nullptr);
    ASSERT_TRUE(given.is_ok() && d.is_ok()) << d.message();
    const net::DSparkWeights& w = (*d)->model().weights();
    const net::DSparkWeights& w0 = (*given)->model().weights();
    EXPECT_EQ(w.fc.describe(), "Q4_1");
    EXPECT_EQ(w.layers[0].w_up.describe(), "Q4_1");
    EXPECT_EQ(w.layers[0].wq.dense_matrix().packed != nullptr, kernels::pack_supported(DType::Q4_1, kernels::detect_isa()));
    const std::pair<const DraftMatrix*, const DraftMatrix*> mats[] = {
        {&w.fc, &w0.fc}, {&w.layers[0].wq, &w0.layers[0].wq}, {&w.layers[0].w_down, &w0.layers[0].w_down}};
    for (const auto& [c, o] : mats) {
      std::vector<float> rc((size_t)c->n_cols()), ro(rc.size());
      for (int64_t r = 0; r < c->n_rows(); ++r) {
        c->dequantize_row(r, rc.data(), kernels::detect_isa());
        o->dequantize_row(r, ro.data(), kernels::detect_isa());
        ASSERT_EQ(rc, ro) << o->describe() << " row " << r;
      }
    }
    const Run a = run(q, false, 4), b = run(q, false, 0), c8 = run(q, false, 8);
    ASSERT_FALSE(a.hidden.empty());
    const double dh = max_rel_diff(a.hidden, b.hidden), dl = max_rel_diff(a.logits, b.logits);
    std::printf("%s: int4 copies vs the checkpoint: hidden %.2e, logits %.2e (int8 copies: %.2e, %.2e)\n", name, dh,
                dl, max_rel_diff(c8.hidden, b.hidden), max_rel_diff(c8.logits, b.logits));
    EXPECT_LT(dh, kTolInt4VsA4BitCheckpoint);
    EXPECT_LT(dl, kTolInt4VsA4BitCheckpoint);
    EXPECT_EQ(run(q, true, 4).tokens, a.tokens);  // the exact Markov fast path, as for int8
    // Other widths are refused with a message, not an abort.
    opt.copy_bits = 2;
    auto bad = speculative::DSparkDrafter::load(q, testing::tiny_target(shape_), &table_.tables, opt, nullptr);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.message().find("8 or 4"), std::string::npos) << bad.message();
  }
}

TEST_F(QuantForward, OwnEmbeddingTableIsQuantizedAndGathered) {
  // A drafter with its own embed_tokens [V, H] (the gather table of the block input rows).
  auto f = formats::SafetensorsFile::open(dense_ + "/model.safetensors");
  ASSERT_TRUE(f.is_ok());
  std::vector<formats::StWriteTensor> ts;
  for (const auto& i : f->tensors()) {
    const uint8_t* p = f->data(i);
    ts.push_back({i.name, i.dtype, i.shape, std::vector<uint8_t>(p, p + i.n_bytes)});
  }
  formats::StWriteTensor e{"embed_tokens.weight", formats::StDType::kF32, {shape_.V, shape_.H}, {}};
  e.bytes.resize(table_.data.size() * 4);
  for (size_t i = 0; i < table_.data.size(); ++i) {
    const float v = 0.5f * table_.data[(table_.data.size() - 1 - i)];  // not the target's table
    std::memcpy(&e.bytes[i * 4], &v, 4);
  }
  ts.push_back(std::move(e));
  f = Result<formats::SafetensorsFile>(Status::error("closed"));
  ASSERT_TRUE(formats::write_safetensors(dense_ + "/model.safetensors", ts).is_ok());
  for (auto [name, spec] : {std::pair<const char*, QuantSpec>{"e_turbo", {Method::kTurbo, 3, 32}},
                            {"e_affine", {Method::kAffine, 4, 64}}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(convert(name, spec).is_ok());
    const std::string q = (tmp_ / name).string();
    auto st = formats::SafetensorsModel::open_dir(q + "/");
    ASSERT_EQ(st->find("embed_tokens.weight")->dtype, formats::StDType::kU32);
    const Run a = run(q, false), b = run(write_dequantized(q), false);
    EXPECT_LT(max_rel_diff(a.hidden, b.hidden), kTolQuantVsDequant);
    EXPECT_LT(max_rel_diff(a.logits, b.logits), kTolQuantVsDequant);
  }
}

TEST_F(QuantForward, ConfigRecordsEveryMatrixAndKeepsTheRestDense) {
  auto rep = convert("t", {Method::kTurbo, 3, 32});
  ASSERT_TRUE(rep.is_ok()) << rep.message();
  std::ifstream in(tmp_ / "t" / "config.json");
  const json cfg = json::parse(in);
  const json& q = cfg["quantization"];
  EXPECT_EQ(cfg["quantization_config"], q);
  EXPECT_EQ(q["confidence_head.proj"], false);
  EXPECT_EQ(q["fc"]["mode"], "turbo");
  EXPECT_EQ(q["fc"]["bits"], 3);
  EXPECT_EQ(q["fc"]["rotation_block"], 256);  // 256 input columns: one block (cap 256)
  EXPECT_EQ(q["layers.0.self_attn.o_proj"]["rotation_block"], 128);
  EXPECT_EQ(q["markov_head.markov_w1"]["rotation_block"], 64);
  EXPECT_EQ(q["turbo_codebooks"]["3"].size(), 8u);
  EXPECT_NE(q["fc"]["rotation_seed"], q["lm_head"]["rotation_seed"]);
  auto st = formats::SafetensorsModel::open_dir((tmp_ / "t").string() + "/");
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ(st->find("fc.weight")->dtype, formats::StDType::kU32);
  EXPECT_EQ(st->find("fc.weight")->shape, (std::vector<int64_t>{128, 256 * 3 / 32}));
  EXPECT_EQ(st->find("fc.biases"), nullptr);
  EXPECT_EQ(st->find("norm.weight")->dtype, formats::StDType::kBF16);
  EXPECT_EQ(st->find("confidence_head.proj.weight")->dtype, formats::StDType::kBF16);
  EXPECT_EQ(st->find("lm_head.weight")->shape, (std::vector<int64_t>{128, 128 * 3 / 32}));
  EXPECT_NE(st->find("d2t"), nullptr);
  // 3 + 16/32 bits per quantized weight.
  EXPECT_NEAR(rep->bpw_quantized, 3.5, 1e-9);
}

TEST_F(QuantForward, LmHeadFalseKeepsTheTargetRows) {
  auto rep = convert("k", {Method::kAffine, 4, 64}, R"({"lm_head.weight": false})");
  ASSERT_TRUE(rep.is_ok()) << rep.message();
  EXPECT_FALSE(rep->lm_head_materialized);
  auto st = formats::SafetensorsModel::open_dir((tmp_ / "k").string() + "/");
  EXPECT_EQ(st->find("lm_head.weight"), nullptr);
  const Run a = run((tmp_ / "k").string(), false);
  EXPECT_FALSE(a.tokens.empty());
}

TEST_F(QuantForward, LoaderErrorsNameTensorAndField) {
  ASSERT_TRUE(convert("a", {Method::kAffine, 4, 32}).is_ok());
  ASSERT_TRUE(convert("t", {Method::kTurbo, 4, 32}).is_ok());
  auto load_error = [&](const std::string& dir) {
    auto d = speculative::DSparkDrafter::load(dir, testing::tiny_target(shape_), &table_.tables, {}, nullptr);
    EXPECT_FALSE(d.is_ok());
    return d.is_ok() ? std::string() : d.message();
  };
  auto copy = [&](const std::string& from, const std::string& to) {
    fs::copy(tmp_ / from, tmp_ / to, fs::copy_options::recursive);
    return (tmp_ / to).string();
  };
  auto edit_tensors = [](const std::string& dir, const std::function<void(std::vector<formats::StWriteTensor>&)>& fn) {
    std::vector<formats::StWriteTensor> ts;
    {
      auto f = formats::SafetensorsFile::open(dir + "/model.safetensors");
      for (const auto& i : f->tensors()) {
        const uint8_t* p = f->data(i);
        ts.push_back({i.name, i.dtype, i.shape, std::vector<uint8_t>(p, p + i.n_bytes)});
      }
    }
    fn(ts);
    ASSERT_TRUE(formats::write_safetensors(dir + "/model.safetensors", ts).is_ok());
  };
  auto edit_config = [](const std::string& dir, const std::function<void(json&)>& fn) {
    json j;
    {
      std::ifstream in(dir + "/config.json");
      j = json::parse(in);
    }
    fn(j);
    std::ofstream(dir + "/config.json") << j.dump(1);
  };
  auto mentions = [](const std::string& msg, const std::string& needle) {
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };

  std::string d = copy("a", "no_biases");
  edit_tensors(d, [](auto& ts) { std::erase_if(ts, [](auto& t) { return t.name == "layers.0.mlp.up_proj.biases"; }); });
  mentions(load_error(d), "layers.0.mlp.up_proj.biases");

  d = copy("a", "bad_scales");
  edit_tensors(d, [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "fc.scales") {
        t.shape = {128, 4};
        t.bytes.resize(128 * 4 * 2);
      }
  });
  const std::string e = load_error(d);
  mentions(e, "fc.scales");
  mentions(e, "[128, 4]");

  d = copy("a", "false_entry");
  edit_config(d, [](json& j) { j["quantization"]["fc"] = false; });
  mentions(load_error(d), "quantization.fc");

  d = copy("t", "no_codebook");
  edit_config(d, [](json& j) { j["quantization"].erase("turbo_codebooks"); });
  mentions(load_error(d), "turbo_codebooks");

  d = copy("a", "unknown_field");
  edit_config(d, [](json& j) { j["quantization"]["fc"]["zero_point"] = 1; });
  mentions(load_error(d), "quantization.fc.zero_point");

  d = copy("a", "bad_bits");
  edit_config(d, [](json& j) { j["quantization"]["fc"]["bits"] = 7; });
  mentions(load_error(d), "quantization.fc");
}

}  // namespace
}  // namespace dspark::quant
