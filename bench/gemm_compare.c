/* gemm_compare.c — cnnc's GEMM kernels against OpenBLAS (Debian's libopenblas-dev, one thread)
 * on the exact matrix shapes one training sample of the seed's model produces (and two of
 * models/cifar10.model's Winograd products, against the FMA peak it prints), then the patch
 * copies (im2col, im2row, col2im) of those convolutions and the gradients taken from a
 * max-pool's picks, which have no OpenBLAS counterpart. Prints the time per call and GFLOP/s
 * (or GB/s) for each, best of many repetitions. Run by `make bench-gemm`; the result decides
 * which one cnnc uses and is recorded in docs/speed.md. Measures; asserts nothing. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cnnc.h"
#include "kernels/gemm.h"

typedef struct {
    const char *what;
    int trans_a, trans_b, M, N, K;
    int bf16; /* 1: --precision bf16 computes this product in bf16 */
} shape;

/* The products of one sample (conv layers) or one batch of 128 (linear layers). */
static const shape shapes[] = {
    {"conv1 forward   W[10x25] col[25x576]", 0, 0, 10, 576, 25, 1},
    {"conv1 dW        dout[10x576] col^T", 0, 1, 10, 25, 576, 0},
    {"conv2 forward   W[20x250] col[250x64]", 0, 0, 20, 64, 250, 1},
    {"conv2 dW        dout[20x64] rows[64x250]", 0, 0, 20, 250, 64, 1},
    {"conv2 dcol      W^T[250x20] dout[20x64]", 1, 0, 250, 64, 20, 1},
    {"fc1 forward     x[128x320] W^T", 0, 1, 128, 50, 320, 0},
    {"fc1 dW          dout^T[50x128] x", 1, 0, 50, 320, 128, 0},
    {"fc1 dx          dout[128x50] W[50x320]", 0, 0, 128, 320, 50, 0},
    /* models/cifar10.model: one of F(4 x 4, 3 x 3)'s 36 products of a block of 128 tiles, U[xi]
     * [OC, C] * V[xi] [C, tiles], as conv2 (32 -> 32) and conv4 (64 -> 64) run them. */
    {"cifar conv2 Winograd U[32x32] V[32x128]", 0, 0, 32, 128, 32, 0},
    {"cifar conv4 Winograd U[64x64] V[64x128]", 0, 0, 64, 128, 64, 0},
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

/* Seconds per call, best of 50 rounds of `reps` calls. */
static double time_calls(const shape *s, int use_blas, const float *A, const float *B, float *C)
{
    int lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N, reps = 200;
    double best = 1e30;
    for (int round = 0; round < 50; round++) {
        double start = now_seconds();
        for (int r = 0; r < reps; r++) {
            if (use_blas)
                cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                            s->trans_b ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A,
                            lda, B, ldb, 1.0f, C, s->N);
            else
                cn_sgemm(s->trans_a, s->trans_b, s->M, s->N, s->K, A, lda, B, ldb, 1, C, s->N);
        }
        double took = (now_seconds() - start) / reps;
        best = took < best ? took : best;
    }
    return best;
}

/* The patch copies of one sample: the input [C,H,W] and kernel K of each convolution. */
typedef struct {
    const char *what;
    int which, C, H, W, K; /* which: 0 im2col, 1 im2row, 2 col2im */
} patch_shape;

static const patch_shape patch_shapes[] = {
    {"conv1 im2col    in[1x28x28] K5", 0, 1, 28, 28, 5},
    {"conv2 im2col    in[10x12x12] K5", 0, 10, 12, 12, 5},
    {"conv2 im2row    in[10x12x12] K5", 1, 10, 12, 12, 5},
    {"conv2 col2im    col[250x64]", 2, 10, 12, 12, 5},
};

/* Seconds per call, best of 50 rounds; *bytes gets the patch matrix's size. */
static double time_patches(const patch_shape *s, float *image, float *col, double *bytes)
{
    int P = (s->H - s->K + 1) * (s->W - s->K + 1), reps = 200;
    *bytes = 4.0 * P * s->C * s->K * s->K;
    double best = 1e30;
    for (int round = 0; round < 50; round++) {
        double start = now_seconds();
        for (int r = 0; r < reps; r++) {
            if (s->which == 0) cn_im2col(col, image, s->C, s->H, s->W, s->K);
            if (s->which == 1) cn_im2row(col, s->C * s->K * s->K, image, s->C, s->H, s->W, s->K);
            if (s->which == 2) cn_col2im(image, col, s->C, s->H, s->W, s->K);
        }
        double took = (now_seconds() - start) / reps;
        best = took < best ? took : best;
    }
    return best;
}

