/* test_gemm.c — cn_sgemm (cn_sgemm_rows_from, cn_sgemm_rows_at) and the patch kernels (im2col,
 * shifted planes, im2row, col2im, row2im) of the instruction set in use (tests/run.sh runs this
 * once per CNNC_ISA) against plain double-precision loops, over shapes that reach every tile,
 * band, dot-product block and tail the kernels have; the chained product and the transposes
 * (Winograd's weight gradient, and the one that stores around the caches). */
#include "testutil.h"

#include "kernels/gemm.h"
#include "layers/layers.h"

static void fill(float *x, size_t n, cn_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = cn_rng_uniform(rng) - 0.5f;
}

/* C = (acc ? C : 0) + op(A) op(B) in double, the plain way. */
static void reference(int ta, int tb, int M, int N, int K, const float *A, const float *B,
                      int acc, float *C)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = acc ? C[(size_t)i * N + j] : 0.0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                double b = tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
                s += a * b;
            }
            C[(size_t)i * N + j] = (float)s;
        }
}

static void check_shape(int ta, int tb, int M, int N, int K, cn_rng *rng)
{
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B);
    float *C = malloc(nc * sizeof *C), *want = malloc(nc * sizeof *want);
    assert_true(A && B && C && want);
    fill(A, na, rng), fill(B, nb, rng), fill(C, nc, rng);
    memcpy(want, C, nc * sizeof *C);
    reference(ta, tb, M, N, K, A, B, 1, want);
    cn_sgemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 1, C, N);
    double worst = tu_max_violation(C, want, nc, 1e-5 * (K + 1), 1e-5);
    if (worst > 1)
        fail_msg("%s%s %dx%dx%d: off by %.2f tolerances", ta ? "T" : "N", tb ? "T" : "N", M, N,
                 K, worst);
    reference(ta, tb, M, N, K, A, B, 0, want); /* and overwriting */
    cn_sgemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 0, C, N);
    assert_true(tu_max_violation(C, want, nc, 1e-5 * (K + 1), 1e-5) <= 1);
    if (tb) { /* dot products: each element the bits of its own 1 x 1 product, whatever block
               * (whole, part or single) took it */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float one;
                cn_sgemm(0, 1, 1, 1, K, A + (size_t)i * K, K, B + (size_t)j * K, K, 0, &one, 1);
                if (memcmp(&one, &C[(size_t)i * N + j], sizeof one) != 0)
                    fail_msg("NT %dx%dx%d: element (%d, %d) is %.9g, its own dot %.9g", M, N, K,
                             i, j, (double)C[(size_t)i * N + j], (double)one);
            }
    }
    if (!ta && !tb) { /* sums from one value per row: the bits of filling C and accumulating */
        float *start = malloc((size_t)M * sizeof *start);
        assert_non_null(start);
        fill(start, (size_t)M, rng);
        for (size_t i = 0; i < nc; i++) want[i] = start[i / (size_t)N];
        cn_sgemm(0, 0, M, N, K, A, K, B, N, 1, want, N);
        cn_sgemm_rows_from(M, N, K, A, K, B, N, start, C, N);
        assert_memory_equal(C, want, nc * sizeof *C);
        free(start);
    }
    free(A), free(B), free(C), free(want);
}

static void test_gemm_all_cases(void **state)
{
    (void)state;
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 9, 13, 16, 17, 20, 25, 31, 33, 50, 64, 70};
    int n = (int)(sizeof sizes / sizeof sizes[0]);
    cn_rng rng;
    cn_rng_seed(&rng, 4);
    for (int c = 0; c < 3; c++) /* NN, TN, NT */
        for (int t = 0; t < 60; t++) {
            int M = sizes[cn_rng_below(&rng, (uint32_t)n)];
            int N = sizes[cn_rng_below(&rng, (uint32_t)n)];
            int K = sizes[cn_rng_below(&rng, (uint32_t)n)];
            check_shape(c == 1, c == 2, M, N, K, &rng);
        }
    /* Every band height of every instruction set (tiles of 1 to 10 rows: NEON's 32 registers
     * hold 10), each with whole, last and leftover column tiles; and packed panels (rows of B
     * 512 floats apart, at least four bands). */
    for (int M = 1; M <= 26; M++) check_shape(0, 0, M, 3 * 16 + 5, 7, &rng);
    check_shape(0, 0, 70, 520, 40, &rng);
    check_shape(1, 0, 50, 515, 30, &rng);
    check_shape(0, 1, 10, 25, 576, &rng); /* conv1's weight gradient */
    for (int N = 24; N <= 27; N++) /* models/cifar10.model's conv1: 0 to 3 columns left */
        check_shape(0, 1, 32, N, 1024, &rng);
    check_shape(0, 1, 128, 50, 320, &rng); /* fc1's forward */
    check_shape(1, 0, 250, 64, 20, &rng);  /* conv2's input gradient */
    check_shape(0, 0, 20, 250, 64, &rng);  /* conv2's weight gradient: a masked last tile */
}

/* row2im's definition: every patch row entry added back, each element's terms in (ky, ox)
 * order; the rows are those of im2row with stride ld. */
