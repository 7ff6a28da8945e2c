#include "dspark/dspark_markov.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"

namespace dspark::net {

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Heap order: the smallest (value, then larger index) on top, so the heap keeps the K+1 largest
// values with ties resolved toward lower indices, as argmax does.
bool heap_less(const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

MarkovHead::MarkovHead(const DSparkModel& model, int top_k) : m_(model) {
  const DSparkConfig& c = model.config();
  r_ = c.markov_rank;
  vd_ = model.draft_vocab();
  H_ = c.hidden_size;
  top_k_ = std::max(1, top_k);
  max_k_ = (int64_t)top_k_ * kEscalate;
  if (r_ == 0) return;
  e_.resize((size_t)r_);
  u_.resize((size_t)r_);
  s_.resize((size_t)r_);
  zin_.resize((size_t)(2 * r_ + H_));
  y_.resize((size_t)(3 * r_));
  heap_.reserve((size_t)max_k_ + 1);
  const quant::DraftMatrix& w2 = model.weights().markov_w2;
  if (!w2.is_quantized()) rows_.resize((size_t)max_k_ * w2.dense_matrix().row_stride);  // gathered dense rows
  cand_rows_.resize((size_t)max_k_);
  cand_bias_.resize((size_t)max_k_);
}

void MarkovHead::reset() { std::fill(s_.begin(), s_.end(), 0.0f); }

void MarkovHead::prepare(int32_t prev, const float* h_k, kernels::MatmulContext& mm) {
  const DSparkWeights& w = m_.weights();
  w.markov_w1.dequantize_row(w.markov_w1_row(prev), e_.data(), mm.isa);
  switch (m_.config().markov_type) {
    case MarkovHeadType::kVanilla:
      std::copy(e_.begin(), e_.end(), u_.begin());
      break;
    case MarkovHeadType::kGated: {
      // u = σ(G·[h ; e] + b) ⊙ e  (h first)
      std::memcpy(zin_.data(), h_k, (size_t)H_ * 4);
      std::memcpy(zin_.data() + H_, e_.data(), (size_t)r_ * 4);
      w.gate_w.matmul(mm, zin_.data(), 1, y_.data(), r_);
      for (int64_t i = 0; i < r_; ++i) u_[(size_t)i] = sigmoid(y_[(size_t)i] + w.gate_b[(size_t)i]) * e_[(size_t)i];
      break;
    }
    case MarkovHeadType::kRnn: {
      // z = [s_{k-1} ; e ; h]; y = J·z + b split [gate; candidate; output]
      std::memcpy(zin_.data(), s_.data(), (size_t)r_ * 4);
      std::memcpy(zin_.data() + r_, e_.data(), (size_t)r_ * 4);
      std::memcpy(zin_.data() + 2 * r_, h_k, (size_t)H_ * 4);
      w.joint_w.matmul(mm, zin_.data(), 1, y_.data(), 3 * r_);
      for (int64_t i = 0; i < r_; ++i) {
        const float g = sigmoid(y_[(size_t)i] + w.joint_b[(size_t)i]);
        const float cand = std::tanh(y_[(size_t)(r_ + i)] + w.joint_b[(size_t)(r_ + i)]);
        s_[(size_t)i] = g * s_[(size_t)i] + (1.0f - g) * cand;
        u_[(size_t)i] = std::tanh(y_[(size_t)(2 * r_ + i)] + w.joint_b[(size_t)(2 * r_ + i)]);
      }
      break;
    }
  }
}

void MarkovHead::full_bias(kernels::MatmulContext& mm, float* bias) {
  m_.weights().markov_w2.matmul(mm, u_.data(), 1, bias, vd_);
}

int64_t MarkovHead::argmax(kernels::MatmulContext& mm, const float* u_row, bool fast, float* scores, bool* full_row) {
  const uint64_t full_cost = (uint64_t)vd_ * (uint64_t)r_;
  ++stats_.slots;
  stats_.macs_full += full_cost;
  if (fast) {
    double unorm2 = 0;
    for (float x : u_) unorm2 += (double)x * x;
    // Rounding slack of the f32 dot (length r) and of the add; see the header.
    const double unorm = std::sqrt(unorm2) * (1.0 + 1e-6 * (double)r_);
    const std::vector<float>& norms = m_.w2_row_norms();
    const quant::DraftMatrix& w2 = m_.weights().markov_w2;
    for (int64_t K = top_k_; K + 1 < vd_; K *= kEscalate) {
      // Candidates: the K largest upper bounds UB(v) = U(v) + ||u||·||W2[v]||; heap_ ends with the
      // (K+1)-th largest UB at the back, which bounds every non-candidate's score.
      heap_.clear();
      for (int64_t v = 0; v < vd_; ++v) {
        const std::pair<float, int64_t> item{(float)((double)u_row[v] + unorm * (double)norms[(size_t)v]), v};
        if ((int64_t)heap_.size() < K + 1) {
          heap_.push_back(item);
          std::push_heap(heap_.begin(), heap_.end(), heap_less);
        } else if (heap_less(item, heap_.front())) {
          std::pop_heap(heap_.begin(), heap_.end(), heap_less);
          heap_.back() = item;
          std::push_heap(heap_.begin(), heap_.end(), heap_less);
        }
      }
      std::pop_heap(heap_.begin(), heap_.end(), heap_less);
      const double ub_rest = (double)heap_.back().first;
      // Exact bias of the K candidates: the same kernel over the selected W2 rows.
      for (int64_t i = 0; i < K; ++i) cand_rows_[(size_t)i] = heap_[(size_t)i].second;
      w2.matmul_rows(mm, cand_rows_.data(), K, u_.data(), cand_bias_.data(), rows_);
      stats_.macs_done += (uint64_t)K * (uint64_t)r_;
      int64_t best = -1;
      float best_score = -INFINITY;
      for (int64_t i = 0; i < K; ++i) {
        const int64_t v = heap_[(size_t)i].second;
        const float sc = u_row[v] + cand_bias_[(size_t)i];
        if (best < 0 || sc > best_score || (sc == best_score && v < best)) {
          best = v;
          best_score = sc;
        }
      }
      // float(UB) may round down by half an ulp: add a relative slack.
      if ((double)best_score > ub_rest + 1e-6 * (std::fabs(ub_rest) + 1.0)) {
        ++stats_.hits;
        *full_row = false;
        return best;
      }
      if ((K * kEscalate + 1) * (int64_t)kMaxCandidateShare > vd_ || K * kEscalate > max_k_) break;
    }
    ++stats_.fallbacks;
  }
  full_bias(mm, scores);
  stats_.macs_done += full_cost;
  for (int64_t v = 0; v < vd_; ++v) scores[v] += u_row[v];
  *full_row = true;
  return kernels::argmax(scores, vd_);
}

}  // namespace dspark::net
