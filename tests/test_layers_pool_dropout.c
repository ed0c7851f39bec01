/* test_layers_pool_dropout.c — the layer types avgpool2d, global_avgpool and dropout through
 * their tables (src/layers/layer.h): forward and backward against PyTorch (tests/fixtures/
 * layers_pool_dropout.safetensors, written by tools/gen_fixtures.py) and against finite
 * differences (tu_fd_check), their plans (output shapes, refusals and their messages) and
 * canonical keys, and dropout's training mask, which PyTorch cannot give: its statistics, its
 * scale, that backward uses the same mask, that it depends on every number of its key and on
 * nothing else, not even on how a batch is split into passes.
 * It does not test models, model files or the trainer.
 *
 * Tolerances against PyTorch (|got - want| <= atol + rtol * |want|): atol 2e-6, rtol 2e-5 for
 * the pools (float sums of at most 42 values, in PyTorch's order for avgpool2d, in double here
 * where PyTorch's mean sums floats); dropout in evaluation is a copy: exact. */
#include "testutil.h"
#include "layers/layer.h"
#include "layers/layers.h"

/* The tables under test (types.c lists them for the model). */

#define PT_ATOL 2e-6
#define PT_RTOL 2e-5

static cn_safetensors *fixture;

/* ---------------------------------------------------------------- allocations and fixture */

#define MAX_ALLOCS 64
static void *allocs[MAX_ALLOCS];
static int num_allocs;

static float *zeros(size_t n)
{
    assert_true(num_allocs < MAX_ALLOCS);
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    allocs[num_allocs++] = p;
    return p;
}

static float *nans(size_t n)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static float *random_values(cn_rng *rng, size_t n, float offset)
{
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = offset + 2.0f * cn_rng_uniform(rng) - 1.0f;
    return p;
}

static int free_allocs(void **state)
{
    (void)state;
    while (num_allocs > 0) free(allocs[--num_allocs]);
    return 0;
}

static int load_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("layers_pool_dropout.safetensors");
    return fixture ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    cn_safetensors_free(fixture);
    return 0;
}

/* The float tensor prefix.field, copied; it must hold exactly n values. */
static float *fx_f32(const char *prefix, const char *field, size_t n)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, field);
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    if (!t) fail_msg("fixture tensor %s missing: rerun tools/gen_fixtures.py", name);
    assert_int_equal(t->dtype, CN_F32);
    assert_int_equal(tu_ref_bytes(t), n * sizeof(float));
    float *p = zeros(n);
    memcpy(p, t->data, n * sizeof *p);
    return p;
}

/* The int64 tensor prefix.field as int32 picks (max-pool argmax); it must hold n values. */
static int32_t *fx_picks(const char *prefix, const char *field, size_t n)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, field);
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    if (!t) fail_msg("fixture tensor %s missing: rerun tools/gen_fixtures.py", name);
    assert_int_equal(t->dtype, CN_I64);
    assert_int_equal(tu_ref_bytes(t), n * sizeof(int64_t));
    int32_t *p = (int32_t *)zeros(n);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, (const char *)t->data + i * sizeof v, sizeof v);
        p[i] = (int32_t)v;
    }
    return p;
}

static int fx_int(const char *prefix, const char *key)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", prefix, key);
    const char *v = cn_safetensors_meta(fixture, name);
    if (!v) fail_msg("fixture metadata %s missing", name);
    return atoi(v);
}

/* ---------------------------------------------------------------- layers and passes */

/* A layer of type t planned on input in from spec s; the plan must succeed. */
static cn_layer planned(const cn_layer_type *t, cn_shape in, cn_layer_spec s, int index)
{
    cn_layer l = {.type = t, .index = index, .in = in, .counter = -1};
    cn_error err = {{0}};
    if (t->plan(&l, &s, &err) != 0) fail_msg("%s: plan refused: %s", t->kind, err.msg);
    return l;
}

/* The plan of type t on input in from spec s must fail with exactly message. */
static void expect_refusal(const cn_layer_type *t, cn_shape in, cn_layer_spec s,
                           const char *message)
{
    cn_layer l = {.type = t, .in = in, .counter = -1};
    cn_error err = {{0}};
    if (t->plan(&l, &s, &err) == 0) fail_msg("%s: plan accepted what it must refuse", t->kind);
    assert_string_equal(err.msg, message);
}

