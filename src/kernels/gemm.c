/* gemm.c — cn_sgemm: picks the kernels for the instruction set in use and maps the four
 * transpose cases onto them. The instruction set is decided once per process: the best the build
 * has and the CPU offers (cpu.c), or the one named by the CNNC_ISA environment variable
 * (generic, avx2, avx512, neon) when it is valid and supported; likewise the kernels of the bf16
 * products (CNNC_BF16: avx512, amx). Those one-time decisions are the only process-wide state in
 * cnnc and they never change afterwards. */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cnnc.h"
#include "kernels/gemm.h"

typedef struct {
    void (*nn)(int, int, int, const float *, ptrdiff_t, ptrdiff_t, const float *, int,
               const int32_t *, const float *, float *, int);
    void (*nt)(int, int, int, const float *, int, const float *, int, float *, int);
    float (*burn)(long, float, double *);
    void (*chained)(int, int, int, const float *, int, const float *, int, float *, int);
    void (*transpose)(float *, int, const float *, int, int, int);
    void (*transpose_streamed)(float *, int, const float *, int, int, int);
    void (*copy_streamed)(float *, const float *, size_t);
    void (*im2col)(float *, const float *, int, int, int, int);
    void (*shifted)(float *, ptrdiff_t, const float *, int, int, int, int);
    void (*pad_rows)(float *, const float *, int, int, int, int, int, int);
    void (*crop_rows)(float *, const float *, int, int, int, int);
    void (*im2row)(float *, int, const float *, int, int, int, int);
    void (*col2im)(float *, const float *, int, int, int, int);
    void (*picked)(int, int, const float *, const int32_t *, const float *, int, int, int, int,
                   float *);
    void (*pool2)(float *, int32_t *, const float *, int, int, int);
    void (*pool2_rows)(float *, int32_t *, const float *, int, int, int);
    void (*pool2_gradient)(float *, const float *, const int32_t *, int, int, int);
    void (*picked_rows)(int, int, const float *, const int32_t *, const float *, int, int,
                        float *, int);
    void (*picks_sorted)(int, int, const float *, const int32_t *, int, int32_t *);
    void (*picked_input)(const int32_t *, int, const float *, int, int, float *);
    void (*row2im)(float *, const float *, int, int, int, int, int);
    void (*wino4_input)(float *, ptrdiff_t, const float *, const cn_winograd_plane *, float *);
    void (*wino4_output)(float *, const float *, ptrdiff_t, const cn_winograd_plane *, float,
                         float *);
    void (*wino4_gradient_rows)(float *, ptrdiff_t, const float *, const cn_winograd_plane *,
                                int);
    void (*bn_sums)(double *, const float *, const cn_bn_planes *, float);
    void (*bn_normalise)(float *, const float *, const cn_bn_planes *, const cn_bn_channel *);
    void (*bn_gradient_sums)(double *, const float *, const float *, const cn_bn_planes *,
                             const cn_bn_channel *);
    void (*bn_input_gradient)(float *, const float *, const float *, const cn_bn_planes *,
                              const cn_bn_channel *);
} gemm_kernels;

