/* test_model_gradients.c — whole models built from model files, run by the executor over one
 * batch: the gradient of the mean NLL loss that cn_backward gives for every parameter equals
 * central finite differences of the loss from cn_forward, for models with every layer type on
 * inputs of several shapes and channel counts (padding, stride, overlapping pools, the fused
 * conv -> max-pool backward, dropout with its mask fixed by the step's key, both BatchNorms in
 * training mode, linear layers with and without bias). Points where the loss is not smooth (a
 * relu or a max-pool changes its choice within the step, or sits right at a kink) are found by
 * comparing differences of two step sizes, and skipped; most points must be checked. It does
 * not compare with PyTorch (test_layers*.c and test_model_steps.c do). */
#include <float.h>

#include "testutil.h"

#include "kernels/conv.h"
#include "layers/layers.h"
#include "model/executor.h"
#include "model/model.h"

#define BATCH 6
#define FD_EPS 1e-3f
#define FD_ATOL 1e-4
#define FD_RTOL 5e-3
#define SMOOTH_RTOL 2e-3 /* two step sizes further apart than this: a kink */
#define MIN_CHECKED 0.8

typedef struct {
    cn_model *m;
    cn_plan plan;
    cn_workspace w;
} net;

static net make_net_in(const char *text, uint64_t seed, cn_precision precision)
{
    net n = {0};
    cn_error err = {{0}};
    n.m = cn_model_from_text(text, strlen(text), "test.model", &err);
    if (!n.m) fail_msg("%s", err.msg);
    cn_model_init(n.m, seed);
    assert_int_equal(cn_plan_init(&n.plan, n.m, BATCH, precision), 0);
    assert_int_equal(cn_workspace_init(&n.w, &n.plan), 0);
    cn_rng rng;
    cn_rng_seed(&rng, seed + 1);
    size_t in = (size_t)BATCH * cn_model_input_size(n.m);
    for (size_t i = 0; i < in; i++) n.w.input[i] = 2.0f * cn_rng_uniform(&rng) - 1.0f;
    for (int b = 0; b < BATCH; b++)
        n.w.labels[b] = (uint8_t)cn_rng_below(&rng, (uint32_t)cn_model_num_outputs(n.m));
    n.w.key = (cn_step_key){seed, 3, 7, 1};
    /* biases and BatchNorm's weights away from their initial 0 and 1 */
    for (size_t i = 0; i < n.m->num_params; i++)
        n.m->params[i] += 0.1f * (2.0f * cn_rng_uniform(&rng) - 1.0f);
    return n;
}

static net make_net(const char *text, uint64_t seed)
{
    return make_net_in(text, seed, CN_PRECISION_FP32);
}

static void free_net(net *n)
{
    cn_workspace_free(&n->w);
    cn_plan_free(&n->plan);
    cn_model_free(n->m);
}

/* The mean NLL of the batch, in double, from a training forward pass. */
static double loss_of(net *n)
{
    cn_forward(&n->plan, &n->w, BATCH, 1);
    const float *logp = n->w.out[n->m->num_layers - 1];
    int classes = cn_model_num_outputs(n->m);
    double sum = 0;
    for (int b = 0; b < BATCH; b++) sum -= logp[(size_t)b * classes + n->w.labels[b]];
    return sum / BATCH;
}

/* The central difference of the loss in *p with step FD_EPS into *fd; -1 where the loss is
 * not smooth there: the central differences of steps FD_EPS and FD_EPS / 2 disagree (a relu or
 * a max-pool changes its choice within the steps), or the gap between the one-sided
 * differences does not shrink with the step (a kink right at *p: a relu of an exact 0, as
 * after a convolution without bias over zeros). */
