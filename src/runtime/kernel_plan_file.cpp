// Kernel plan files and the planned target backend (runtime/kernel_plan_file.h).
#include "runtime/kernel_plan_file.h"

#include <cpuid.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/cpu_load.h"
#include "formats/gguf.h"
#include "kernels/planner.h"

namespace dspark::runtime {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

int64_t mtime_ns(const struct stat& st) { return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec; }

// The GNU build id note of the main program (dl_iterate_phdr's first object), as hex.
int find_build_id(struct dl_phdr_info* info, size_t, void* out) {
  auto* hex = static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      const uint8_t* name = p + sizeof nh;
      const uint8_t* desc = name + ((nh.n_namesz + 3) & ~3u);
      if (desc + nh.n_descsz > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        char b[3];
        for (uint32_t k = 0; k < nh.n_descsz; ++k) {
          std::snprintf(b, sizeof b, "%02x", desc[k]);
          *hex += b;
        }
        return 1;
      }
      p = desc + ((nh.n_descsz + 3) & ~3u);
    }
  }
  return 1;  // only the main program
}

const char* kMagic = "dspark-kernel-plan 1";

bool parse_dtype(const std::string& name, DType* out) {
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeInfo* info = dtype_info(id);
    if (info && name == info->name) {
      *out = (DType)id;
      return true;
    }
  }
  return false;
}

bool parse_path(const std::string& name, kernels::KernelPath* out) {
  for (int i = 0; i < kernels::kNumKernelPaths; ++i)
    if (name == kernels::kernel_path_name((kernels::KernelPath)i)) {
      *out = (kernels::KernelPath)i;
      return true;
    }
  return false;
}

}  // namespace

std::string cpu_identity() {
  unsigned r[12] = {};
  std::string brand;
  if (__get_cpuid(0x80000000, &r[0], &r[1], &r[2], &r[3]) && r[0] >= 0x80000004) {
    for (unsigned leaf = 0; leaf < 3; ++leaf)
      __get_cpuid(0x80000002 + leaf, &r[4 * leaf], &r[4 * leaf + 1], &r[4 * leaf + 2], &r[4 * leaf + 3]);
    brand.assign(reinterpret_cast<const char*>(r), sizeof r);
    brand = brand.c_str();  // up to the first NUL
    brand.erase(0, brand.find_first_not_of(' '));
  }
  return (brand.empty() ? std::string("unknown cpu") : brand) + "|" + kernels::plan_caps_name(kernels::detect_plan_caps());
}

std::string binary_identity() {
  std::string id;
  dl_iterate_phdr(&find_build_id, &id);
  if (!id.empty()) return "build-id " + id;
  struct stat st {};
  if (stat("/proc/self/exe", &st) == 0) return "exe " + std::to_string(st.st_size) + " " + std::to_string(mtime_ns(st));
  return "exe unknown";
}

Result<std::string> model_identity(const std::string& model_path) {
  std::error_code ec;
  const std::string canon = std::filesystem::canonical(model_path, ec).string();
  struct stat st {};
  if (ec || stat(canon.c_str(), &st) != 0) return Status::error(model_path + ": cannot stat the model file");
  return canon + "|" + std::to_string(st.st_size) + "|" + std::to_string(mtime_ns(st));
}

std::string format_plan_file(const kernels::KernelPlan& plan, const PlanIdentity& id) {
  std::ostringstream o;
  o << kMagic << "\ncpu " << id.cpu << "\nbinary " << id.binary << "\nmodel " << id.model << "\nthreads " << id.threads
    << "\nchunk " << id.chunk << "\nmargin " << plan.margin << "\n";
  for (const kernels::TypePlan& tp : plan.types) {
    o << "type " << dtype_name(tp.type);
    for (kernels::KernelPath p : tp.path) o << " " << kernels::kernel_path_name(p);
    o << " " << tp.rows_timed << " " << tp.cols_timed << "\n";
  }
  char ms[32];
  for (const kernels::PlanTiming& t : plan.timings) {
    std::snprintf(ms, sizeof ms, "%.6f", t.ms);
    o << "time " << dtype_name(t.type) << " " << t.n << " " << kernels::kernel_path_name(t.path) << " " << ms << "\n";
  }
  const std::string body = o.str();
  return body + "checksum " + hex16(fnv1a(body)) + "\n";
}