static int compare_patches(void)
{
    printf("%-42s %12s\n", "patch copy (one sample)", "cnnc us");
    for (size_t i = 0; i < sizeof patch_shapes / sizeof patch_shapes[0]; i++) {
        const patch_shape *s = &patch_shapes[i];
        size_t n = (size_t)s->C * s->K * s->K * s->H * s->W;
        float *image = random_floats((size_t)s->C * s->H * s->W);
        float *col = random_floats(n + CN_IM2ROW_SLACK);
        if (!image || !col) return 1;
        double bytes, took = time_patches(s, image, col, &bytes);
        printf("%-42s %5.2f (%3.0f GB/s of patches)\n", s->what, took * 1e6, 1e-9 * bytes / took);
        free(image), free(col);
    }
    return 0;
}

/* The gradients of a convolution from its max-pool's picks (2x2 windows), one sample: the
 * picks are those of random outputs, a third of their gradients zero (as after a ReLU). */
typedef struct {
    const char *what;
    int which, C, H, W, OC, K; /* which: 0 from the input, 1 from rows, 2 input's rows, 3 row2im */
} pick_shape;

static const pick_shape pick_shapes[] = {
    {"conv1 dW from the input  picks[10x144]", 0, 1, 28, 28, 10, 5},
    {"conv2 dW from rows       picks[20x16]", 1, 10, 12, 12, 20, 5},
    {"conv2 input rows         picks[20x16]", 2, 10, 12, 12, 20, 5},
    {"conv2 row2im             rows[64x250]", 3, 10, 12, 12, 20, 5},
};

/* Rows of L floats padded to an odd number of whole cache lines, as conv2d.c lays them out. */
static int padded(int L) { return ((L + 15) / 16 | 1) * 16; }

static void time_pick_call(const pick_shape *s, int Q, const float *a, const int32_t *at,
                           float *in, const float *w, float *rows, int32_t *scratch, float *dw)
{
    int OH = s->H - s->K + 1, OW = s->W - s->K + 1, L = s->C * s->K * s->K, ld = padded(L);
    switch (s->which) {
    case 0: cn_conv_picked_weight_gradient(s->OC, Q, a, at, in, s->C, s->H, s->W, s->K, dw); break;
    case 1: cn_picked_rows_weight_gradient(s->OC, Q, a, at, rows, L, ld, dw, L); break;
    case 2:
        cn_picks_by_position(s->OC, Q, a, at, OH * OW, scratch);
        cn_picked_rows_input_gradient(scratch, OH * OW, w, L, ld, rows);
        break;
    default: cn_row2im(in, rows, ld, s->C, s->H, s->W, s->K);
    }
}