static int central_difference(net *n, float *p, double *fd)
{
    float v = *p;
    double at[5];
    const float steps[5] = {0, FD_EPS, -FD_EPS, FD_EPS / 2, -FD_EPS / 2};
    for (int k = 0; k < 5; k++) {
        *p = v + steps[k];
        at[k] = loss_of(n);
    }
    *p = v;
    *fd = (at[1] - at[2]) / (2.0 * FD_EPS);
    double half = (at[3] - at[4]) / (double)FD_EPS;
    double gap = (at[1] - 2 * at[0] + at[2]) / FD_EPS;           /* right - left, step h */
    double gap_half = (at[3] - 2 * at[0] + at[4]) / (FD_EPS / 2); /* the same, step h/2 */
    /* The loss is a float sum: each value carries a few roundings of its size, and so its
     * second differences a gap of that much over the step with no kink at all (a gap of 1e-4
     * is one rounding of a loss of 1.5 over FD_EPS). Below eight roundings, a gap is noise. */
    double noise = 8 * FLT_EPSILON * fabs(at[0]) / FD_EPS;
    int kink_inside = fabs(*fd - half) > SMOOTH_RTOL * fabs(*fd) + FD_ATOL;
    int kink_here = fabs(gap) > fmax(FD_ATOL, noise) && fabs(gap_half) > 0.75 * fabs(gap);
    return kink_inside || kink_here ? -1 : 0;
}

/* Checks every stride-th parameter (1: all of them). */
static void check_gradients_every(const char *text, uint64_t seed, size_t stride)
{
    net n = make_net(text, seed);
    loss_of(&n);
    cn_backward(&n.plan, &n.w);
    size_t P = n.m->num_params, checked = 0;
    float *grad = malloc(P * sizeof *grad);
    assert_non_null(grad);
    memcpy(grad, n.w.dparams, P * sizeof *grad);
    double worst = 0;
    size_t worst_at = 0;
    size_t tried = 0;
    for (size_t i = 0; i < P; i += stride, tried++) {
        double fd;
        if (central_difference(&n, &n.m->params[i], &fd)) continue;
        double v_rel = fabs(fd - grad[i]) / (FD_ATOL + FD_RTOL * fabs(fd));
        if (!(v_rel <= worst) && !isnan(worst)) worst = v_rel, worst_at = i; /* NaN sticks */
        checked++;
    }
    if (!(worst <= 1))
        fail_msg("parameter %zu: gradient %.6g, finite difference disagrees (violation %.3g)",
                 worst_at, grad[worst_at], worst);
    if ((double)checked < MIN_CHECKED * (double)tried)
        fail_msg("only %zu of %zu parameters were smooth enough to check", checked, tried);
    free(grad);
    free_net(&n);
}

static void check_gradients(const char *text, uint64_t seed)
{
    check_gradients_every(text, seed, 1);
}

/* Every layer type, three channels, an odd non-square input. */
static const char every_layer[] =
    "input channels=3 height=13 width=11 mean=0.1307 std=0.3081\n"
    "conv2d out=4 kernel=3 padding=1 stride=2 bias=0\n" /* 4x7x6 */
    "batchnorm2d momentum=0.2 eps=0.001\n"
    "relu\n"
    "avgpool2d kernel=2 stride=1\n"               /* 4x6x5 */
    "conv2d out=5 kernel=3\n"                     /* 5x4x3 */
    "maxpool2d kernel=2\n"                        /* 5x2x1, backward fused into the conv */
    "relu\n"
    "dropout p=0.3\n"
    "global_avgpool\n"                            /* 5 */
    "linear out=6 bias=0\n"
    "batchnorm1d\n"
    "relu\n"
    "dropout p=0.2\n"
    "linear out=4\n"
    "log_softmax\n";

/* The seed's shape of network on a small grey input, flatten before the head. */
static const char seed_like[] =
    "input channels=1 height=12 width=12 mean=0.1307 std=0.3081\n"
    "conv2d out=3 kernel=5\n"
    "maxpool2d kernel=2\n"
    "relu\n"
    "batchnorm2d\n"
    "flatten\n"
    "linear out=7\n"
    "relu\n"
    "linear out=3\n"
    "log_softmax\n";

/* Padding wider than half the kernel, overlapping max-pool windows, a 1x1 convolution, two
 * channels. */
static const char wide_padding[] =
    "input channels=2 height=5 width=7 mean=0.1307 std=0.3081\n"
    "conv2d out=3 kernel=3 padding=2\n"            /* 3x7x9 */
    "relu\n"
    "maxpool2d kernel=2 stride=1\n"               /* 3x6x8, overlapping windows */
    "conv2d out=2 kernel=1\n"
    "avgpool2d kernel=3 stride=2\n"               /* 2x2x3 */
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

