/* test_layers.c — every layer kernel of src/layers/layers.h against PyTorch (tests/fixtures/
 * layers.safetensors, conv_stride_padding.safetensors for convolutions with stride, padding
 * or no bias, label_smoothing.safetensors for the smoothed loss, written by
 * tools/gen_fixtures.py) and against central finite differences
 * of L = sum(y * r). It also checks the backward contract: parameter gradients accumulate (+=),
 * input gradients are overwritten (=).
 * It does not test models, trainers or the safetensors reader beyond loading the fixture.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|, elementwise), against PyTorch:
 *   exact (0, 0)              max-pool (values, argmax, gradient), relu, nll gradient: copies
 *   atol 1e-5, rtol 1e-4      conv2d: float sums of up to 250 (input gradient) and 128 (weight
 *                             gradient) terms, whose order is the gemm's to choose
 *   atol 2e-6, rtol 2e-5      batchnorm, linear, log_softmax, nll loss
 * Against central finite differences (tu_fd_check, testutil.h: eps 1e-2 in float, L summed in
 * double): atol 2e-4, rtol 1e-3 of the finite difference;
 *   at least 80% of the points of every array must be checked after skipping relu kinks
 *   (|x| < 2 eps) and max-pool near ties (top two of a window within 2 eps).
 * The fixture folder is tests/fixtures, or $CNNC_FIXTURES. */
#include "testutil.h"
#include "kernels/conv.h"
#include "kernels/winograd.h"
#include "layers/layers.h"

#define PT_ATOL 2e-6
#define PT_RTOL 2e-5
#define CONV_ATOL 1e-5
#define CONV_RTOL 1e-4
#define CONV_WEIGHT_SCALE 1e-5 /* as test_model_random's PT_SCALE */
#define FD_EPS TU_FD_EPS

static cn_safetensors *fixture;

/* ---------------------------------------------------------------- allocations and fixture */

#define MAX_ALLOCS 512
static void *allocs[MAX_ALLOCS];
static int num_allocs;

static void *tracked(size_t bytes)
{
    assert_true(num_allocs < MAX_ALLOCS);
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    allocs[num_allocs++] = p;
    return p;
}

static float *zeros(size_t n) { return tracked(n * sizeof(float)); }

static float *nans(size_t n)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static int free_allocs(void **state)
{
    (void)state;
    while (num_allocs > 0) free(allocs[--num_allocs]);
    return 0;
}

static const cn_tensor_ref *fx_tensor(const char *prefix, const char *field, size_t *count)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, field);
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    if (!t) fail_msg("fixture tensor %s missing: rerun tools/gen_fixtures.py", name);
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    *count = n;
    return t;
}

/* The float tensor prefix.field, copied (the fixture's bytes need not be aligned); it must hold
 * exactly n values. */
static float *fx_f32(const char *prefix, const char *field, size_t n)
{
    size_t count;
    const cn_tensor_ref *t = fx_tensor(prefix, field, &count);
    assert_int_equal(t->dtype, CN_F32);
    assert_int_equal(count, n);
    float *p = zeros(n);
    memcpy(p, t->data, n * sizeof *p);
    return p;
}

static int64_t *fx_i64(const char *prefix, const char *field, size_t n)
{
    size_t count;
    const cn_tensor_ref *t = fx_tensor(prefix, field, &count);
    assert_int_equal(t->dtype, CN_I64);
    assert_int_equal(count, n);
    int64_t *p = tracked(n * sizeof *p);
    memcpy(p, t->data, n * sizeof *p);
    return p;
}

static const char *fx_meta(const char *prefix, const char *key)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, key);
    const char *v = cn_safetensors_meta(fixture, name);
    if (!v) fail_msg("fixture metadata %s missing", name);
    return v;
}

static int fx_int(const char *prefix, const char *key) { return atoi(fx_meta(prefix, key)); }

/* The metadata prefix.key as an int, or fallback when the fixture has no such key. */
static int fx_int_or(const char *prefix, const char *key, int fallback)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, key);
    const char *v = cn_safetensors_meta(fixture, name);
    return v ? atoi(v) : fallback;
}

static int load_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("layers.safetensors");
    return fixture ? 0 : -1;
}

static int load_conv_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("conv_stride_padding.safetensors");
    return fixture ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    cn_safetensors_free(fixture);
    return 0;
}

/* ---------------------------------------------------------------- comparisons */

static void expect_pt(const char *what, const float *got, const float *want, size_t n)
{
    tu_expect_close(what, got, want, n, PT_ATOL, PT_RTOL);
}

static void expect_conv(const char *what, const float *got, const float *want, size_t n)
{
    tu_expect_close(what, got, want, n, CONV_ATOL, CONV_RTOL);
}

/* The weight gradient against PyTorch's: the same, with CONV_WEIGHT_SCALE of the tensor's
 * largest value as the absolute part where that is larger. Winograd's layers take it by
 * F(4x4, 3x3), whose transforms sum terms up to 64 times larger than the direct sums' and
 * fold them back with sixths and 24ths: on conv_stride_padding's k3p1 (largest 39.7) an
 * element of 0.15 lands 4.4e-5 from PyTorch's, 1.1e-6 of the largest (about 12 units in the
 * last place of it), past an absolute 1e-5 alone (docs/speed.md, "The weight gradient by
 * F(4 x 4, 3 x 3)"); 0.14 of this tolerance (0.15 with the portable kernels). */
static void expect_conv_weights(const char *what, const float *got, const float *want,
                                size_t n)
{
    double largest = tu_largest_abs(want, n);
    double atol = CONV_WEIGHT_SCALE * largest > CONV_ATOL ? CONV_WEIGHT_SCALE * largest
                                                          : CONV_ATOL;
    tu_expect_close(what, got, want, n, atol, CONV_RTOL);
}

static void expect_exact(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s[%zu]: got %.9g, want exactly %.9g", what, i, got[i],
                                        want[i]);
}

/* want * 2, for checking that a second backward call accumulated. */
static float *twice(const float *want, size_t n)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * want[i];
    return p;
}

/* ---------------------------------------------------------------- conv2d */

/* A fixture's convolution: stride 1, no padding and a bias unless its metadata says otherwise.
 * Without a bias, b and db are NULL. The scratch is filled with NaNs, so that a kernel reading
 * a part of it that it did not write first shows. */
typedef struct {
    int B;
    cn_conv_shape s;
    size_t nx, nw, ny;
    float *x, *w, *b, *r, *y, *col;
} conv_case;

static conv_case conv_load(const char *p)
{
    conv_case c = {.B = fx_int(p, "B")};
    c.s = cn_conv_shape_of(fx_int(p, "C"), fx_int(p, "H"), fx_int(p, "W"), fx_int(p, "OC"),
                           fx_int(p, "K"), fx_int_or(p, "stride", 1), fx_int_or(p, "pad", 0));
    c.nx = (size_t)c.B * c.s.C * c.s.H * c.s.W;
    c.nw = (size_t)c.s.OC * c.s.C * c.s.K * c.s.K;
    c.ny = (size_t)c.B * c.s.OC * c.s.OH * c.s.OW;
    c.x = fx_f32(p, "x", c.nx);
    c.w = fx_f32(p, "weight", c.nw);
    c.b = fx_int_or(p, "bias", 1) ? fx_f32(p, "bias", (size_t)c.s.OC) : NULL;
    c.r = fx_f32(p, "dy", c.ny);
    c.y = nans(c.ny);
    c.col = nans(cn_conv2d_col_floats(&c.s));
    return c;
}

static void conv_forward(conv_case *c)
{
    cn_conv2d_forward(c->y, c->x, c->w, c->b, c->B, &c->s, c->col);
}

static void conv_backward(conv_case *c, float *dx, float *dw, float *db)
{
    cn_conv2d_backward(dx, dw, db, c->r, c->x, c->w, c->B, &c->s, c->col);
}

static void conv_vs_pytorch(const char *p)
{
    conv_case c = conv_load(p);
    size_t OC = (size_t)c.s.OC;
    conv_forward(&c);
    expect_conv("conv y", c.y, fx_f32(p, "y", c.ny), c.ny);
    float *dx = nans(c.nx), *dw = zeros(c.nw), *db = c.b ? zeros(OC) : NULL;
    float *want_dw = fx_f32(p, "dweight", c.nw), *want_db = db ? fx_f32(p, "dbias", OC) : NULL;
    conv_backward(&c, dx, dw, db);
    expect_conv("conv dx", dx, fx_f32(p, "dx", c.nx), c.nx);
    expect_conv_weights("conv dweight", dw, want_dw, c.nw);
    if (db) expect_conv("conv dbias", db, want_db, OC);
    conv_backward(&c, NULL, dw, db);
    expect_conv_weights("conv dweight accumulated", dw, twice(want_dw, c.nw), c.nw);
    if (db) expect_conv("conv dbias accumulated", db, twice(want_db, OC), OC);
}

static double conv_loss(void *ctx)
{
    conv_case *c = ctx;
    conv_forward(c);
    return tu_dot(c->y, c->r, c->ny);
}

static void conv_finite_differences(const char *p)
{
    conv_case c = conv_load(p);
    float *dx = zeros(c.nx), *dw = zeros(c.nw), *db = c.b ? zeros((size_t)c.s.OC) : NULL;
    conv_backward(&c, dx, dw, db);
    tu_fd_check("conv x", conv_loss, &c, c.x, dx, c.nx, NULL);
    tu_fd_check("conv weight", conv_loss, &c, c.w, dw, c.nw, NULL);
    if (db) tu_fd_check("conv bias", conv_loss, &c, c.b, db, (size_t)c.s.OC, NULL);
}

