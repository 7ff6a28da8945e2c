// The exact greedy LM head: every row's argmax of logits = x · Wᵀ (W the model's Q8_0 output
// matrix [n_vocab, n_embd]) while reading a 5-bit copy of W plus the few exact rows that could win.
//
// At load each row w_i is requantized to Q5_0 (w̃_i: 22 instead of 34 bytes per 32 weights), and
// with s_i = (n_blocks + 2) · 2⁻²³ · (||w_i||₂ + ||w̃_i||₂) two bounds of the error are kept (f32,
// rounded up):  u_i = max_j |w_ij - w̃_ij| + s_i   and   v_i = ||w_i - w̃_i||₂ + s_i.
// Both matmuls quantize x to the same Q8_0 activations x̂ (kernels/cpu/cpu.h) and run one fma chain
// over the blocks, within (n_blocks + 1) · 2⁻²⁴ · ||w|| · ||x̂|| of w · x̂. For any split of the
// activation's elements into A and B (A = the few outliers: Gemma 3's final hidden state carries
// 37-59 % of its squared norm in three channels),
//   |y_i - ỹ_i| <= u_i · a + v_i · b,   a >= ||x̂_A||₁,  b >= ||x̂_B||₂,
// with a and b bounded from x (each element of x̂ is within amax(block) / 127 + 4e-6 of x's) and A
// chosen per row as the k largest elements minimising the bound of a typical row. With L = max_i
// (ỹ_i - B_i), a row with ỹ_i + B_i < L has y_i < L <= max_j y_j and cannot be the argmax. The
// rows left (the candidates) get their exact y_i from the Q8_0 rows through the same canonical
// kernel, the bits the full head gives them; every other entry is -inf. So the row's argmax, first
// index on ties, is the full head's, exactly, reading 115 MB + the candidates' rows per token
// instead of 178 MB on Gemma 3. The comparisons run in f32 with margins for its rounding.
//
// Only for consumers that read nothing but the argmax (greedy decoding and T 0 verification):
// ForwardOptions::argmax_only. A row whose screen keeps more than kMaxCandidateShare of the
// vocabulary (flat distributions, x = 0, NaNs) falls back to the full head, and so do the next
// kSkipAfterFallback rows and every forward of more than kMaxScreenRows rows (verify windows).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "model/weights.h"

namespace dspark::model {

// Per-thread buffers of ArgmaxHead::run (one per ForwardScratch) and its counters.
struct ArgmaxScratch {
  std::vector<int32_t> cand;  // [n_cand] candidate row ids of the current row
  std::vector<uint8_t> rows;  // [n_cand, row_bytes] their Q8_0 rows, gathered
  std::vector<float> exact;   // [n_cand] their exact logits
  std::vector<float> split;   // [n_embd] split_activation_bound's scratch
  int64_t rows_run = 0;       // logits rows screened
  int64_t candidates = 0;     // candidates over those rows
  int64_t fallbacks = 0;      // screened rows that then ran the full head
  int64_t full_rows = 0;      // rows sent to the full head unscreened (windows, after a fallback)
  int64_t skip = 0;           // rows left to send unscreened
};

class ArgmaxHead {
 public:
  // Rows kept by the screen above this share of the vocabulary run the full head instead: a
  // gathered row costs ~12x a row of the full head's sequential read (Gemma 3: 5,556 rows in
  // 1.0-1.1 ms against 262,144 in 4.2 ms, 2026-12-05).
  static constexpr double kMaxCandidateShare = 1.0 / 16;
  // Forwards of more rows run the full head: it reads its weights once for all of them, while the
  // screen's per-row work grows with the rows (Gemma 3, Spec-Bench dev at T 0 with the shipped
  // drafter: 266 tok/s screening every verify row against 339 with the full head, 2026-12-05).
  static constexpr int64_t kMaxScreenRows = 1;
  // After a fallback, this many rows go straight to the full head: uncertain stretches of text
  // come in runs, and a screened row that falls back costs the screen and the full head.
  static constexpr int64_t kSkipAfterFallback = 8;
  // Relative margin of the f32 screen arithmetic (80x its worst rounding; ArgmaxHead::run).
  static constexpr float kRelSlack = 1e-5f;
  // Largest outlier set A tried per activation row (split_activation_bound).
  static constexpr int64_t kMaxOutliers = 16;

  // Only a head that is most of the bytes a token reads saves enough to pay for the screen's work:
  // Gemma 3's is 72 % of them and decodes 1.22x faster with it (Spec-Bench dev, T 0, 48 prompts);
  // SmolLM2's is 30 %, and greedy decoding ran at 1.000x with it (same run, 2026-12-05).
  static constexpr double kMinHeadShare = 0.5;
  static bool worth_building(const ModelWeights& w);

  // The screen for `head` on `be`, or nullptr where it does not apply: a head that is not Q8_0, a
  // backend whose memory is not the host's, or no SIMD kernel for Q5_0 there. Reads every row of
  // head.data once (a few hundred ms for Gemma 3's 262,144 rows).
  static std::unique_ptr<ArgmaxHead> build(const kernels::QMatrix& head, const kernels::Backend& be);

  // y [n, ldy]: row t holds the full head's logits of x row t where they could be its largest, -inf
  // elsewhere (or the full head's row on fallback). x [n, n_embd] f32 in host memory.
  void run(kernels::MatmulContext& mm, const float* x, int64_t n, float* y, int64_t ldy, ArgmaxScratch& s) const;

  size_t bytes() const {
    return screen_storage_.bytes() + screen_data_.bytes() + (linf_.size() + l2_.size()) * sizeof(float);
  }
  const kernels::QMatrix& screen() const { return screen_; }
  // u_i and v_i of the header comment: [n_vocab] each.
  const std::vector<float>& linf_bounds() const { return linf_; }
  const std::vector<float>& l2_bounds() const { return l2_; }

 private:
  ArgmaxHead(const kernels::QMatrix& head, const kernels::Backend& be) : head_(head), be_(&be) {}

  kernels::QMatrix head_;            // the model's Q8_0 head (rows read for the candidates)
  const kernels::Backend* be_;
  kernels::QMatrix screen_;          // Q5_0 [n_vocab, n_embd]: packed only when the backend packs it
  kernels::Buffer screen_data_;      // its unpacked rows (released once packed)
  kernels::Buffer screen_storage_;   // its packed copy
  std::vector<float> linf_, l2_;     // [n_vocab] u_i, v_i
  float linf_typ_ = 0, l2_typ_ = 0;  // their medians
};

// a >= ||x̂_A||₁ and b >= ||x̂_B||₂ for x [n] f32 quantized to Q8_0 by the matmul, A = the k
// largest elements with k in [0, kMaxOutliers] minimising u_typ · a + v_typ · b (header comment).
// tmp: scratch of n floats.
struct ActivationSplit {
  double a = 0, b = 0;
};
ActivationSplit split_activation_bound(const float* x, int64_t n, float u_typ, float v_typ, std::vector<float>& tmp);

// One Q8_0 row of n elements requantized to Q5_0 into dst (the bytes quantize_row_q5_0_ref gives
// for the dequantized row), with upper bounds of ||w - w̃||₂, max |w - w̃|, ||w||₂ and ||w̃||₂.
struct RequantStats {
  double l2 = 0, linf = 0, norm_w = 0, norm_wt = 0;
};
RequantStats requantize_q8_0_to_q5_0(const void* src_row, void* dst_row, int64_t n);

}  // namespace dspark::model