/* A convolution that runs on the whole batch at once (Winograd's: 3x3, >= 8 channels) with its
 * backward fused into the max-pool after it, which runs in chunks of the batch: large enough
 * planes that the pool's segment takes more than one pass over the BATCH samples. */
static const char whole_batch_into_pool[] =
    "input channels=8 height=36 width=36 mean=0 std=1\n"
    "conv2d out=8 kernel=3\n"                      /* 8x34x34, the whole batch at once */
    "maxpool2d kernel=2\n"                        /* 8x17x17, in chunks */
    "relu\n"
    "avgpool2d kernel=2 stride=1\n"               /* 8x16x16 */
    "maxpool2d kernel=8\n"                        /* 8x2x2 */
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

/* A linear layer with more parameters than CN_CHUNK_FLOATS runs on the whole batch (its gradient
 * would cost more to sum per chunk than the chunks save); one with fewer runs in chunks. */
static const char big_linear[] =
    "input channels=1 height=16 width=16 mean=0 std=1\n"
    "conv2d out=4 kernel=3 padding=1\n"           /* 4x16x16 */
    "relu\n"
    "flatten\n"
    "linear out=33\n"                            /* 1024 x 33 weights */
    "relu\n"
    "linear out=3\n"
    "log_softmax\n";

/* A relu on either side of a BatchNorm: the one before runs inside BatchNorm's passes, and the
 * one after then runs on its own (no chains of fused layers). */
static const char relu_around_batchnorm[] =
    "input channels=2 height=6 width=6 mean=0 std=1\n"
    "conv2d out=3 kernel=3\n"                      /* 3x4x4 */
    "relu\n"
    "batchnorm2d\n"
    "relu\n"
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

/* A max-pool after a BatchNorm runs inside its passes, after the relu between them or without
 * one, windows that tile the plane or overlap; the same model with a layer between them that
 * changes nothing (dropout with p = 0) runs them one after the other. */
static const char batchnorm_into_pool[] =
    "input channels=2 height=10 width=10 mean=0 std=1\n"
    "conv2d out=3 kernel=3 padding=1\n"            /* 3x10x10 */
    "batchnorm2d\n"
    "relu\n"
    "maxpool2d kernel=2\n"                         /* 3x5x5: relu and pool inside bn */
    "conv2d out=4 kernel=3 padding=1 bias=0\n"     /* 4x5x5 */
    "batchnorm2d\n"
    "maxpool2d kernel=3 stride=2\n"                /* 4x2x2: pool inside bn */
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";
static const char batchnorm_then_pool[] =
    "input channels=2 height=10 width=10 mean=0 std=1\n"
    "conv2d out=3 kernel=3 padding=1\n"
    "batchnorm2d\n"
    "relu\n"
    "dropout p=0\n"
    "maxpool2d kernel=2\n"
    "conv2d out=4 kernel=3 padding=1 bias=0\n"
    "batchnorm2d\n"
    "dropout p=0\n"
    "maxpool2d kernel=3 stride=2\n"
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

/* a and b, the same network with the same parameters run by other passes, give the same bits:
 * the log-probabilities in evaluation and training, the gradients and the batch statistics. */
static void assert_same_steps(net *a, net *b)
{
    assert_int_equal(a->m->num_params, b->m->num_params);
    assert_memory_equal(a->m->params, b->m->params, a->m->num_params * sizeof(float));
    size_t out = (size_t)BATCH * cn_model_num_outputs(a->m) * sizeof(float);
    for (int training = 0; training <= 1; training++) {
        cn_forward(&a->plan, &a->w, BATCH, training);
        cn_forward(&b->plan, &b->w, BATCH, training);
        assert_memory_equal(a->w.out[a->m->num_layers - 1], b->w.out[b->m->num_layers - 1], out);
    }
    cn_backward(&a->plan, &a->w);
    cn_backward(&b->plan, &b->w);
    assert_memory_equal(a->w.dparams, b->w.dparams, a->m->num_params * sizeof(float));
    assert_memory_equal(a->w.report, b->w.report, a->m->num_report * sizeof(float));
}