Result<kernels::KernelPlan> parse_plan_file(const std::string& text, const PlanIdentity& want,
                                            const kernels::PlanCaps& caps) {
  const size_t at = text.rfind("checksum ");
  if (text.rfind(kMagic, 0) != 0 || at == std::string::npos) return Status::error("not a kernel plan file");
  std::string sum = text.substr(at + 9);
  while (!sum.empty() && (sum.back() == '\n' || sum.back() == '\r')) sum.pop_back();
  if (sum != hex16(fnv1a(text.substr(0, at)))) return Status::error("checksum mismatch (the file was altered)");
  kernels::KernelPlan plan;
  plan.caps = caps;
  std::istringstream in(text.substr(0, at));
  std::string line;
  std::getline(in, line);  // magic
  std::vector<kernels::TypePlan> types;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    std::istringstream f(val);
    if (key == "cpu" && val != want.cpu) return Status::error("made on another CPU (" + val + "; this one: " + want.cpu + ")");
    if (key == "binary" && val != want.binary) return Status::error("made by another dspark binary (" + val + ")");
    if (key == "model" && val != want.model) return Status::error("made for another model file (" + val + ")");
    if (key == "threads" && val != std::to_string(want.threads))
      return Status::error("made for " + val + " threads, not " + std::to_string(want.threads));
    if (key == "chunk" && val != std::to_string(want.chunk))
      return Status::error("made for a prefill chunk of " + val + ", not " + std::to_string(want.chunk));
    if (key == "margin" && !(f >> plan.margin)) return Status::error("bad margin line");
    if (key == "type") {
      kernels::TypePlan tp;
      std::string name, p;
      if (!(f >> name) || !parse_dtype(name, &tp.type)) return Status::error("bad type line '" + line + "'");
      for (int b = 0; b < kernels::kPlanBuckets; ++b) {
        if (!(f >> p) || !parse_path(p, &tp.path[(size_t)b])) return Status::error("bad type line '" + line + "'");
        if (path_packed_rows(tp.path[(size_t)b])) {
          if (tp.packed_rows && tp.packed_rows != path_packed_rows(tp.path[(size_t)b]))
            return Status::error("two packed layouts for " + name);
          tp.packed_rows = path_packed_rows(tp.path[(size_t)b]);
        } else {
          tp.needs_source = true;
        }
      }
      f >> tp.rows_timed >> tp.cols_timed;
      types.push_back(tp);
    }
    if (key == "time") {
      kernels::PlanTiming t;
      std::string name, p;
      if (!(f >> name >> t.n >> p >> t.ms) || !parse_dtype(name, &t.type) || !parse_path(p, &t.path))
        return Status::error("bad time line '" + line + "'");
      plan.timings.push_back(t);
    }
  }
  plan.chunk = want.chunk;
  plan.threads = want.threads;
  // Every path must be one this CPU has for its type and bucket (else the file lies about the CPU).
  for (const kernels::TypePlan& tp : types)
    for (int b = 0; b < kernels::kPlanBuckets; ++b) {
      const auto c = kernels::candidate_paths(tp.type, plan.bucket_tokens(b), caps);
      const kernels::KernelPath p = tp.path[(size_t)b];
      if (std::find(c.begin(), c.end(), p) == c.end() && !(c.empty() && p == kernels::KernelPath::kScalar))
        return Status::error(std::string("names a path this CPU lacks (") + kernels::kernel_path_name(p) + " for " +
                             dtype_name(tp.type) + ")");
    }
  plan.types = std::move(types);
  return plan;
}

std::string default_plan_path(const std::string& cache_dir, const PlanIdentity& id) {
  const std::string key = id.cpu + "\n" + id.binary + "\n" + id.model + "\n" + std::to_string(id.threads) + "\n" +
                          std::to_string(id.chunk);
  return cache_dir + "/kernel-plans/" + hex16(fnv1a(key)) + ".plan";
}

namespace {

// The matrices to time, one per weight type with a choice on this CPU: the type's largest matrix
// (layer matrices and the LM head; by bytes, so a type's plan follows where its bytes are: Gemma 3's
// Q8_0 is a 178 MB head beside 174 KB attn_v matrices); plus the greedy head's Q5_0 screen
// (model/argmax_head.h, made at load from a Q8_0 head) when the model has no Q5_0 matrix, synthetic;
// with each, the bytes of weights a decoded token reads (the layers' matrices and the head): the size
// of the stream single-token products are timed on (PlanMatrix::stream_bytes, kernels/planner.h).
std::vector<kernels::PlanMatrix> plan_matrices(const formats::GgufFile& f, const kernels::PlanCaps& caps) {
  std::vector<kernels::PlanMatrix> out;
  const formats::GgufTensorInfo* head = f.find_tensor("output.weight");
  if (!head) head = f.find_tensor("token_embd.weight");
  size_t decode_bytes = 0;
  for (const formats::GgufTensorInfo& t : f.tensors()) {
    const bool layer = t.name.rfind("blk.", 0) == 0;
    if (t.n_dims != 2 || !(layer || &t == head) || !dtype_info(t.type).supported) continue;
    decode_bytes += t.n_bytes;
    if (kernels::candidate_paths(t.type, 512, caps).size() < 2 && kernels::candidate_paths(t.type, 1, caps).size() < 2)
      continue;
    kernels::QMatrix m{t.type, t.ne[1], t.ne[0], f.tensor_data(t), row_bytes(t.type, t.ne[0])};
    size_t i = 0;
    while (i < out.size() && out[i].m.type != t.type) ++i;
    if (i == out.size()) out.push_back({m});
    else if (t.n_bytes > out[i].m.row_stride * (size_t)out[i].m.n_rows) out[i] = {m};
  }
  const bool has_q5_0 = std::any_of(out.begin(), out.end(), [](const auto& p) { return p.m.type == DType::Q5_0; });
  if (head && head->type == DType::Q8_0 && !has_q5_0 && head->ne[0] % 32 == 0)
    out.push_back({kernels::QMatrix{DType::Q5_0, head->ne[1], head->ne[0], nullptr, row_bytes(DType::Q5_0, head->ne[0])}});
  for (kernels::PlanMatrix& p : out) p.stream_bytes = decode_bytes;
  return out;
}

Status write_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o << text;
    if (!o.flush()) return Status::error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::ok();
}

}  // namespace

