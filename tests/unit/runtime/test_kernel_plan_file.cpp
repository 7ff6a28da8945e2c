// Kernel plan files (runtime/kernel_plan_file.h): the text round-trips; a file from another CPU,
// binary, model, thread count or chunk, an altered one, or one naming paths this CPU lacks is
// rejected; at load a rejected file is named in one stderr line and the target planned again; a
// second load reads the plan instead of timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../model/tiny_llama.h"
#include "kernels/plan.h"
#include "runtime/kernel_plan_file.h"
#include "runtime/loaded_model.h"

namespace dspark::runtime {
namespace {

using P = kernels::KernelPath;
const kernels::PlanCaps kAvx512{kernels::Isa::kAvx512, false}, kAvx2{kernels::Isa::kAvx2, false};

kernels::KernelPlan sample_plan() {
  std::vector<kernels::PlanTiming> t;
  for (int64_t n : {1, 2, 4, 8, 16, 512}) {
    t.push_back({DType::Q8_0, n, P::kPacked16, 1.0});
    t.push_back({DType::Q8_0, n, P::kAvx512, n == 512 ? 0.5 : 2.0});
  }
  return kernels::decide_plan(kAvx512, 512, {DType::Q8_0}, t);
}

PlanIdentity identity() { return PlanIdentity{"Some CPU|avx512-vnni", "build-id 0123", "/m.gguf|10|20", 2, 512}; }

TEST(KernelPlanFile, RoundTrip) {
  const kernels::KernelPlan plan = sample_plan();
  auto back = parse_plan_file(format_plan_file(plan, identity()), identity(), kAvx512);
  ASSERT_TRUE(back.is_ok()) << back.message();
  ASSERT_EQ(back->types.size(), 1u);
  EXPECT_EQ(back->types[0].path, plan.types[0].path);
  EXPECT_EQ(back->types[0].packed_rows, 16);
  EXPECT_TRUE(back->types[0].needs_source);
  EXPECT_EQ(back->timings.size(), plan.timings.size());
  EXPECT_EQ(back->threads, 2);
  EXPECT_EQ(back->types[0].path[5], P::kAvx512);
}

// A decode bucket on packed16-hw (the x16 kernels without the single token's software prefetch)
// comes back with the x16 copy; the same file on a CPU without the x16 layout names a path it lacks.
TEST(KernelPlanFile, RoundTripPacked16Hw) {
  std::vector<kernels::PlanTiming> t;
  for (int64_t n : {1, 2, 4, 8, 16, 512}) t.push_back({DType::Q4_1, n, P::kPacked16, 1.0});
  t.push_back({DType::Q4_1, 1, P::kPacked16Hw, 0.8});
  const kernels::KernelPlan plan = kernels::decide_plan(kAvx512, 512, {DType::Q4_1}, t);
  ASSERT_EQ(plan.types[0].path[0], P::kPacked16Hw);
  const std::string text = format_plan_file(plan, identity());
  auto back = parse_plan_file(text, identity(), kAvx512);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->types[0].path, plan.types[0].path);
  EXPECT_EQ(back->types[0].packed_rows, 16);
  EXPECT_FALSE(back->types[0].needs_source);
  EXPECT_EQ(back->timings.size(), plan.timings.size());
  auto avx2 = parse_plan_file(text, identity(), kAvx2);
  ASSERT_FALSE(avx2.is_ok());
  EXPECT_NE(avx2.message().find("packed16-hw"), std::string::npos) << avx2.message();
}

TEST(KernelPlanFile, RejectsOtherCpuBinaryModelAndAltered) {
  const std::string text = format_plan_file(sample_plan(), identity());
  auto reject = [&](PlanIdentity want, const std::string& needle, const kernels::PlanCaps& caps = kAvx512,
                    const std::string& body = "") {
    auto r = parse_plan_file(body.empty() ? text : body, want, caps);
    ASSERT_FALSE(r.is_ok()) << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
  };
  PlanIdentity id = identity();
  id.cpu = "Other CPU|avx512-vnni";
  reject(id, "another CPU");
  id = identity();
  id.binary = "build-id 4567";
  reject(id, "another dspark binary");
  id = identity();
  id.model = "/other.gguf|10|20";
  reject(id, "another model");
  id = identity();
  id.threads = 4;
  reject(id, "threads");
  id = identity();
  id.chunk = 256;
  reject(id, "chunk");
  // Altered: one path changed by hand (the checksum no longer matches).
  std::string altered = text;
  altered.replace(altered.find("packed16"), 8, "packed8 ");
  reject(identity(), "checksum", kAvx512, altered);
  reject(identity(), "not a kernel plan", kAvx512, "hello\n");
  // Same identity but read on a CPU without AVX-512 (a file copied across, identity forged).
  reject(identity(), "lacks", kAvx2);
}

TEST(KernelPlanFile, DefaultPathDependsOnEveryPart) {
  const std::string a = default_plan_path("/c", identity());
  PlanIdentity id = identity();
  id.threads = 1;
  EXPECT_NE(default_plan_path("/c", id), a);
  EXPECT_EQ(a.rfind("/c/kernel-plans/", 0), 0u);
  EXPECT_FALSE(cpu_identity().empty());
  EXPECT_FALSE(binary_identity().empty());
}

// A fresh folder under the test temp dir holding a tiny F32 model; `file` is where its plan goes.
struct TinyPlanDir {
  std::string dir, model, file;
  bool ok = false;
  explicit TinyPlanDir(const std::string& name)
      : dir(::testing::TempDir() + name), model(dir + "/tiny.gguf"), file(dir + "/tiny.plan") {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    ok = dspark::testing::TinyLlama(7).write(model).is_ok();
  }
};

// End to end on a tiny F32 model: planned and saved at the first load, read at the second (no
// timing), an altered file rejected in one line naming it and replaced; off and other backends
// have no plan. The planned model gives the unplanned one's logits bitwise.
TEST(KernelPlanFile, LoadPlansSavesReadsAndRejects) {
  if (kernels::detect_isa() < kernels::Isa::kAvx2) GTEST_SKIP() << "no SIMD kernels: nothing to plan";
  const TinyPlanDir t("dspark_plan_test");
  ASSERT_TRUE(t.ok);
  const std::string &dir = t.dir, &model = t.model, &file = t.file;
  std::vector<std::string> notes;  // what target_backend reports (a verb prints each on stderr)
  // Saved whatever else runs on the test machine (the quiet-machine rule has its own test below).
  const BackendFlags flags{"", file, 2, 32, [&notes](const std::string& n) { notes.push_back(n); }, 1e9};

  auto first = target_backend(model, dir, flags);
  ASSERT_TRUE(first.is_ok()) << first.message();
  ASSERT_NE(first->planned, nullptr);
  EXPECT_NE(first->plan_status.find("planned in"), std::string::npos) << first->plan_status;
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_NE(plan_report(*first).find("F32"), std::string::npos);

  auto second = target_backend(model, dir, flags);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->plan_status, "read from " + file);
  EXPECT_EQ(second->planned->plan().types[0].path, first->planned->plan().types[0].path);