static void test_batchnorm_into_pool(void **state)
{
    (void)state;
    const unsigned both = CN_FUSE_FORWARD | CN_FUSE_BACKWARD;
    net a = make_net(batchnorm_into_pool, 18), b = make_net(batchnorm_then_pool, 18);
    assert_int_equal(cn_model_fusion(a.m, 1, 0).passes, both);
    assert_int_equal(cn_model_fusion(a.m, 1, 0).layers, 2);
    assert_int_equal(cn_model_fusion(a.m, 5, 0).passes, both);
    assert_int_equal(cn_model_fusion(a.m, 5, 0).layers, 1);
    assert_int_equal(cn_model_fusion(b.m, 1, 0).layers, 1); /* the relu only */
    assert_int_equal(cn_model_fusion(b.m, 6, 0).layers, 0);
    assert_same_steps(&a, &b);
    free_net(&a);
    free_net(&b);
    check_gradients(batchnorm_into_pool, 18);
}

/* A relu between a convolution and a max-pool: the convolution's backward takes its gradients
 * from the pool's picks, gated on the relu's output there (a chunked convolution, then one of
 * Winograd's on the whole batch); the same model with a layer between that changes nothing
 * (dropout with p = 0) runs the three one after the other, densely. */
static const char relu_into_pool[] =
    "input channels=2 height=14 width=14 mean=0 std=1\n"
    "conv2d out=8 kernel=3\n"                      /* 8x12x12 */
    "relu\n"
    "maxpool2d kernel=2\n"                         /* 8x6x6 */
    "conv2d out=8 kernel=3\n"                      /* 8x4x4, Winograd's, the whole batch */
    "relu\n"
    "maxpool2d kernel=2\n"                         /* 8x2x2 */
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";
static const char relu_then_pool[] =
    "input channels=2 height=14 width=14 mean=0 std=1\n"
    "conv2d out=8 kernel=3\n"
    "relu\n"
    "dropout p=0\n"
    "maxpool2d kernel=2\n"
    "conv2d out=8 kernel=3\n"
    "relu\n"
    "dropout p=0\n"
    "maxpool2d kernel=2\n"
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

static void test_relu_into_pool(void **state)
{
    (void)state;
    net a = make_net(relu_into_pool, 19), b = make_net(relu_then_pool, 19);
    assert_int_equal(cn_model_fusion(a.m, 0, 0).passes, CN_FUSE_BACKWARD);
    assert_int_equal(cn_model_fusion(a.m, 0, 0).layers, 2);
    assert_int_equal(cn_model_fusion(a.m, 3, 0).layers, 2);
    assert_int_equal(cn_model_fusion(b.m, 0, 0).layers, 0);
    assert_memory_equal(a.m->params, b.m->params, a.m->num_params * sizeof(float));
    int L = a.m->num_layers, classes = cn_model_num_outputs(a.m);
    cn_forward(&a.plan, &a.w, BATCH, 1);
    cn_forward(&b.plan, &b.w, BATCH, 1);
    assert_memory_equal(a.w.out[L - 1], b.w.out[L + 1],
                        (size_t)BATCH * classes * sizeof(float));
    cn_backward(&a.plan, &a.w);
    cn_backward(&b.plan, &b.w);
    size_t nonzero = 0;
    for (size_t i = 0; i < a.m->num_params; i++) { /* the same sums in another order */
        float x = a.w.dparams[i], y = b.w.dparams[i];
        if (!(fabsf(x - y) <= 1e-6f + 1e-5f * fabsf(y)))
            fail_msg("parameter %zu: gradient %.9g through the picks, %.9g densely", i, x, y);
        nonzero += y != 0.0f;
    }
    assert_true(nonzero > a.m->num_params / 2);
    free_net(&a);
    free_net(&b);
    check_gradients(relu_into_pool, 19);
}