static void run_forward(const cn_layer *l, int n, int first, const float *x, float *y,
                        int training, const cn_step_key *key)
{
    cn_layer_pass p = {.l = l, .n = n, .first = first, .x = x, .y = y, .training = training,
                       .key = key};
    l->type->forward(&p);
}

static void run_backward(const cn_layer *l, int n, int first, const float *dy, float *dx,
                         const cn_step_key *key)
{
    cn_layer_pass p = {.l = l, .n = n, .first = first, .dy = dy, .dx = dx, .training = 1,
                       .key = key};
    l->type->backward(&p);
}

/* ---------------------------------------------------------------- against PyTorch */

/* A fixture case of a pooling table: plan on [C,H,W], forward, backward (into NaNs, which it
 * must overwrite) and backward without an input gradient. */
static void pool_vs_pytorch(const cn_layer_type *t, const char *p, cn_layer_spec s,
                            cn_shape want_out)
{
    int B = fx_int(p, "B");
    cn_shape in = {fx_int(p, "C"), fx_int(p, "H"), fx_int(p, "W"), 0};
    cn_layer l = planned(t, in, s, 0);
    assert_memory_equal(&l.out, &want_out, sizeof want_out);
    size_t nx = B * cn_shape_size(in), ny = B * cn_shape_size(l.out);
    float *y = nans(ny), *dx = nans(nx), *dy = fx_f32(p, "dy", ny);
    run_forward(&l, B, 0, fx_f32(p, "x", nx), y, 1, NULL);
    tu_expect_close(p, y, fx_f32(p, "y", ny), ny, PT_ATOL, PT_RTOL);
    run_backward(&l, B, 0, dy, dx, NULL);
    tu_expect_close(p, dx, fx_f32(p, "dx", nx), nx, PT_ATOL, PT_RTOL);
    run_backward(&l, B, 0, dy, NULL, NULL);
}

static void avgpool_vs_pytorch(const char *p, int stride_given)
{
    int H = fx_int(p, "H"), W = fx_int(p, "W"), K = fx_int(p, "K"), S = fx_int(p, "S");
    cn_layer_spec s = {.kind = CN_AVGPOOL2D, .kernel = K, .stride = stride_given ? S : 0};
    pool_vs_pytorch(&cn_avgpool2d_type, p, s,
                    (cn_shape){fx_int(p, "C"), (H - K) / S + 1, (W - K) / S + 1, 0});
}

static void test_avgpool_pytorch(void **state)
{
    (void)state;
    avgpool_vs_pytorch("avgpool_k2s2", 0); /* odd sizes: the last row and column floored away */
    avgpool_vs_pytorch("avgpool_k2s2", 1);
    avgpool_vs_pytorch("avgpool_k3s2", 1); /* overlapping windows */
    avgpool_vs_pytorch("avgpool_k3s1", 1);
    avgpool_vs_pytorch("avgpool_k3s3", 0); /* one channel */
}

static void test_global_avgpool_pytorch(void **state)
{
    (void)state;
    cn_layer_spec s = {.kind = CN_GLOBAL_AVGPOOL};
    pool_vs_pytorch(&cn_global_avgpool_type, "global_avgpool", s, (cn_shape){5, 1, 1, 1});
    pool_vs_pytorch(&cn_global_avgpool_type, "global_avgpool_row", s, (cn_shape){16, 1, 1, 1});
}

/* nn.MaxPool2d(K, S) with a stride other than its window, through maxpool2d's table: the same
 * values and picks as PyTorch (ties included: the inputs take four levels), and backward adds
 * up where overlapping windows pick the same input. */