static void row2im_reference(float *want, const float *rows, int ld, int C, int H, int W, int K)
{
    int OH = H - K + 1, OW = W - K + 1;
    memset(want, 0, (size_t)C * H * W * sizeof *want);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++)
                    for (int kx = 0; kx < K; kx++)
                        want[(c * H + oy + ky) * W + ox + kx] +=
                            rows[(size_t)(oy * OW + ox) * ld + (c * K + ky) * K + kx];
}

/* im2col and im2row (rows packed, and padded with NaNs between them) hold every patch entry
 * where their definitions put it; col2im adds every entry back in (ky, kx) order and row2im in
 * (ky, ox) order, exactly, never reading the padding. */
static void check_patches(int C, int H, int W, int K, cn_rng *rng)
{
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K, P = OH * OW, ld = CKK + 3;
    size_t HW = (size_t)C * H * W;
    float *in = malloc(HW * sizeof *in), *back = malloc(HW * 4), *want = calloc(HW, 4);
    float *col = malloc((size_t)CKK * P * 4);
    float *rows = malloc(((size_t)CKK * P + CN_IM2ROW_SLACK) * sizeof *rows);
    float *padded = malloc(((size_t)ld * P + CN_IM2ROW_SLACK) * sizeof *padded);
    assert_non_null(in), assert_non_null(back), assert_non_null(want);
    assert_non_null(col), assert_non_null(rows), assert_non_null(padded);
    fill(in, C * H * W, rng);
    cn_im2col(col, in, C, H, W, K);
    cn_im2row(rows, CKK, in, C, H, W, K);
    cn_im2row(padded, ld, in, C, H, W, K);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        int j = (c * K + ky) * K + kx, p = oy * OW + ox;
                        float x = in[(c * H + oy + ky) * W + ox + kx];
                        assert_true(col[(size_t)j * P + p] == x);
                        assert_true(rows[(size_t)p * CKK + j] == x);
                        assert_true(padded[(size_t)p * ld + j] == x);
                        col[(size_t)j * P + p] = x * (float)(1 + j % 7); /* unequal terms */
                        padded[(size_t)p * ld + j] = x * (float)(1 + (j + p) % 5);
                        want[(c * H + oy + ky) * W + ox + kx] += col[(size_t)j * P + p];
                    }
    cn_col2im(back, col, C, H, W, K);
    for (size_t i = 0; i < HW; i++) assert_true(back[i] == want[i]);
    for (int p = 0; p < P; p++)
        for (int j = CKK; j < ld; j++) padded[(size_t)p * ld + j] = NAN;
    row2im_reference(want, padded, ld, C, H, W, K);
    cn_row2im(back, padded, ld, C, H, W, K);
    for (size_t i = 0; i < HW; i++) assert_true(back[i] == want[i]);
    free(in), free(back), free(want), free(col), free(rows), free(padded);
}

static void test_patches_match_their_definition(void **state)
{
    (void)state;
    static const int shapes[][4] = {
        {10, 12, 12, 5}, /* conv2 of the seed's model */
        {1, 28, 28, 5},  /* conv1 */
        {3, 11, 13, 5},  {2, 14, 21, 4}, /* rows wider than a vector of 16 */
        {2, 20, 19, 3},  /* more rows than col2im keeps in registers */
        {1, 5, 5, 5},    /* one output position */
    };
    cn_rng rng;
    cn_rng_seed(&rng, 8);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_patches(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], &rng);
}

/* cn_sgemm_rows_at, rows of B at given offsets (overlapping, repeated, out of order), gives the
 * bits of cn_sgemm_rows_from and of cn_sgemm on those rows copied out: from a start per row, or
 * from zeros. */
static void check_rows_at(int M, int N, int K, cn_rng *rng)
{
    int L = N + 3 * K + 5; /* the floats the rows are taken from */
    float *A = malloc((size_t)M * K * 4), *pool = malloc((size_t)L * 4);
    float *B = malloc((size_t)K * N * 4), *start = malloc((size_t)M * 4);
    float *C = malloc((size_t)M * N * 4), *want = malloc((size_t)M * N * 4);
    int32_t *brow = malloc((size_t)K * sizeof *brow);
    assert_true(A && pool && B && start && C && want && brow);
    fill(A, (size_t)M * K, rng), fill(pool, (size_t)L, rng), fill(start, (size_t)M, rng);
    for (int k = 0; k < K; k++) {
        brow[k] = (int32_t)cn_rng_below(rng, (uint32_t)(L - N + 1));
        memcpy(B + (size_t)k * N, pool + brow[k], (size_t)N * 4);
    }
    cn_sgemm_rows_from(M, N, K, A, K, B, N, start, want, N);
    cn_sgemm_rows_at(M, N, K, A, K, pool, brow, start, C, N);
    assert_memory_equal(C, want, (size_t)M * N * sizeof *C);
    cn_sgemm(0, 0, M, N, K, A, K, B, N, 0, want, N);
    cn_sgemm_rows_at(M, N, K, A, K, pool, brow, NULL, C, N);
    assert_memory_equal(C, want, (size_t)M * N * sizeof *C);
    free(A), free(pool), free(B), free(start), free(C), free(want), free(brow);
}