static void test_conv_pytorch(void **state) { (void)state; conv_vs_pytorch("conv"); }
static void test_conv1_pytorch(void **state) { (void)state; conv_vs_pytorch("conv1"); }
static void test_conv_fd(void **state) { (void)state; conv_finite_differences("conv"); }
static void test_conv1_fd(void **state) { (void)state; conv_finite_differences("conv1"); }

/* conv_stride_padding.safetensors: every case against PyTorch, four against finite
 * differences. */
#define CONV_VS_PYTORCH(name)                                                                 \
    static void test_##name##_pytorch(void **state) { (void)state; conv_vs_pytorch(#name); }
#define CONV_FD(name)                                                                         \
    static void test_##name##_fd(void **state) { (void)state; conv_finite_differences(#name); }
CONV_VS_PYTORCH(k3p1_small)
CONV_VS_PYTORCH(k3p1)
CONV_VS_PYTORCH(k3s2p1)
CONV_VS_PYTORCH(k5s2p2)
CONV_VS_PYTORCH(k1s2)
CONV_VS_PYTORCH(k1)
CONV_VS_PYTORCH(nobias_k3p1)
CONV_VS_PYTORCH(nobias_k3)
CONV_FD(k3p1_small)
CONV_FD(k3s2p1)
CONV_FD(k5s2p2)
CONV_FD(nobias_k3p1)

/* ---------------------------------------------------------------- maxpool2d */

typedef struct {
    int B, C, H, W, S, OH, OW;
    size_t nx, ny;
    float *x, *r, *y;
    int32_t *argmax;
} pool_case;

static pool_case pool_shape(int B, int C, int H, int W, int S)
{
    pool_case c = {.B = B, .C = C, .H = H, .W = W, .S = S, .OH = H / S, .OW = W / S};
    c.nx = (size_t)B * C * H * W;
    c.ny = (size_t)B * C * c.OH * c.OW;
    c.y = zeros(c.ny);
    c.argmax = tracked(c.ny * sizeof *c.argmax);
    return c;
}

static void pool_forward(pool_case *c)
{
    cn_pool_shape s = cn_pool_shape_of(c->C, c->H, c->W, c->S, c->S);
    cn_maxpool2d_forward(c->y, c->argmax, c->x, c->B, &s);
}

static void pool_vs_pytorch(const char *p)
{
    pool_case c = pool_shape(fx_int(p, "B"), fx_int(p, "C"), fx_int(p, "H"), fx_int(p, "W"),
                             fx_int(p, "S"));
    c.x = fx_f32(p, "x", c.nx);
    c.r = fx_f32(p, "dy", c.ny);
    pool_forward(&c);
    expect_exact("maxpool y", c.y, fx_f32(p, "y", c.ny), c.ny);
    const int64_t *want = fx_i64(p, "argmax", c.ny);
    for (size_t i = 0; i < c.ny; i++)
        if (c.argmax[i] != want[i])
            fail_msg("%s argmax[%zu]: got %d, PyTorch %lld", p, i, (int)c.argmax[i],
                     (long long)want[i]);
    float *dx = nans(c.nx);
    cn_pool_shape s = cn_pool_shape_of(c.C, c.H, c.W, c.S, c.S);
    cn_maxpool2d_backward(dx, c.r, c.argmax, c.B, &s);
    expect_exact("maxpool dx", dx, fx_f32(p, "dx", c.nx), c.nx);
}

static double pool_loss(void *ctx)
{
    pool_case *c = ctx;
    pool_forward(c);
    return tu_dot(c->y, c->r, c->ny);
}

/* 1 when input i lies in a window whose two largest values are within 2 eps. */
static int pool_near_tie(void *ctx, size_t i)
{
    const pool_case *c = ctx;
    size_t plane = i / ((size_t)c->H * c->W), at = i % ((size_t)c->H * c->W);
    int y = (int)(at / (size_t)c->W), x = (int)(at % (size_t)c->W);
    if (y >= c->OH * c->S || x >= c->OW * c->S) return 0;
    const float *base = c->x + plane * c->H * c->W + (size_t)(y / c->S * c->S) * c->W +
                        x / c->S * c->S;
    float top = -INFINITY, second = -INFINITY;
    for (int dy = 0; dy < c->S; dy++)
        for (int dx = 0; dx < c->S; dx++) {
            float v = base[dy * c->W + dx];
            if (v > top) { second = top; top = v; }
            else if (v > second) second = v;
        }
    return top - second < 2 * FD_EPS;
}

static float *random_values(cn_rng *rng, size_t n, float scale)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * cn_rng_uniform(rng) - 1.0f);
    return p;
}

/* Random inputs (the fixture's are full of deliberate ties); odd size so some cells are
 * floored away and must get gradient 0. */
static void test_pool_fd(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 7);
    pool_case c = pool_shape(2, 3, 7, 7, 2);
    c.x = random_values(&rng, c.nx, 1.0f);
    c.r = random_values(&rng, c.ny, 1.0f);
    pool_forward(&c);
    float *dx = nans(c.nx);
    cn_pool_shape s = cn_pool_shape_of(c.C, c.H, c.W, c.S, c.S);
    cn_maxpool2d_backward(dx, c.r, c.argmax, c.B, &s);
    tu_fd_check("maxpool x", pool_loss, &c, c.x, dx, c.nx, pool_near_tie);
}

/* The first maximum in scan order, the rule PyTorch follows, written plainly. */
static void reference_pool(float *y, int32_t *where, const float *x, int W, int S, int OH, int OW)
{
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            int best = oy * S * W + ox * S;
            for (int dy = 0; dy < S; dy++)
                for (int dx = 0; dx < S; dx++) {
                    int at = (oy * S + dy) * W + ox * S + dx;
                    if (x[at] > x[best]) best = at;
                }
            y[oy * OW + ox] = x[best];
            where[oy * OW + ox] = best;
        }
}

/* Inputs drawn from three values make ties of every shape in most windows; the window-2 kernel
 * must pick the same element as the plain rule everywhere, and backward (into NaNs) give the bits
 * of adding each pick's gradient to a zeroed plane, -0 included, zeros where no window reads.
 * Widths of 1 to 33 windows (odd ones floored) cover whole vectors and tails on every
 * instruction set, and widths of a quarter vector (4, 2, 1 windows) and of half a vector (8, 4,
 * 2) with and without rows left over from groups of four or two. */
static void test_pool_ties_match_scan_order(void **state)
{
    (void)state;
    static const int sizes[][2] = {{9, 9},  {24, 24}, {8, 8},  {5, 40},  {3, 67},  {2, 34},
                                   {11, 8}, {8, 4},   {10, 5}, {9, 2},   {16, 16}, {7, 17}};
    enum { C = 16, MOST = 24 * 24 }; /* the most inputs a plane has */
    float x[C * MOST], y[C * MOST], want_y[MOST], dy[C * MOST], dx[C * MOST], want_dx[MOST];
    int32_t where[C * MOST], want_where[MOST];
    cn_rng rng;
    cn_rng_seed(&rng, 9);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int H = sizes[s][0], W = sizes[s][1], OH = H / 2, OW = W / 2;
        for (int i = 0; i < C * H * W; i++) x[i] = (float)cn_rng_below(&rng, 3);
        cn_pool_shape ps = cn_pool_shape_of(C, H, W, 2, 2);
        cn_maxpool2d_forward(y, where, x, 1, &ps);
        for (int i = 0; i < C * OH * OW; i++) /* gradients of -0 among them */
            dy[i] = cn_rng_below(&rng, 4) ? cn_rng_uniform(&rng) - 0.5f : -0.0f;
        for (int i = 0; i < C * H * W; i++) dx[i] = NAN;
        cn_maxpool2d_backward(dx, dy, where, 1, &ps);
        for (int c = 0; c < C; c++) {
            reference_pool(want_y, want_where, x + c * H * W, W, 2, OH, OW);
            assert_memory_equal(y + c * OH * OW, want_y, (size_t)OH * OW * sizeof *y);
            assert_memory_equal(where + c * OH * OW, want_where, (size_t)OH * OW * sizeof *where);
            /* backward: each pick's gradient added to a zero, every other element zero */
            for (int i = 0; i < H * W; i++) want_dx[i] = 0.0f;
            for (int o = 0; o < OH * OW; o++) want_dx[want_where[o]] += dy[c * OH * OW + o];
            if (memcmp(dx + c * H * W, want_dx, (size_t)H * W * sizeof *dx))
                fail_msg("%d x %d: the max-pool's gradient differs from the picks' added to zeros",
                         H, W);
        }
    }
}

/* The 2x2 pool over positions as rows, a channel a lane (cn_maxpool2_rows), picks what the
 * planes' kernel picks, itself checked against the plain rule above: ties of every shape, NaNs,
 * odd planes and channel counts of part vectors, one vector, and more on every instruction set. */
static void test_pool_rows_match_planes(void **state)
{
    (void)state;
    static const int sizes[][3] = {{7, 7, 45}, {14, 14, 64}, {6, 5, 3}, {3, 9, 16}, {2, 2, 17}};
    enum { MOST = 14 * 14 * 64 };
    static float x[MOST], rows[MOST], y[MOST], ry[MOST], ry_t[MOST];
    static int32_t where[MOST], rwhere[MOST], rwhere_t[MOST];
    cn_rng rng;
    cn_rng_seed(&rng, 12);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int H = sizes[s][0], W = sizes[s][1], C = sizes[s][2], P = H * W, Q = (H / 2) * (W / 2);
        for (int i = 0; i < C * P; i++)
            x[i] = cn_rng_below(&rng, 50) ? (float)cn_rng_below(&rng, 3) : NAN;
        for (int c = 0; c < C; c++)
            for (int p = 0; p < P; p++) rows[p * C + c] = x[c * P + p];
        cn_maxpool2_planes(y, where, x, C, H, W);
        cn_maxpool2_rows(ry, rwhere, rows, H, W, C);
        for (int c = 0; c < C; c++)
            for (int q = 0; q < Q; q++)
                ry_t[c * Q + q] = ry[q * C + c], rwhere_t[c * Q + q] = rwhere[q * C + c];
        if (memcmp(ry_t, y, (size_t)C * Q * sizeof *y) ||
            memcmp(rwhere_t, where, (size_t)C * Q * sizeof *where))
            fail_msg("%d x %d, %d channels: the pool over rows differs from the planes'", H, W,
                     C);
    }
}