Result<TargetBackend> target_backend(const std::string& model_path, const std::string& cache_dir,
                                     const BackendFlags& flags) {
  auto be = kernels::find_backend(flags.backend);
  if (!be) return be.status();
  TargetBackend tb;
  tb.backend = *be;
  tb.plan_status = "off";
  const bool auto_cpu = flags.backend.empty() || flags.backend == "auto" || flags.backend == "cpu";
  const kernels::PlanCaps caps = kernels::detect_plan_caps();
  if (flags.kernel_plan == "off" || flags.kernel_plan.empty()) return tb;
  if (!auto_cpu) {
    tb.plan_status = "off (a plan applies to the auto CPU backend, not --backend " + flags.backend + ")";
    return tb;
  }
  if (caps.isa == kernels::Isa::kScalar) {
    tb.plan_status = "off (no SIMD kernels on this CPU: nothing to choose)";
    return tb;
  }
  PlanIdentity id{cpu_identity(), binary_identity(), "", std::max(1, flags.threads), flags.chunk};
  auto mid = model_identity(model_path);
  if (!mid) return mid.status();
  id.model = *mid;
  const std::string file = flags.kernel_plan == "auto" ? default_plan_path(cache_dir, id) : flags.kernel_plan;
  std::ifstream in(file, std::ios::binary);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    auto plan = parse_plan_file(ss.str(), id, caps);
    if (plan) {
      tb.planned = std::make_unique<kernels::PlannedCpuBackend>(**be, std::move(plan).value());
      tb.backend = tb.planned.get();
      tb.plan_status = "read from " + file;
      return tb;
    }
    notify(flags.note, "dspark: kernel plan " + file + " rejected: " + plan.message() + "; planning again");
  }
  auto gguf = formats::GgufFile::open(model_path);
  if (!gguf) return gguf.status();
  std::vector<kernels::PlanMatrix> mats = plan_matrices(*gguf, caps);
  kernels::PlanRequest req;
  req.caps = caps;
  req.chunk = flags.chunk;
  req.threads = id.threads;
  for (const kernels::PlanMatrix& m : mats) req.types.push_back(m.m.type);
  const auto t0 = std::chrono::steady_clock::now();
  const OtherLoad load;  // what other processes use while the plan is timed
  kernels::MatmulPlanTimer timer(std::move(mats), id.threads, flags.chunk);
  auto plan = kernels::make_plan(req, timer);
  if (!plan) return Status::error(model_path + ": " + plan.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::optional<double> others = load.cpus();
  const double quiet = flags.max_other_cpus.value_or(
      kPlanQuietOtherCpus * std::max(1, (int)std::thread::hardware_concurrency() - id.threads));
  char buf[160];
  std::snprintf(buf, sizeof buf, "planned in %.2f s", secs);
  tb.plan_status = buf;
  if (others && *others > quiet) {
    std::snprintf(buf, sizeof buf, "other processes used %.2f CPUs while it was timed (more than %.2f)", *others, quiet);
    tb.plan_status += std::string(", not saved: ") + buf;
    notify(flags.note, std::string("dspark: kernel plan used for this run but not saved: ") + buf +
                           ", so its choices may not be this CPU's best; the next start plans again");
  } else if (Status st = write_file(file, format_plan_file(*plan, id)); !st) {
    notify(flags.note, "dspark: kernel plan not saved: " + st.message());
  } else {
    if (others) {
      std::snprintf(buf, sizeof buf, " (other processes used %.2f CPUs meanwhile)", *others);
      tb.plan_status += buf;
    }
    tb.plan_status += ", saved to " + file;
  }
  tb.planned = std::make_unique<kernels::PlannedCpuBackend>(**be, std::move(plan).value());
  tb.backend = tb.planned.get();
  return tb;
}

std::string plan_report(const TargetBackend& tb) {
  std::string out = "dspark: kernel plan: " + tb.plan_status + "\n";
  if (!tb.planned) return out;
  const kernels::KernelPlan& p = tb.planned->plan();
  out += "dspark: kernel plan for " + kernels::plan_caps_name(p.caps) + ", " + std::to_string(p.threads) +
         " threads (ms per product; * = chosen; ties within " + std::to_string((int)(p.margin * 100 + 0.5)) +
         " % go to the earlier path):\n";
  std::istringstream s(kernels::plan_summary(p));
  for (std::string line; std::getline(s, line);) out += "dspark:   " + line + "\n";
  out += kernels::plan_timings_table(p);
  return out;
}

}  // namespace dspark::runtime