/* The shifted planes hold in[c, y, x + kx] in plane (c,kx), and row (c,ky,kx) of the patch
 * matrix read from them (ky OW on) is im2col's row: the product through the planes has the
 * bits of the product with im2col's matrix. */
static void check_shifted_planes(int C, int H, int W, int K, int OC, cn_rng *rng)
{
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K, P = OH * OW;
    ptrdiff_t ps = (ptrdiff_t)H * OW + 7; /* a gap between the planes, never read */
    float *in = malloc((size_t)C * H * W * 4), *col = malloc((size_t)CKK * P * 4);
    float *planes = malloc((size_t)C * K * ps * 4), *weight = malloc((size_t)OC * CKK * 4);
    float *out = malloc((size_t)OC * P * 4), *want = malloc((size_t)OC * P * 4);
    int32_t *brow = malloc((size_t)CKK * sizeof *brow);
    assert_true(in && col && planes && weight && out && want && brow);
    fill(in, (size_t)C * H * W, rng), fill(weight, (size_t)OC * CKK, rng);
    for (ptrdiff_t i = 0; i < C * K * ps; i++) planes[i] = NAN;
    cn_shifted_planes(planes, ps, in, C, H, W, K);
    for (int c = 0; c < C; c++)
        for (int kx = 0; kx < K; kx++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < OW; x++)
                    assert_true(planes[(c * K + kx) * ps + y * OW + x] ==
                                in[(c * H + y) * W + x + kx]);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
                brow[(c * K + ky) * K + kx] = (int32_t)((c * K + kx) * ps + ky * OW);
    cn_im2col(col, in, C, H, W, K);
    cn_sgemm(0, 0, OC, P, CKK, weight, CKK, col, P, 0, want, P);
    cn_sgemm_rows_at(OC, P, CKK, weight, CKK, planes, brow, NULL, out, P);
    assert_memory_equal(out, want, (size_t)OC * P * sizeof *out);
    free(in), free(col), free(planes), free(weight), free(out), free(want), free(brow);
}

/* cn_pad_rows puts each input row between pad zeros, zero rows outside the input, and writes
 * nothing past its plane; cn_crop_rows takes the inside back. */
static void check_padding(int C, int H, int W, int pad, int y0, int rows, cn_rng *rng)
{
    int Wp = W + 2 * pad, Hp = H + 2 * pad;
    size_t n = (size_t)C * rows * Wp, whole = (size_t)C * Hp * Wp;
    float *in = malloc((size_t)C * H * W * 4), *dst = malloc((n + 1) * 4);
    float *plane = malloc(whole * 4), *back = malloc((size_t)C * H * W * 4);
    assert_true(in && dst && plane && back);
    fill(in, (size_t)C * H * W, rng);
    for (size_t i = 0; i <= n; i++) dst[i] = NAN;
    cn_pad_rows(dst, in, C, H, W, pad, y0, rows);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < rows; r++)
            for (int x = 0; x < Wp; x++) {
                int y = y0 + r - pad, xi = x - pad;
                float want = y >= 0 && y < H && xi >= 0 && xi < W ? in[(c * H + y) * W + xi] : 0.0f;
                assert_true(dst[((size_t)c * rows + r) * Wp + x] == want);
            }
    assert_true(isnan(dst[n]));
    cn_pad_rows(plane, in, C, H, W, pad, 0, Hp);
    cn_crop_rows(back, plane, C, H, W, pad);
    assert_memory_equal(back, in, (size_t)C * H * W * sizeof *in);
    free(in), free(dst), free(plane), free(back);
}

static void test_padding_copies(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 20);
    check_padding(3, 32, 32, 1, 0, 34, &rng); /* models/cifar10.model's conv1, whole */
    check_padding(2, 28, 28, 1, 5, 9, &rng);  /* a band inside */
    check_padding(2, 7, 37, 2, 4, 9, &rng);   /* a band past the bottom; rows over 2 vectors */
    check_padding(1, 5, 3, 0, 0, 5, &rng);    /* no padding, a row shorter than a vector */
    check_padding(4, 6, 17, 3, 0, 12, &rng);  /* zero rows above and below */
}

static void test_products_from_rows_at_offsets(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 16);
    /* every band height, with whole, masked-last, narrow and leftover column tiles */
    static const int widths[] = {1, 4, 5, 8, 12, 16, 21, 24, 32, 47, 48, 53, 64, 100};
    for (int M = 1; M <= 26; M++)
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
            check_rows_at(M, widths[w], 1 + (M * 7 + (int)w) % 30, &rng);
    static const int shapes[][5] = {
        {1, 28, 28, 5, 10},  /* the seed's conv1 */
        {10, 12, 12, 5, 20}, /* conv2: rows of 8 */
        {1, 30, 30, 3, 32},  /* models/fashion_mnist_best.model's conv1, padded */
        {3, 34, 34, 3, 32},  /* models/cifar10.model's conv1, padded */
        {2, 9, 13, 4, 7},    {3, 6, 5, 1, 4}, {2, 5, 5, 5, 3},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_shifted_planes(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                             shapes[i][4], &rng);
}