/* BatchNorm making what the convolutions read, a sample at a time (layer.h, by_sample): the
 * normalised output (with its relu, without one) as the next convolution's input, and the input
 * gradient (through a max-pool's picks, or straight) as the previous one's output gradient; and
 * taking what Winograd's convolutions write as they write it (its statistics from the output of
 * the one before, its gradient's sums from the input gradient of the one after). The
 * same model with layers between that change nothing (dropout with p = 0) keeps every tensor in
 * buffers: the same bits in both passes, training and evaluation. (No finite differences here:
 * with BatchNorm's batch statistics on 8 channels many of these gradients move the loss by less
 * than a few of its roundings; the stored passes have theirs above and in test_layers.c.) */
static const char batchnorm_makes[] =
    "input channels=3 height=12 width=12 mean=0 std=1\n"
    "conv2d out=8 kernel=3 padding=1 bias=0\n"    /* 0: patches (3 channels), dy made */
    "batchnorm2d\n"                                /* 1: makes 3's input (with its relu)
                                                    * and 0's dy */
    "relu\n"
    "conv2d out=8 kernel=3 padding=1 bias=0\n"    /* 3: Winograd's */
    "batchnorm2d\n"                                /* 4: makes 3's dy, through the pool */
    "relu\n"
    "maxpool2d kernel=2\n"                         /* 8x6x6 */
    "conv2d out=8 kernel=3 padding=1 bias=0\n"    /* 7: its input stored (pooled) */
    "batchnorm2d\n"                                /* 8: makes 7's dy and 9's input */
    "conv2d out=4 kernel=3 bias=0\n"              /* 9: 4x4x4, patches */
    "global_avgpool\n"
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";
static const char batchnorm_stores[] =
    "input channels=3 height=12 width=12 mean=0 std=1\n"
    "conv2d out=8 kernel=3 padding=1 bias=0\n"
    "dropout p=0\n"
    "batchnorm2d\n"
    "relu\n"
    "dropout p=0\n"
    "conv2d out=8 kernel=3 padding=1 bias=0\n"
    "dropout p=0\n"
    "batchnorm2d\n"
    "relu\n"
    "maxpool2d kernel=2\n"
    "conv2d out=8 kernel=3 padding=1 bias=0\n"
    "dropout p=0\n"
    "batchnorm2d\n"
    "dropout p=0\n"
    "conv2d out=4 kernel=3 bias=0\n"
    "global_avgpool\n"
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

static void test_batchnorm_makes(void **state)
{
    (void)state;
    net a = make_net(batchnorm_makes, 23), b = make_net(batchnorm_stores, 23);
    const int made_x[] = {-1, -1, -1, 1, -1, -1, -1, -1, -1, 8};
    const int made_dy[] = {1, -1, -1, 4, -1, -1, -1, 8, -1, -1};
    const int shown_y[] = {-1, -1, -1, 4, -1, -1, -1, 8, -1, -1};  /* Winograd's show */
    const int shown_dx[] = {-1, -1, -1, 1, -1, -1, -1, -1, -1, -1}; /* 4's output is pooled */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(a.plan.made_x[i], made_x[i]);
        assert_int_equal(a.plan.made_dy[i], made_dy[i]);
        assert_int_equal(a.plan.shown_y[i], shown_y[i]);
        assert_int_equal(a.plan.shown_dx[i], shown_dx[i]);
    }
    for (int i = 0; i < b.m->num_layers; i++)
        assert_true(b.plan.made_x[i] < 0 && b.plan.made_dy[i] < 0 && b.plan.shown_y[i] < 0 &&
                    b.plan.shown_dx[i] < 0);
    assert_null(a.w.out[2]); /* the relu's output, made for layer 3 */
    assert_null(a.w.grad[3]);
    assert_same_steps(&a, &b);
    free_net(&a);
    free_net(&b);
}

static void test_every_layer(void **state)
{
    (void)state;
    check_gradients(every_layer, 11);
}

static void test_seed_like(void **state)
{
    (void)state;
    check_gradients(seed_like, 12);
}

static void test_wide_padding(void **state)
{
    (void)state;
    check_gradients(wide_padding, 13);
}

static void test_whole_batch_into_pool(void **state)
{
    (void)state;
    net n = make_net(whole_batch_into_pool, 14);
    int pool_segment = 1;
    assert_int_equal(n.plan.segments[0].batch_op, 1); /* the convolution alone */
    assert_true(n.plan.segments[pool_segment].num_chunks > 1);
    free_net(&n);
    check_gradients(whole_batch_into_pool, 14);
}

