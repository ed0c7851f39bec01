/* bf16_absent.c — the bf16 products' entry points in builds for processors other than x86-64,
 * which have no AVX512_BF16 kernels: cn_bf16_supported (cpu.c) is 0 there, every caller checks
 * it before packing a bf16 operand, and `--precision bf16` is refused with a message, so none of
 * these is ever reached. Each stops the program loudly if one were. Not a slow bf16 path. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/gemm.h"

static void absent(const char *what)
{
    fprintf(stderr, "cnnc: %s: no bf16 kernels in this build (a caller skipped "
                    "cn_bf16_supported)\n", what);
    abort();
}

void cn_bf16_pack_rows(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld)
{
    (void)dst, (void)src, (void)rows, (void)cols, (void)ld;
    absent(__func__);
}

void cn_bf16_pack_row_pairs(cn_bf16_pair *dst, const float *src, int rows, int cols, int ld)
{
    (void)dst, (void)src, (void)rows, (void)cols, (void)ld;
    absent(__func__);
}

void cn_bf16_pair_channels(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad)
{
    (void)dst, (void)in, (void)C, (void)H, (void)W, (void)pad;
    absent(__func__);
}

void cn_bf16_pair_columns(cn_bf16_pair *dst, const float *in, int C, int H, int W, int pad)
{
    (void)dst, (void)in, (void)C, (void)H, (void)W, (void)pad;
    absent(__func__);
}

void cn_bf16_im2col_pairs(cn_bf16_pair *colp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K)
{
    (void)colp, (void)plane, (void)C, (void)H, (void)W, (void)K;
    absent(__func__);
}

void cn_bf16_im2row_pairs(cn_bf16_pair *rowsp, const cn_bf16_pair *plane, int C, int H, int W,
                          int K)
{
    (void)rowsp, (void)plane, (void)C, (void)H, (void)W, (void)K;
    absent(__func__);
}

void cn_bf16_pool_gradient_pairs(cn_bf16_pair *dyp, int turned, cn_bf16_pair *dyq, int qpad,
                                 const float *d, const int32_t *at, const cn_pool_shape *s)
{
    (void)dyp, (void)turned, (void)dyq, (void)qpad, (void)d, (void)at, (void)s;
    absent(__func__);
}

void cn_gemm_bf16(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai, ptrdiff_t ak,
                  const cn_bf16_pair *B, int ldb, int accumulate, float *C, int ldc)
{
    (void)M, (void)N, (void)Kp, (void)A, (void)ai, (void)ak, (void)B, (void)ldb;
    (void)accumulate, (void)C, (void)ldc;
    absent(__func__);
}

void cn_gemm_bf16_rows_from(int M, int N, int Kp, const cn_bf16_pair *A, ptrdiff_t ai,
                            ptrdiff_t ak, const cn_bf16_pair *B, int ldb, const float *start,
                            float *C, int ldc)
{
    (void)M, (void)N, (void)Kp, (void)A, (void)ai, (void)ak, (void)B, (void)ldb;
    (void)start, (void)C, (void)ldc;
    absent(__func__);
}

void cn_gemm_bf16_gathered(int M, int N, int Kp, const cn_bf16_pair *A, const int32_t *arow,
                           const int32_t *acol, const cn_bf16_pair *B, int ldb, int accumulate,
                           float *C, int ldc)
{
    (void)M, (void)N, (void)Kp, (void)A, (void)arow, (void)acol, (void)B, (void)ldb;
    (void)accumulate, (void)C, (void)ldc;
    absent(__func__);
}