/* n random floats on a cache line of their own. */
static float *random_aligned(size_t n)
{
    float *p = aligned_alloc(64, (n + 15) / 16 * 16 * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

static int compare_picks(void)
{
    printf("%-42s %12s\n", "gradients from pool picks (one sample)", "cnnc us");
    for (size_t i = 0; i < sizeof pick_shapes / sizeof pick_shapes[0]; i++) {
        const pick_shape *s = &pick_shapes[i];
        int OH = s->H - s->K + 1, OW = s->W - s->K + 1, Q = (OH / 2) * (OW / 2);
        size_t L = (size_t)s->C * s->K * s->K, ld = (size_t)padded((int)L);
        size_t picks = (size_t)s->OC * Q;
        float *in = random_floats((size_t)s->C * s->H * s->W), *w = random_aligned(s->OC * ld);
        float *out = random_floats((size_t)s->OC * OH * OW), *a = random_floats(picks);
        float *rows = random_aligned((size_t)OH * OW * ld + CN_IM2ROW_SLACK);
        float *dw = random_floats(s->OC * L);
        int32_t *at = malloc(picks * sizeof *at);
        int32_t *scratch = malloc(CN_PICK_SCRATCH_INTS(OH * OW, picks) * sizeof *scratch);
        if (!in || !w || !out || !a || !rows || !dw || !at || !scratch) return 1;
        cn_maxpool2_planes(a, at, out, s->OC, OH, OW);
        for (size_t j = 0; j < picks; j++) a[j] = j % 3 ? (float)rand() / (float)RAND_MAX : 0.0f;
        double best = 1e30;
        for (int round = 0; round < 50; round++) {
            double start = now_seconds();
            for (int r = 0; r < 200; r++) time_pick_call(s, Q, a, at, in, w, rows, scratch, dw);
            double took = (now_seconds() - start) / 200;
            best = took < best ? took : best;
        }
        printf("%-42s %5.2f\n", s->what, best * 1e6);
        free(in), free(w), free(out), free(a), free(rows), free(dw), free(at), free(scratch);
    }
    return 0;
}

/* Seconds per call of the bf16 product of the same shape (operands packed once, outside the
 * timing), best of 50 rounds; 0 when the CPU has no AVX512_BF16. */
static double time_bf16(const shape *s, const float *A, const float *B, float *C)
{
    if (!cn_bf16_supported() || !s->bf16) return 0;
    int Kp = (s->K + 1) / 2, reps = 200;
    cn_bf16_pair *Ap = malloc((size_t)s->M * Kp * 4), *Bp = malloc((size_t)Kp * s->N * 4);
    if (!Ap || !Bp) return 0;
    ptrdiff_t ai = Kp, ak = 1;
    if (s->trans_a) /* A is stored [K, M]: its row pairs, read transposed */
        cn_bf16_pack_row_pairs(Ap, A, s->K, s->M, s->M), ai = 1, ak = s->M;
    else
        cn_bf16_pack_rows(Ap, A, s->M, s->K, s->K);
    cn_bf16_pack_row_pairs(Bp, B, s->K, s->N, s->N);
    double best = 1e30;
    for (int round = 0; round < 50; round++) {
        double start = now_seconds();
        for (int r = 0; r < reps; r++)
            cn_gemm_bf16(s->M, s->N, Kp, Ap, ai, ak, Bp, s->N, 1, C, s->N);
        double took = (now_seconds() - start) / reps;
        best = took < best ? took : best;
    }
    free(Ap), free(Bp);
    return best;
}

int main(void)
{
    openblas_set_num_threads(1);
    double peak = 0;
    cn_error err = {0};
    if (cn_peak_gflops(1, &peak, &err) != 0) {
        fprintf(stderr, "gemm_compare: %s\n", err.msg);
        return 1;
    }
    printf("one thread; cnnc kernels: %s (FMA peak %.1f GFLOP/s); OpenBLAS: %s\n",
           cn_isa_name(cn_isa_active()), peak, openblas_get_config());
    printf("%-42s %12s %12s %8s %12s\n", "shape (M x N x K)", "cnnc us", "OpenBLAS us", "ratio",
           "cnnc bf16 us");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        float *A = random_floats((size_t)s->M * s->K), *B = random_floats((size_t)s->K * s->N);
        float *C = random_floats((size_t)s->M * s->N);
        if (!A || !B || !C) return 1;
        double ours = time_calls(s, 0, A, B, C), blas = time_calls(s, 1, A, B, C);
        double bf16 = time_bf16(s, A, B, C), gflop = 2e-9 * s->M * s->N * s->K;
        printf("%-42s %5.2f (%3.0f) %5.2f (%3.0f) %7.2fx", s->what, ours * 1e6, gflop / ours,
               blas * 1e6, gflop / blas, blas / ours);
        if (bf16 > 0)
            printf(" %5.2f (%3.0f)\n", bf16 * 1e6, gflop / bf16);
        else
            printf("    -\n");
        free(A), free(B), free(C);
    }
    printf("(microseconds per call, GFLOP/s in parentheses; ratio > 1: cnnc faster; bf16: the\n"
           " AVX512_BF16 product of the same shape with operands packed beforehand, for the\n"
           " products --precision bf16 computes so: '-' for the others)\n");
    return compare_patches() || compare_picks();
}