  {  // alter one timing by hand
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const size_t at = text.find("time F32 1 ");
    ASSERT_NE(at, std::string::npos);
    text[text.find('.', at) + 1] = text[text.find('.', at) + 1] == '9' ? '1' : '9';
    std::ofstream(file, std::ios::trunc) << text;
  }
  EXPECT_TRUE(notes.empty());  // planned and saved, then read: nothing to remark
  ::testing::internal::CaptureStderr();
  auto third = target_backend(model, dir, flags);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // a library reports through the callback only
  ASSERT_TRUE(third.is_ok());
  EXPECT_NE(third->plan_status.find("planned in"), std::string::npos);
  ASSERT_EQ(notes.size(), 1u);  // one line, naming the file and why
  const std::string& err = notes[0];
  EXPECT_NE(err.find(file), std::string::npos) << err;
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;

  auto off = target_backend(model, dir, BackendFlags{"", "off", 2, 32, nullptr, {}});
  ASSERT_TRUE(off.is_ok());
  EXPECT_EQ(off->planned, nullptr);
  auto avx2 = target_backend(model, dir, BackendFlags{"cpu-avx2", "auto", 2, 32, nullptr, {}});
  ASSERT_TRUE(avx2.is_ok());
  EXPECT_EQ(avx2->planned, nullptr);
  EXPECT_FALSE(target_backend(model, dir, BackendFlags{"no-such", "auto", 2, 32, nullptr, {}}).is_ok());

