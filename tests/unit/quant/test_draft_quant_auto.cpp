// --draft-quant auto: an unquantized drafter is converted once to the recommended rung beside its
// source (through the converter's staging folder + reload check) and reused afterwards; `none`,
// an already quantized drafter and a missing recommendation load the checkpoint as given; `int8`,
// and auto on a CPU below the recommendation's min_isa, load it as given with int8 matmul copies
// (int4 ones for a checkpoint that is affine 4-bit throughout); a
// bad recommendation file is an error naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../model/tiny_gemma3.h"
#include "quant/quant_config.h"
#include "tiny_drafter.h"
#include "kernels/backend.h"
#include "runtime/draft_quant.h"

namespace dspark::quant {
namespace {

namespace fs = std::filesystem;

TEST(DraftQuantAuto, ConvertsOnceThenReuses) {
  const fs::path tmp = fs::temp_directory_path() / ("dspark_dqauto_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const testing::TinyGemma3 t(3);
  ASSERT_TRUE(t.write((tmp / "target.gguf").string()).is_ok());
  auto target = model::load_model((tmp / "target.gguf").string());
  ASSERT_TRUE(target.is_ok()) << target.message();
  const testing::TinyDrafterShape s = testing::paired_tiny_shape(t.n_embd, t.n_vocab, t.n_layer);
  const std::string src = (tmp / "drafter").string();
  ASSERT_TRUE(testing::write_tiny_drafter(src, s, 8).is_ok());
  const std::string rec = (tmp / "quant_auto.json").string();
  std::ofstream(rec) << R"({"rung": "affine4g32", "method": "affine", "bits": 4, "group_size": 32})";
  ThreadPool pool(1);

  auto none = runtime::resolve_draft_quant(src, speculative::DraftQuant::kNone, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->dir, src);
  EXPECT_EQ(none->copy_bits, 0);
  auto int8 = runtime::resolve_draft_quant(src, speculative::DraftQuant::kInt8, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(int8.is_ok());
  EXPECT_EQ(int8->dir, src);
  EXPECT_EQ(int8->copy_bits, 8);
  EXPECT_EQ(int8->mode(), speculative::DraftQuant::kInt8);
  auto int4 = runtime::resolve_draft_quant(src, speculative::DraftQuant::kInt4, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(int4.is_ok());
  EXPECT_EQ(int4->dir, src);
  EXPECT_EQ(int4->copy_bits, 4);
  EXPECT_EQ(int4->mode(), speculative::DraftQuant::kInt4);
  speculative::DraftQuant bad_mode{};
  EXPECT_FALSE(speculative::parse_draft_quant("int2", &bad_mode).is_ok());  // a mode is typed once parsed

  // Remarks reach the caller's note callback (verbs print them), never stderr from the library.
  std::string err1, err2;
  ::testing::internal::CaptureStderr();
  auto a = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec,
                                        [&err1](const std::string& n) { err1 += n + "\n"; });
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(a.is_ok()) << a.message();
  EXPECT_EQ(fs::path(a->dir), tmp / "drafter-auto-affine4g32");
  EXPECT_EQ(a->copy_bits, 0);
  EXPECT_NE(err1.find("converting"), std::string::npos) << err1;
  auto qc = read_quant_config(a->dir + "/config.json");
  ASSERT_TRUE(qc.is_ok());
  EXPECT_TRUE(qc->present);
  const auto written = fs::last_write_time(a->dir + "/model.safetensors");

  auto b = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec,
                                        [&err2](const std::string& n) { err2 += n + "\n"; });
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->dir, a->dir);
  EXPECT_NE(err2.find("converted earlier"), std::string::npos) << err2;
  EXPECT_EQ(fs::last_write_time(a->dir + "/model.safetensors"), written) << "reused, not rewritten";

  // A quantized drafter loads as given; so does any drafter without a recommendation file.
  auto q = runtime::resolve_draft_quant(a->dir, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(q->dir, a->dir);
  EXPECT_EQ(q->copy_bits, 0);
  // Loaded as given (draft-quant none, an A/B arm's default), a quantized checkpoint gets a speed
  // note on CPUs without AMX; an unquantized one never does.
  const bool amx_cpu = kernels::detect_isa() >= kernels::Isa::kAvx512 && kernels::amx_available();
  auto qn = runtime::resolve_draft_quant_for("dspark", a->dir, speculative::DraftQuant::kNone, **target, tmp.string(), &pool);
  ASSERT_TRUE(qn.is_ok()) << qn.message();
  EXPECT_EQ(qn->dir, a->dir);
  EXPECT_EQ(qn->copy_bits, 0);
  EXPECT_EQ(qn->note.empty(), amx_cpu) << qn->note;
  auto un = runtime::resolve_draft_quant_for("dspark", src, speculative::DraftQuant::kNone, **target, tmp.string(), &pool);
  ASSERT_TRUE(un.is_ok()) << un.message();
  EXPECT_EQ(un->dir, src);
  EXPECT_EQ(un->note, "");
  auto missing = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, (tmp / "none.json").string());
  EXPECT_FALSE(missing.is_ok()) << "a named recommendation file that does not exist is an error";

  // A rung that does not fit the drafter (group 128 > the 32-wide Markov table): loaded as given.
  std::ofstream(rec) << R"({"rung": "affine4g128", "method": "affine", "bits": 4, "group_size": 128})";
  std::string err3;
  auto unfit = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec,
                                            [&err3](const std::string& n) { err3 += n + "\n"; });
  ASSERT_TRUE(unfit.is_ok()) << unfit.message();
  EXPECT_EQ(unfit->dir, src);
  EXPECT_NE(err3.find("not converted"), std::string::npos) << err3;
  EXPECT_FALSE(fs::exists(tmp / "drafter-auto-affine4g128")) << "nothing half-written";

