/* gemm.h — the single-precision matrix product that the conv and linear layers are built on,
 * and the choice of instruction set behind it. Row-major; no threads inside (the trainer
 * parallelises across replicas); deterministic: the order of the sums depends only on the
 * shapes and on the instruction set. */
#ifndef CN_GEMM_H
#define CN_GEMM_H

#include <stddef.h>

/* C[M,N] = (accumulate ? C : 0) + op(A)[M,K] * op(B)[K,N], where op(A) = A [M,K] (lda) or, with
 * trans_a, A^T of A [K,M]; likewise op(B) = B [K,N] (ldb) or, with trans_b, B^T of B [N,K].
 * Both transposed at once is not supported (asserted). */
void cn_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
              const float *B, int ldb, int accumulate, float *C, int ldc);

/* iters rounds of independent vector multiply-adds with the kernels in use: the arithmetic peak
 * of one core. Adds the flops done to *flops; returns a value to keep. */
float cn_fma_burn(long iters, float seed, double *flops);

/* The kernels, one set per instruction set (gemm_kernels.inc). */
#define CN_DECLARE_GEMM_KERNELS(isa)                                                           \
    void cn_gemm_nn_##isa(int M, int N, int K, const float *A, ptrdiff_t ai, ptrdiff_t ak,    \
                          const float *B, int ldb, float *C, int ldc);                        \
    void cn_gemm_nt_##isa(int M, int N, int K, const float *A, int lda, const float *Bt,      \
                          int ldb, float *C, int ldc);                                 \
    float cn_fma_burn_##isa(long iters, float seed, double *flops);
CN_DECLARE_GEMM_KERNELS(generic)
CN_DECLARE_GEMM_KERNELS(avx2)
CN_DECLARE_GEMM_KERNELS(avx512)

#endif /* CN_GEMM_H */