/* The bf16 convolution against the fp32 one fed the same values rounded to bf16: only the order
 * of the sums may differ, so every packing layout must put each value where the product wants
 * it. Even and odd output widths, channel counts and output channel counts. */
static float *rounded_copy(const float *x, size_t n)
{
    float *r = zeros(n);
    for (size_t i = 0; i < n; i++) r[i] = tu_bf16_round(x[i]);
    return r;
}

/* A convolution of shape s with a bias (bias 1) or none; the scratch starts as NaNs and both
 * weight gradients from the same values. */
static void check_conv_bf16(int B, cn_conv_shape s, int bias, cn_rng *rng)
{
    int C = s.C, H = s.H, W = s.W, OC = s.OC, K = s.K, P = s.OH * s.OW, CKK = C * K * K;
    size_t nx = (size_t)B * C * H * W, nw = (size_t)OC * CKK, ny = (size_t)B * OC * P;
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *b = random_values(rng, (size_t)OC, 0.1f), *dy = random_values(rng, ny, 1.0f);
    float *xr = rounded_copy(x, nx), *wr = rounded_copy(w, nw), *dyr = rounded_copy(dy, ny);
    float *col = nans(cn_conv2d_col_floats(&s));
    cn_bf16_pair *packed = (cn_bf16_pair *)nans(cn_conv2d_packed_words(&s));
    float *y = nans(ny), *want_y = zeros(ny), *dx = nans(nx), *want_dx = zeros(nx);
    float *dw = zeros(nw), *want_dw = zeros(nw), *db = zeros((size_t)OC);
    float *want_db = zeros((size_t)OC), *ignored = zeros(nw);
    if (!bias) b = db = NULL;
    for (size_t i = 0; i < nw; i++) dw[i] = want_dw[i] = 0.25f; /* backward adds (+=) to them */
    cn_conv2d_forward(want_y, xr, wr, b, B, &s, col);
    cn_conv2d_backward(want_dx, want_dw, ignored, dyr, xr, wr, B, &s, col);
    cn_conv2d_backward(NULL, ignored, want_db, dy, x, w, B, &s, col); /* fp32 bias */
    cn_conv2d_forward_bf16(y, x, w, b, B, &s, packed);
    cn_conv2d_backward_bf16(dx, dw, db, dy, x, w, B, &s, col, packed);
    double worst[4] = {tu_max_violation(y, want_y, ny, 1e-5 * CKK, 1e-5),
                       tu_max_violation(dw, want_dw, nw, 1e-5 * B * P, 1e-5),
                       tu_max_violation(dx, want_dx, nx, 1e-5 * OC * K * K, 1e-5),
                       db ? tu_max_violation(db, want_db, (size_t)OC, 1e-5 * B * P, 1e-5) : 0};
    for (int i = 0; i < 4; i++)
        if (worst[i] > 1)
            fail_msg("bf16 conv B%d C%d %dx%d OC%d K%d stride %d pad %d: %s off by %.1f "
                     "tolerances", B, C, H, W, OC, K, s.stride, s.pad,
                     (const char *[]){"y", "dweight", "din", "dbias"}[i], worst[i]);
}

/* The bf16 linear layer against the fp32 one fed the same values rounded to bf16, as above;
 * the scratch starts as NaNs. */
static void check_linear_bf16(int B, int I, int O, int bias, cn_rng *rng)
{
    size_t nx = (size_t)B * I, nw = (size_t)O * I, ny = (size_t)B * O;
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *b = random_values(rng, (size_t)O, 0.1f), *dy = random_values(rng, ny, 1.0f);
    float *xr = rounded_copy(x, nx), *wr = rounded_copy(w, nw), *dyr = rounded_copy(dy, ny);
    cn_bf16_pair *packed = (cn_bf16_pair *)nans(cn_linear_packed_words(I, O));
    float *y = nans(ny), *want_y = zeros(ny), *dx = nans(nx), *want_dx = zeros(nx);
    float *dw = zeros(nw), *want_dw = zeros(nw), *db = zeros((size_t)O);
    float *want_db = zeros((size_t)O), *ignored = zeros(nw);
    if (!bias) b = db = NULL;
    cn_linear_forward(want_y, xr, wr, b, B, I, O);
    cn_linear_backward(want_dx, want_dw, ignored, dyr, xr, wr, B, I, O);
    cn_linear_backward(NULL, ignored, want_db, dy, x, w, B, I, O); /* fp32 bias */
    cn_linear_forward_bf16(y, x, w, b, B, I, O, packed);
    cn_linear_backward_bf16(dx, dw, db, dy, x, w, B, I, O, packed);
    double worst[4] = {tu_max_violation(y, want_y, ny, 1e-5 * I, 1e-5),
                       tu_max_violation(dw, want_dw, nw, 1e-5 * B, 1e-5),
                       tu_max_violation(dx, want_dx, nx, 1e-5 * O, 1e-5),
                       db ? tu_max_violation(db, want_db, (size_t)O, 1e-5 * B, 1e-5) : 0};
    for (int i = 0; i < 4; i++)
        if (worst[i] > 1)
            fail_msg("bf16 linear B%d %d -> %d: %s off by %.1f tolerances", B, I, O,
                     (const char *[]){"y", "dweight", "din", "dbias"}[i], worst[i]);
}

/* Batches of one group and of several (an odd last one), odd feature counts. */
static void test_linear_bf16_matches_fp32_on_rounded_values(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip(); /* this CPU trains in fp32 only */
    cn_rng rng;
    cn_rng_seed(&rng, 23);
    check_linear_bf16(64, 1152, 256, 1, &rng); /* the hidden layer of fashion_mnist_best */
    check_linear_bf16(CN_LINEAR_GROUP * 2 + 5, 37, 33, 1, &rng);
    check_linear_bf16(3, 10, 5, 0, &rng);
    check_linear_bf16(1, 1, 1, 1, &rng);
}

/* cn_conv_shape_of, shorter. */
static cn_conv_shape shape(int C, int H, int W, int OC, int K, int stride, int pad)
{
    return cn_conv_shape_of(C, H, W, OC, K, stride, pad);
}

static void test_conv_bf16_matches_fp32_on_rounded_values(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip(); /* this CPU trains in fp32 only */
    cn_rng rng;
    cn_rng_seed(&rng, 13);
    check_conv_bf16(2, shape(10, 12, 12, 20, 5, 1, 0), 1, &rng); /* conv2 of the seed's model */
    check_conv_bf16(2, shape(1, 28, 28, 10, 5, 1, 0), 1, &rng);  /* conv1: kernel column pairs */
    check_conv_bf16(2, shape(3, 9, 10, 4, 5, 1, 0), 1, &rng);    /* three channels: columns too */
    check_conv_bf16(3, shape(3, 9, 10, 5, 3, 1, 0), 1, &rng);    /* odd channels and OC, width 8 */
    check_conv_bf16(1, shape(4, 11, 11, 6, 4, 1, 0), 1, &rng);   /* odd output width */
    check_conv_bf16(1, shape(2, 5, 5, 3, 5, 1, 0), 1, &rng);     /* one position */
    check_conv_bf16(2, shape(3, 6, 7, 4, 3, 1, 0), 0, &rng);     /* no bias */
}

/* The same with padding (channel pairs and kernel column pairs, even and odd output widths)
 * and strides over 1 (pairs of patch rows), with a bias and without. */
static void test_conv_bf16_stride_padding_matches_fp32(void **state)
{
    (void)state;
    if (!cn_bf16_supported()) skip(); /* this CPU trains in fp32 only */
    cn_rng rng;
    cn_rng_seed(&rng, 17);
    check_conv_bf16(2, shape(16, 8, 8, 32, 3, 1, 1), 1, &rng);  /* CIFAR-like, even width */
    check_conv_bf16(2, shape(3, 9, 9, 8, 3, 1, 1), 1, &rng);    /* odd width, column pairs */
    check_conv_bf16(1, shape(1, 10, 12, 4, 5, 1, 2), 1, &rng);  /* one channel, pad 2 */
    check_conv_bf16(2, shape(5, 7, 6, 6, 3, 1, 1), 0, &rng);    /* no bias */
    check_conv_bf16(2, shape(6, 8, 10, 4, 5, 1, 2), 1, &rng);   /* channel pairs, pad 2 */
    check_conv_bf16(2, shape(3, 8, 10, 4, 5, 1, 2), 1, &rng);   /* column pairs, pad 2 */
    check_conv_bf16(2, shape(4, 9, 11, 6, 3, 2, 1), 1, &rng);   /* stride 2 */
    check_conv_bf16(2, shape(3, 11, 13, 5, 5, 2, 2), 0, &rng);  /* stride 2, K 5, no bias */
    check_conv_bf16(1, shape(6, 7, 8, 3, 1, 2, 0), 1, &rng);    /* K 1, stride 2 */
    check_conv_bf16(1, shape(4, 10, 10, 5, 3, 3, 0), 1, &rng);  /* stride 3, no padding */
    check_conv_bf16(2, shape(3, 5, 6, 4, 2, 1, 2), 1, &rng);    /* padding as wide as the kernel */
    /* 7 x 7 outputs: with the vector kernel, forward and input gradient with positions as rows,
     * the forward reading the channel pairs in place */
    check_conv_bf16(2, shape(16, 7, 7, 32, 3, 1, 1), 1, &rng);  /* padded: crop after row2im */
    check_conv_bf16(2, shape(16, 9, 9, 32, 3, 1, 0), 0, &rng);  /* valid, no bias */
    check_conv_bf16(1, shape(17, 7, 7, 33, 3, 1, 1), 1, &rng);  /* odd channels: a zero pair */
    /* kernel column pairs read in place with positions as rows (the vector kernel) */
    check_conv_bf16(1, shape(1, 6, 7, 48, 3, 1, 1), 1, &rng);   /* one channel, padded */
    check_conv_bf16(1, shape(3, 5, 6, 40, 2, 1, 0), 0, &rng);   /* an even kernel */
    /* the weight gradient over groups of samples (45 pairs of positions: two samples a group),
     * the last group short */
    check_conv_bf16(5, shape(4, 9, 9, 8, 3, 1, 1), 1, &rng);
}

