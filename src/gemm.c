/* gemm.c — portable single-precision matrix product for the conv and linear layers. Loops are
 * ordered so the innermost one runs over contiguous memory and vectorises; the transposed-B
 * case uses dot products with a fixed set of partial sums. It does not block for caches or use
 * threads: the layer shapes here are small and the trainer runs replicas in parallel. */
#include <string.h>

#include "gemm.h"

/* C[i,:] += a * B[k,:] for the rows of op(A) — covers A and A^T with B untransposed. */
static void gemm_b_rows(int trans_a, int M, int N, int K, const float *A, int lda,
                        const float *B, int ldb, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *restrict c = C + (size_t)i * ldc;
        for (int k = 0; k < K; k++) {
            float a = trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
            const float *restrict b = B + (size_t)k * ldb;
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* Eight interleaved partial sums, added pairwise at the end: a fixed order for a given K. */
static float dot(const float *restrict x, const float *restrict y, int n)
{
    float s[8] = {0};
    int k = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++) s[l] += x[k + l] * y[k + l];
    for (int l = 0; k < n; k++, l++) s[l] += x[k] * y[k];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* C[i,j] += op(A)[i,:] . B[j,:] — B transposed; A^T is gathered one row at a time. */
static void gemm_b_transposed(int trans_a, int M, int N, int K, const float *A, int lda,
                              const float *B, int ldb, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (!trans_a) {
            for (int j = 0; j < N; j++) c[j] += dot(A + (size_t)i * lda, B + (size_t)j * ldb, K);
            continue;
        }
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * B[(size_t)j * ldb + k];
            c[j] += s;
        }
    }
}

void cn_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
              const float *B, int ldb, int accumulate, float *C, int ldc)
{
    if (!accumulate)
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    if (trans_b)
        gemm_b_transposed(trans_a, M, N, K, A, lda, B, ldb, C, ldc);
    else
        gemm_b_rows(trans_a, M, N, K, A, lda, B, ldb, C, ldc);
}
