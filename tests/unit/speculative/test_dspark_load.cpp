// DSpark drafter loading: bad checkpoints and options give errors that name the file and the
// field or tensor (the CLI turns them into exit code 2). Each case copies a synthetic golden
// checkpoint to a temporary directory and breaks one thing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "speculative/drafter_dspark.h"

namespace dspark::speculative {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSynthDir = fs::path(DSPARK_SOURCE_DIR) / "tests/goldens/dspark_synth";
const TargetShape kTarget{6, 40, 192};  // the synthetic drafters' target: 6 layers, H 40, V 192

class DSparkLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           ("dspark_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Copies a variant into tmp_/<name>/ and returns that directory.
  std::string copy_variant(const std::string& variant) {
    const fs::path dst = tmp_ / variant;
    fs::create_directories(dst);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kSynthDir / variant / f, dst / f);
    return dst.string();
  }
  static void edit_config(const std::string& dir, const std::function<void(json&)>& fn) {
    json j;
    {
      std::ifstream in(fs::path(dir) / "config.json");
      j = json::parse(in);
    }
    fn(j);
    std::ofstream(fs::path(dir) / "config.json") << j.dump(1);
  }
  // Rewrites model.safetensors through fn (which may drop, add or reshape tensors).
  static void edit_tensors(const std::string& dir, const std::function<void(std::vector<formats::StWriteTensor>&)>& fn) {
    const std::string path = (fs::path(dir) / "model.safetensors").string();
    std::vector<formats::StWriteTensor> ts;
    {
      auto f = formats::SafetensorsFile::open(path);
      ASSERT_TRUE(f.is_ok()) << f.message();
      for (const auto& info : f->tensors()) {
        const uint8_t* p = f->data(info);
        ts.push_back({info.name, info.dtype, info.shape, std::vector<uint8_t>(p, p + info.n_bytes)});
      }
    }
    fn(ts);
    ASSERT_TRUE(formats::write_safetensors(path, ts).is_ok());
  }
  static std::string load_error(const std::string& dir, const TargetShape& t = kTarget, const DSparkOptions& opt = {},
                                const TargetTables* tables = nullptr) {
    auto d = DSparkDrafter::load(dir, t, tables, opt, nullptr);
    EXPECT_FALSE(d.is_ok()) << "loaded " << dir;
    return d.is_ok() ? std::string() : d.message();
  }

  fs::path tmp_;
};

#define EXPECT_MENTIONS(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << (msg)

TEST_F(DSparkLoad, GoodCheckpointLoads) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  auto d = DSparkDrafter::load(dir, kTarget, nullptr, {}, nullptr);
  ASSERT_TRUE(d.is_ok()) << d.message();
  EXPECT_EQ((*d)->required_taps(), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ((*d)->kind(), "dspark");
  EXPECT_EQ((*d)->gamma(), 4);
  EXPECT_FLOAT_EQ((*d)->model().embed_scale(), 6.3125f);
}

TEST_F(DSparkLoad, MissingConfig) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  fs::remove(fs::path(dir) / "config.json");
  EXPECT_MENTIONS(load_error(dir), "config.json");
}

TEST_F(DSparkLoad, MissingWeights) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  fs::remove(fs::path(dir) / "model.safetensors");
  EXPECT_MENTIONS(load_error(dir), "model.safetensors");
}

TEST_F(DSparkLoad, MissingTensor) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  edit_tensors(dir, [](auto& ts) {
    std::erase_if(ts, [](const formats::StWriteTensor& t) { return t.name == "layers.1.mlp.up_proj.weight"; });
  });
  const std::string e = load_error(dir);
  EXPECT_MENTIONS(e, "layers.1.mlp.up_proj.weight");
  EXPECT_MENTIONS(e, "missing");
}

TEST_F(DSparkLoad, WrongShape) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  edit_tensors(dir, [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "fc.weight") {
        t.shape = {40, 80};
        t.bytes.resize(40 * 80 * 2);
      }
  });
  const std::string e = load_error(dir);
  EXPECT_MENTIONS(e, "model.safetensors");
  EXPECT_MENTIONS(e, "fc.weight");
  EXPECT_MENTIONS(e, "[40, 120]");
}