/* A convolution in direct loops, summed in double: y = conv(x) + b, and for the output
 * gradient dy: dx (=), dw (=) and db (=). Any stride and padding. */
static void direct_conv(const float *x, const float *w, const float *b, const float *dy, int B,
                        const cn_conv_shape *s, float *y, float *dx, float *dw, float *db)
{
    int C = s->C, H = s->H, W = s->W, OC = s->OC, K = s->K, OH = s->OH, OW = s->OW;
    size_t nx = (size_t)B * C * H * W, nw = (size_t)OC * C * K * K;
    double *gx = calloc(nx, sizeof *gx), *gw = calloc(nw, sizeof *gw);
    assert_non_null(gx), assert_non_null(gw);
    for (int oc = 0; oc < OC; oc++) db[oc] = 0;
    for (int n = 0; n < B; n++)
        for (int oc = 0; oc < OC; oc++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    size_t o = (((size_t)n * OC + oc) * OH + oy) * OW + ox;
                    double sum = b[oc], g = dy[o];
                    db[oc] += (float)g;
                    for (int c = 0; c < C; c++)
                        for (int ky = 0; ky < K; ky++)
                            for (int kx = 0; kx < K; kx++) {
                                int iy = oy * s->stride + ky - s->pad;
                                int ix = ox * s->stride + kx - s->pad;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                size_t i = (((size_t)n * C + c) * H + iy) * W + ix;
                                size_t k = (((size_t)oc * C + c) * K + ky) * K + kx;
                                sum += (double)w[k] * x[i];
                                gx[i] += (double)w[k] * g;
                                gw[k] += (double)x[i] * g;
                            }
                    y[o] = (float)sum;
                }
    for (size_t i = 0; i < nx; i++) dx[i] = (float)gx[i];
    for (size_t k = 0; k < nw; k++) dw[k] = (float)gw[k];
    free(gx), free(gw);
}

/* cn_conv2d_forward and cn_conv2d_backward against direct loops: shapes whose patch matrix is
 * large enough to be taken in several bands of output rows (padded and not), one band, and the
 * whole-output paths (few patch entries, a stride of 2), the scratch starting as NaNs. */
static void check_conv_direct(int B, cn_conv_shape s, cn_rng *rng)
{
    int P = s.OH * s.OW, CKK = s.C * s.K * s.K;
    size_t nx = (size_t)B * s.C * s.H * s.W, nw = (size_t)s.OC * CKK, ny = (size_t)B * s.OC * P;
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *b = random_values(rng, (size_t)s.OC, 0.1f), *dy = random_values(rng, ny, 1.0f);
    float *col = nans(cn_conv2d_col_floats(&s)), *y = nans(ny), *dx = nans(nx);
    float *dw = zeros(nw), *db = zeros((size_t)s.OC), *want_y = zeros(ny), *want_dx = zeros(nx);
    float *want_dw = zeros(nw), *want_db = zeros((size_t)s.OC);
    direct_conv(x, w, b, dy, B, &s, want_y, want_dx, want_dw, want_db);
    cn_conv2d_forward(y, x, w, b, B, &s, col);
    cn_conv2d_backward(dx, dw, db, dy, x, w, B, &s, col);
    double worst[4] = {tu_max_violation(y, want_y, ny, 1e-5 * CKK, 1e-5),
                       tu_max_violation(dw, want_dw, nw, 1e-5 * B * P, 1e-5),
                       tu_max_violation(dx, want_dx, nx, 1e-5 * s.OC * s.K * s.K, 1e-5),
                       tu_max_violation(db, want_db, (size_t)s.OC, 1e-5 * B * P, 1e-5)};
    for (int i = 0; i < 4; i++)
        if (worst[i] > 1)
            fail_msg("conv B%d C%d %dx%d OC%d K%d stride %d pad %d: %s off by %.1f tolerances",
                     B, s.C, s.H, s.W, s.OC, s.K, s.stride, s.pad,
                     (const char *[]){"y", "dweight", "din", "dbias"}[i], worst[i]);
}

static void test_conv_bands_match_direct_loops(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 19);
    check_conv_direct(2, shape(32, 32, 32, 5, 3, 1, 1), &rng); /* three bands of 11, 11, 10 */
    check_conv_direct(1, shape(32, 34, 34, 3, 3, 1, 0), &rng); /* the same, valid: rows copied */
    check_conv_direct(1, shape(64, 17, 15, 4, 3, 1, 1), &rng); /* two bands, odd sizes */
    check_conv_direct(1, shape(20, 40, 36, 3, 5, 1, 2), &rng); /* K 5, pad 2 */
    check_conv_direct(1, shape(3, 70, 70, 4, 3, 1, 1), &rng);  /* dot-product weight gradient */
    check_conv_direct(2, shape(8, 9, 11, 6, 3, 2, 1), &rng);   /* stride 2: one band */
    check_conv_direct(2, shape(16, 8, 8, 32, 3, 1, 1), &rng);  /* one band, transposed dweight */
    check_conv_direct(2, shape(4, 12, 12, 6, 3, 1, 1), &rng);  /* few patch entries: one band */
}

/* The 3x3 convolutions of stride 1 that go through Winograd's algorithm (kernels/winograd.c:
 * F(4x4, 3x3) forward and for the input gradient, F(2x2, 3x3) for the weight gradient) against
 * direct loops: padding 0, 1 and 2, output sizes that are and are not multiples of 2 and 4
 * (tiles cut by the edge), batches of several blocks of samples with a partial last one, a
 * plane of more tiles than a block, rows of tiles longer than a vector of every instruction set,
 * rows of half a vector (two to a vector) and rows of fewer tiles (the weight gradient's
 * transforms through runs in tile order: 7 x 9 and 8 x 8 planes on AVX-512), planes whose
 * output rows are whole vectors of AVX-512 (16 and 32 wide: F(4x4, 3x3)'s output stored
 * straight from registers) or only of AVX2 and the baseline (8 wide), one output position, and
 * the fewest channels it takes. Planes
 * of fewer than 16 tiles go through F(4x4, 3x3)'s transforms a few samples at a time (4 of 4
 * tiles, 2 of 6, 16 of 1), the last group of a block part full (3 of 4, 3 samples in groups of
 * 2). */
static void test_conv_winograd_matches_direct_loops(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 23);
    const struct {
        int B;
        cn_conv_shape s;
    } cases[] = {
        {3, shape(8, 8, 8, 8, 3, 1, 1)},     /* one block, part full */
        {43, shape(16, 7, 9, 12, 3, 1, 1)},  /* odd sizes, several blocks, the last part full */
        {2, shape(12, 10, 11, 8, 3, 1, 0)},  /* no padding */
        {3, shape(8, 6, 5, 10, 3, 1, 2)},    /* padding 2 */
        {2, shape(32, 33, 32, 16, 3, 1, 1)}, /* more tiles than a block: a sample per block */
        {2, shape(8, 9, 70, 8, 3, 1, 1)},    /* rows of 35 tiles: several vectors, the last part */
        {1, shape(8, 12, 41, 8, 3, 1, 2)},   /* padding 2 on rows of 22 tiles */
        /* rows of VW / 2 tiles, two to a vector (AVX-512, AVX2, baseline): an odd last output
         * row, an odd number of rows of tiles */
        {2, shape(16, 15, 16, 8, 3, 1, 1)},
        {2, shape(16, 13, 15, 8, 3, 1, 1)},
        {2, shape(8, 7, 7, 8, 3, 1, 1)},
        {2, shape(8, 9, 8, 8, 3, 1, 1)},
        {3, shape(8, 3, 4, 8, 3, 1, 1)},
        {3, shape(8, 5, 3, 8, 3, 1, 1)},
        {2, shape(9, 1, 1, 8, 3, 1, 1)},     /* one position, padding all round */
        {2, shape(8, 3, 3, 9, 3, 1, 0)},     /* one position, no padding */
        {3, shape(16, 16, 16, 8, 3, 1, 1)},  /* output rows of 16 */
        {2, shape(8, 32, 32, 12, 3, 1, 1)},  /* ... of 32, several blocks of tiles */
        {2, shape(8, 18, 34, 8, 3, 1, 0)},   /* ... of 32, no padding, 16 rows */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_true(cn_winograd_fits(&cases[i].s));
        check_conv_direct(cases[i].B, cases[i].s, &rng);
    }
    cn_conv_shape thin = shape(3, 32, 32, 32, 3, 1, 1), wide = shape(32, 8, 8, 32, 5, 1, 2);
    assert_false(cn_winograd_fits(&thin)); /* a first layer's three channels */
    assert_false(cn_winograd_fits(&wide)); /* another kernel size */
}