/* The value in the low (half 0) or high (half 1) half of a pair. */
static float pair_half(cn_bf16_pair p, int half)
{
    uint32_t u = half ? p & 0xffff0000u : p << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* want = (C or 0) + A B over the values rounded to bf16, in double. */
static void bf16_reference(int M, int N, int K, const float *A, const float *B, const float *C,
                           float *want)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = C ? C[(size_t)i * N + j] : 0.0;
            for (int k = 0; k < K; k++)
                sum += (double)tu_bf16_round(A[(size_t)i * K + k]) *
                       tu_bf16_round(B[(size_t)k * N + j]);
            want[(size_t)i * N + j] = (float)sum;
        }
}

/* Both packings put each rounded value where their definitions say, zeros in the padding; the
 * product of packed operands, A read either way, matches double-precision sums of the rounded
 * values. */
static void check_bf16_shape(int M, int N, int K, cn_rng *rng)
{
    int Kp = (K + 1) / 2;
    float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)K * N * 4);
    float *C = malloc((size_t)M * N * 4), *want = malloc((size_t)M * N * 4);
    cn_bf16_pair *Ap = malloc((size_t)M * Kp * 4), *Bp = malloc((size_t)Kp * N * 4);
    assert_true(A && B && C && want && Ap && Bp);
    fill(A, (size_t)M * K, rng), fill(B, (size_t)K * N, rng), fill(C, (size_t)M * N, rng);
    cn_bf16_pack_rows(Ap, A, M, K, K);
    cn_bf16_pack_row_pairs(Bp, B, K, N, N);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < 2 * Kp; k++)
            assert_true(pair_half(Ap[(size_t)i * Kp + k / 2], k % 2) ==
                        (k < K ? tu_bf16_round(A[(size_t)i * K + k]) : 0.0f));
    for (int k = 0; k < 2 * Kp; k++)
        for (int j = 0; j < N; j++)
            assert_true(pair_half(Bp[(size_t)(k / 2) * N + j], k % 2) ==
                        (k < K ? tu_bf16_round(B[(size_t)k * N + j]) : 0.0f));
    bf16_reference(M, N, K, A, B, C, want);
    cn_gemm_bf16(M, N, Kp, Ap, Kp, 1, Bp, N, 1, C, N);
    double worst = tu_max_violation(C, want, (size_t)M * N, 1e-5 * (K + 1), 1e-5);
    if (worst > 1) fail_msg("bf16 %dx%dx%d: off by %.2f tolerances", M, N, K, worst);
    /* A from the row pairs of A^T [K, M], read transposed; C overwritten */
    float *T = malloc((size_t)K * M * 4);
    cn_bf16_pair *Tp = malloc((size_t)Kp * M * 4);
    assert_true(T && Tp);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) T[(size_t)k * M + i] = A[(size_t)i * K + k];
    cn_bf16_pack_row_pairs(Tp, T, K, M, M);
    bf16_reference(M, N, K, A, B, NULL, want);
    cn_gemm_bf16(M, N, Kp, Tp, 1, M, Bp, N, 0, C, N);
    worst = tu_max_violation(C, want, (size_t)M * N, 1e-5 * (K + 1), 1e-5);
    if (worst > 1) fail_msg("bf16 A^T %dx%dx%d: off by %.2f tolerances", M, N, K, worst);
    /* sums from one value per row: the bits of filling C with it and accumulating */
    float *start = T; /* M values */
    fill(start, (size_t)M, rng);
    for (size_t i = 0; i < (size_t)M * N; i++) want[i] = start[i / (size_t)N];
    cn_gemm_bf16(M, N, Kp, Ap, Kp, 1, Bp, N, 1, want, N);
    cn_gemm_bf16_rows_from(M, N, Kp, Ap, Kp, 1, Bp, N, start, C, N);
    assert_memory_equal(C, want, (size_t)M * N * sizeof *C);
    free(A), free(B), free(C), free(want), free(Ap), free(Bp), free(T), free(Tp);
}

static void test_bf16_products(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip(); /* this CPU trains in fp32 only */
    static const int shapes[][3] = {
        {20, 64, 250}, {20, 250, 64}, {250, 64, 20}, {10, 576, 25}, /* the seed's convolutions */
        {1, 1, 1},     {7, 33, 3},    {13, 17, 31},  {6, 16, 2},   {5, 47, 9},
    };
    cn_rng rng;
    cn_rng_seed(&rng, 12);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_bf16_shape(shapes[i][0], shapes[i][1], shapes[i][2], &rng);
}

/* cn_bf16_im2row_pairs from a cn_bf16_pair_columns plane: row (oy, j) holds the patch entries
 * of positions (oy, 2j) (low halves) and (oy, 2j+1) (high halves, zero past an odd row's end),
 * each value x's padded plane rounded to bf16. */