#define KERNELS_OF(isa)                                                                        \
    {cn_gemm_nn_##isa, cn_gemm_nt_##isa, cn_fma_burn_##isa, cn_gemm_nn_chained_##isa,          \
     cn_transpose_##isa, cn_transpose_streamed_##isa,                                         \
     cn_copy_streamed_##isa, cn_im2col_##isa,                                                 \
     cn_shifted_planes_##isa, cn_pad_rows_##isa, cn_crop_rows_##isa, cn_im2row_##isa,          \
     cn_col2im_##isa, cn_conv_picked_weight_gradient_##isa, cn_maxpool2_planes_##isa,          \
     cn_maxpool2_rows_##isa, cn_maxpool2_gradient_##isa,                                       \
     cn_picked_rows_weight_gradient_##isa, cn_picks_by_position_##isa,                         \
     cn_picked_rows_input_gradient_##isa, cn_row2im_##isa, cn_winograd4_input_##isa,          \
     cn_winograd4_output_##isa, cn_winograd4_gradient_rows_##isa,                             \
     cn_bn_sums_##isa, cn_bn_normalise_##isa, cn_bn_gradient_sums_##isa,                      \
     cn_bn_input_gradient_##isa}

/* The sets of this build's processor family; the others stay empty and are never supported. */
static const gemm_kernels kernels_by_isa[CN_ISA_COUNT] = {
    [CN_ISA_GENERIC] = KERNELS_OF(generic),
#if defined(__x86_64__)
    [CN_ISA_AVX2] = KERNELS_OF(avx2),
    [CN_ISA_AVX512] = KERNELS_OF(avx512),
#elif defined(__aarch64__)
    [CN_ISA_NEON] = KERNELS_OF(neon),
#endif
};
static const char *const isa_names[] = {"generic", "avx2", "avx512", "neon"};
_Static_assert(sizeof isa_names / sizeof isa_names[0] == CN_ISA_COUNT, "a name per isa");
/* The order in which the best supported set is chosen. */
static const cn_isa best_first[] = {CN_ISA_AVX512, CN_ISA_AVX2, CN_ISA_NEON, CN_ISA_GENERIC};
_Static_assert(sizeof best_first / sizeof best_first[0] == CN_ISA_COUNT, "every isa ranked");

const char *cn_isa_name(cn_isa isa)
{
    return (unsigned)isa < CN_ISA_COUNT ? isa_names[isa] : "unknown";
}

int cn_isa_supported(cn_isa isa)
{
    return (unsigned)isa < CN_ISA_COUNT && kernels_by_isa[isa].nn && cn_cpu_runs(isa);
}

int cn_isa_from_env(cn_isa *isa, cn_error *err)
{
    const char *want = getenv("CNNC_ISA");
    int i = 0;
    while (!cn_isa_supported(best_first[i])) i++; /* generic, the last, always is */
    *isa = best_first[i];
    if (!want || !*want) return 0;
    for (i = 0; i < CN_ISA_COUNT; i++)
        if (strcmp(want, isa_names[i]) == 0) {
            if (!kernels_by_isa[i].nn)
                return cn_fail(err, "CNNC_ISA=%s: kernels of another processor family, not in "
                               "this build", want);
            if (!cn_isa_supported((cn_isa)i))
                return cn_fail(err, "CNNC_ISA=%s: this CPU does not support it", want);
            *isa = (cn_isa)i;
            return 0;
        }
    return cn_fail(err, "CNNC_ISA=%s: unknown; use generic, avx2, avx512 or neon", want);
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static cn_isa isa_in_use; /* written once under isa_once, read-only afterwards */

static void decide_isa(void)
{
    if (cn_isa_from_env(&isa_in_use, NULL) != 0) cn_isa_from_env(&isa_in_use, NULL);
}

cn_isa cn_isa_active(void)
{
    pthread_once(&isa_once, decide_isa);
    return isa_in_use;
}

void cn_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
              const float *B, int ldb, int accumulate, float *C, int ldc)
{
    assert(!(trans_a && trans_b) && "cn_sgemm: A^T * B^T is not supported");
    const gemm_kernels *k = &kernels_by_isa[cn_isa_active()];
    if (!accumulate)
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    if (trans_b)
        k->nt(M, N, K, A, lda, B, ldb, C, ldc);
    else if (trans_a)
        k->nn(M, N, K, A, 1, lda, B, ldb, NULL, NULL, C, ldc);
    else
        k->nn(M, N, K, A, lda, 1, B, ldb, NULL, NULL, C, ldc);
}

void cn_sgemm_rows_from(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        const float *start, float *C, int ldc)
{
    kernels_by_isa[cn_isa_active()].nn(M, N, K, A, lda, 1, B, ldb, NULL, start, C, ldc);
}

void cn_sgemm_rows_at(int M, int N, int K, const float *A, int lda, const float *B,
                      const int32_t *brow, const float *start, float *C, int ldc)
{
    if (!start)
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    kernels_by_isa[cn_isa_active()].nn(M, N, K, A, lda, 1, B, 0, brow, start, C, ldc);
}

float cn_fma_burn(long iters, float seed, double *flops)
{
    return kernels_by_isa[cn_isa_active()].burn(iters, seed, flops);
}

void cn_sgemm_chained(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float *C, int ldc)
{
    kernels_by_isa[cn_isa_active()].chained(M, N, K, A, lda, B, ldb, C, ldc);
}


void cn_transpose(float *dst, int ldd, const float *src, int lds, int rows, int cols)
{
    kernels_by_isa[cn_isa_active()].transpose(dst, ldd, src, lds, rows, cols);
}

void cn_transpose_streamed(float *dst, int ldd, const float *src, int lds, int rows, int cols)
{
    kernels_by_isa[cn_isa_active()].transpose_streamed(dst, ldd, src, lds, rows, cols);
}

void cn_copy_streamed(float *dst, const float *src, size_t n)
{
    kernels_by_isa[cn_isa_active()].copy_streamed(dst, src, n);
}

void cn_im2col(float *col, const float *in, int C, int H, int W, int K)
{
    kernels_by_isa[cn_isa_active()].im2col(col, in, C, H, W, K);
}

void cn_shifted_planes(float *planes, ptrdiff_t ps, const float *in, int C, int H, int W, int K)
{
    kernels_by_isa[cn_isa_active()].shifted(planes, ps, in, C, H, W, K);
}

void cn_pad_rows(float *dst, const float *in, int C, int H, int W, int pad, int y0, int rows)
{
    kernels_by_isa[cn_isa_active()].pad_rows(dst, in, C, H, W, pad, y0, rows);
}

void cn_crop_rows(float *out, const float *plane, int C, int H, int W, int pad)
{
    kernels_by_isa[cn_isa_active()].crop_rows(out, plane, C, H, W, pad);
}

void cn_im2row(float *rows, int ld, const float *in, int C, int H, int W, int K)
{
    kernels_by_isa[cn_isa_active()].im2row(rows, ld, in, C, H, W, K);
}

void cn_col2im(float *din, const float *col, int C, int H, int W, int K)
{
    kernels_by_isa[cn_isa_active()].col2im(din, col, C, H, W, K);
}

void cn_conv_picked_weight_gradient(int OC, int Q, const float *a, const int32_t *at,
                                    const float *in, int C, int H, int W, int K, float *dweight)
{
    assert((int64_t)(H - K + 1) * (W - K + 1) <= (1 << 22) &&
           "cn_conv_picked_weight_gradient: output planes over 2^22 positions");
    kernels_by_isa[cn_isa_active()].picked(OC, Q, a, at, in, C, H, W, K, dweight);
}

void cn_maxpool2_planes(float *y, int32_t *where, const float *x, int planes, int H, int W)
{
    kernels_by_isa[cn_isa_active()].pool2(y, where, x, planes, H, W);
}

void cn_maxpool2_rows(float *y, int32_t *where, const float *x, int H, int W, int C)
{
    kernels_by_isa[cn_isa_active()].pool2_rows(y, where, x, H, W, C);
}

void cn_maxpool2_gradient(float *dx, const float *dy, const int32_t *where, int planes, int H,
                          int W)
{
    kernels_by_isa[cn_isa_active()].pool2_gradient(dx, dy, where, planes, H, W);
}

void cn_picked_rows_weight_gradient(int OC, int Q, const float *a, const int32_t *at,
                                    const float *rows, int L, int ld, float *dweight, int ldw)
{
    kernels_by_isa[cn_isa_active()].picked_rows(OC, Q, a, at, rows, L, ld, dweight, ldw);
}

void cn_picks_by_position(int OC, int Q, const float *a, const int32_t *at, int P,
                          int32_t *sorted)
{
    kernels_by_isa[cn_isa_active()].picks_sorted(OC, Q, a, at, P, sorted);
}

void cn_picked_rows_input_gradient(const int32_t *sorted, int P, const float *weight, int L,
                                   int ld, float *drows)
{
    kernels_by_isa[cn_isa_active()].picked_input(sorted, P, weight, L, ld, drows);
}

void cn_row2im(float *din, const float *rows, int ld, int C, int H, int W, int K)
{
    kernels_by_isa[cn_isa_active()].row2im(din, rows, ld, C, H, W, K);
}

void cn_winograd4_input(float *v, ptrdiff_t xs, const float *plane, const cn_winograd_plane *s,
                        float *row)
{
    kernels_by_isa[cn_isa_active()].wino4_input(v, xs, plane, s, row);
}

void cn_winograd4_output(float *y, const float *m, ptrdiff_t xs, const cn_winograd_plane *s,
                         float bias, float *row)
{
    kernels_by_isa[cn_isa_active()].wino4_output(y, m, xs, s, bias, row);
}

void cn_winograd4_gradient_rows(float *m, ptrdiff_t xs, const float *d,
                                const cn_winograd_plane *s, int C)
{
    kernels_by_isa[cn_isa_active()].wino4_gradient_rows(m, xs, d, s, C);
}

void cn_bn_sums(double *sums, const float *x, const cn_bn_planes *p, float shift)
{
    kernels_by_isa[cn_isa_active()].bn_sums(sums, x, p, shift);
}

void cn_bn_normalise(float *y, const float *x, const cn_bn_planes *p, const cn_bn_channel *c)
{
    kernels_by_isa[cn_isa_active()].bn_normalise(y, x, p, c);
}

void cn_bn_gradient_sums(double *sums, const float *dy, const float *x, const cn_bn_planes *p,
                         const cn_bn_channel *c)
{
    kernels_by_isa[cn_isa_active()].bn_gradient_sums(sums, dy, x, p, c);
}

void cn_bn_input_gradient(float *dx, const float *dy, const float *x, const cn_bn_planes *p,
                          const cn_bn_channel *c)
{
    kernels_by_isa[cn_isa_active()].bn_input_gradient(dx, dy, x, p, c);
}

static const char *const bf16_kernel_names[] = {"avx512", "amx"};
_Static_assert(sizeof bf16_kernel_names / sizeof bf16_kernel_names[0] == CN_BF16_KERNEL_COUNT,
               "a name per bf16 kernel set");

const char *cn_bf16_kernel_name(cn_bf16_kernel k)
{
    return (unsigned)k < CN_BF16_KERNEL_COUNT ? bf16_kernel_names[k] : "unknown";
}

int cn_bf16_kernel_supported(cn_bf16_kernel k)
{
    if (k == CN_BF16_AVX512) return cn_bf16_supported();
    return k == CN_BF16_AMX && cn_amx_supported();
}

int cn_bf16_kernel_from_env(cn_bf16_kernel *k, cn_error *err)
{
    const char *want = getenv("CNNC_BF16");
    *k = cn_bf16_kernel_supported(CN_BF16_AMX) ? CN_BF16_AMX : CN_BF16_AVX512;
    if (!want || !*want) return 0;
    for (int i = 0; i < CN_BF16_KERNEL_COUNT; i++)
        if (strcmp(want, bf16_kernel_names[i]) == 0) {
            if (!cn_bf16_kernel_supported((cn_bf16_kernel)i))
                return cn_fail(err, "CNNC_BF16=%s: this CPU or operating system does not offer "
                               "it", want);
            *k = (cn_bf16_kernel)i;
            return 0;
        }
    return cn_fail(err, "CNNC_BF16=%s: unknown; use avx512 or amx", want);
}

static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static cn_bf16_kernel bf16_in_use; /* written once under bf16_once, read-only afterwards */

static void decide_bf16(void)
{
    if (cn_bf16_kernel_from_env(&bf16_in_use, NULL) != 0)
        cn_bf16_kernel_from_env(&bf16_in_use, NULL);
}

cn_bf16_kernel cn_bf16_kernel_active(void)
{
    pthread_once(&bf16_once, decide_bf16);
    return bf16_in_use;
}

static const char *const precision_names[] = {"fp32", "bf16"};
_Static_assert(sizeof precision_names / sizeof precision_names[0] == CN_PRECISION_COUNT,
               "a name per precision");

const char *cn_precision_name(cn_precision p)
{
    return (unsigned)p < CN_PRECISION_COUNT ? precision_names[p] : "unknown";
}

int cn_precision_from_name(const char *name, cn_precision *p)
{
    for (int i = 0; i < CN_PRECISION_COUNT; i++)
        if (strcmp(name, precision_names[i]) == 0) {
            *p = (cn_precision)i;
            return 0;
        }
    return -1;
}

int cn_precision_supported(cn_precision p)
{
    return p == CN_PRECISION_FP32 || (p == CN_PRECISION_BF16 && cn_bf16_supported());
}