/* Outputs of at least CN_STREAM_FLOATS for the batch are stored around the caches (Winograd's
 * output transform, the bf16 transposes of the output and of the direct input gradient): one
 * call on a batch that large gives the same bits, sample by sample, as two calls on its halves,
 * whose outputs stay in the caches. A batch of 32 of 32 x 32 planes of 32 channels: the output
 * and the input gradient 2^20 floats; each half below. With bf16, where the CPU has it. */
static void check_streamed_halves(int bf16, cn_rng *rng)
{
    enum { B = 32, H = B / 2 };
    cn_conv_shape s = shape(32, 32, 32, 32, 3, 1, 1);
    size_t nx = (size_t)B * s.C * s.H * s.W, nw = (size_t)s.OC * s.C * 9, ny = nx;
    assert_true(cn_streamed(ny) && !cn_streamed(ny / 2));
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *dy = random_values(rng, ny, 1.0f), *col = nans(cn_conv2d_col_floats(&s));
    cn_bf16_pair *packed = (cn_bf16_pair *)nans(cn_conv2d_packed_words(&s));
    float *y[2] = {nans(ny), nans(ny)}, *dx[2] = {nans(nx), nans(nx)}, *dw = zeros(nw);
    for (int split = 0; split < 2; split++)
        for (int b = 0; b < B; b += split ? H : B) {
            int n = split ? H : B;
            size_t at = (size_t)b * s.C * s.H * s.W;
            if (bf16) {
                cn_conv2d_forward_bf16(y[split] + at, x + at, w, NULL, n, &s, packed);
                cn_conv2d_backward_bf16(dx[split] + at, dw, NULL, dy + at, x + at, w, n, &s, col,
                                        packed);
            } else {
                cn_conv2d_forward(y[split] + at, x + at, w, NULL, n, &s, col);
                cn_conv2d_backward(dx[split] + at, dw, NULL, dy + at, x + at, w, n, &s, col);
            }
        }
    assert_memory_equal(y[0], y[1], ny * sizeof(float));
    assert_memory_equal(dx[0], dx[1], nx * sizeof(float));
    for (size_t i = 0; i < ny; i++) assert_true(isfinite(y[0][i]));
}

static void test_streamed_outputs_match_cached_ones(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 37);
    cn_conv_shape s = shape(32, 32, 32, 32, 3, 1, 1);
    assert_true(cn_winograd_fits(&s));
    check_streamed_halves(0, &rng);
    if (cn_bf16_supported()) check_streamed_halves(1, &rng);
}

/* A convolution's gradients from the max-pool's gradient and argmax, against the pool's
 * backward pass then the convolution's, on random data, with an input gradient and without
 * (a first layer): windows of 2 and 3, sizes the pool floors, kernels up to 8 (masked rows, or
 * whole vectors without masks) and 9 (the float-at-a-time path), rows of patches past one
 * vector of registers. Only the order of the sums differs. About half the picks have a zero
 * gradient (as after a ReLU), in every pattern of 8 neighbours that the kernels dropping them
 * meet (the seed's conv1 has 144 picks a channel: 360 runs of 8). Without a bias (dbias NULL)
 * the other gradients are the same bits. */
static void check_conv_pool(int B, int C, int H, int W, int OC, int K, int S, cn_rng *rng)
{
    cn_conv_shape s = cn_conv_shape_of(C, H, W, OC, K, 1, 0);
    int OH = H - K + 1, OW = W - K + 1, Q = (OH / S) * (OW / S);
    size_t nx = (size_t)B * C * H * W, nw = (size_t)OC * C * K * K, ny = (size_t)B * OC * OH * OW;
    size_t nq = (size_t)B * OC * Q;
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *b = random_values(rng, (size_t)OC, 0.1f), *y = zeros(ny), *pooled = zeros(nq);
    float *dpool = random_values(rng, nq, 1.0f), *dy = zeros(ny);
    size_t pool_col = cn_conv2d_pool_col_floats(&s, S), dense_col = cn_conv2d_col_floats(&s);
    float *col = zeros(pool_col > dense_col ? pool_col : dense_col); /* as the layer sizes it */
    float *dw = random_values(rng, nw, 1.0f), *db = random_values(rng, (size_t)OC, 1.0f);
    float *want_dw = zeros(nw), *want_db = zeros((size_t)OC), *dx = zeros(nx);
    float *want_dx = zeros(nx), *dw_first = zeros(nw), *db_first = zeros((size_t)OC);
    float *dw_no_bias = zeros(nw), *dx_no_bias = zeros(nx);
    int32_t *where = (int32_t *)zeros(nq);
    for (size_t i = 0; i < nq; i++) /* run j of 8 keeps the bits of j % 256: every pattern */
        if (!(((i / 8) % 256) >> (i % 8) & 1)) dpool[i] = 0.0f;
    memcpy(want_dw, dw, nw * sizeof *dw), memcpy(want_db, db, (size_t)OC * sizeof *db);
    memcpy(dw_first, dw, nw * sizeof *dw), memcpy(db_first, db, (size_t)OC * sizeof *db);
    memcpy(dw_no_bias, dw, nw * sizeof *dw);
    cn_conv2d_forward(y, x, w, b, B, &s, col);
    cn_pool_shape ps = cn_pool_shape_of(OC, OH, OW, S, S);
    cn_maxpool2d_forward(pooled, where, y, B, &ps);
    cn_maxpool2d_backward(dy, dpool, where, B, &ps);
    cn_conv2d_backward(want_dx, want_dw, want_db, dy, x, w, B, &s, col);
    cn_conv2d_pool_backward(dx, dw, db, dpool, where, NULL, x, w, B, &s, S, col);
    cn_conv2d_pool_backward(NULL, dw_first, db_first, dpool, where, NULL, x, w, B, &s, S, col);
    cn_conv2d_pool_backward(dx_no_bias, dw_no_bias, NULL, dpool, where, NULL, x, w, B, &s, S, col);
    expect_exact("conv from pool without a bias: weights", dw_no_bias, dw, nw);
    expect_exact("conv from pool without a bias: input", dx_no_bias, dx, nx);
    double tol = 1e-5 * (Q + 1);
    double worst = tu_max_violation(dw, want_dw, nw, tol, 1e-5);
    double worst_b = tu_max_violation(db, want_db, (size_t)OC, tol, 1e-5);
    double worst_x = tu_max_violation(dx, want_dx, nx, 1e-5 * (OC * K * K + 1), 1e-5);
    double worst_first = tu_max_violation(dw_first, want_dw, nw, tol, 1e-5);
    if (worst > 1 || worst_b > 1 || worst_x > 1 || worst_first > 1)
        fail_msg("C=%d H=%d W=%d OC=%d K=%d S=%d: off by %.2f (weights), %.2f (bias), %.2f "
                 "(input), %.2f (weights without input) tolerances",
                 C, H, W, OC, K, S, worst, worst_b, worst_x, worst_first);
}

static void test_conv_from_pool_matches_dense(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 13);
    check_conv_pool(2, 1, 28, 28, 10, 5, 2, &rng);  /* conv1 of the seed's model */
    check_conv_pool(2, 10, 12, 12, 20, 5, 2, &rng); /* conv2 */
    check_conv_pool(1, 3, 16, 16, 4, 7, 2, &rng);
    check_conv_pool(3, 2, 13, 12, 3, 3, 2, &rng);
    check_conv_pool(1, 2, 12, 14, 3, 3, 3, &rng);
    check_conv_pool(1, 2, 14, 14, 3, 9, 2, &rng);
    check_conv_pool(2, 1, 9, 9, 2, 1, 2, &rng);
    check_conv_pool(1, 12, 20, 21, 2, 5, 2, &rng); /* rows of 300: two pieces; H > 16; twelve
                                                       channel groups of one */
    check_conv_pool(2, 7, 12, 12, 5, 5, 2, &rng);  /* channel groups of 4 and 3 */
    check_conv_pool(1, 1, 6, 40, 2, 3, 2, &rng);   /* input rows wider than a vector */
    /* without masked moves: a row that is one whole vector of four, and rows of two vectors in
     * more than one set of rows at a time */
    check_conv_pool(2, 2, 11, 11, 3, 4, 2, &rng);
    check_conv_pool(1, 2, 12, 13, 3, 8, 2, &rng);
}

/* A padded first layer: its weight and bias gradients from the picks (no input gradient; with
 * one, padding is not fusable) against the pool's backward then the dense convolution's. */