  // min_isa: a CPU that has it converts (scalar: every CPU); one that lacks it loads the
  // checkpoint as given with int8 matmul copies, and says so in the choice's note (--verbose).
  std::ofstream(rec) << R"({"rung": "affine4g32", "method": "affine", "bits": 4, "group_size": 32, "min_isa": "scalar"})";
  auto low = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(low.is_ok()) << low.message();
  EXPECT_EQ(low->dir, a->dir);
  EXPECT_EQ(low->copy_bits, 0);
  std::ofstream(rec) << R"({"rung": "affine4g32", "method": "affine", "bits": 4, "group_size": 32, "min_isa": "avx512"})";
  auto high = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(high.is_ok()) << high.message();
  if (kernels::detect_isa() < kernels::Isa::kAvx512) {
    EXPECT_EQ(high->dir, src);
    EXPECT_EQ(high->copy_bits, 8);
    EXPECT_NE(high->note.find("has no avx512"), std::string::npos) << high->note;
  } else {
    EXPECT_EQ(high->dir, a->dir);
    EXPECT_EQ(high->copy_bits, 0);
  }
  // The target's backend decides, not the CPU alone: a target on the AVX2 backend lacks avx512 (--backend
  // cpu-avx2 reaches the drafter's format as it reaches its kernels).
  if (kernels::detect_isa() >= kernels::Isa::kAvx2) {
    auto avx2_target = model::load_model((tmp / "target.gguf").string(), &kernels::cpu_backend(kernels::Isa::kAvx2));
    ASSERT_TRUE(avx2_target.is_ok()) << avx2_target.message();
    auto on_avx2 = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **avx2_target, tmp.string(), &pool, rec);
    ASSERT_TRUE(on_avx2.is_ok()) << on_avx2.message();
    EXPECT_EQ(on_avx2->dir, src);
    EXPECT_EQ(on_avx2->copy_bits, 8);
    EXPECT_NE(on_avx2->note.find("backend has no avx512"), std::string::npos) << on_avx2->note;
  }
  std::ofstream(rec) << R"({"rung": "affine4g32", "method": "affine", "bits": 4, "group_size": 32, "min_isa": "amx"})";
  auto amx = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(amx.is_ok()) << amx.message();
  if (kernels::detect_isa() >= kernels::Isa::kAvx512 && kernels::amx_available()) {
    EXPECT_EQ(amx->dir, a->dir);
    EXPECT_EQ(amx->copy_bits, 0);
  } else {
    EXPECT_EQ(amx->dir, src);
    EXPECT_EQ(amx->copy_bits, 8);
    EXPECT_NE(amx->note.find("has no amx"), std::string::npos) << amx->note;
  }
  // Below min_isa, a checkpoint that is affine 4-bit throughout (the converted one) gets Q4_1 copies,
  // which hold it exactly; with AMX it loads as given (already quantized).
  auto amx4 = runtime::resolve_draft_quant(a->dir, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_TRUE(amx4.is_ok()) << amx4.message();
  EXPECT_EQ(amx4->dir, a->dir);
  if (kernels::detect_isa() >= kernels::Isa::kAvx512 && kernels::amx_available()) {
    EXPECT_EQ(amx4->copy_bits, 0);
  } else {
    EXPECT_EQ(amx4->copy_bits, 4);
    EXPECT_EQ(amx4->mode(), speculative::DraftQuant::kInt4);
    EXPECT_NE(amx4->note.find("Q4_1"), std::string::npos) << amx4->note;
  }
  std::ofstream(rec) << R"({"rung": "affine4g32", "method": "affine", "bits": 4, "group_size": 32, "min_isa": "avx9"})";
  auto bad_isa = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_FALSE(bad_isa.is_ok());
  EXPECT_NE(bad_isa.message().find("min_isa"), std::string::npos) << bad_isa.message();

  std::ofstream(rec) << R"({"method": "affine"})";
  auto bad = runtime::resolve_draft_quant(src, speculative::DraftQuant::kAuto, **target, tmp.string(), &pool, rec);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("quant_auto.json"), std::string::npos) << bad.message();
  EXPECT_NE(speculative::parse_draft_quant("sometimes", &bad_mode).message().find("auto, none, int8, int4"), std::string::npos);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace dspark::quant
