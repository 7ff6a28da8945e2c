// Dense f32 matrix products for training: C = alpha * op(A) * op(B) + beta * C, row-major.
// The fast path is OpenBLAS's cblas_sgemm (Debian libopenblas-dev: a well-kept, heavily tuned GEMM;
// every backward pass around it is ours); gemm_ref is the scalar oracle the tests compare against.
#pragma once

#include <cstdint>

namespace dspark::train {

// op(A) is [M, K] (A stored [M, K], or [K, M] when trans_a); op(B) is [K, N] (B stored [K, N], or
// [N, K] when trans_b); C is [M, N]. lda/ldb/ldc are row strides in elements.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
              int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Threads the BLAS may use (process-wide BLAS setting; call once at startup).
void gemm_set_threads(int n);

}  // namespace dspark::train
