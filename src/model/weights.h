// Layer weights of a decoder-only model as views into the mapped GGUF (nothing is copied). One
// struct for every architecture: tensors an architecture does not have stay null / empty. Shapes
// are checked against the config at load by TensorBinder; errors name the file and tensor.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace dspark::model {

struct LayerWeights {
  const float* attn_norm = nullptr;        // [n_embd] f32
  kernels::QMatrix wq;                     // [n_head * head_dim, n_embd]
  kernels::QMatrix wk;                     // [n_head_kv * head_dim, n_embd]
  kernels::QMatrix wv;                     // [n_head_kv * head_dim, n_embd]
  const float* q_norm = nullptr;           // [head_dim] f32 (Gemma 3)
  const float* k_norm = nullptr;           // [head_dim] f32 (Gemma 3)
  kernels::QMatrix wo;                     // [n_embd, n_head * head_dim]
  const float* post_attn_norm = nullptr;   // [n_embd] f32 (Gemma 3)
  const float* ffn_norm = nullptr;         // [n_embd] f32
  kernels::QMatrix w_gate;                 // [n_ff, n_embd]
  kernels::QMatrix w_up;                   // [n_ff, n_embd]
  kernels::QMatrix w_down;                 // [n_embd, n_ff]
  const float* post_ffw_norm = nullptr;    // [n_embd] f32 (Gemma 3)
  // Prepared-only fusions (data == nullptr; Backend::weight_prepared): the rows of wq, wk, wv
  // [q_dim + 2 kv_dim, n_embd] and of w_gate, w_up [2 n_ff, n_embd], made by prepare_weights when
  // the backend has a kernel for the parts' shared type (the CPU: a packed type), so one matmul (one activation quantization, one hand-off to the
  // threads) replaces three or two. Every output row is the same dot product as in its part.
  kernels::QMatrix wqkv, w_gate_up;
};

struct ModelWeights {
  kernels::QMatrix token_embd;             // [n_vocab, n_embd]
  kernels::QMatrix output;                 // [n_vocab, n_embd] LM head; == token_embd when tied
  bool tied_output = true;
  std::vector<LayerWeights> layers;        // [n_layer]
  const float* output_norm = nullptr;      // [n_embd] f32
  size_t total_bytes = 0;                  // bytes of all bound tensors
  // The backend's copies of the matrices (the CPU: the row-interleaved copies of kernels/packed.h
  // that QMatrix::packed points into); moving the struct keeps them valid. Empty when the backend
  // runs the GGUF layout as it is.
  std::vector<kernels::Buffer> prepared;
};

// Finds tensors by name, checks their shapes and binds views; counts the bytes bound.
class TensorBinder {
 public:
  explicit TensorBinder(const formats::GgufFile& f) : f_(f) {}
  // An f32 vector [n].
  Status vec(const std::string& name, int64_t n, const float** out);
  // A matrix stored as GGUF [ne0 = n_cols, ne1 = n_rows], any supported type.
  Status mat(const std::string& name, int64_t n_rows, int64_t n_cols, kernels::QMatrix* out);
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  size_t total_bytes() const { return total_bytes_; }

 private:
  Result<const formats::GgufTensorInfo*> find(const std::string& name, int64_t ne0, int64_t ne1);
  const formats::GgufFile& f_;
  size_t total_bytes_ = 0;
};

// Gives the backend every layer matrix and the LM head to prepare (Backend::prepare_weight; the
// CPU packs the types its ISA has packed kernels for; the token table keeps its GGUF layout for
// row lookups); parts that can be fused (LayerWeights::wqkv, w_gate_up) are prepared only into
// their fusion. With `release_source` (the tensors lie in a file mapping) the kernel may drop the
// source pages of the tensors that run from their prepared copy alone (Backend::weight_prepared: not
// those a kernel plan also runs in the GGUF layout) from memory (re-read from the file if anything touches them
// again), so the copies do not double the resident size.
// A backend whose memory is not the host's (Backend::host_memory) also gets copies of the f32 norm
// vectors, which the layer structs then point to (sizes from `config`); on the CPU they stay views.
void prepare_weights(ModelWeights* w, const kernels::Backend& be, bool release_source, const ModelConfig& config);

// Which kernel the backend runs for the matrices a forward multiplies by (each layer's matrices or
// their fusions, and the LM head), one row per (weight type, kernel) in first-seen order: for
// --verbose, which says so when a type has no SIMD kernel (the scalar reference path, slow).
struct KernelUse {
  std::string type;     // "Q4_K", ...
  std::string kernel;   // kernels::MatmulPath::kernel
  bool simd = false;
  int64_t matrices = 0;
  size_t bytes = 0;     // GGUF bytes of those matrices
};
std::vector<KernelUse> kernel_use(const ModelWeights& w, const kernels::Backend& be);

// token_embd, output (bound when present, else tied to token_embd) and output_norm.
Status bind_embeddings_and_head(TensorBinder& b, const ModelConfig& c, ModelWeights* w);

}  // namespace dspark::model