static void maxpool_vs_pytorch(const char *p)
{
    int B = fx_int(p, "B"), H = fx_int(p, "H"), W = fx_int(p, "W");
    int K = fx_int(p, "K"), S = fx_int(p, "S");
    cn_shape in = {fx_int(p, "C"), H, W, 0};
    cn_layer l = planned(&cn_maxpool2d_type, in,
                         (cn_layer_spec){.kind = CN_MAXPOOL2D, .kernel = K, .stride = S}, 0);
    cn_shape want = {in.c, (H - K) / S + 1, (W - K) / S + 1, 0};
    assert_memory_equal(&l.out, &want, sizeof want);
    size_t nx = B * cn_shape_size(in), ny = B * cn_shape_size(l.out);
    float *y = nans(ny), *dx = nans(nx), *dy = fx_f32(p, "dy", ny);
    int32_t *picks = (int32_t *)zeros(l.type->aux_bytes(&l) * B / sizeof(float));
    cn_layer_pass fw = {.l = &l, .n = B, .x = fx_f32(p, "x", nx), .y = y, .aux = picks};
    l.type->forward(&fw);
    assert_memory_equal(y, fx_f32(p, "y", ny), ny * sizeof *y);
    assert_memory_equal(picks, fx_picks(p, "argmax", ny), ny * sizeof *picks);
    cn_layer_pass bw = {.l = &l, .n = B, .dy = dy, .dx = dx, .aux = picks, .training = 1};
    l.type->backward(&bw);
    tu_expect_close(p, dx, fx_f32(p, "dx", nx), nx, PT_ATOL, PT_RTOL);
    char line[64] = "";
    l.type->describe(&l, line, sizeof line);
    char want_line[64];
    snprintf(want_line, sizeof want_line, " kernel=%d stride=%d", K, S);
    assert_string_equal(line, want_line);
}

static void test_maxpool_strided_pytorch(void **state)
{
    (void)state;
    maxpool_vs_pytorch("maxpool_k3s2"); /* overlapping windows */
    maxpool_vs_pytorch("maxpool_k2s1");
    maxpool_vs_pytorch("maxpool_k2s3"); /* gaps between windows */
}

/* Evaluation is the identity, forward and backward, whatever p. */
static void test_dropout_eval_pytorch(void **state)
{
    (void)state;
    const char *p = "dropout_eval";
    int B = fx_int(p, "B");
    size_t n = (size_t)B * 100;
    cn_layer l = planned(&cn_dropout_type, (cn_shape){4, 5, 5, 0},
                         (cn_layer_spec){.kind = CN_DROPOUT, .p = 0.5f}, 2);
    float *y = nans(n), *dx = nans(n), *dy = fx_f32(p, "dy", n);
    run_forward(&l, B, 0, fx_f32(p, "x", n), y, 0, NULL);
    assert_memory_equal(y, fx_f32(p, "y", n), n * sizeof *y);
    cn_layer_pass back = {.l = &l, .n = B, .dy = dy, .dx = dx, .training = 0};
    l.type->backward(&back);
    assert_memory_equal(dx, fx_f32(p, "dx", n), n * sizeof *dx);
}

/* ---------------------------------------------------------------- finite differences */

typedef struct {
    const cn_layer *l;
    int B;
    const cn_step_key *key;
    float *x, *y, *r;
    size_t ny;
} fd_case;

static double fd_loss(void *ctx)
{
    fd_case *c = ctx;
    run_forward(c->l, c->B, 0, c->x, c->y, 1, c->key);
    return tu_dot(c->y, c->r, c->ny);
}

/* L = sum(y * r) on random x and r: backward's dx against finite differences. */
static void fd_layer(const char *what, const cn_layer *l, int B, const cn_step_key *key,
                     cn_rng *rng)
{
    size_t nx = B * cn_shape_size(l->in), ny = B * cn_shape_size(l->out);
    fd_case c = {l, B, key, random_values(rng, nx, 0.0f), zeros(ny), random_values(rng, ny, 0.0f),
                 ny};
    float *dx = nans(nx);
    run_backward(l, B, 0, c.r, dx, key);
    tu_fd_check(what, fd_loss, &c, c.x, dx, nx, NULL);
}

