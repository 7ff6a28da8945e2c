// The backend registry: every backend `--backend` can name, with its availability test. A new
// backend is its own files plus one row in kBackends; nothing else changes.
#include "kernels/backend.h"

#if DSPARK_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace dspark::kernels {

namespace {

bool always() { return true; }
std::string no_reason() { return ""; }
bool has_avx2() { return detect_isa() >= Isa::kAvx2; }
std::string no_avx2() { return "this CPU does not report AVX2 and FMA"; }
const Backend* get_cpu() { return &default_backend(); }
const Backend* get_avx2() { return has_avx2() ? &cpu_backend(Isa::kAvx2) : nullptr; }
const Backend* get_scalar() { return &cpu_backend(Isa::kScalar); }
#if DSPARK_HAVE_CUDA
bool has_cuda() { return cuda::available(); }
std::string no_cuda() { return cuda::unavailable_reason(); }
const Backend* get_cuda() { return cuda::backend(); }
#else
bool has_cuda() { return false; }
std::string no_cuda() {
  return "this binary was built without CUDA (configure with -DDSPARK_CUDA=ON where the CUDA toolkit is installed)";
}
const Backend* get_cuda() { return nullptr; }
#endif

// `auto` takes the first available row: the CPU. The CUDA backend is named explicitly.
constexpr BackendInfo kBackends[] = {
    {"cpu", "the CPU, with the best kernels it reports (AVX-512 VNNI and AMX, AVX2, else scalar)", &always, &no_reason,
     &get_cpu},
    {"cpu-avx2", "the CPU limited to AVX2 kernels (same results, for comparisons)", &has_avx2, &no_avx2, &get_avx2},
    {"cpu-scalar", "the CPU with the scalar reference kernels (same results, slow: the oracle)", &always, &no_reason,
     &get_scalar},
    {"cuda", "NVIDIA GPU 0 (sm_90 and newer): weights in device memory, the CPU's matmul bits", &has_cuda, &no_cuda,
     &get_cuda},
};

}  // namespace

std::span<const BackendInfo> backends() { return kBackends; }

Result<const Backend*> find_backend(const std::string& name) {
  std::string avail, why;
  for (const BackendInfo& b : kBackends) {
    if (!b.available()) {
      if (name == b.name) why = b.why_not();
      continue;
    }
    if (name.empty() || name == "auto" || name == b.name) {
      if (const Backend* be = b.get()) return be;
      return Status::error("--backend " + std::string(b.name) + ": " + b.why_not());  // it failed to start
    }
    avail += std::string(avail.empty() ? "" : ", ") + b.name;
  }
  if (!why.empty()) return Status::error("--backend " + name + ": " + why + " (available: auto, " + avail + ")");
  return Status::error("--backend: '" + name + "' is not an available backend (available: auto, " + avail + ")");
}

}  // namespace dspark::kernels
