// The drafter quantizer (`dspark quantize-drafter`): reads a dense DSpark checkpoint and writes a
// quantized sibling directory (docs/QUANT-FORMAT.md) through a staging folder renamed into place.
//
// Default policy: every 2-D `*.weight` matrix is quantized with the default spec (layer q/k/o/gate/
// up/down, fc, lm_head, markov_w2, the gather tables markov_w1 and embed_tokens, gated/rnn head
// projections); norms, layer_scalar, biases, d2t and the confidence head are copied unchanged. A
// drafter whose draft LM head comes from the target (extension E3: lm_head absent + d2t) gets it
// written as an explicit `lm_head.weight` [V_d, H] (target rows d2t[j], dequantized) so it can be
// quantized; with `false` for lm_head it stays E3.
// Recipe (JSON object): tensor or module name -> {"method"|"mode", "bits", "group_size"
// [, "rotation_block"]} or false; names not listed use the default.
// Refuses, before writing anything: an existing output, an already quantized source, a spec or
// group size that does not fit a tensor, recipe entries naming unknown tensors or bad fields,
// non-finite weights. Errors name the tensor or field.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/kernels.h"
#include "quant/quant_types.h"

namespace dspark::quant {

struct ConvertOptions {
  std::string src_dir;                 // dense DSpark checkpoint
  std::string out_dir;                 // must not exist
  QuantSpec defaults;                  // method / bits / group_size; rotation block picked per tensor
  std::string recipe_path;             // optional
  uint64_t seed = 1;                   // turbo rotation seeds derive from it (per module)
  const kernels::QMatrix* target_lm_head = nullptr;  // [V, H] target output rows (E3 materialization)
  std::function<void(const std::string& tensor, int64_t index, int64_t total)> progress;
  // Called on the finished staging directory before it is renamed into place (the reload + draft
  // smoke check); an error aborts the conversion and removes the staging directory.
  std::function<Status(const std::string& staging_dir)> check;
};

struct TensorReport {
  std::string name;              // source tensor name (lm_head.weight when materialized)
  std::vector<int64_t> shape;    // [rows, cols]
  std::string source;            // "BF16", "F32", "target rows" ...
  QuantSpec spec;                // method kNone: copied unchanged
  uint64_t bytes_before = 0, bytes_after = 0;
  double nmse = 0;               // Σ(w - ŵ)^2 / Σ w^2 of the dequantized weights (quantized only)
};

struct ConvertReport {
  std::string out_dir;
  std::vector<TensorReport> tensors;
  uint64_t bytes_before = 0;     // tensor bytes of the source checkpoint
  uint64_t bytes_after = 0;      // tensor bytes written
  int64_t params_after = 0;      // elements of every written tensor (quantized: rows x cols)
  int64_t params_quantized = 0;
  double bpw_quantized = 0;      // stored bits per weight over the quantized tensors
  double bpw_model = 0;          // 8 * bytes_after / params_after
  bool lm_head_materialized = false;
};

// "DIR-affine4g64", "DIR-turbo4g32" (trailing '/' of DIR ignored).
std::string default_out_dir(const std::string& src_dir, const QuantSpec& s);

// Per-module seed of the turbo sign vector: splitmix64(seed ^ fnv1a64(module)) >> 11 (< 2^53, exact
// in JSON doubles).
uint64_t module_rotation_seed(uint64_t seed, const std::string& module);

Result<ConvertReport> quantize_checkpoint(const ConvertOptions& opt);

}  // namespace dspark::quant