static void test_pools_fd(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 31);
    cn_layer_spec k3s2 = {.kind = CN_AVGPOOL2D, .kernel = 3, .stride = 2};
    cn_layer_spec k2 = {.kind = CN_AVGPOOL2D, .kernel = 2};
    cn_layer_spec k3s1 = {.kind = CN_AVGPOOL2D, .kernel = 3, .stride = 1};
    cn_layer l = planned(&cn_avgpool2d_type, (cn_shape){3, 9, 8, 0}, k3s2, 0);
    fd_layer("avgpool2d k3 s2", &l, 2, NULL, &rng);
    l = planned(&cn_avgpool2d_type, (cn_shape){2, 7, 5, 0}, k2, 0);
    fd_layer("avgpool2d k2", &l, 2, NULL, &rng);
    l = planned(&cn_avgpool2d_type, (cn_shape){2, 5, 6, 0}, k3s1, 0);
    fd_layer("avgpool2d k3 s1", &l, 1, NULL, &rng);
    l = planned(&cn_global_avgpool_type, (cn_shape){4, 5, 7, 0},
                (cn_layer_spec){.kind = CN_GLOBAL_AVGPOOL}, 0);
    fd_layer("global_avgpool", &l, 3, NULL, &rng);
}

/* The mask is a function of the key, not of x: fixed while x moves. */
static void test_dropout_fd(void **state)
{
    (void)state;
    cn_rng rng;
    cn_rng_seed(&rng, 32);
    cn_step_key key = {5, 1, 2, 0};
    cn_layer l = planned(&cn_dropout_type, (cn_shape){3, 4, 5, 0},
                         (cn_layer_spec){.kind = CN_DROPOUT, .p = 0.3f}, 4);
    fd_layer("dropout", &l, 3, &key, &rng);
}

/* ---------------------------------------------------------------- dropout's mask */

enum { MASK_N = 4096 }; /* values per sample in the mask tests: [16,16,16] */

static cn_layer dropout_layer(float p, int index)
{
    return planned(&cn_dropout_type, (cn_shape){16, 16, 16, 0},
                   (cn_layer_spec){.kind = CN_DROPOUT, .p = p}, index);
}

/* The mask (1 kept, 0 dropped) of sample first of layer l under key. */
static void mask_of(const cn_layer *l, int first, const cn_step_key *key, float *mask)
{
    float *ones = zeros(MASK_N);
    for (int i = 0; i < MASK_N; i++) ones[i] = 1.0f;
    run_forward(l, 1, first, ones, mask, 1, key);
    for (int i = 0; i < MASK_N; i++) mask[i] = mask[i] != 0.0f;
}

/* Values in 1..2 (never 0, so y = 0 means dropped), for n samples. */
static float *nonzero_values(size_t n, uint64_t seed)
{
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    return random_values(&rng, n * MASK_N, 2.5f);
}

/* Over 2^20 values the fraction kept is 1 - p within 6 standard deviations (at most 0.003):
 * a p off by 0.01, or the kept and dropped sides swapped, fails. Each kept value is exactly x
 * times the float 1/(1-p); backward lets dy through exactly where forward kept x, scaled alike. */
static void check_fraction(float p)
{
    enum { B = 256 };
    cn_layer l = dropout_layer(p, 3);
    cn_step_key key = {7, 2, 11, 1};
    size_t n = (size_t)B * MASK_N, kept = 0;
    float *x = nonzero_values(B, 1), *y = nans(n), *dy = nonzero_values(B, 2), *dx = nans(n);
    float scale = 1.0f / (1.0f - p);
    run_forward(&l, B, 0, x, y, 1, &key);
    run_backward(&l, B, 0, dy, dx, &key);
    for (size_t i = 0; i < n; i++) {
        if (y[i] == 0.0f) {
            if (dx[i] != 0.0f) fail_msg("p=%g: [%zu] dropped forward, not backward", p, i);
            continue;
        }
        kept++;
        if (y[i] != x[i] * scale || dx[i] != dy[i] * scale)
            fail_msg("p=%g: [%zu] y %.9g dx %.9g, want %.9g and %.9g", p, i, y[i], dx[i],
                     x[i] * scale, dy[i] * scale);
    }
    double fraction = (double)kept / n, sigma = sqrt(p * (1.0 - p) / n);
    if (fabs(fraction - (1.0 - p)) > 6 * sigma)
        fail_msg("p=%g: kept %.5f of the values, want %.5f +- %.5f", p, fraction, 1.0 - p,
                 6 * sigma);
}