static void check_position_pairs(int C, int H, int W, int K, int pad, cn_rng *rng)
{
    int Hv = H + 2 * pad, Wv = W + 2 * pad, OH = Hv - K + 1, OW = Wv - K + 1, CKK = C * K * K;
    int Q = OH * ((OW + 1) / 2);
    float *x = malloc((size_t)C * H * W * sizeof *x);
    cn_bf16_pair *plane = malloc((size_t)C * Hv * Wv * sizeof *plane);
    cn_bf16_pair *rows = malloc(((size_t)Q * CKK + CN_IM2ROW_SLACK) * sizeof *rows);
    assert_true(x && plane && rows);
    fill(x, (size_t)C * H * W, rng);
    cn_bf16_pair_columns(plane, x, C, H, W, pad);
    cn_bf16_im2row_pairs(rows, plane, C, Hv, Wv, K);
    for (int q = 0; q < Q; q++)
        for (int k = 0; k < CKK; k++)
            for (int half = 0; half < 2; half++) {
                int oy = q / ((OW + 1) / 2), ox = 2 * (q % ((OW + 1) / 2)) + half;
                int c = k / (K * K), y = oy + k / K % K - pad, xx = ox + k % K - pad;
                int inside = ox < OW && y >= 0 && y < H && xx >= 0 && xx < W;
                float want = inside ? tu_bf16_round(x[((size_t)c * H + y) * W + xx]) : 0.0f;
                if (pair_half(rows[(size_t)q * CKK + k], half) != want)
                    fail_msg("im2row pairs C%d %dx%d K%d pad %d: row %d entry %d half %d", C, H,
                             W, K, pad, q, k, half);
            }
    free(x), free(plane), free(rows);
}

static void test_bf16_position_pairs(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip();
    cn_rng rng;
    cn_rng_seed(&rng, 13);
    check_position_pairs(3, 6, 6, 3, 1, &rng); /* even output width */
    check_position_pairs(4, 7, 7, 3, 1, &rng); /* odd: the last of each row pairs with zero */
    check_position_pairs(2, 9, 12, 5, 0, &rng);
    check_position_pairs(1, 5, 13, 9, 2, &rng); /* K over 8: two pieces a kernel row */
}

/* cn_bf16_pool_gradient_pairs: the words cn_bf16_pack_rows and cn_bf16_pair_channels (padded
 * by qpad) make of the max-pool's input gradient g [C, H, W] (zeros, and 0 + d at each window's
 * pick: a -0 turns +0), without g; picks drawn anywhere in their K x K windows, S >= K apart. */
static void check_pool_pairs(int C, int H, int W, int K, int S, int qpad, cn_rng *rng)
{
    cn_pool_shape ps = cn_pool_shape_of(C, H, W, K, S);
    int Q = ps.OH * ps.OW, P = H * W, pairs = cn_bf16_pairs(W);
    size_t np = (size_t)C * H * pairs;
    size_t nq = (size_t)cn_bf16_pairs(C) * (H + 2 * qpad) * (W + 2 * qpad);
    float *d = malloc((size_t)C * Q * sizeof *d), *g = calloc((size_t)C * P, sizeof *g);
    int32_t *at = malloc((size_t)C * Q * sizeof *at);
    cn_bf16_pair *dyp = malloc(np * 4), *dyq = malloc(nq * 4), *wp = malloc(np * 4);
    cn_bf16_pair *wq = malloc(nq * 4), *wt = malloc(np * 4);
    assert_true(d && g && at && dyp && dyq && wp && wq && wt);
    fill(d, (size_t)C * Q, rng);
    d[0] = -0.0f;
    for (int c = 0; c < C; c++)
        for (int q = 0; q < Q; q++) {
            int y = q / ps.OW * S + (int)cn_rng_below(rng, (uint32_t)K);
            int x = q % ps.OW * S + (int)cn_rng_below(rng, (uint32_t)K);
            at[c * Q + q] = y * W + x;
            g[(size_t)c * P + y * W + x] += d[c * Q + q];
        }
    memset(dyp, 0xa5, np * 4), memset(dyq, 0xa5, nq * 4); /* every word must be written */
    cn_bf16_pack_rows(wp, g, C * H, W, W);
    cn_bf16_pair_channels(wq, g, C, H, W, qpad);
    cn_bf16_pool_gradient_pairs(dyp, 0, dyq, qpad, d, at, &ps);
    if (memcmp(dyp, wp, np * 4) != 0 || memcmp(dyq, wq, nq * 4) != 0)
        fail_msg("pool pairs C=%d %dx%d K=%d S=%d pad %d: not the packed gradient's words", C, H,
                 W, K, S, qpad);
    cn_bf16_pool_gradient_pairs(dyp, 0, NULL, qpad, d, at, &ps); /* without dyq */
    assert_memory_equal(dyp, wp, np * 4);
    cn_bf16_transpose(wt, wp, C, H * pairs); /* turned round: [H pairs, C] */
    memset(dyp, 0xa5, np * 4);
    cn_bf16_pool_gradient_pairs(dyp, 1, NULL, qpad, d, at, &ps);
    if (memcmp(dyp, wt, np * 4) != 0)
        fail_msg("pool pairs C=%d %dx%d K=%d S=%d turned round: not the packed gradient's words",
                 C, H, W, K, S);
    free(d), free(g), free(at), free(dyp), free(dyq), free(wp), free(wq), free(wt);
}