TEST_F(DSparkLoad, WrongDtype) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  edit_tensors(dir, [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "norm.weight") t.dtype = formats::StDType::kI16;  // same byte size as BF16
  });
  const std::string e = load_error(dir);
  EXPECT_MENTIONS(e, "norm.weight");
  EXPECT_MENTIONS(e, "I16");
}

TEST_F(DSparkLoad, UnexpectedTensor) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  edit_tensors(dir, [](auto& ts) {
    ts.push_back({"layers.0.self_attn.v_proj.weight", formats::StDType::kBF16, {32, 40}, std::vector<uint8_t>(32 * 40 * 2)});
  });
  EXPECT_MENTIONS(load_error(dir), "layers.0.self_attn.v_proj.weight");
}

TEST_F(DSparkLoad, ConfigFieldErrors) {
  struct Case {
    const char* field;
    json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"markov_head_type", "lstm", "field 'markov_head_type' = 'lstm' is not supported"},
      {"attention_k_eq_v", false, "field 'attention_k_eq_v'"},
      {"hidden_activation", "gelu", "field 'hidden_activation'"},
      {"target_layer_ids", json::array({3, 1, 4}), "field 'target_layer_ids'"},
      {"target_layer_ids", json::array({1, 3, 5}), "field 'target_layer_ids'"},  // 5 = last layer
      {"target_layer_ids", json::array({-2, 3}), "field 'target_layer_ids'"},
      {"architectures", json::array({"Gemma3ForCausalLM"}), "field 'architectures'"},
      {"global_head_dim", nullptr, "field 'global_head_dim' is missing"},
      {"block_size", 0, "field 'block_size'"},
      {"mask_token_id", 192, "field 'mask_token_id'"},
      {"draft_vocab_size", 96, "field 'draft_vocab_size'"},
      {"dspark_copy_head", json{{"max_ngram", 2}, {"prior_acceptance_sampled", json::array({0.2, 0.5})}},
       "dspark_copy_head.prior_acceptance_sampled"},
      {"dspark_copy_head", json{{"max_ngram", 1}, {"prior_acceptance_sampled", json::array({0.2, 1.5})}},
       "dspark_copy_head.prior_acceptance_sampled"},
  };
  for (const Case& c : cases) {
    const std::string dir = copy_variant("a_vanilla_conf_bf16");
    edit_config(dir, [&](json& j) {
      if (c.value.is_null()) j.erase(c.field);
      else j[c.field] = c.value;
    });
    const std::string e = load_error(dir);
    EXPECT_MENTIONS(e, "config.json");
    EXPECT_MENTIONS(e, c.needle);
    fs::remove_all(dir);
  }
}