static void check_first_conv_pool_padded(int B, int C, int H, int W, int OC, int K, int pad,
                                         cn_rng *rng)
{
    cn_conv_shape s = cn_conv_shape_of(C, H, W, OC, K, 1, pad);
    assert_true(cn_conv2d_pool_fusable(&s, 2, 0) && !cn_conv2d_pool_fusable(&s, 2, 1));
    int OH = s.OH, OW = s.OW, Q = (OH / 2) * (OW / 2);
    size_t nx = (size_t)B * C * H * W, nw = (size_t)OC * C * K * K, ny = (size_t)B * OC * OH * OW;
    size_t nq = (size_t)B * OC * Q;
    float *x = random_values(rng, nx, 1.0f), *w = random_values(rng, nw, 0.3f);
    float *y = zeros(ny), *pooled = zeros(nq), *dpool = random_values(rng, nq, 1.0f);
    float *dy = zeros(ny), *dw = zeros(nw), *want_dw = zeros(nw), *want_dx = zeros(nx);
    float *db = zeros((size_t)OC), *want_db = zeros((size_t)OC);
    size_t pool_col = cn_conv2d_pool_col_floats(&s, 2), dense_col = cn_conv2d_col_floats(&s);
    float *col = nans(pool_col > dense_col ? pool_col : dense_col);
    int32_t *where = (int32_t *)zeros(nq);
    cn_conv2d_forward(y, x, w, NULL, B, &s, col);
    cn_pool_shape ps = cn_pool_shape_of(OC, OH, OW, 2, 2);
    cn_maxpool2d_forward(pooled, where, y, B, &ps);
    cn_maxpool2d_backward(dy, dpool, where, B, &ps);
    cn_conv2d_backward(want_dx, want_dw, want_db, dy, x, w, B, &s, col);
    cn_conv2d_pool_backward(NULL, dw, db, dpool, where, NULL, x, w, B, &s, 2, col);
    double tol = 1e-5 * (Q + 1);
    double worst = tu_max_violation(dw, want_dw, nw, tol, 1e-5);
    double worst_b = tu_max_violation(db, want_db, (size_t)OC, tol, 1e-5);
    if (worst > 1 || worst_b > 1)
        fail_msg("first layer C=%d %dx%d OC=%d K=%d pad %d: off by %.2f (weights), %.2f (bias) "
                 "tolerances", C, H, W, OC, K, pad, worst, worst_b);
}

static void test_padded_first_conv_from_pool(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 29);
    check_first_conv_pool_padded(2, 1, 28, 28, 32, 3, 1, &rng); /* fashion_mnist_best's conv1 */
    check_first_conv_pool_padded(1, 3, 9, 11, 4, 5, 2, &rng);   /* colour, odd sizes, pad 2 */
}

static void test_pool_pytorch(void **state) { (void)state; pool_vs_pytorch("pool"); }
static void test_pool7_pytorch(void **state) { (void)state; pool_vs_pytorch("pool7"); }

/* ---------------------------------------------------------------- relu */

typedef struct {
    size_t n;
    float *x, *r, *y;
} relu_case;

static relu_case relu_load(void)
{
    size_t n;
    fx_tensor("relu", "x", &n);
    relu_case c = {.n = n, .x = fx_f32("relu", "x", n), .r = fx_f32("relu", "dy", n)};
    c.y = zeros(n);
    return c;
}

static void test_relu_pytorch(void **state)
{
    (void)state;
    relu_case c = relu_load();
    size_t zeros_in_x = 0;
    for (size_t i = 0; i < c.n; i++) zeros_in_x += c.x[i] == 0.0f;
    assert_true(zeros_in_x > 0);
    cn_relu_forward(c.y, c.x, c.n);
    expect_exact("relu y", c.y, fx_f32("relu", "y", c.n), c.n);
    float *dx = nans(c.n);
    cn_relu_backward(dx, c.r, c.y, c.n);
    expect_exact("relu dx", dx, fx_f32("relu", "dx", c.n), c.n);
}

static double relu_loss(void *ctx)
{
    relu_case *c = ctx;
    cn_relu_forward(c->y, c->x, c->n);
    return tu_dot(c->y, c->r, c->n);
}

static int relu_near_kink(void *ctx, size_t i)
{
    const relu_case *c = ctx;
    return fabsf(c->x[i]) < 2 * FD_EPS;
}

static void test_relu_fd(void **state)
{
    (void)state;
    relu_case c = relu_load();
    float *dx = zeros(c.n);
    cn_relu_forward(c.y, c.x, c.n);
    cn_relu_backward(dx, c.r, c.y, c.n);
    tu_fd_check("relu x", relu_loss, &c, c.x, dx, c.n, relu_near_kink);
}

/* ---------------------------------------------------------------- batchnorm2d */

typedef struct {
    int B, C, HW;
    size_t n;
    float eps;
    float *x, *gamma, *beta, *r, *y, *mean, *invstd, *var_unbiased;
} bn_case;

static bn_case bn_load(const char *p)
{
    bn_case c = {.B = fx_int(p, "B"), .C = fx_int(p, "C"), .HW = fx_int(p, "HW")};
    c.eps = (float)atof(fx_meta(p, "eps"));
    c.n = (size_t)c.B * c.C * c.HW;
    c.x = fx_f32(p, "x", c.n);
    c.gamma = fx_f32(p, "weight", (size_t)c.C);
    c.beta = fx_f32(p, "bias", (size_t)c.C);
    c.y = zeros(c.n);
    c.mean = zeros((size_t)c.C);
    c.invstd = zeros((size_t)c.C);
    c.var_unbiased = zeros((size_t)c.C);
    return c;
}

static void bn_forward(bn_case *c)
{
    cn_batchnorm2d_forward_train(c->y, c->mean, c->invstd, c->var_unbiased, c->x, c->gamma,
                                 c->beta, c->B, c->C, c->HW, c->eps, 0);
}

static void bn_backward(bn_case *c, float *dx, float *dgamma, float *dbeta)
{
    cn_batchnorm2d_backward(dx, dgamma, dbeta, c->r, c->x, c->mean, c->invstd, c->gamma, c->beta,
                            c->B, c->C, c->HW, 0);
}

/* running = (1 - momentum) * running + momentum * batch, from mean 0 and var 1. */
static void bn_expect_running(const bn_case *c)
{
    float momentum = (float)atof(fx_meta("bn", "momentum"));
    float *rm = zeros((size_t)c->C), *rv = zeros((size_t)c->C);
    for (int i = 0; i < c->C; i++) {
        rm[i] = (1 - momentum) * 0.0f + momentum * c->mean[i];
        rv[i] = (1 - momentum) * 1.0f + momentum * c->var_unbiased[i];
    }
    expect_pt("bn running_mean", rm, fx_f32("bn", "running_mean", (size_t)c->C), (size_t)c->C);
    expect_pt("bn running_var", rv, fx_f32("bn", "running_var", (size_t)c->C), (size_t)c->C);
}

static void test_bn_train_pytorch(void **state)
{
    (void)state;
    bn_case c = bn_load("bn");
    size_t C = (size_t)c.C;
    c.r = fx_f32("bn", "dy", c.n);
    bn_forward(&c);
    expect_pt("bn y", c.y, fx_f32("bn", "y", c.n), c.n);
    expect_pt("bn mean", c.mean, fx_f32("bn", "mean", C), C);
    expect_pt("bn invstd", c.invstd, fx_f32("bn", "invstd", C), C);
    expect_pt("bn var_unbiased", c.var_unbiased, fx_f32("bn", "var_unbiased", C), C);
    bn_expect_running(&c);
    float *dx = nans(c.n), *dg = zeros(C), *db = zeros(C);
    float *want_dg = fx_f32("bn", "dweight", C), *want_db = fx_f32("bn", "dbias", C);
    bn_backward(&c, dx, dg, db);
    expect_pt("bn dx", dx, fx_f32("bn", "dx", c.n), c.n);
    expect_pt("bn dweight", dg, want_dg, C);
    expect_pt("bn dbias", db, want_db, C);
    bn_backward(&c, dx, dg, db);
    expect_pt("bn dweight accumulated", dg, twice(want_dg, C), C);
    expect_pt("bn dbias accumulated", db, twice(want_db, C), C);
}

static void test_bn_eval_pytorch(void **state)
{
    (void)state;
    bn_case c = bn_load("bn_eval");
    size_t C = (size_t)c.C;
    float *rm = fx_f32("bn_eval", "running_mean", C), *rv = fx_f32("bn_eval", "running_var", C);
    cn_batchnorm2d_forward_eval(c.y, c.x, c.gamma, c.beta, rm, rv, c.B, c.C, c.HW, c.eps, 0);
    expect_pt("bn_eval y", c.y, fx_f32("bn_eval", "y", c.n), c.n);
}

static double bn_loss(void *ctx)
{
    bn_case *c = ctx;
    bn_forward(c);
    return tu_dot(c->y, c->r, c->n);
}

static void test_bn_fd(void **state)
{
    (void)state;
    bn_case c = bn_load("bn");
    size_t C = (size_t)c.C;
    c.r = fx_f32("bn", "dy", c.n);
    float *dx = zeros(c.n), *dg = zeros(C), *db = zeros(C);
    bn_forward(&c);
    bn_backward(&c, dx, dg, db);
    tu_fd_check("bn x", bn_loss, &c, c.x, dx, c.n, NULL);
    tu_fd_check("bn weight", bn_loss, &c, c.gamma, dg, C, NULL);
    tu_fd_check("bn bias", bn_loss, &c, c.beta, db, C, NULL);
}

/* BatchNorm's inputs for a case: input x and output gradient dy [B, C, HW], gamma about 1,
 * beta about 0. */
typedef struct {
    size_t n, Cs;
    float *x, *dy, *gamma, *beta;
} bn_inputs;

static bn_inputs bn_inputs_of(int B, int C, int HW, uint64_t seed)
{
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    bn_inputs k = {(size_t)B * C * HW, (size_t)C, NULL, NULL, NULL, NULL};
    k.x = random_values(&rng, k.n, 2.0f), k.dy = random_values(&rng, k.n, 1.0f);
    k.gamma = random_values(&rng, k.Cs, 0.5f), k.beta = random_values(&rng, k.Cs, 0.5f);
    for (int c = 0; c < C; c++) k.gamma[c] += 1.0f;
    return k;
}

/* The batch statistics of two forward passes: the same bits. */
static void assert_same_statistics(const float *mean, const float *invstd, const float *var,
                                   const float *mean_f, const float *invstd_f,
                                   const float *var_f, size_t Cs)
{
    assert_memory_equal(mean_f, mean, Cs * sizeof *mean);
    assert_memory_equal(invstd_f, invstd, Cs * sizeof *invstd);
    assert_memory_equal(var_f, var, Cs * sizeof *var);
}