static void test_bf16_pool_pairs(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip();
    cn_rng rng;
    cn_rng_seed(&rng, 17);
    check_pool_pairs(6, 14, 14, 2, 2, 0, &rng);
    check_pool_pairs(5, 7, 7, 2, 2, 0, &rng);   /* a row and column left out; odd channels */
    check_pool_pairs(3, 9, 11, 3, 3, 0, &rng);  /* picks up to two rows down */
    check_pool_pairs(4, 10, 9, 2, 3, 0, &rng);  /* windows further apart than wide */
    check_pool_pairs(17, 5, 40, 2, 2, 0, &rng); /* more than 16 windows a row */
    check_pool_pairs(5, 7, 7, 2, 2, 1, &rng);   /* channel pairs padded by 1 and 2 */
    check_pool_pairs(3, 9, 11, 3, 3, 2, &rng);
}

/* cn_sgemm_chained: C + (the product of k's first chain of CN_CHAIN, from zero) + (the next
 * chain's) + ..., each chain as cn_sgemm sums it and the chains added in order, bit for bit; and
 * within fp32 rounding of the double-precision product. */
static void check_chained(int M, int N, int K, cn_rng *rng)
{
    size_t nc = (size_t)M * N;
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C = malloc(nc * sizeof *C), *want = malloc(nc * sizeof *want);
    float *part = malloc(nc * sizeof *part), *exact = malloc(nc * sizeof *exact);
    assert_true(A && B && C && want && part && exact);
    fill(A, (size_t)M * K, rng), fill(B, (size_t)K * N, rng), fill(C, nc, rng);
    memcpy(want, C, nc * sizeof *C), memcpy(exact, C, nc * sizeof *C);
    for (int k0 = 0; k0 < K; k0 += CN_CHAIN) {
        int kc = K - k0 < CN_CHAIN ? K - k0 : CN_CHAIN;
        cn_sgemm(0, 0, M, N, kc, A + k0, K, B + (size_t)k0 * N, N, 0, part, N);
        for (size_t i = 0; i < nc; i++) want[i] += part[i];
    }
    reference(0, 0, M, N, K, A, B, 1, exact);
    cn_sgemm_chained(M, N, K, A, K, B, N, C, N);
    if (memcmp(C, want, nc * sizeof *C) != 0)
        fail_msg("chained %dx%dx%d: not the chains' sums added in order", M, N, K);
    assert_true(tu_max_violation(C, exact, nc, 1e-5 * (K + 1), 1e-5) <= 1);
    free(A), free(B), free(C), free(want), free(part), free(exact);
}

/* B^T of the six values d, in wino4_bt's order (winograd_kernels.inc). */
static void bt6(float r[6], const float d[6])
{
    float a = d[4] - d[2], b = d[3] - d[1];
    r[0] = 4.0f * (d[0] - d[2]) + a;
    r[1] = (d[3] + d[4]) - 4.0f * (d[1] + d[2]);
    r[2] = (d[4] - d[3]) + 4.0f * (d[1] - d[2]);
    r[3] = a + 2.0f * b;
    r[4] = a - 2.0f * b;
    r[5] = 4.0f * (d[1] - d[3]) + (d[5] - d[3]);
}

/* cn_winograd4_input against B^T d B of each tile's 6 x 6 block, down the columns then across,
 * in scalar code: bit for bit (multiplications by 2 and 4 only), for planes IH x IW padded by
 * pad, `planes` of them a call (the same channel of a few samples). Its kernels: in registers for
 * rows of 4 and 8 tiles (AVX-512), in two passes through scratch otherwise. */
static void check_winograd4_input(int IH, int IW, int pad, int planes, cn_rng *rng)
{
    int OH = IH + 2 * pad - 2, OW = IW + 2 * pad - 2, TH = (OH + 3) / 4, TW = (OW + 3) / 4;
    int T = planes * TH * TW;
    size_t stride = (size_t)IH * IW + 7, xs = (size_t)T + 5;
    cn_winograd_plane s = {IH, IW, pad, OH, OW, TH, TW, planes, (ptrdiff_t)stride, 0};
    float *x = malloc((stride * planes + 64) * sizeof *x), *v = malloc(36 * xs * sizeof *v);
    float *row = malloc(cn_winograd4_row_floats(&s) * sizeof *row);
    assert_true(x && v && row);
    fill(x, stride * planes + 64, rng);
    for (size_t i = 0; i < 36 * xs; i++) v[i] = NAN;
    cn_winograd4_input(v, (ptrdiff_t)xs, x, &s, row);
    for (int t = 0; t < T; t++) {
        int p = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        float cols[6][6], want[6][6]; /* B^T down column c, then across row i */
        for (int c = 0; c < 6; c++) {
            float d[6];
            for (int r = 0; r < 6; r++) {
                int y = 4 * ty - pad + r, xx = 4 * tx - pad + c;
                d[r] = y >= 0 && y < IH && xx >= 0 && xx < IW
                           ? x[(size_t)p * stride + (size_t)y * IW + xx] : 0.0f;
            }
            float r6[6];
            bt6(r6, d);
            for (int i = 0; i < 6; i++) cols[i][c] = r6[i];
        }
        for (int i = 0; i < 6; i++) bt6(want[i], cols[i]);
        for (int xi = 0; xi < 36; xi++)
            if (memcmp(&v[xi * xs + t], &want[xi / 6][xi % 6], sizeof(float)) != 0)
                fail_msg("winograd4 input %dx%d pad %d x%d: tile %d entry %d is %g, not %g", IH,
                         IW, pad, planes, t, xi, v[xi * xs + t], want[xi / 6][xi % 6]);
    }
    for (int xi = 0; xi < 36; xi++)
        for (size_t t = (size_t)T; t < xs; t++) assert_true(isnan(v[xi * xs + t]));
    free(x), free(v), free(row);
}