TEST_F(DSparkLoad, RopeParameterFallbacks) {
  // Flat keys when rope_parameters is absent; a bad factor names the nested field.
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  edit_config(dir, [](json& j) { j["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 1.5; });
  EXPECT_MENTIONS(load_error(dir), "rope_parameters.full_attention.partial_rotary_factor");
  edit_config(dir, [](json& j) {
    j.erase("rope_parameters");
    j["rope_theta"] = 1e6;
    j["partial_rotary_factor"] = 0.25;
  });
  auto d = DSparkDrafter::load(dir, kTarget, nullptr, {}, nullptr);
  ASSERT_TRUE(d.is_ok()) << d.message();
  EXPECT_EQ((*d)->model().config().n_rot, 4);
}

TEST_F(DSparkLoad, PairingMismatch) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  EXPECT_MENTIONS(load_error(dir, {8, 40, 192}), "field 'num_target_layers' = 6 does not match");
  EXPECT_MENTIONS(load_error(dir, {6, 64, 192}), "field 'hidden_size' = 40 does not match");
  EXPECT_MENTIONS(load_error(dir, {6, 40, 256}), "field 'vocab_size' = 192 does not match");
}

TEST_F(DSparkLoad, BadOptions) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  for (float t : {1.5f, -0.1f, NAN}) {
    DSparkOptions opt;
    opt.threshold = t;
    EXPECT_MENTIONS(load_error(dir, kTarget, opt), "threshold");
  }
  DSparkOptions opt;
  opt.gamma = 5;  // block_size 4
  EXPECT_MENTIONS(load_error(dir, kTarget, opt), "gamma");
  // Threshold without a confidence head.
  const std::string c = copy_variant("c_rnn_noconf_f16");
  opt = {};
  opt.threshold = 0.5f;
  EXPECT_MENTIONS(load_error(c, kTarget, opt), "enable_confidence_head");
}

TEST_F(DSparkLoad, TargetTables) {
  const std::string e = copy_variant("e_target_embed_bf16");
  EXPECT_MENTIONS(load_error(e), "embed_tokens.weight");
  // Tables of the wrong shape are refused.
  std::vector<float> table(192 * 32, 0.0f);
  const kernels::QMatrix q{DType::F32, 192, 32, table.data(), 32 * 4};
  const TargetTables bad{q, q, 192, 32};
  EXPECT_MENTIONS(load_error(e, kTarget, {}, &bad), "token embedding");
  // f: d2t without lm_head (E3): the draft LM head is the target's rows d2t[j]; without target
  // tables it is an error naming the tensor.
  const std::string f = copy_variant("f_d2t_bf16");
  edit_tensors(f, [](auto& ts) {
    std::erase_if(ts, [](const formats::StWriteTensor& t) { return t.name == "lm_head.weight"; });
  });
  std::vector<float> good(192 * 40);
  for (size_t i = 0; i < good.size(); ++i) good[i] = (float)i;
  const kernels::QMatrix g{DType::F32, 192, 40, good.data(), 40 * 4};
  const TargetTables embed_only{g, kernels::QMatrix{}, 192, 40};
  EXPECT_MENTIONS(load_error(f, kTarget, {}, &embed_only), "lm_head.weight");
  const TargetTables ok{g, g, 192, 40};
  auto m = DSparkModel::load(f, kTarget, &ok);
  ASSERT_TRUE(m.is_ok()) << m.message();
  const DSparkWeights& w = (*m)->weights();
  ASSERT_EQ(w.lm_head.n_rows(), (int64_t)w.d2t.size());
  for (size_t j = 0; j < w.d2t.size(); ++j) {
    float row[40];
    w.lm_head.dequantize_row((int64_t)j, row, kernels::detect_isa());
    ASSERT_EQ(row[7], good[(size_t)w.d2t[j] * 40 + 7]) << "draft row " << j;
  }
}

TEST_F(DSparkLoad, BadD2t) {
  const std::string f = copy_variant("f_d2t_bf16");
  edit_tensors(f, [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "d2t") {
        int64_t first;
        std::memcpy(&first, t.bytes.data(), 8);
        std::memcpy(t.bytes.data() + 8, &first, 8);  // duplicate entry 1
      }
  });
  std::vector<float> good(192 * 40, 0.0f);
  const kernels::QMatrix g{DType::F32, 192, 40, good.data(), 40 * 4};
  const TargetTables ok{g, g, 192, 40};
  const std::string e = load_error(f, kTarget, {}, &ok);
  EXPECT_MENTIONS(e, "d2t");
  EXPECT_MENTIONS(e, "duplicate");
}

TEST_F(DSparkLoad, ProtocolErrors) {
  const std::string dir = copy_variant("a_vanilla_conf_bf16");
  auto d = DSparkDrafter::load(dir, kTarget, nullptr, {}, nullptr);
  ASSERT_TRUE(d.is_ok()) << d.message();
  std::vector<float> rows(3 * 40, 0.5f);
  TapRows taps{{rows.data(), rows.data(), rows.data()}, 3, 40};
  std::vector<int32_t> prompt{1, 2, 3};
  ASSERT_TRUE((*d)->begin(prompt, taps).is_ok());
  DraftResult out;
  EXPECT_MENTIONS((*d)->draft({5, 2, 4, {}, nullptr}, &out).message(), "position");
  EXPECT_MENTIONS((*d)->draft({5, 3, 4, {.temperature = 0.5f}, nullptr}, &out).message(), "rng");
  EXPECT_MENTIONS((*d)->commit(std::span<const int32_t>(prompt.data(), 1), 7, taps).message(), "position");
  TapRows narrow{{rows.data(), rows.data()}, 1, 40};
  EXPECT_MENTIONS((*d)->commit(std::span<const int32_t>(prompt.data(), 1), 3, narrow).message(), "tap rows");
  ASSERT_TRUE((*d)->draft({5, 3, 4, {}, nullptr}, &out).is_ok());
  EXPECT_EQ(out.tokens.size(), 4u);
}

}  // namespace
}  // namespace dspark::speculative