static void test_dropout_fraction_and_scale(void **state)
{
    (void)state;
    check_fraction(0.5f);
    check_fraction(0.1f);
    check_fraction(0.9f);
    check_fraction(0.25f);
}

/* The fraction of positions where two masks of p = 1/2 differ: 1/2 for independent masks. */
static double differing(const float *a, const float *b)
{
    int n = 0;
    for (int i = 0; i < MASK_N; i++) n += a[i] != b[i];
    return (double)n / MASK_N;
}

static void expect_independent(const char *what, const float *a, const float *b)
{
    double d = differing(a, b);
    if (fabs(d - 0.5) > 0.05) fail_msg("%s: masks differ at %.3f of the positions", what, d);
}

/* The same key gives the same mask; changing any one of seed, epoch, step, replica, the
 * sample's index or the layer's index gives an unrelated one. */
static void test_dropout_mask_depends_on_its_key(void **state)
{
    (void)state;
    cn_step_key key = {42, 3, 17, 2};
    cn_layer l = dropout_layer(0.5f, 6), other_layer = dropout_layer(0.5f, 7);
    float *base = zeros(MASK_N), *again = zeros(MASK_N), *m = zeros(MASK_N);
    mask_of(&l, 9, &key, base);
    mask_of(&l, 9, &key, again);
    assert_memory_equal(base, again, MASK_N * sizeof *base);
    cn_step_key changed[] = {{43, 3, 17, 2}, {42, 4, 17, 2}, {42, 3, 18, 2}, {42, 3, 17, 3}};
    const char *names[] = {"seed", "epoch", "step", "replica"};
    for (int k = 0; k < 4; k++) {
        mask_of(&l, 9, &changed[k], m);
        expect_independent(names[k], base, m);
    }
    mask_of(&l, 10, &key, m);
    expect_independent("sample", base, m);
    mask_of(&other_layer, 9, &key, m);
    expect_independent("layer", base, m);
    mask_of(&l, 10, &key, again);
    mask_of(&l, 11, &key, m);
    expect_independent("neighbouring samples", again, m);
}

/* A batch run as one pass or split into passes at any points gives the same bytes, forward and
 * backward: what a thread computes does not depend on which part of the batch it took. */
static void test_dropout_passes_split_anywhere(void **state)
{
    (void)state;
    enum { B = 10 };
    static const int cuts[][3] = {{0, 4, B}, {0, 1, B}, {0, 9, B}};
    cn_layer l = dropout_layer(0.4f, 1);
    cn_step_key key = {1, 0, 57, 5};
    size_t n = (size_t)B * MASK_N;
    float *x = nonzero_values(B, 3), *whole = nans(n), *whole_dx = nans(n);
    float *split = nans(n), *split_dx = nans(n);
    run_forward(&l, B, 0, x, whole, 1, &key);
    run_backward(&l, B, 0, x, whole_dx, &key);
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        for (int part = 0; part < 2; part++) {
            int first = cuts[c][part], count = cuts[c][part + 1] - first;
            size_t at = (size_t)first * MASK_N;
            run_forward(&l, count, first, x + at, split + at, 1, &key);
            run_backward(&l, count, first, x + at, split_dx + at, &key);
        }
        assert_memory_equal(split, whole, n * sizeof *whole);
        assert_memory_equal(split_dx, whole_dx, n * sizeof *whole);
    }
}

/* p = 0 in training is the identity bit for bit: negative zero, subnormals, infinities, and a
 * signalling NaN (which a multiplication by 1 would quieten). */
static void test_dropout_p0_is_identity(void **state)
{
    (void)state;
    enum { B = 3 };
    size_t n = (size_t)B * MASK_N;
    cn_layer l = dropout_layer(0.0f, 0);
    cn_step_key key = {9, 9, 9, 9};
    float *x = nonzero_values(B, 4), *y = nans(n), *dx = nans(n);
    uint32_t signalling_nan = 0x7f800001u;
    x[0] = -0.0f, x[1] = 1e-40f, x[2] = INFINITY, x[3] = -INFINITY, x[4] = 0.0f;
    memcpy(&x[5], &signalling_nan, sizeof x[5]);
    run_forward(&l, B, 0, x, y, 1, &key);
    assert_memory_equal(y, x, n * sizeof *x);
    run_backward(&l, B, 0, x, dx, &key);
    assert_memory_equal(dx, x, n * sizeof *x);
}