static void test_winograd4_input_transform(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 41);
    check_winograd4_input(32, 32, 1, 1, &rng); /* rows of 8 tiles: in registers on AVX-512 */
    check_winograd4_input(16, 16, 1, 1, &rng); /* rows of 4 */
    check_winograd4_input(15, 16, 1, 1, &rng); /* an odd last row of tiles */
    check_winograd4_input(13, 15, 1, 1, &rng); /* a last column short of the window */
    check_winograd4_input(8, 16, 1, 3, &rng);  /* two rows of tiles a plane, 3 planes a call */
    check_winograd4_input(30, 30, 2, 1, &rng); /* padding 2: rows of 8 tiles */
    check_winograd4_input(14, 14, 2, 2, &rng); /* padding 2: rows of 4, 2 planes a call */
    check_winograd4_input(6, 6, 2, 3, &rng);   /* padding 2: rows of 2 (in registers on AVX2) */
    check_winograd4_input(16, 16, 0, 2, &rng); /* valid, rows of 4 tiles cut by the edge */
    check_winograd4_input(14, 32, 0, 1, &rng); /* valid, rows of 8 */
    check_winograd4_input(18, 18, 0, 1, &rng); /* valid: columns past the window (two passes) */
    check_winograd4_input(34, 34, 0, 1, &rng);
    check_winograd4_input(7, 7, 1, 4, &rng);   /* rows of 2 tiles, 4 planes a call */
    check_winograd4_input(9, 70, 1, 1, &rng);  /* rows of 18 tiles */
}

/* A y of the four values y (F(4x4, 3x3)'s A^T transposed), in wino4_a's order
 * (winograd_kernels.inc). */
static void a4(float r[6], const float y[4])
{
    float a = y[0] + y[2], b = y[1] + y[3], c = y[0] + 4.0f * y[2];
    float d = 2.0f * y[1] + 8.0f * y[3];
    r[0] = y[0], r[1] = a + b, r[2] = a - b, r[3] = c + d, r[4] = c - d, r[5] = y[3];
}

/* cn_winograd4_gradient_rows (the weight gradient's transform of the output gradient,
 * positions as rows, channels as columns) against A dY A^T of each tile's 4 x 4 block of each
 * channel, down the columns then across, in scalar code: bit for bit, for C channels of
 * gradients OH x OW; channel counts of part vectors, one and several on every instruction set;
 * tiles cut by the edges (zeros past them); nothing written past the tiles' rows. */
static void check_winograd4_gradient_rows(int C, int OH, int OW, cn_rng *rng)
{
    int TH = (OH + 3) / 4, TW = (OW + 3) / 4, T = TH * TW, PW = 4 * TW;
    size_t xs = (size_t)T * C + 5, n = (size_t)4 * TH * PW * C;
    cn_winograd_plane s = {OH + 2, OW + 2, 1, OH, OW, TH, TW, 1, 0, 0};
    float *d = calloc(n, sizeof *d), *m = malloc(36 * xs * sizeof *m);
    assert_true(d && m);
    for (int y = 0; y < OH; y++) /* the gradient inside its zeros, a channel a column */
        for (int i = 0; i < OW; i++)
            for (int c = 0; c < C; c++)
                d[((size_t)y * PW + i) * C + c] = 2.0f * cn_rng_uniform(rng) - 1.0f;
    for (size_t i = 0; i < 36 * xs; i++) m[i] = NAN;
    cn_winograd4_gradient_rows(m, (ptrdiff_t)xs, d, &s, C);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            float cols[6][4], want[6][6]; /* A down column j, then across row i */
            for (int j = 0; j < 4; j++) {
                float y[4], r6[6];
                for (int r = 0; r < 4; r++)
                    y[r] = d[((size_t)(4 * (t / TW) + r) * PW + 4 * (t % TW) + j) * C + c];
                a4(r6, y);
                for (int i = 0; i < 6; i++) cols[i][j] = r6[i];
            }
            for (int i = 0; i < 6; i++) a4(want[i], cols[i]);
            for (int xi = 0; xi < 36; xi++)
                if (memcmp(&m[xi * xs + (size_t)t * C + c], &want[xi / 6][xi % 6], sizeof(float)))
                    fail_msg("winograd4 gradient rows %d x %dx%d: tile %d channel %d entry %d",
                             C, OH, OW, t, c, xi);
        }
    for (int xi = 0; xi < 36; xi++)
        for (size_t i = (size_t)T * C; i < xs; i++) assert_true(isnan(m[xi * xs + i]));
    free(d), free(m);
}

