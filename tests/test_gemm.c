/* test_gemm.c — cn_sgemm and the patch kernels (im2col, im2row, col2im) of the instruction set in
 * use (tests/run.sh runs this once per CNNC_ISA) against plain double-precision loops, over
 * shapes that reach every tile, band, dot-product block and tail the kernels have. */
#include "testutil.h"

#include "gemm.h"

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
    check_shape(0, 1, 10, 25, 576, &rng); /* conv1's weight gradient */
    check_shape(0, 1, 128, 50, 320, &rng); /* fc1's forward */
    check_shape(1, 0, 250, 64, 20, &rng);  /* conv2's input gradient */
    check_shape(0, 0, 20, 250, 64, &rng);  /* conv2's weight gradient: a masked last tile */
}

/* im2col and im2row hold every patch entry where their definitions put it, and col2im adds
 * every entry back in (ky, kx) order, exactly. */
static void check_patches(int C, int H, int W, int K, cn_rng *rng)
{
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K, P = OH * OW;
    float *in = malloc((size_t)C * H * W * sizeof *in), *back = malloc((size_t)C * H * W * 4);
    float *want = calloc((size_t)C * H * W, sizeof *want), *col = malloc((size_t)CKK * P * 4);
    float *rows = malloc(((size_t)CKK * P + CN_IM2ROW_SLACK) * sizeof *rows);
    assert_non_null(in), assert_non_null(back), assert_non_null(want);
    assert_non_null(col), assert_non_null(rows);
    fill(in, C * H * W, rng);
    cn_im2col(col, in, C, H, W, K);
    cn_im2row(rows, in, C, H, W, K);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        int j = (c * K + ky) * K + kx, p = oy * OW + ox;
                        float x = in[(c * H + oy + ky) * W + ox + kx];
                        assert_true(col[(size_t)j * P + p] == x);
                        assert_true(rows[(size_t)p * CKK + j] == x);
                        col[(size_t)j * P + p] = x * (float)(1 + j % 7); /* unequal terms */
                        want[(c * H + oy + ky) * W + ox + kx] += col[(size_t)j * P + p];
                    }
    cn_col2im(back, col, C, H, W, K);
    for (int i = 0; i < C * H * W; i++) assert_true(back[i] == want[i]);
    free(in), free(back), free(want), free(col), free(rows);
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

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_all_cases),
        cmocka_unit_test(test_patches_match_their_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