/* ---------------------------------------------------------------- plans and keys */

static void expect_shape(const cn_layer *l, int c, int h, int w)
{
    if (l->out.c != c || l->out.h != h || l->out.w != w)
        fail_msg("%s on %dx%dx%d: out %dx%dx%d, want %dx%dx%d", l->type->kind, l->in.c, l->in.h,
                 l->in.w, l->out.c, l->out.h, l->out.w, c, h, w);
}

static void test_plan_shapes(void **state)
{
    (void)state;
    const cn_layer_type *avg = &cn_avgpool2d_type, *global = &cn_global_avgpool_type;
    cn_layer_spec k2 = {.kind = CN_AVGPOOL2D, .kernel = 2};
    cn_layer_spec k3s2 = {.kind = CN_AVGPOOL2D, .kernel = 3, .stride = 2};
    cn_layer_spec k5s3 = {.kind = CN_AVGPOOL2D, .kernel = 5, .stride = 3};
    cn_layer_spec g = {.kind = CN_GLOBAL_AVGPOOL}, d = {.kind = CN_DROPOUT, .p = 0.2f};
    cn_layer l = planned(avg, (cn_shape){10, 24, 24, 0}, k2, 0);
    expect_shape(&l, 10, 12, 12);
    assert_int_equal(l.args.stride, 2);
    l = planned(avg, (cn_shape){3, 7, 9, 0}, k2, 0);
    expect_shape(&l, 3, 3, 4);
    l = planned(avg, (cn_shape){4, 9, 11, 0}, k3s2, 0);
    expect_shape(&l, 4, 4, 5);
    l = planned(avg, (cn_shape){1, 5, 12, 0}, k5s3, 0);
    expect_shape(&l, 1, 1, 3);
    l = planned(avg, (cn_shape){2, 3, 1, 0}, (cn_layer_spec){.kind = CN_AVGPOOL2D, .kernel = 1}, 0);
    expect_shape(&l, 2, 3, 1);
    l = planned(global, (cn_shape){20, 4, 4, 0}, g, 0);
    expect_shape(&l, 20, 1, 1);
    l = planned(global, (cn_shape){16, 1, 5, 0}, g, 0);
    expect_shape(&l, 16, 1, 1);
    l = planned(&cn_dropout_type, (cn_shape){3, 4, 5, 0}, d, 0);
    expect_shape(&l, 3, 4, 5);
    l = planned(&cn_dropout_type, (cn_shape){50, 1, 1, 0}, d, 0);
    expect_shape(&l, 50, 1, 1);
}

static void test_plan_refusals(void **state)
{
    (void)state;
    const cn_layer_type *avg = &cn_avgpool2d_type;
    cn_layer_spec k8 = {.kind = CN_AVGPOOL2D, .kernel = 8};
    expect_refusal(avg, (cn_shape){320, 1, 1, 1}, k8,
                   "needs a [C,H,W] input, not the flat 320 features of flatten or linear");
    expect_refusal(&cn_global_avgpool_type, (cn_shape){50, 1, 1, 1},
                   (cn_layer_spec){.kind = CN_GLOBAL_AVGPOOL},
                   "needs a [C,H,W] input, not the flat 50 features of flatten or linear");
    expect_refusal(avg, (cn_shape){3, 7, 9, 0}, k8, "kernel=8 does not fit its input 3x7x9");
    expect_refusal(avg, (cn_shape){3, 9, 7, 0}, k8, "kernel=8 does not fit its input 3x9x7");
    expect_refusal(avg, (cn_shape){3, 9, 9, 0}, (cn_layer_spec){.kind = CN_AVGPOOL2D},
                   "kernel=0 must be at least 1");
    expect_refusal(avg, (cn_shape){3, 9, 9, 0},
                   (cn_layer_spec){.kind = CN_AVGPOOL2D, .kernel = 2, .stride = -1},
                   "stride=-1 must be at least 1");
    static const float bad_p[] = {-0.1f, 1.0f, 1.5f, NAN};
    static const char *const messages[] = {
        "p=-0.1 must be at least 0 and less than 1", "p=1 must be at least 0 and less than 1",
        "p=1.5 must be at least 0 and less than 1", "p=nan must be at least 0 and less than 1"};
    for (int i = 0; i < 4; i++)
        expect_refusal(&cn_dropout_type, (cn_shape){3, 4, 5, 0},
                       (cn_layer_spec){.kind = CN_DROPOUT, .p = bad_p[i]}, messages[i]);
}