static void test_big_linear_whole_batch(void **state)
{
    (void)state;
    net n = make_net(big_linear, 15);
    assert_true((size_t)1024 * 33 > CN_CHUNK_FLOATS);
    assert_int_equal(n.plan.num_segments, 3); /* conv, relu, flatten | linear | the rest */
    assert_int_equal(n.plan.segments[1].first, 3);
    assert_int_equal(n.plan.segments[1].batch_op, 1);
    assert_int_equal(n.plan.segments[2].batch_op, 0); /* 33 x 3 weights: in chunks */
    free_net(&n);
    check_gradients_every(big_linear, 15, 53);
}

static void test_relu_around_batchnorm(void **state)
{
    (void)state;
    net n = make_net(relu_around_batchnorm, 16);
    assert_int_equal(cn_model_fusion(n.m, 1, 0).passes, CN_FUSE_FORWARD | CN_FUSE_BACKWARD);
    assert_int_equal(cn_model_fusion(n.m, 2, 0).passes, 0); /* BatchNorm runs inside the relu's */
    assert_int_equal(n.plan.segments[1].first, 1); /* the relu on the whole batch, with it */
    assert_int_equal(n.plan.segments[1].batch_op, 1);
    free_net(&n);
    check_gradients(relu_around_batchnorm, 16);
}

/* With --precision bf16 a convolution of one input channel keeps fp32's products (bf16 does not
 * pay there: conv2d.c), the next one takes bf16's. */
static const char two_convolutions[] =
    "input channels=1 height=8 width=8 mean=0 std=1\n"
    "conv2d out=4 kernel=3\n" /* kept for the whole batch: BatchNorm reads it */
    "batchnorm2d\n"
    "conv2d out=4 kernel=3\n" /* kept too: the linear layer's backward reads it */
    "flatten\n"
    "linear out=3\n"
    "log_softmax\n";

/* The model of text in fp32 (a) and in bf16 (b), after a training forward pass each. */
static void fp32_and_bf16(const char *text, uint64_t seed, net *a, net *b)
{
    *a = make_net(text, seed);
    *b = make_net_in(text, seed, CN_PRECISION_BF16);
    cn_forward(&a->plan, &a->w, BATCH, 1);
    cn_forward(&b->plan, &b->w, BATCH, 1);
}

static void test_bf16_where_it_pays(void **state)
{
    (void)state;
    if (!cn_precision_supported(CN_PRECISION_BF16)) skip(); /* this CPU trains in fp32 only */
    net a, b;
    fp32_and_bf16(two_convolutions, 17, &a, &b);
    assert_true(a.plan.keep_out[0] && a.plan.keep_out[2]);
    size_t first = (size_t)BATCH * cn_layer_out_size(&a.m->layers[0]);
    size_t second = (size_t)BATCH * cn_layer_out_size(&a.m->layers[2]);
    assert_memory_equal(a.w.out[0], b.w.out[0], first * sizeof(float));
    assert_true(memcmp(a.w.out[2], b.w.out[2], second * sizeof(float)) != 0);
    free_net(&a);
    free_net(&b);
}

/* Under bf16, a 3 x 3 convolution of Winograd's shapes whose output BatchNorm takes (as it is
 * written) runs fp32's passes where the bf16 products have no AMX tiles (conv2d.c,
 * fp32_beside_makers): its output is fp32's bit for bit. The same convolution with nothing
 * made or taken beside it (after a dropout, before a linear layer) keeps bf16's products; on
 * AMX both do. */
static const char winograd_into_batchnorm[] = "input channels=8 height=8 width=8 mean=0 std=1\n"
                                              "conv2d out=8 kernel=3 padding=1 bias=0\n"
                                              "batchnorm2d\n"
                                              "dropout p=0\n"
                                              "conv2d out=8 kernel=3 padding=1 bias=0\n"
                                              "flatten\n"
                                              "linear out=3\n"
                                              "log_softmax\n";