  // Same logits with and without the plan.
  auto planned = model::load_model(model, third->backend);  // no tokenizer in the tiny file
  auto plain = model::load_model(model, off->backend);
  ASSERT_TRUE(planned.is_ok() && plain.is_ok()) << planned.message() << plain.message();
  ThreadPool pool(2);
  for (int64_t n : {1, 5, 40}) {
    std::vector<int32_t> toks;
    for (int64_t i = 0; i < n; ++i) toks.push_back((int32_t)(3 + 7 * i) % 80);
    const model::ForwardOptions all{model::LogitsMode::kAll, {}};
    model::Session a(**planned, {.n_ctx = 64, .max_batch = 32}, &pool), b(**plain, {.n_ctx = 64, .max_batch = 32}, &pool);
    ASSERT_TRUE((*planned)->forward(a, toks, all).is_ok());
    ASSERT_TRUE((*plain)->forward(b, toks, all).is_ok());
    ASSERT_EQ(std::memcmp(a.logits(), b.logits(), sizeof(float) * (size_t)(n * 80)), 0) << n;
  }
  std::filesystem::remove_all(dir);
}

// A plan timed while others used more CPU than the flags allow (here: any at all, as -1 CPUs) runs
// this start, is not saved, says so in one note, and the next start plans again.
TEST(KernelPlanFile, PlanTimedOnABusyMachineIsNotSaved) {
  if (kernels::detect_isa() < kernels::Isa::kAvx2) GTEST_SKIP() << "no SIMD kernels: nothing to plan";
  const TinyPlanDir t("dspark_plan_busy_test");
  ASSERT_TRUE(t.ok);
  const std::string &dir = t.dir, &model = t.model, &file = t.file;
  std::vector<std::string> notes;
  const BackendFlags busy{"", file, 2, 32, [&notes](const std::string& n) { notes.push_back(n); }, -1.0};
  for (int start = 0; start < 2; ++start) {
    auto tb = target_backend(model, dir, busy);
    ASSERT_TRUE(tb.is_ok()) << tb.message();
    ASSERT_NE(tb->planned, nullptr);  // used for this run
    EXPECT_NE(tb->plan_status.find("planned in"), std::string::npos) << tb->plan_status;
    EXPECT_NE(tb->plan_status.find("not saved: other processes used"), std::string::npos) << tb->plan_status;
    EXPECT_FALSE(std::filesystem::exists(file));
  }
  ASSERT_EQ(notes.size(), 2u);  // one line per start
  EXPECT_NE(notes[0].find("not saved"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("the next start plans again"), std::string::npos) << notes[0];
  EXPECT_EQ(notes[0].find('\n'), std::string::npos) << notes[0];
  // The same start with room for the others: saved, and read by the next one.
  auto quiet = target_backend(model, dir, BackendFlags{"", file, 2, 32, nullptr, 1e9});
  ASSERT_TRUE(quiet.is_ok());
  EXPECT_NE(quiet->plan_status.find("saved to " + file), std::string::npos) << quiet->plan_status;
  auto again = target_backend(model, dir, BackendFlags{"", file, 2, 32, nullptr, -1.0});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->plan_status, "read from " + file);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dspark::runtime
