// The backend registry: every backend `--backend` can name, with its availability test. A new
// backend (CUDA, say) is its own files plus one row in kBackends; nothing else changes.
#include "kernels/backend.h"

namespace dspark::kernels {

namespace {

bool always() { return true; }
bool has_avx2() { return detect_isa() >= Isa::kAvx2; }
const Backend* get_cpu() { return &default_backend(); }
const Backend* get_avx2() { return has_avx2() ? &cpu_backend(Isa::kAvx2) : nullptr; }
const Backend* get_scalar() { return &cpu_backend(Isa::kScalar); }

constexpr BackendInfo kBackends[] = {
    {"cpu", "the CPU, with the best kernels it reports (AVX-512 VNNI and AMX, AVX2, else scalar)", &always, &get_cpu},
    {"cpu-avx2", "the CPU limited to AVX2 kernels (same results, for comparisons)", &has_avx2, &get_avx2},
    {"cpu-scalar", "the CPU with the scalar reference kernels (same results, slow: the oracle)", &always, &get_scalar},
};

}  // namespace

std::span<const BackendInfo> backends() { return kBackends; }

Result<const Backend*> find_backend(const std::string& name) {
  std::string avail;
  for (const BackendInfo& b : kBackends) {
    if (!b.available()) continue;
    if (name.empty() || name == "auto" || name == b.name) return b.get();
    avail += std::string(avail.empty() ? "" : ", ") + b.name;
  }
  return Status::error("--backend: '" + name + "' is not an available backend (available: auto, " + avail + ")");
}

}  // namespace dspark::kernels