static void test_bf16_beside_batchnorm(void **state)
{
    (void)state;
    if (!cn_precision_supported(CN_PRECISION_BF16)) skip(); /* this CPU trains in fp32 only */
    net a, b;
    fp32_and_bf16(winograd_into_batchnorm, 29, &a, &b);
    size_t n = (size_t)BATCH * cn_layer_out_size(&a.m->layers[0]) * sizeof(float);
    int amx = cn_bf16_kernel_active() == CN_BF16_AMX;
    assert_int_equal(b.plan.shown_y[0], amx ? -1 : 1);
    assert_int_equal(memcmp(a.w.out[0], b.w.out[0], n) == 0, !amx); /* shown to BatchNorm */
    assert_true(memcmp(a.w.out[3], b.w.out[3], n) != 0);             /* nothing made, taken */
    free_net(&a);
    free_net(&b);
}

/* A hidden linear layer of 32 outputs takes bf16's products under --precision bf16 (linear.c);
 * the classifier of 3 keeps fp32's: the log-probabilities are those of fp32 on the hidden
 * layer's output, bit for bit. */
static const char two_linear_layers[] = "input channels=1 height=5 width=5 mean=0 std=1\n"
                                        "flatten\n"
                                        "linear out=32\n"
                                        "relu\n"
                                        "linear out=3\n"
                                        "log_softmax\n";

static void test_bf16_linear_where_it_pays(void **state)
{
    (void)state;
    if (!cn_precision_supported(CN_PRECISION_BF16)) skip(); /* this CPU trains in fp32 only */
    net a = make_net(two_linear_layers, 19);
    net b = make_net_in(two_linear_layers, 19, CN_PRECISION_BF16);
    assert_true(a.plan.keep_out[2]); /* the classifier's backward reads it */
    cn_forward(&a.plan, &a.w, BATCH, 1);
    cn_forward(&b.plan, &b.w, BATCH, 1);
    size_t hidden = (size_t)BATCH * 32;
    assert_true(memcmp(a.w.out[2], b.w.out[2], hidden * sizeof(float)) != 0);
    const cn_layer *classifier = &b.m->layers[3];
    float logits[BATCH * 3], want[BATCH * 3];
    cn_linear_forward(logits, b.w.out[2], b.m->params + classifier->params,
                      b.m->params + classifier->params + 3 * 32, BATCH, 32, 3);
    cn_log_softmax_forward(want, logits, BATCH, 3);
    assert_memory_equal(b.w.out[4], want, sizeof want);
    free_net(&a);
    free_net(&b);
}

/* Under --precision bf16 a convolution runs the max-pool right after it inside its passes
 * (conv2d.c): forward a sample at a time, the pool's output and picks those of the two passes
 * one after the other, bit for bit; backward with the pool's gradient put straight into the
 * products' pairs, the weight and input gradients those of the two passes bit for bit, the
 * bias's summed in another order. The convolution's own output and gradient are never made.
 * conv2's 7 x 7 plane leaves its last row and column out of every 2 x 2 window; with 5 output
 * channels the last pair of channels has a zero partner; with 45 the products take the
 * positions as rows (with the vector kernel), and the pool runs on them in that layout, 45
 * channels two whole vectors and a part. */
static const char conv_into_pool[] = "input channels=3 height=9 width=9 mean=0 std=1\n"
                                     "conv2d out=4 kernel=3\n"
                                     "relu\n"
                                     "conv2d out=%d kernel=3 padding=1\n"
                                     "maxpool2d kernel=2\n"
                                     "flatten\n"
                                     "linear out=3\n"
                                     "log_softmax\n";

/* The passes of conv2 and its pool one after the other, as the layers' own kernels run them
 * unfused: the pool's output want and picks where; from the pool's gradient dpool, dw, db, din. */
typedef struct {
    float *y, *want, *dense, *dw, *db, *din, *col;
    int32_t *where;
    cn_bf16_pair *packed;
} unfused;

static void free_unfused(unfused *u)
{
    free(u->y), free(u->want), free(u->dense), free(u->dw), free(u->db), free(u->din);
    free(u->col), free(u->where), free(u->packed);
}