/* BatchNorm with the relu after it fused into its passes computes the bits of the two layers
 * run one after the other: the forward output, the running statistics' inputs, and, from the
 * relu's output gradient, the input and parameter gradients (the relu's gate recomputed from
 * the input). Planes with vector tails, a plane of one value (batchnorm1d), more channels than
 * one sweep takes. */
static void bn_relu_fused_case(int B, int C, int HW, uint64_t seed)
{
    bn_inputs k = bn_inputs_of(B, C, HW, seed);
    size_t n = k.n, Cs = k.Cs;
    float *x = k.x, *dy = k.dy, *gamma = k.gamma, *beta = k.beta;
    float *y = zeros(n), *yr = zeros(n), *yf = zeros(n), *mean = zeros(Cs), *invstd = zeros(Cs);
    float *var = zeros(Cs), *mean_f = zeros(Cs), *invstd_f = zeros(Cs), *var_f = zeros(Cs);
    cn_batchnorm2d_forward_train(y, mean, invstd, var, x, gamma, beta, B, C, HW, 1e-5f, 0);
    cn_relu_forward(yr, y, n);
    cn_batchnorm2d_forward_train(yf, mean_f, invstd_f, var_f, x, gamma, beta, B, C, HW, 1e-5f, 1);
    assert_memory_equal(yf, yr, n * sizeof *yf);
    assert_same_statistics(mean, invstd, var, mean_f, invstd_f, var_f, Cs);
    size_t zeroed = 0;
    for (size_t i = 0; i < n; i++) zeroed += yr[i] == 0.0f;
    assert_true(zeroed > n / 8 && zeroed < n - n / 8); /* the gate matters */

    float *dbn = zeros(n), *dx = nans(n), *dx_f = nans(n);
    float *dg = zeros(Cs), *db = zeros(Cs), *dg_f = zeros(Cs), *db_f = zeros(Cs);
    cn_relu_backward(dbn, dy, yr, n);
    cn_batchnorm2d_backward(dx, dg, db, dbn, x, mean, invstd, gamma, beta, B, C, HW, 0);
    cn_batchnorm2d_backward(dx_f, dg_f, db_f, dy, x, mean, invstd, gamma, beta, B, C, HW, 1);
    assert_memory_equal(dx_f, dx, n * sizeof *dx);
    assert_memory_equal(dg_f, dg, Cs * sizeof *dg);
    assert_memory_equal(db_f, db, Cs * sizeof *db);

    cn_batchnorm2d_forward_eval(y, x, gamma, beta, mean, var, B, C, HW, 1e-5f, 0);
    cn_relu_forward(yr, y, n);
    cn_batchnorm2d_forward_eval(yf, x, gamma, beta, mean, var, B, C, HW, 1e-5f, 1);
    assert_memory_equal(yf, yr, n * sizeof *yf);
}

/* The same for a relu right before BatchNorm (CN_BN_RELU_BEFORE): BatchNorm reads the relu's
 * input and writes the relu's input gradient, the bits of relu then BatchNorm. */
static void relu_bn_fused_case(int B, int C, int HW, uint64_t seed)
{
    bn_inputs k = bn_inputs_of(B, C, HW, seed);
    size_t n = k.n, Cs = k.Cs;
    float *x = k.x, *dy = k.dy, *gamma = k.gamma, *beta = k.beta;
    x[0] = -1.0f; /* the first value, which the statistics are taken about, is rectified too */
    float *xr = zeros(n), *y = zeros(n), *yf = zeros(n), *mean = zeros(Cs), *invstd = zeros(Cs);
    float *var = zeros(Cs), *mean_f = zeros(Cs), *invstd_f = zeros(Cs), *var_f = zeros(Cs);
    cn_relu_forward(xr, x, n);
    cn_batchnorm2d_forward_train(y, mean, invstd, var, xr, gamma, beta, B, C, HW, 1e-5f, 0);
    cn_batchnorm2d_forward_train(yf, mean_f, invstd_f, var_f, x, gamma, beta, B, C, HW, 1e-5f,
                                 CN_BN_RELU_BEFORE);
    assert_memory_equal(yf, y, n * sizeof *yf);
    assert_same_statistics(mean, invstd, var, mean_f, invstd_f, var_f, Cs);

    float *dxr = zeros(n), *dx = nans(n), *dx_f = nans(n);
    float *dg = zeros(Cs), *db = zeros(Cs), *dg_f = zeros(Cs), *db_f = zeros(Cs);
    cn_batchnorm2d_backward(dxr, dg, db, dy, xr, mean, invstd, gamma, beta, B, C, HW, 0);
    cn_relu_backward(dx, dxr, xr, n);
    cn_batchnorm2d_backward(dx_f, dg_f, db_f, dy, x, mean, invstd, gamma, beta, B, C, HW,
                            CN_BN_RELU_BEFORE);
    assert_memory_equal(dx_f, dx, n * sizeof *dx);
    assert_memory_equal(dg_f, dg, Cs * sizeof *dg);
    assert_memory_equal(db_f, db, Cs * sizeof *db);
    size_t zeroed = 0;
    for (size_t i = 0; i < n; i++) zeroed += dx[i] == 0.0f;
    assert_true(zeroed > n / 8 && zeroed < n - n / 8); /* the gate matters */

    cn_batchnorm2d_forward_eval(y, xr, gamma, beta, mean, var, B, C, HW, 1e-5f, 0);
    cn_batchnorm2d_forward_eval(yf, x, gamma, beta, mean, var, B, C, HW, 1e-5f,
                                CN_BN_RELU_BEFORE);
    assert_memory_equal(yf, y, n * sizeof *yf);
}

static void test_bn_relu_fused_equals_two_layers(void **state)
{
    (void)state;
    bn_relu_fused_case(5, 3, 144, 21);  /* the seed's bn1 planes, 12 x 12 */
    bn_relu_fused_case(3, 37, 13, 22);  /* tails, two sweeps of channels */
    bn_relu_fused_case(16, 40, 1, 23);  /* batchnorm1d */
    bn_relu_fused_case(2, 2, 1030, 24); /* long planes */
    relu_bn_fused_case(5, 3, 144, 25);
    relu_bn_fused_case(3, 37, 13, 26);
    relu_bn_fused_case(16, 40, 1, 27);
    relu_bn_fused_case(2, 2, 1030, 28);
    relu_bn_fused_case(300, 2, 1024, 29); /* past CN_BN_CACHED_FLOATS: the sweep by samples */
}

/* The batch statistics stay exact when the values are far from 0 beside their spread (a one
 * pass sum of squares would cancel): against a two-pass reference in double. */
static void test_bn_statistics_far_from_zero(void **state)
{
    (void)state;
    enum { B = 4, C = 3, HW = 50 };
    cn_rng rng;
    cn_rng_seed(&rng, 25);
    size_t n = (size_t)B * C * HW;
    float *x = random_values(&rng, n, 0.01f), *y = zeros(n);
    for (size_t i = 0; i < n; i++) x[i] += 1000.0f * (float)(1 + i / HW % C);
    float gamma[C] = {1, 1, 1}, beta[C] = {0}, mean[C], invstd[C], var[C];
    cn_batchnorm2d_forward_train(y, mean, invstd, var, x, gamma, beta, B, C, HW, 1e-8f, 0);
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) m += x[((size_t)b * C + c) * HW + i];
        m /= B * HW;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                double d = x[((size_t)b * C + c) * HW + i] - m;
                v += d * d;
            }
        v /= B * HW;
        double want = 1.0 / sqrt(v + 1e-8);
        if (!(fabs(invstd[c] - want) <= 1e-6 * want && fabs(mean[c] - m) <= 1e-6 * fabs(m)))
            fail_msg("channel %d: mean %.9g invstd %.9g, want %.9g %.9g", c, (double)mean[c],
                     (double)invstd[c], m, want);
    }
}

/* ---------------------------------------------------------------- linear */

typedef struct {
    int B, I, O;
    size_t nx, nw, ny;
    float *x, *w, *b, *r, *y;
} linear_case;

static linear_case linear_load(void)
{
    linear_case c = {.B = fx_int("linear", "B"), .I = fx_int("linear", "I"),
                     .O = fx_int("linear", "O")};
    c.nx = (size_t)c.B * c.I;
    c.nw = (size_t)c.O * c.I;
    c.ny = (size_t)c.B * c.O;
    c.x = fx_f32("linear", "x", c.nx);
    c.w = fx_f32("linear", "weight", c.nw);
    c.b = fx_f32("linear", "bias", (size_t)c.O);
    c.r = fx_f32("linear", "dy", c.ny);
    c.y = zeros(c.ny);
    return c;
}

static void linear_forward(linear_case *c)
{
    cn_linear_forward(c->y, c->x, c->w, c->b, c->B, c->I, c->O);
}

static void linear_backward(linear_case *c, float *dx, float *dw, float *db)
{
    cn_linear_backward(dx, dw, db, c->r, c->x, c->w, c->B, c->I, c->O);
}

static void test_linear_pytorch(void **state)
{
    (void)state;
    linear_case c = linear_load();
    size_t O = (size_t)c.O;
    linear_forward(&c);
    expect_pt("linear y", c.y, fx_f32("linear", "y", c.ny), c.ny);
    float *dx = nans(c.nx), *dw = zeros(c.nw), *db = zeros(O);
    float *want_dw = fx_f32("linear", "dweight", c.nw), *want_db = fx_f32("linear", "dbias", O);
    linear_backward(&c, dx, dw, db);
    expect_pt("linear dx", dx, fx_f32("linear", "dx", c.nx), c.nx);
    expect_pt("linear dweight", dw, want_dw, c.nw);
    expect_pt("linear dbias", db, want_db, O);
    linear_backward(&c, NULL, dw, db);
    expect_pt("linear dweight accumulated", dw, twice(want_dw, c.nw), c.nw);
    expect_pt("linear dbias accumulated", db, twice(want_db, O), O);
}

