// The kernel plan of a target (kernels/plan.h) at load: read from its file, or planned (timed on
// the model's matrices, kernels/planner.h) and saved there, and the backend that runs it.
//
// --kernel-plan auto (default of the verbs with --backend): the plan file under the cache dir,
//   <cache>/kernel-plans/<hash>.plan, where the hash is of the identity below; planned on the
//   first start (about a second: decode timed on a stream of the model's size), read on the next ones.
//   A plan timed while other processes used the CPUs (BackendFlags::max_other_cpus) runs that start
//   and is not saved: one note, and the next start plans again.
// --kernel-plan FILE: the same with that file.
// --kernel-plan off: no plan; the CPU backend's fixed rule (kernels.h default_path).
// A plan applies to the auto CPU backend (--backend auto / cpu) of a SIMD CPU; other backends run
// without one.
//
// The file is text, one record per line, last line "checksum <FNV-1a 64 of the bytes before it>":
//   dspark-kernel-plan 1
//   cpu <CPUID brand string>|<isa>[+amx]     binary <build id, else exe size and mtime>
//   model <canonical path>|<bytes>|<mtime>   threads <pool size>   chunk <prefill chunk>
//   margin <fraction>
//   type <dtype> <path at n1> <n2> <n4> <n8> <n16> <chunk> <rows timed> <cols timed>
//   time <dtype> <n> <path> <ms>
// A file made on another CPU, by another binary, for another model, thread count or chunk, one
// whose checksum does not match (altered), or one naming paths this CPU lacks is rejected with
// one line on stderr naming the file, and the target is planned again (never run on it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/note.h"
#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/plan.h"
#include "kernels/planned_backend.h"

namespace dspark::runtime {

// What a plan file is valid for.
struct PlanIdentity {
  std::string cpu;     // CPUID brand string | plan caps
  std::string binary;  // "build-id <hex>" or "exe <bytes> <mtime ns>"
  std::string model;   // canonical path | bytes | mtime ns
  int threads = 1;
  int64_t chunk = 512;
};

std::string cpu_identity();
std::string binary_identity();
Result<std::string> model_identity(const std::string& model_path);

// The plan file's text, and its parse against the identity it must have. Errors say why it is
// rejected (without the file name).
std::string format_plan_file(const kernels::KernelPlan& plan, const PlanIdentity& id);
Result<kernels::KernelPlan> parse_plan_file(const std::string& text, const PlanIdentity& want,
                                            const kernels::PlanCaps& caps);

// <cache_dir>/kernel-plans/<16 hex digits of the identity's hash>.plan
std::string default_plan_path(const std::string& cache_dir, const PlanIdentity& id);

// The backend flags of a verb that loads a target (tools/common_flags.h add_backend_flag).
struct BackendFlags {
  std::string backend;              // --backend ("" / auto = the CPU's best)
  std::string kernel_plan = "off";  // --kernel-plan: auto | off | FILE
  int threads = 1;                  // the verb's pool size (the plan is timed and kept per size)
  int64_t chunk = 512;              // its prefill chunk (SessionOptions::max_batch)
  NoteFn note;                      // a rejected or unsaved plan file is reported here (core/note.h)
  // A plan timed while other processes (or the hypervisor's steal) used more than this many CPUs on
  // average runs this start but is not saved, so the next start plans again. nullopt: the default,
  // kPlanQuietOtherCpus per CPU the pool leaves free (at least one).
  std::optional<double> max_other_cpus;
};

// A quarter of a CPU: on a 2-core AMD Zen 4 VM the rest of an idle machine read 0.00-0.01 CPUs while a
// plan was timed, and two busy shell loops beside it 1.12. A plan timed beside such load can pick a
// slower path for good (a plan made while other tenants loaded a KVM Xeon chose the unpacked AVX2
// kernel for the LM head at 1 token, and decode ran 341 tok/s against 403 with the plan off).
inline constexpr double kPlanQuietOtherCpus = 0.25;

// The backend a target runs on, and its plan when it has one.
struct TargetBackend {
  const kernels::Backend* backend = nullptr;           // what the model is loaded on
  std::unique_ptr<kernels::PlannedCpuBackend> planned;  // owns the plan (backend points here) or null
  std::string plan_status;  // "off", "read from FILE", "planned in 0.42 s, saved to FILE" (or ", not saved: ...")
};

// Resolves flags.backend and, on the auto CPU backend with a plan mode other than off, the plan of
// the model file at model_path (read, or planned and saved; one line to flags.note when a file is
// rejected or cannot be written). Errors: an unknown backend, a bad model file, a failed timing.
Result<TargetBackend> target_backend(const std::string& model_path, const std::string& cache_dir,
                                     const BackendFlags& flags);

// bench -v: where the plan came from, its choices, the timings behind them and the weight copies.
std::string plan_report(const TargetBackend& tb);

}  // namespace dspark::runtime