static void expect_describe(const cn_layer *l, const char *want)
{
    char got[64] = "";
    if (l->type->describe) l->type->describe(l, got, sizeof got);
    assert_string_equal(got, want);
}

static void expect_dropout_describe(float p, const char *want)
{
    cn_layer l = dropout_layer(p, 0);
    expect_describe(&l, want);
    char text[32];
    snprintf(text, sizeof text, "%s", want + strlen(" p="));
    assert_true(strtof(text, NULL) == p); /* reads back as the same float */
}

static void test_describe(void **state)
{
    (void)state;
    cn_shape in = {3, 12, 12, 0};
    cn_layer l = planned(&cn_avgpool2d_type, in,
                         (cn_layer_spec){.kind = CN_AVGPOOL2D, .kernel = 2}, 0);
    expect_describe(&l, " kernel=2");
    l = planned(&cn_avgpool2d_type, in,
                (cn_layer_spec){.kind = CN_AVGPOOL2D, .kernel = 3, .stride = 3}, 0);
    expect_describe(&l, " kernel=3");
    l = planned(&cn_avgpool2d_type, in,
                (cn_layer_spec){.kind = CN_AVGPOOL2D, .kernel = 3, .stride = 2}, 0);
    expect_describe(&l, " kernel=3 stride=2");
    l = planned(&cn_global_avgpool_type, in, (cn_layer_spec){.kind = CN_GLOBAL_AVGPOOL}, 0);
    expect_describe(&l, "");
    expect_dropout_describe(0.5f, " p=0.5");
    expect_dropout_describe(0.1f, " p=0.1");
    expect_dropout_describe(0.0f, " p=0");
    expect_dropout_describe(0.123456789f, " p=0.123456791"); /* %g gives 0.123457 */
}

/* What the model reads from the tables without running them. */
static void test_table_facts(void **state)
{
    (void)state;
    const cn_layer_type *t[] = {&cn_avgpool2d_type, &cn_global_avgpool_type, &cn_dropout_type};
    static const char *const kinds[] = {"avgpool2d", "global_avgpool", "dropout"};
    static const char *const keys[] = {"kernel stride", "", "p"};
    static const char *const required[] = {"kernel", "", "p"};
    static const unsigned flags[] = {0, 0, CN_RANDOM};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(t[i]->kind, kinds[i]);
        assert_string_equal(t[i]->keys, keys[i]);
        assert_string_equal(t[i]->required, required[i]);
        assert_int_equal(t[i]->flags, flags[i]);
        assert_null(t[i]->tensors);
        assert_null(t[i]->aux_bytes);
        assert_null(t[i]->macs);
        assert_non_null(t[i]->backward);
    }
}

/* ---------------------------------------------------------------- main */

#define T(f) cmocka_unit_test_teardown(f, free_allocs)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_avgpool_pytorch),
        T(test_global_avgpool_pytorch),
        T(test_maxpool_strided_pytorch),
        T(test_dropout_eval_pytorch),
        T(test_pools_fd),
        T(test_dropout_fd),
        T(test_dropout_fraction_and_scale),
        T(test_dropout_mask_depends_on_its_key),
        T(test_dropout_passes_split_anywhere),
        T(test_dropout_p0_is_identity),
        T(test_plan_shapes),
        T(test_plan_refusals),
        T(test_describe),
        T(test_table_facts),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
