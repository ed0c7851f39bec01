/* gemm.h — the single-precision matrix product that the conv and linear layers are built on.
 * Row-major; no threads inside (the trainer parallelises across replicas); deterministic: the
 * order of the sums depends only on the shapes. */
#ifndef CN_GEMM_H
#define CN_GEMM_H

/* C[M,N] = (accumulate ? C : 0) + op(A)[M,K] * op(B)[K,N], where op(A) = A [M,K] (lda) or, with
 * trans_a, A^T of A [K,M]; likewise op(B) = B [K,N] (ldb) or, with trans_b, B^T of B [N,K]. */
void cn_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
              const float *B, int ldb, int accumulate, float *C, int ldc);

#endif /* CN_GEMM_H */