static double linear_loss(void *ctx)
{
    linear_case *c = ctx;
    linear_forward(c);
    return tu_dot(c->y, c->r, c->ny);
}

static void test_linear_fd(void **state)
{
    (void)state;
    linear_case c = linear_load();
    float *dx = zeros(c.nx), *dw = zeros(c.nw), *db = zeros((size_t)c.O);
    linear_backward(&c, dx, dw, db);
    tu_fd_check("linear x", linear_loss, &c, c.x, dx, c.nx, NULL);
    tu_fd_check("linear weight", linear_loss, &c, c.w, dw, c.nw, NULL);
    tu_fd_check("linear bias", linear_loss, &c, c.b, db, (size_t)c.O, NULL);
}

/* ---------------------------------------------------------------- log_softmax and nll */

typedef struct {
    int B, N;
    size_t n;
    float *x, *r, *y;
    uint8_t labels[16];
} softmax_case;

static softmax_case softmax_load(const char *p)
{
    softmax_case c = {.B = fx_int(p, "B"), .N = fx_int(p, "N")};
    c.n = (size_t)c.B * c.N;
    c.y = zeros(c.n);
    return c;
}

static void test_log_softmax_pytorch(void **state)
{
    (void)state;
    softmax_case c = softmax_load("logsoftmax");
    c.x = fx_f32("logsoftmax", "x", c.n);
    c.r = fx_f32("logsoftmax", "dy", c.n);
    cn_log_softmax_forward(c.y, c.x, c.B, c.N);
    expect_pt("log_softmax y", c.y, fx_f32("logsoftmax", "y", c.n), c.n);
    float *dx = nans(c.n);
    cn_log_softmax_backward(dx, c.r, c.y, c.B, c.N);
    expect_pt("log_softmax dx", dx, fx_f32("logsoftmax", "dx", c.n), c.n);
}

static double log_softmax_loss(void *ctx)
{
    softmax_case *c = ctx;
    cn_log_softmax_forward(c->y, c->x, c->B, c->N);
    return tu_dot(c->y, c->r, c->n);
}

static void test_log_softmax_fd(void **state)
{
    (void)state;
    softmax_case c = softmax_load("logsoftmax");
    c.x = fx_f32("logsoftmax", "x", c.n);
    c.r = fx_f32("logsoftmax", "dy", c.n);
    float *dx = zeros(c.n);
    cn_log_softmax_forward(c.y, c.x, c.B, c.N);
    cn_log_softmax_backward(dx, c.r, c.y, c.B, c.N);
    tu_fd_check("log_softmax x", log_softmax_loss, &c, c.x, dx, c.n, NULL);
}

/* Case p's input (its tensor field) and labels. */
static softmax_case labelled_load(const char *p, const char *field)
{
    softmax_case c = softmax_load(p);
    assert_true(c.B <= (int)sizeof c.labels);
    c.x = fx_f32(p, field, c.n);
    const int64_t *labels = fx_i64(p, "labels", (size_t)c.B);
    for (int b = 0; b < c.B; b++) c.labels[b] = (uint8_t)labels[b];
    return c;
}

static softmax_case nll_load(void) { return labelled_load("nll", "logp"); }

static void test_nll_pytorch(void **state)
{
    (void)state;
    softmax_case c = nll_load();
    float loss = cn_nll_loss(c.x, c.labels, c.B, c.N);
    expect_pt("nll loss", &loss, fx_f32("nll", "loss", 1), 1);
    float *dx = nans(c.n);
    cn_nll_backward(dx, c.labels, c.B, c.N);
    expect_exact("nll dlogp", dx, fx_f32("nll", "dlogp", c.n), c.n);
}

static double nll_loss(void *ctx)
{
    softmax_case *c = ctx;
    return cn_nll_loss(c->x, c->labels, c->B, c->N);
}

static void test_nll_fd(void **state)
{
    (void)state;
    softmax_case c = nll_load();
    float *dx = zeros(c.n);
    cn_nll_backward(dx, c.labels, c.B, c.N);
    tu_fd_check("nll logp", nll_loss, &c, c.x, dx, c.n, NULL);
}

/* ---------------------------------------------------------------- label smoothing */

static softmax_case smooth_load(float *a)
{
    *a = (float)atof(fx_meta("smooth", "label_smoothing"));
    return labelled_load("smooth", "x");
}

/* log_softmax, then the smoothed loss and the gradient of the logits, as PyTorch (the gradient
 * of logp is checked against finite differences below). */
static void test_smoothed_nll_pytorch(void **state)
{
    (void)state;
    float a;
    softmax_case c = smooth_load(&a);
    assert_true(a > 0);
    cn_log_softmax_forward(c.y, c.x, c.B, c.N);
    expect_pt("smoothed logp", c.y, fx_f32("smooth", "logp", c.n), c.n);
    float loss = cn_smoothed_nll_loss(c.y, c.labels, c.B, c.N, a);
    expect_pt("smoothed loss", &loss, fx_f32("smooth", "loss", 1), 1);
    float *dlogp = nans(c.n), *dx = nans(c.n);
    cn_smoothed_nll_backward(dlogp, c.labels, c.B, c.N, a);
    cn_log_softmax_backward(dx, dlogp, c.y, c.B, c.N);
    expect_pt("smoothed dx", dx, fx_f32("smooth", "dx", c.n), c.n);
}

/* Smoothing 0 is the plain NLL, bit for bit. */
static void test_smoothed_nll_zero_is_nll(void **state)
{
    (void)state;
    float a;
    softmax_case c = smooth_load(&a);
    cn_log_softmax_forward(c.y, c.x, c.B, c.N);
    float plain = cn_nll_loss(c.y, c.labels, c.B, c.N);
    float zero = cn_smoothed_nll_loss(c.y, c.labels, c.B, c.N, 0.0f);
    assert_memory_equal(&plain, &zero, sizeof plain);
    float *want = nans(c.n), *got = nans(c.n);
    cn_nll_backward(want, c.labels, c.B, c.N);
    cn_smoothed_nll_backward(got, c.labels, c.B, c.N, 0.0f);
    assert_memory_equal(want, got, c.n * sizeof *got);
}

static double smoothed_loss(void *ctx)
{
    softmax_case *c = ctx;
    return cn_smoothed_nll_loss(c->y, c->labels, c->B, c->N, 0.1f);
}

static void test_smoothed_nll_fd(void **state)
{
    (void)state;
    float a;
    softmax_case c = smooth_load(&a);
    cn_log_softmax_forward(c.y, c.x, c.B, c.N);
    float *dlogp = zeros(c.n);
    cn_smoothed_nll_backward(dlogp, c.labels, c.B, c.N, 0.1f);
    tu_fd_check("smoothed logp", smoothed_loss, &c, c.y, dlogp, c.n, NULL);
}

static int load_smoothing_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("label_smoothing.safetensors");
    return fixture ? 0 : -1;
}

/* ---------------------------------------------------------------- main */

#define T(f) cmocka_unit_test_teardown(f, free_allocs)

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        T(test_conv_pytorch),       T(test_conv1_pytorch),   T(test_conv_fd),
        T(test_conv1_fd),           T(test_pool_pytorch),    T(test_pool7_pytorch),
        T(test_pool_fd),            T(test_relu_pytorch),    T(test_relu_fd),
        T(test_pool_ties_match_scan_order), T(test_pool_rows_match_planes),
        T(test_conv_from_pool_matches_dense),
        T(test_padded_first_conv_from_pool),
        T(test_conv_bands_match_direct_loops), T(test_conv_winograd_matches_direct_loops),
        T(test_streamed_outputs_match_cached_ones),
        T(test_conv_bf16_matches_fp32_on_rounded_values),
        T(test_conv_bf16_stride_padding_matches_fp32),
        T(test_linear_bf16_matches_fp32_on_rounded_values),
        T(test_bn_train_pytorch),   T(test_bn_eval_pytorch), T(test_bn_fd),
        T(test_bn_relu_fused_equals_two_layers), T(test_bn_statistics_far_from_zero),
        T(test_linear_pytorch),     T(test_linear_fd),       T(test_log_softmax_pytorch),
        T(test_log_softmax_fd),     T(test_nll_pytorch),     T(test_nll_fd),
    };
    const struct CMUnitTest stride_padding[] = {
        T(test_k3p1_small_pytorch),  T(test_k3p1_pytorch),        T(test_k3s2p1_pytorch),
        T(test_k5s2p2_pytorch),      T(test_k1s2_pytorch),        T(test_k1_pytorch),
        T(test_nobias_k3p1_pytorch), T(test_nobias_k3_pytorch),   T(test_k3p1_small_fd),
        T(test_k3s2p1_fd),           T(test_k5s2p2_fd),           T(test_nobias_k3p1_fd),
    };
    const struct CMUnitTest smoothing[] = {
        T(test_smoothed_nll_pytorch), T(test_smoothed_nll_zero_is_nll), T(test_smoothed_nll_fd),
    };
    int failed = cmocka_run_group_tests(tests, load_fixture, free_fixture);
    failed += cmocka_run_group_tests(smoothing, load_smoothing_fixture, free_fixture);
    return failed + cmocka_run_group_tests(stride_padding, load_conv_fixture, free_fixture);
}
