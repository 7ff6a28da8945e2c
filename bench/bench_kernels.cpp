// Kernel benchmarks on the real matrix shapes of Gemma 3 270M and SmolLM2-135M: matvec (n_tokens = 1, reported as GB/s
// of weight bytes) and matmul (n_tokens 8, 64, 512); attention of one query position over an f16 cache in
// SmolLM2's layout (3 query heads per K/V head, head_dim 64, 3 K/V heads interleaved), cache-resident
// (BM_Attention) and as a decode forward meets it, rows from memory (BM_AttentionCold); memory read bandwidth
// (BM_ReadBandwidth: the decode roofline). Not a test.
//   dspark_bench_kernels [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <new>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/f16.h"
#include "core/rng.h"
#include "core/threadpool.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/packed.h"
#include "kernels/ref/ref.h"

namespace {

using dspark::DType;
using namespace dspark::kernels;

struct Shape {
  const char* name;
  DType type;
  int64_t rows, cols;
};

// [n_rows, n_cols] = [out, in] as matmul sees them.
const Shape kShapes[] = {
    {"lm_head_q8_0", DType::Q8_0, 262144, 640},  {"attn_q_q5_0", DType::Q5_0, 1024, 640},
    {"attn_k_q5_0", DType::Q5_0, 256, 640},      {"attn_v_q8_0", DType::Q8_0, 256, 640},
    {"ffn_up_q5_0", DType::Q5_0, 2048, 640},     {"attn_out_q4_k", DType::Q4_K, 640, 1024},
    {"ffn_down_q4_k", DType::Q4_K, 640, 2048},   {"ffn_down_q6_k", DType::Q6_K, 640, 2048},
    // SmolLM2-135M (Q4_1 layers, Q8_0 token_embd as the LM head)
    {"smol_lm_head_q8_0", DType::Q8_0, 49152, 576}, {"smol_ffn_up_q4_1", DType::Q4_1, 1536, 576},
    {"smol_ffn_down_q4_1", DType::Q4_1, 576, 1536}, {"smol_attn_q_q4_1", DType::Q4_1, 576, 576},
};

// Weights: 64 distinct quantized random rows repeated (distinct addresses, realistic values).
struct Weights {
  std::vector<uint8_t> bytes;
  QMatrix m;
};

const Weights& weights(int shape) {
  static std::unique_ptr<Weights> cache[sizeof(kShapes) / sizeof(kShapes[0])];
  if (!cache[shape]) {
    const Shape& s = kShapes[shape];
    auto w = std::make_unique<Weights>();
    const size_t rb = dspark::row_bytes(s.type, s.cols);
    w->bytes.resize(rb * (size_t)s.rows);
    dspark::Rng rng(42);
    std::vector<float> row((size_t)s.cols);
    for (int64_t r = 0; r < std::min<int64_t>(64, s.rows); ++r) {
      for (auto& v : row) v = (float)(rng.uniform() * 2 - 1);
      quantize_row_ref(s.type, row.data(), w->bytes.data() + rb * (size_t)r, s.cols);
    }
    for (int64_t r = 64; r < s.rows; ++r) std::memcpy(w->bytes.data() + rb * (size_t)r, w->bytes.data() + rb * (size_t)(r % 64), rb);
    w->m = QMatrix{s.type, s.rows, s.cols, w->bytes.data(), rb};
    cache[shape] = std::move(w);
  }
  return *cache[shape];
}

dspark::ThreadPool& pool(int n) {
  static dspark::ThreadPool p1(1), p2(2);
  return n == 1 ? p1 : p2;
}

// args: shape index, n_tokens, threads, isa (0 scalar, 1 avx2, 2 avx512-vnni, 3 avx512 + AMX-INT8),
// packed (1: the packed copy of kernels/packed.h for that ISA, x8 or x16 records, where pack_supported)
void BM_Matmul(benchmark::State& state) {
  const int shape = (int)state.range(0);
  const int64_t ntok = state.range(1);
  const int threads = (int)state.range(2);
  const bool amx = state.range(3) == 3;
  const Isa isa = amx ? Isa::kAvx512 : (Isa)state.range(3);
  if (isa > detect_isa() || (amx && !amx_available())) {
    state.SkipWithError("ISA not available");
    return;
  }
  const Weights& w = weights(shape);
  const bool packed = state.range(4) != 0;
  std::vector<uint8_t> packed_bytes_buf;
  QMatrix m = w.m;
  if (packed) {
    if (!pack_supported(m.type, isa)) {
      state.SkipWithError("no packed kernel");
      return;
    }
    packed_bytes_buf.resize(packed_bytes(m, packed_group_rows(m.type, isa)));
    attach_packed(&m, isa, packed_bytes_buf.data());
  }
  dspark::Rng rng(7);
  std::vector<float> x((size_t)(ntok * w.m.n_cols)), y((size_t)(ntok * w.m.n_rows));
  for (auto& v : x) v = (float)(rng.uniform() * 2 - 1);
  MatmulContext ctx;
  ctx.isa = isa;
  ctx.pool = &pool(threads);
  ctx.allow_amx = amx;
  for (auto _ : state) {
    matmul(ctx, m, x.data(), ntok, y.data(), w.m.n_rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)w.bytes.size());
  state.counters["GMAC/s"] = benchmark::Counter((double)w.m.n_rows * (double)w.m.n_cols * (double)ntok,
                                                benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(kShapes[shape].name) + " tok=" + std::to_string(ntok) + " thr=" + std::to_string(threads) +
                 " " + (amx ? "avx512-amx" : isa_name(isa)) + (packed ? "+packed x" + std::to_string(m.packed_rows) : ""));
}

void Args(benchmark::internal::Benchmark* b) {
  const int n_shapes = (int)(sizeof(kShapes) / sizeof(kShapes[0]));
  for (int isa : {3, 2, 1})
    for (int s = 0; s < n_shapes; ++s)
      for (int64_t ntok : {1, 2, 4, 8, 16, 64, 512}) {
        if ((s == 0 || s == 8) && ntok > 16) continue;  // lm_head: last token, or a few for speculative verify
        if (s >= 1 && s <= 7 && (ntok == 2 || ntok == 4)) continue;  // verify-window sizes: LM heads and SmolLM2
        if (isa == 3 && ntok == 1) continue;  // AMX is for n_tokens >= 2
        for (int threads : {1, 2}) {
          b->Args({s, ntok, threads, isa, 0});
          if ((isa == 1 || isa == 2) && pack_supported(kShapes[s].type, (Isa)isa))
            b->Args({s, ntok, threads, isa, 1});
        }
      }
}

BENCHMARK(BM_Matmul)->Apply(Args)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One query position's attention for one K/V head: args n_keys, isa (0 scalar, 1 avx2, 2 avx512).
// SmolLM2-135M: 3 query heads share the K/V head; cache rows hold 3 heads x 64 f16 (stride 192).
void BM_Attention(benchmark::State& state) {
  const int64_t n_keys = state.range(0);
  const Isa isa = (Isa)state.range(1);
  if (isa > detect_isa()) {
    state.SkipWithError("ISA not available");
    return;
  }
  const int kGroup = state.range(2);
  const int64_t kHd = state.range(3), kStride = state.range(4);
  dspark::Rng rng(11);
  std::vector<uint16_t> k((size_t)(n_keys * kStride)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
    v[i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
  }
  std::vector<float> q((size_t)(kGroup * kHd)), scores((size_t)(kGroup * n_keys)), out(q.size());
  for (auto& x : q) x = (float)(rng.uniform() * 2 - 1) * 0.125f;
  const KvView view{k.data(), v.data(), n_keys, kStride};
  for (auto _ : state) {
    attention_f16kv(isa, q.data(), kGroup, kHd, view, 0, n_keys, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["ns/key"] = benchmark::Counter((double)n_keys, benchmark::Counter::kIsIterationInvariantRate |
                                                                    benchmark::Counter::kInvert);
  state.SetLabel(std::string("keys=") + std::to_string(n_keys) + " " + isa_name(isa));
}
BENCHMARK(BM_Attention)->ArgsProduct({{64, 512, 2048}, {0, 1, 2}, {3}, {64}, {192}})->ArgsProduct({{512}, {2}, {1, 2, 4}, {256}, {256}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// n_rows consecutive causal rows of one sequence (a verify window or a prefill chunk), the last at
// n_keys, against one K/V head in SmolLM2's layout (3 query heads of 64): a call per row
// (attention_f16kv, rows=0) or all rows at once (attention_f16kv_rows, rows=1). Cache-resident.
void BM_AttentionRows(benchmark::State& state) {
  const int64_t n_keys = state.range(0), n_rows = state.range(1);
  const bool together = state.range(2) != 0;
  const Isa isa = Isa::kAvx512;
  if (isa > detect_isa()) {
    state.SkipWithError("ISA not available");
    return;
  }
  const int64_t kHd = 64, kStride = 192, kGroup = 3;
  dspark::Rng rng(11);
  std::vector<uint16_t> k((size_t)(n_keys * kStride)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
    v[i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
  }
  std::vector<float> q((size_t)(n_rows * kGroup * kHd)), out(q.size()), scores((size_t)(kGroup * n_keys));
  for (auto& x : q) x = (float)(rng.uniform() * 2 - 1) * 0.125f;
  std::vector<int64_t> first((size_t)n_rows, 0), nk((size_t)n_rows);
  for (int64_t r = 0; r < n_rows; ++r) nk[(size_t)r] = n_keys - n_rows + 1 + r;
  const KvView view{k.data(), v.data(), n_keys, kStride};
  const AttnRows rows{q.data(), kGroup * kHd, out.data(), kGroup * kHd, first.data(), nk.data(), (int)n_rows};
  for (auto _ : state) {
    if (together) attention_f16kv_rows(isa, rows, kGroup, kHd, view, scores.data());
    else
      for (int64_t r = 0; r < n_rows; ++r)
        attention_f16kv(isa, q.data() + r * kGroup * kHd, kGroup, kHd, view, 0, nk[(size_t)r], scores.data(),
                        out.data() + r * kGroup * kHd);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["ns/row-key"] = benchmark::Counter((double)(n_rows * n_keys), benchmark::Counter::kIsIterationInvariantRate |
                                                                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_AttentionRows)->ArgsProduct({{512}, {1, 2, 3, 5, 8, 16, 64}, {0, 1}})->ArgsProduct({{2048}, {5, 512}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseRealTime();


// Attention as a decode forward meets it: SmolLM2's 30 layers of 3 K/V heads (3 query heads each,
// head_dim 64, rows of 192 f16), n_tok query tokens of a verify window (each its own call, token t
// seeing n_keys + t keys), and between layers 4 MB of other memory streamed through the caches, as a
// layer's weights do: a different 4 MB slice per layer (120 MB per pass, far more than the L3), so by
// the time a layer's K/V rows come round again they have left every cache, as in a forward. Only the
// attention calls are timed (manual time), one thread. args: n_keys, n_tok.
void BM_AttentionCold(benchmark::State& state) {
  if (detect_isa() < Isa::kAvx2) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int64_t n_keys = state.range(0), n_tok = state.range(1);
  const bool head_major = state.range(2) != 0;  // 1: each K/V head's rows contiguous (stride head_dim)
  constexpr int kLayers = 30, kHeadsKv = 3, kGroup = 3;
  constexpr int64_t kHd = 64;
  const int64_t kStride = head_major ? kHd : kHeadsKv * kHd;
  const int64_t cap = n_keys + n_tok;
  dspark::Rng rng(12);
  std::vector<std::vector<uint16_t>> k(kLayers), v(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    k[l].resize((size_t)(cap * kHeadsKv * kHd));
    v[l].resize(k[l].size());
    for (size_t i = 0; i < k[l].size(); ++i) {
      k[l][i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
      v[l][i] = dspark::fp32_to_fp16((float)(rng.uniform() * 2 - 1));
    }
  }
  constexpr size_t kFlushPerLayer = (size_t)4 << 20;
  std::vector<uint8_t> flush(kFlushPerLayer * kLayers, 1);
  std::vector<float> q((size_t)(kGroup * kHd)), scores((size_t)(kGroup * cap)), out(q.size());
  for (auto& x : q) x = (float)(rng.uniform() * 2 - 1) * 0.125f;
  const Isa isa = detect_isa();
  uint64_t sink = 0;
  for (auto _ : state) {
    double secs = 0;
    for (int l = 0; l < kLayers; ++l) {
      for (size_t i = kFlushPerLayer * l; i < kFlushPerLayer * (l + 1); i += 64) sink += flush[i];
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t t = 0; t < n_tok; ++t)
        for (int g = 0; g < kHeadsKv; ++g) {
          const int64_t off = head_major ? g * cap * kHd : g * kHd;
          const KvView view{k[l].data() + off, v[l].data() + off, cap, kStride};
          attention_f16kv(isa, q.data(), kGroup, kHd, view, 0, n_keys + t, scores.data(), out.data());
        }
      secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(out.data());
    }
    state.SetIterationTime(secs);
  }
  benchmark::DoNotOptimize(sink);
  state.SetLabel("30 layers x 3 K/V heads, " + std::to_string(n_tok) + " token(s), " +
                 (head_major ? "head-major rows " : "interleaved rows ") + isa_name(isa));
}
BENCHMARK(BM_AttentionCold)->ArgsProduct({{128, 512, 1024}, {1, 4, 8}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseManualTime();

// Memory read bandwidth, the roofline of decode (every weight byte is read once per token): the
// threads of the pool each stream their half of a 512 MB buffer (far larger than any cache) with
// 256-bit loads. args: threads. Reported as bytes_per_second.
__attribute__((target("avx2"))) uint64_t stream_sum(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[1] + out[2] + out[3];
}

void BM_ReadBandwidth(benchmark::State& state) {
  if (detect_isa() < Isa::kAvx2) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int threads = (int)state.range(0);
  constexpr size_t kBytes = size_t{512} << 20;
  static const std::unique_ptr<uint8_t, decltype(&std::free)> buf = [] {
    std::unique_ptr<uint8_t, decltype(&std::free)> p(static_cast<uint8_t*>(std::aligned_alloc(64, kBytes)), &std::free);
    if (!p) throw std::bad_alloc();
    std::memset(p.get(), 1, kBytes);  // touch every page
    return p;
  }();
  std::vector<uint64_t> sums((size_t)threads);
  const size_t part = kBytes / (size_t)threads;
  for (auto _ : state) {
    pool(threads).parallel_for(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) sums[(size_t)t] = stream_sum(buf.get() + (size_t)t * part, part);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)kBytes);
  state.SetLabel("threads=" + std::to_string(threads));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