static void check_conv_runs_its_pool(int OC, int by_rows)
{
    char text[sizeof conv_into_pool + 8];
    snprintf(text, sizeof text, conv_into_pool, OC);
    net n = make_net_in(text, 31, CN_PRECISION_BF16);
    const unsigned both = CN_FUSE_FORWARD | CN_FUSE_BACKWARD;
    assert_int_equal(cn_model_fusion(n.m, 2, 1).passes, both);
    assert_int_equal(cn_model_fusion(n.m, 2, 0).passes, CN_FUSE_FORWARD); /* fp32: pool's own */
    assert_true(n.plan.keep_out[1] && n.plan.keep_out[3] && !n.w.out[2] && !n.w.grad[2]);
    cn_forward(&n.plan, &n.w, BATCH, 1);
    cn_backward(&n.plan, &n.w);
    cn_conv_shape s = cn_conv_shape_of(4, 7, 7, OC, 3, 1, 1);
    cn_pool_shape ps = cn_pool_shape_of(OC, 7, 7, 2, 2);
    if (cn_bf16_kernel_active() == CN_BF16_AVX512)
        assert_int_equal(cn_conv2d_pool_rows_fit(&s, 2, 2), by_rows);
    size_t conv_out = (size_t)BATCH * OC * 49, pooled = (size_t)BATCH * OC * 9;
    size_t conv_in = (size_t)BATCH * 4 * 49, weights = (size_t)OC * 36;
    unfused u = {malloc(conv_out * sizeof(float)), malloc(pooled * sizeof(float)),
                 malloc(conv_out * sizeof(float)), calloc(weights, sizeof(float)),
                 calloc((size_t)OC, sizeof(float)), malloc(conv_in * sizeof(float)),
                 malloc(cn_conv2d_col_floats(&s) * sizeof(float)),
                 malloc(pooled * sizeof(int32_t)),
                 malloc(cn_conv2d_packed_words(&s) * sizeof(cn_bf16_pair))};
    assert_true(u.y && u.want && u.dense && u.dw && u.db && u.din && u.col && u.where && u.packed);
    const float *w = n.m->params + n.m->layers[2].params;
    cn_conv2d_forward_bf16(u.y, n.w.out[1], w, w + weights, BATCH, &s, u.packed);
    cn_maxpool2d_forward(u.want, u.where, u.y, BATCH, &ps);
    assert_memory_equal(n.w.out[3], u.want, pooled * sizeof(float));
    assert_memory_equal(n.w.aux[3], u.where, pooled * sizeof(int32_t));
    cn_maxpool2d_backward(u.dense, n.w.grad[3], u.where, BATCH, &ps);
    cn_conv2d_backward_bf16(u.din, u.dw, u.db, u.dense, n.w.out[1], w, BATCH, &s, u.col,
                            u.packed);
    const float *dw = n.w.dparams + n.m->layers[2].params;
    assert_memory_equal(dw, u.dw, weights * sizeof(float));
    assert_memory_equal(n.w.grad[1], u.din, conv_in * sizeof(float));
    for (int o = 0; o < OC; o++)
        if (!(fabsf(dw[weights + o] - u.db[o]) <= 1e-6f * (1.0f + fabsf(u.db[o]))))
            fail_msg("bias %d: %g fused, %g unfused", o, dw[weights + o], u.db[o]);
    free_unfused(&u);
    free_net(&n);
}

static void test_bf16_conv_runs_its_pool(void **state)
{
    (void)state;
    if (!cn_precision_supported(CN_PRECISION_BF16)) skip(); /* this CPU trains in fp32 only */
    check_conv_runs_its_pool(5, 0);
    check_conv_runs_its_pool(45, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_layer),
        cmocka_unit_test(test_seed_like),
        cmocka_unit_test(test_wide_padding),
        cmocka_unit_test(test_whole_batch_into_pool),
        cmocka_unit_test(test_big_linear_whole_batch),
        cmocka_unit_test(test_relu_around_batchnorm),
        cmocka_unit_test(test_bf16_where_it_pays),
        cmocka_unit_test(test_bf16_linear_where_it_pays),
        cmocka_unit_test(test_bf16_beside_batchnorm),
        cmocka_unit_test(test_bf16_conv_runs_its_pool),
        cmocka_unit_test(test_batchnorm_into_pool),
        cmocka_unit_test(test_relu_into_pool),
        cmocka_unit_test(test_batchnorm_makes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