static void test_winograd4_gradient_rows(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 43);
    check_winograd4_gradient_rows(32, 32, 32, &rng); /* models/cifar10.model's */
    check_winograd4_gradient_rows(64, 16, 16, &rng);
    check_winograd4_gradient_rows(8, 7, 9, &rng);    /* part vectors, tiles cut by the edges */
    check_winograd4_gradient_rows(20, 5, 6, &rng);
    check_winograd4_gradient_rows(3, 14, 14, &rng);  /* fewer channels than a vector */
    check_winograd4_gradient_rows(17, 1, 1, &rng);   /* a single position */
}

typedef void transpose_fn(float *, int, const float *, int, int, int);

/* A transpose: every element where it belongs, nothing written between the rows; dst rows of
 * rows + gap floats from a 64-byte boundary plus shift floats (cn_transpose_streamed stores
 * whole vectors around the caches only where they are aligned). */
static void check_transpose_to(transpose_fn *f, int rows, int cols, int gap, int shift,
                               cn_rng *rng)
{
    int lds = cols + 3, ldd = rows + gap;
    size_t nd = (size_t)cols * ldd + (size_t)shift;
    float *src = malloc((size_t)rows * lds * sizeof *src);
    float *mem = aligned_alloc(64, cn_whole_lines(nd) * sizeof *mem), *dst = mem + shift;
    assert_true(src && mem);
    fill(src, (size_t)rows * lds, rng);
    for (size_t i = 0; i < nd; i++) mem[i] = NAN;
    f(dst, ldd, src, lds, rows, cols);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < ldd; i++) {
            float got = dst[(size_t)j * ldd + i];
            if (i < rows ? got != src[(size_t)i * lds + j] : !isnan(got))
                fail_msg("transpose %dx%d (gap %d, shift %d): [%d][%d] is %g", rows, cols, gap,
                         shift, j, i, got);
        }
    for (int i = 0; i < shift; i++) assert_true(isnan(mem[i]));
    free(src), free(mem);
}

/* A streamed copy: every float, nothing around it, on aligned and unaligned destinations. */
static void check_copy_streamed(size_t n, int shift, cn_rng *rng)
{
    float *src = malloc((n + 1) * sizeof *src);
    float *mem = aligned_alloc(64, cn_whole_lines(n + (size_t)shift + 1) * sizeof *mem);
    assert_true(src && mem);
    fill(src, n, rng);
    size_t all = cn_whole_lines(n + (size_t)shift + 1);
    for (size_t i = 0; i < all; i++) mem[i] = NAN;
    cn_copy_streamed(mem + shift, src, n);
    for (size_t i = 0; i < all; i++) {
        int inside = i >= (size_t)shift && i < (size_t)shift + n;
        if (inside ? mem[i] != src[i - (size_t)shift] : !isnan(mem[i]))
            fail_msg("streamed copy of %zu (shift %d): [%zu] is %g", n, shift, i, mem[i]);
    }
    free(src), free(mem);
}

static void check_transpose(int rows, int cols, cn_rng *rng)
{
    check_transpose_to(cn_transpose, rows, cols, 5, 0, rng);
    /* streamed: rows of whole, aligned vectors (gap 0 on sizes of 16s, or 16 more), and the
     * same with every row off the boundary (the ordinary stores) */
    check_transpose_to(cn_transpose_streamed, rows, cols, rows % 16 ? 16 - rows % 16 : 0, 0, rng);
    check_transpose_to(cn_transpose_streamed, rows, cols, 16 + (rows % 16 ? 16 - rows % 16 : 0),
                       0, rng);
    check_transpose_to(cn_transpose_streamed, rows, cols, 5, 3, rng);
    check_copy_streamed((size_t)rows * cols, 0, rng);
    check_copy_streamed((size_t)rows * cols + 5, 3, rng);
}

static void test_chained_products_and_transposes(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 21);
    /* every band height (1 to 7 rows), whole and part vectors, chains whole and cut short */
    static const int Ks[] = {1, CN_CHAIN - 1, CN_CHAIN, CN_CHAIN + 1, 3 * CN_CHAIN + 5, 256};
    for (int M = 1; M <= 15; M++)
        for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++)
            check_chained(M, 1 + (M * 7) % 70, Ks[k], &rng);
    check_chained(32, 32, 256, &rng); /* a weight gradient of F(2x2, 3x3): 32 -> 32 channels */
    check_chained(64, 48, 100, &rng);
    static const int sizes[] = {1, 3, 4, 8, 15, 16, 17, 31, 32, 33, 40, 64};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
            check_transpose(sizes[i], sizes[j], &rng);
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_all_cases),
        cmocka_unit_test(test_patches_match_their_definition),
        cmocka_unit_test(test_products_from_rows_at_offsets),
        cmocka_unit_test(test_padding_copies),
        cmocka_unit_test(test_bf16_products),
        cmocka_unit_test(test_bf16_position_pairs),
        cmocka_unit_test(test_bf16_pool_pairs),
        cmocka_unit_test(test_chained_products_and_transposes),
        cmocka_unit_test(test_winograd4_input_transform),
        cmocka_unit_test(test_winograd4_gradient_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
