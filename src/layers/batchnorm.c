/* batchnorm.c — the batchnorm2d and batchnorm1d layer types (nn.BatchNorm2d over (batch,
 * height, width) per channel of a [C,H,W] input; nn.BatchNorm1d over the batch per feature of a
 * flat input: the same kernels with H*W = 1). Training mode uses the batch statistics (biased
 * variance; the unbiased one goes to the running statistics), evaluation mode the running ones.
 * Sums run in double in a fixed order. The batch statistics are the layer's report: each
 * replica reports its own and update_running combines them in replica order, so the running
 * statistics do not depend on where replicas ran; with several processes each replica's share
 * of that combination is made where it ran (running_share) and the shares are summed like the
 * gradient. A relu right after the layer runs inside its passes (fuses), and so does a relu
 * right before it (forward_rectified, called by relu.c's fusion) and a max-pool right after it
 * or after its relu (plane by plane through scratch, bn_pool). For a convolution that takes
 * them made (layer.h, by_sample), its normalised output (without a pool) and its input gradient
 * are made a sample at a time as the convolution reads them, from what the passes keep: forward
 * then only computes the statistics, backward only the sums; and those sums it takes from what
 * a convolution that shows them writes, as it writes them (take_input, take_output_gradient),
 * so that its passes read nothing. The passes over a plane are kernels of each instruction set
 * (batchnorm_kernels.inc). No affine=False, no track_running_stats=False. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/layers.h"

/* A channel's two sums over the batch (x and x^2, or g and g * xhat), 16 lanes each, which
 * the kernels fill plane by plane in sample order (cn_bn_sums). */
typedef struct {
    double lane[32];
} bn_sums;

/* Where the take functions (by_sample) keep what they sum in the layer's state, after invstd,
 * mean_dy and mean_dy_xhat: each channel's first value (the shift of its statistics), then each
 * channel's sums as 64 floats (copied in and out: the state is floats). */
_Static_assert(sizeof(bn_sums) == 64 * sizeof(float), "a channel's sums fill 64 floats");
static size_t state_floats(int C) { return 68 * (size_t)C; }
static float *taken_shift(float *state, int C) { return state + 3 * (size_t)C; }
static size_t taken_sums(int C, int c) { return 4 * (size_t)C + 64 * (size_t)c; }

static void load_sums(bn_sums *s, const float *state, int C, int c)
{
    memcpy(s, state + taken_sums(C, c), sizeof *s);
}

static void store_sums(float *state, int C, int c, const bn_sums *s)
{
    memcpy(state + taken_sums(C, c), s, sizeof *s);
}

/* The sum of 16 lanes, folded in a fixed order. */
static double fold16(const double *l)
{
    double h[8];
    for (int i = 0; i < 8; i++) h[i] = l[i] + l[i + 8];
    return ((h[0] + h[4]) + (h[1] + h[5])) + ((h[2] + h[6]) + (h[3] + h[7]));
}

/* Channels swept together: for each sample in turn, the planes of up to CN_BN_GROUP channels,
 * so that the batch is read in memory order while the channels' sums stay in L1. */
#define CN_BN_GROUP 32
/* A batch of at most this many floats (1 MB: a second-level cache) goes channel by channel
 * instead: one kernel call takes a channel's planes across the whole batch, its sums held in
 * registers throughout, so that the cost of a call is paid once a channel rather than once a
 * plane (the seed's planes of 12 x 12 and 4 x 4 floats: 64 -> 50 and 38 -> 16 thread-ms an
 * epoch). Larger batches are read in memory order: channel by channel, with planes strided
 * across memory, took twice as long on models/cifar10.model's 16 x 16 planes. */
#define CN_BN_CACHED_FLOATS (256 * 1024)

/* The channels of the sweep that starts at channel c0. */
static int group_size(int C, int c0) { return C - c0 < CN_BN_GROUP ? C - c0 : CN_BN_GROUP; }

/* Where the plane of sample b, channel c starts in a [B, C, HW] tensor. */
static size_t plane(int b, int C, int HW, int c) { return ((size_t)b * C + c) * HW; }

/* The sweep's next plane after sample b, channel c0 + j of a group of g: the next channel, or
 * the group's first in the next sample (where the sweep ends, the last: fetching it again is
 * harmless). */
static size_t next_plane(int b, int j, int B, int C, int HW, int c0, int g)
{
    if (j + 1 < g) return plane(b, C, HW, c0 + j + 1);
    return b + 1 < B ? plane(b + 1, C, HW, c0) : plane(b, C, HW, c0 + j);
}

/* A channel as the kernels see it (cn_bn_channel), its backward means left at 0. */
static cn_bn_channel channel(float mean, float invstd, float gamma, float beta, int relu)
{
    return (cn_bn_channel){.mean = mean, .invstd = invstd, .scale = gamma * invstd,
                           .beta = beta, .relu = (relu & CN_BN_RELU_AFTER) != 0};
}

static int rectified(int relu) { return (relu & CN_BN_RELU_BEFORE) != 0; }

/* A max-pool after the layer (and after its relu), run plane by plane inside its passes: a
 * plane's output is made in scratch and pooled from there, and a plane's output gradient is the
 * pool's routed to its picks in scratch, so that neither goes through memory. The same kernels
 * on the same values as the layers one after the other: the same bits. */
typedef struct {
    cn_pool_shape shape;     /* of one plane (C = 1) */
    float *y;                /* forward: the pool's output [B, C, OH * OW] */
    int32_t *picks;          /* its picks, written forward, read backward */
    const float *dy;         /* backward: the pool's output gradient */
    float *plane;            /* scratch of one plane */
} bn_pool;

/* The four passes over a group's planes, and what they read and write (index j: the group's
 * channel c0 + j). */
typedef enum { BN_SUMS, BN_NORMALISE, BN_GRADIENT_SUMS, BN_INPUT_GRADIENT } bn_pass;
typedef struct {
    float *out;         /* y (unless pooled), or dx */
    const float *x, *dy; /* dy: the gradient's passes only, unless pooled */
    bn_sums *sums;
    const float *shift; /* BN_SUMS */
    const cn_bn_channel *ch;
    int rectify;        /* x is read as its relu (cn_bn_planes) */
    const bn_pool *pool; /* NULL: none after the layer */
} bn_operands;

/* Where the pool's plane that comes from the layer's plane at `at` starts. */
static size_t pooled_at(const bn_pool *q, size_t at, int HW)
{
    return at / (size_t)HW * ((size_t)q->shape.OH * q->shape.OW);
}

/* plane = the gradient of the layer's plane at `at` (HW floats) that the pool's output gradient
 * routes to its picks. */
static void pool_gradient(float *plane, const bn_pool *q, size_t at, int HW)
{
    size_t pooled = pooled_at(q, at, HW);
    cn_maxpool2d_backward(plane, q->dy + pooled, q->picks + pooled, 1, &q->shape);
}

static void run_pass(bn_pass pass, const bn_operands *o, int j, size_t at, const cn_bn_planes *p)
{
    const bn_pool *q = o->pool;
    size_t pooled = q ? pooled_at(q, at, p->n) : 0;
    const float *dy = o->dy ? o->dy + at : NULL;
    if (q && (pass == BN_GRADIENT_SUMS || pass == BN_INPUT_GRADIENT)) {
        pool_gradient(q->plane, q, at, p->n);
        dy = q->plane;
    }
    switch (pass) {
    case BN_SUMS: cn_bn_sums(o->sums[j].lane, o->x + at, p, o->shift[j]); break;
    case BN_NORMALISE:
        cn_bn_normalise(q ? q->plane : o->out + at, o->x + at, p, &o->ch[j]);
        if (q) cn_maxpool2d_forward(q->y + pooled, q->picks + pooled, q->plane, 1, &q->shape);
        break;
    case BN_GRADIENT_SUMS: cn_bn_gradient_sums(o->sums[j].lane, dy, o->x + at, p, &o->ch[j]); break;
    case BN_INPUT_GRADIENT: cn_bn_input_gradient(o->out + at, dy, o->x + at, p, &o->ch[j]); break;
    }
}

/* Fetches the plane at `at` of x (and of dy, unless NULL) ahead of its pass, or of
 * make_output's and make_input_gradient's work on it: each plane of a sample begins a 4 KB page,
 * where the hardware's prefetch stops. (A pool's gradient and picks, a quarter of that, were
 * fetched too: slower.) Always inlined: GCC 12 takes a function that does nothing but fetch for
 * one without effects ("looping pure") and drops the calls to it. */
static inline __attribute__((always_inline)) void fetch_plane(const float *x, const float *dy,
                                                              size_t at, int HW)
{
    cn_fetch_ahead(x + at, HW);
    if (dy) cn_fetch_ahead(dy + at, HW);
}

/* One pass over the planes of channels c0 .. c0 + g - 1 of the batch: a small batch channel by
 * channel, a larger one (or any with a pool inside) in memory order with the next plane fetched
 * ahead. Either way each channel's planes come in sample order, so the sums are the same bits. */
static void sweep(bn_pass pass, const bn_operands *o, int B, int C, int HW, int c0, int g)
{
    size_t stride = (size_t)C * HW;
    if (!o->pool && (size_t)B * stride <= CN_BN_CACHED_FLOATS) {
        cn_bn_planes p = {HW, B, stride, o->rectify};
        for (int j = 0; j < g; j++) run_pass(pass, o, j, plane(0, C, HW, c0 + j), &p);
        return;
    }
    cn_bn_planes p = {HW, 1, stride, o->rectify};
    for (int b = 0; b < B; b++)
        for (int j = 0; j < g; j++) {
            fetch_plane(o->x, o->dy, next_plane(b, j, B, C, HW, c0, g), HW);
            run_pass(pass, o, j, plane(b, C, HW, c0 + j), &p);
        }
}

static void normalise_group(float *out, const float *in, int B, int C, int HW, int c0, int g,
                            const cn_bn_channel *ch, int rectify, const bn_pool *pool)
{
    bn_operands o = {.out = out, .x = in, .ch = ch, .rectify = rectify, .pool = pool};
    sweep(BN_NORMALISE, &o, B, C, HW, c0, g);
}

/* Mean and biased variance of channels c0..c0+g-1 in one sweep: the sums of x - s and of its
 * square, s the channel's first value (so that the variance does not cancel when the mean is
 * far from 0), in double; or those that take_input summed, kept in taken (the state). */
static void group_stats(const float *in, int B, int C, int HW, int c0, int g, int rectify,
                        float *taken, double *mean, double *var)
{
    bn_sums sums[CN_BN_GROUP] = {{{0}}};
    float shift[CN_BN_GROUP];
    double n = (double)B * HW;
    for (int j = 0; j < g; j++) { /* the channel's first value as the kernels read it */
        float first = in[plane(0, C, HW, c0 + j)];
        shift[j] = first;
        if (rectify) cn_relu_forward(&shift[j], &first, 1);
    }
    if (taken) {
        for (int j = 0; j < g; j++) load_sums(&sums[j], taken, C, c0 + j);
    } else {
        bn_operands o = {.x = in, .sums = sums, .shift = shift, .rectify = rectify};
        sweep(BN_SUMS, &o, B, C, HW, c0, g);
    }
    for (int j = 0; j < g; j++) {
        double d = fold16(sums[j].lane) / n, sq = fold16(sums[j].lane + 16) / n;
        mean[j] = shift[j] + d;
        var[j] = sq - d * d > 0 ? sq - d * d : 0.0;
    }
}

/* cn_batchnorm2d_forward_train with a pool inside (or NULL), the sums taken (the state) or
 * NULL. */
static void forward_train(float *out, float *mean, float *invstd, float *var_unbiased,
                          const float *in, const float *gamma, const float *beta, int B, int C,
                          int HW, float eps, int relu, const bn_pool *pool, float *taken)
{
    double n = (double)B * HW;
    for (int c0 = 0; c0 < C; c0 += CN_BN_GROUP) {
        int g = group_size(C, c0);
        double m[CN_BN_GROUP], v[CN_BN_GROUP];
        cn_bn_channel ch[CN_BN_GROUP];
        group_stats(in, B, C, HW, c0, g, rectified(relu), taken, m, v);
        for (int j = 0; j < g; j++) {
            int c = c0 + j;
            mean[c] = (float)m[j];
            invstd[c] = (float)(1.0 / sqrt(v[j] + eps));
            var_unbiased[c] = (float)(n > 1 ? v[j] * n / (n - 1) : v[j]);
            ch[j] = channel(mean[c], invstd[c], gamma[c], beta[c], relu);
        }
        if (out || pool) normalise_group(out, in, B, C, HW, c0, g, ch, rectified(relu), pool);
    }
}

void cn_batchnorm2d_forward_train(float *out, float *mean, float *invstd, float *var_unbiased,
                                  const float *in, const float *gamma, const float *beta, int B,
                                  int C, int HW, float eps, int relu)
{
    forward_train(out, mean, invstd, var_unbiased, in, gamma, beta, B, C, HW, eps, relu, NULL,
                  NULL);
}

/* Channel c as evaluation normalises it: with the running statistics. */
static cn_bn_channel eval_channel(const float *running_mean, const float *running_var, int c,
                                  float gamma, float beta, float eps, int relu)
{
    float invstd = (float)(1.0 / sqrt((double)running_var[c] + eps));
    return channel(running_mean[c], invstd, gamma, beta, relu);
}

/* cn_batchnorm2d_forward_eval with a pool inside (or NULL); nothing without either. */
static void forward_eval(float *out, const float *in, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, int B, int C,
                         int HW, float eps, int relu, const bn_pool *pool)
{
    if (!out && !pool) return;
    for (int c0 = 0; c0 < C; c0 += CN_BN_GROUP) {
        int g = group_size(C, c0);
        cn_bn_channel ch[CN_BN_GROUP];
        for (int j = 0; j < g; j++)
            ch[j] = eval_channel(running_mean, running_var, c0 + j, gamma[c0 + j], beta[c0 + j],
                                 eps, relu);
        normalise_group(out, in, B, C, HW, c0, g, ch, rectified(relu), pool);
    }
}

void cn_batchnorm2d_forward_eval(float *out, const float *in, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, int B, int C, int HW, float eps,
                                 int relu)
{
    forward_eval(out, in, gamma, beta, running_mean, running_var, B, C, HW, eps, relu, NULL);
}

/* cn_batchnorm2d_backward with a pool inside (or NULL; dout is then unused); state (or NULL)
 * gets each channel's mean_dy, then each one's mean_dy_xhat, for make_input_gradient, and with
 * taken holds the gradient's sums that take_output_gradient made. */
static void backward(float *din, float *dgamma, float *dbeta, float *state, int taken,
                     const float *dout, const float *in, const float *mean, const float *invstd,
                     const float *gamma, const float *beta, int B, int C, int HW, int relu,
                     const bn_pool *pool)
{
    double n = (double)B * HW;
    for (int c0 = 0; c0 < C; c0 += CN_BN_GROUP) {
        int g = group_size(C, c0);
        bn_sums sums[CN_BN_GROUP] = {{{0}}};
        cn_bn_channel ch[CN_BN_GROUP];
        for (int j = 0; j < g; j++)
            ch[j] = channel(mean[c0 + j], invstd[c0 + j], gamma[c0 + j], beta[c0 + j], relu);
        bn_operands o = {.out = din, .x = in, .dy = pool ? NULL : dout, .sums = sums, .ch = ch,
                         .rectify = rectified(relu), .pool = pool};
        if (taken)
            for (int j = 0; j < g; j++) load_sums(&sums[j], state, C, c0 + j);
        else
            sweep(BN_GRADIENT_SUMS, &o, B, C, HW, c0, g);
        for (int j = 0; j < g; j++) {
            double sum_dy = fold16(sums[j].lane), sum_dy_xhat = fold16(sums[j].lane + 16);
            dgamma[c0 + j] += (float)sum_dy_xhat;
            dbeta[c0 + j] += (float)sum_dy;
            ch[j].mean_dy = (float)(sum_dy / n), ch[j].mean_dy_xhat = (float)(sum_dy_xhat / n);
            if (!state) continue;
            state[C + c0 + j] = ch[j].mean_dy;
            state[2 * C + c0 + j] = ch[j].mean_dy_xhat;
        }
        if (din) sweep(BN_INPUT_GRADIENT, &o, B, C, HW, c0, g); /* none for a first layer */
    }
}

void cn_batchnorm2d_backward(float *din, float *dgamma, float *dbeta, const float *dout,
                             const float *in, const float *mean, const float *invstd,
                             const float *gamma, const float *beta, int B, int C, int HW,
                             int relu)
{
    backward(din, dgamma, dbeta, NULL, 0, dout, in, mean, invstd, gamma, beta, B, C, HW, relu,
             NULL);
}

/* ---- the layer types: tensors weight (gamma), bias (beta), running_mean, running_var,
 * num_batches_tracked; report [mean C][unbiased var C], state [invstd C][mean_dy C]
 * [mean_dy_xhat C] (written by backward) and what the take functions sum (taken_sums) ---- */

static int plan_args(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    l->args.momentum = s->momentum != 0.0f ? s->momentum : 0.1f;
    l->args.eps = s->eps != 0.0f ? s->eps : 1e-5f;
    if (!(l->args.momentum > 0.0f && l->args.momentum <= 1.0f) ||
        !(l->args.eps > 0.0f && isfinite(l->args.eps)))
        return cn_fail(err, "momentum=%g eps=%g: momentum must be in (0, 1], eps above 0",
                       (double)l->args.momentum, (double)l->args.eps);
    l->out = l->in;
    return 0;
}

static int plan2d(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    return cn_need_planes(l, err) || plan_args(l, s, err);
}

static int plan1d(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    return cn_need_flat(l, err) || plan_args(l, s, err);
}

static int tensors(const cn_layer *l, cn_tensor_plan *t)
{
    int64_t c = l->out.c;
    t[0] = (cn_tensor_plan){"weight", CN_IN_PARAMS, 1, {c}};
    t[1] = (cn_tensor_plan){"bias", CN_IN_PARAMS, 1, {c}};
    t[2] = (cn_tensor_plan){"running_mean", CN_IN_RUNNING, 1, {c}};
    t[3] = (cn_tensor_plan){"running_var", CN_IN_RUNNING, 1, {c}};
    t[4] = (cn_tensor_plan){"num_batches_tracked", CN_IN_COUNTER, 0, {0}};
    return 5;
}

static void init(const cn_layer *l, float *params, float *running, cn_rng *rng)
{
    (void)rng;
    int C = l->out.c;
    for (int c = 0; c < C; c++) {
        params[c] = 1.0f, params[C + c] = 0.0f;
        running[c] = 0.0f, running[C + c] = 1.0f;
    }
}

static void batch_state(const cn_layer *l, size_t *report, size_t *state)
{
    *report = 2 * (size_t)l->out.c, *state = state_floats(l->out.c);
}

/* What runs inside the layer's passes besides its own: relu layers (CN_BN_RELU_*) and a
 * max-pool after it, whose pass is pool (NULL: none). */
typedef struct {
    int relu;
    const cn_layer_pass *pool;
} bn_inside;

/* The pool of a pass (p's col is its scratch plane), or NULL when none runs inside. */
static const bn_pool *pool_of(const cn_layer_pass *p, const bn_inside *in, bn_pool *q)
{
    if (!in->pool) return NULL;
    const cn_layer *pl = in->pool->l;
    *q = (bn_pool){.shape = cn_pool_shape_of(1, pl->in.h, pl->in.w, pl->args.kernel,
                                             pl->args.stride),
                   .y = in->pool->y, .picks = in->pool->aux, .dy = in->pool->dy,
                   .plane = p->col};
    return q;
}

/* y: where the output goes (unless pooled). */
static void run_forward(const cn_layer_pass *p, float *y, const bn_inside *in)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    const float *gamma = p->params, *beta = p->params + C;
    bn_pool q;
    const bn_pool *pool = pool_of(p, in, &q);
    if (p->training)
        forward_train(y, p->report, p->state, p->report + C, p->x, gamma, beta, p->n, C, HW,
                      l->args.eps, in->relu, pool, p->taken ? p->state : NULL);
    else
        forward_eval(y, p->x, gamma, beta, p->running, p->running + C, p->n, C, HW, l->args.eps,
                     in->relu, pool);
}

/* dy: the gradient of the output (the relu's, when fused; unused when pooled). */
static void run_backward(const cn_layer_pass *p, const float *dy, const bn_inside *in)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    bn_pool q;
    backward(p->dx, p->dparams, p->dparams + C, p->state, p->taken, dy, p->x, p->report,
             p->state, p->params, p->params + C, p->n, C, HW, in->relu, pool_of(p, in, &q));
}

static void forward(const cn_layer_pass *p) { run_forward(p, p->y, &(bn_inside){0, NULL}); }
static void backward_pass(const cn_layer_pass *p)
{
    run_backward(p, p->dy, &(bn_inside){0, NULL});
}

/* A relu right before: x is the relu's input, dx its input gradient (relu.c's fusion). */
static void forward_rectified(const cn_layer_pass *p)
{
    run_forward(p, p->y, &(bn_inside){CN_BN_RELU_BEFORE, NULL});
}
static void backward_rectified(const cn_layer_pass *p)
{
    run_backward(p, p->dy, &(bn_inside){CN_BN_RELU_BEFORE, NULL});
}

/* A relu right after, a max-pool right after (or after that relu), or both: their passes run
 * here, in the same sweeps over the batch (the relu's gate recomputed from this layer's input,
 * so nothing more is kept; the pool's picks kept as its own). */
static int is_relu(const cn_layer *l) { return l->type == &cn_relu_type; }
static int is_pool(const cn_layer *l) { return l->type == &cn_maxpool2d_type; }

static cn_fusion fuses(const cn_layer *l, const cn_layer *next, int avail, int bf16)
{
    const unsigned both = CN_FUSE_FORWARD | CN_FUSE_BACKWARD;
    int relu = is_relu(&next[0]);
    (void)l, (void)bf16;
    int pool = relu + 1 <= avail && is_pool(&next[relu]);
    return (cn_fusion){relu || pool ? both : 0, relu + pool};
}

/* next[0 .. count): the fused layers' passes, a relu's first. */
static bn_inside inside_of(const cn_layer_pass *next, int count)
{
    int relu = is_relu(next[0].l);
    return (bn_inside){relu ? CN_BN_RELU_AFTER : 0, count > relu ? &next[relu] : NULL};
}

static void forward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    bn_inside in = inside_of(next, count);
    run_forward(p, next[count - 1].y, &in);
}

static void backward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    bn_inside in = inside_of(next, count);
    run_backward(p, next[count - 1].dy, &in);
}

/* ---- made a sample at a time (layer.h, by_sample): the output where no pool runs inside (the
 * pool's picks are written by the passes), the input gradient always; the same kernels on the
 * same planes as the passes, so the same bits. A pool's gradient is routed into dst's plane
 * and turned into the input gradient there: the pass's scratch (col) is the reading layer's. */

static bn_inside inside_or_none(const cn_layer_pass *next, int count)
{
    return count ? inside_of(next, count) : (bn_inside){0, NULL};
}

static unsigned by_sample(const cn_layer *l, const cn_layer *next, int count)
{
    (void)l;
    int pooled = count > 0 && is_pool(&next[count - 1]);
    unsigned unpooled = CN_MAKES_OUTPUT | CN_TAKES_OUTPUT_GRADIENT;
    return CN_MAKES_INPUT_GRADIENT | CN_TAKES_INPUT | (pooled ? 0 : unpooled);
}

static void make_output(const cn_layer_pass *p, const cn_layer_pass *next, int count, int b,
                        float *dst)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    const float *gamma = p->params, *beta = p->params + C;
    int relu = inside_or_none(next, count).relu;
    cn_bn_planes one = {HW, 1, (size_t)HW, 0};
    for (int c = 0; c < C; c++) {
        if (c + 1 < C) fetch_plane(p->x, NULL, plane(b, C, HW, c + 1), HW);
        cn_bn_channel ch = p->training
                               ? channel(p->report[c], p->state[c], gamma[c], beta[c], relu)
                               : eval_channel(p->running, p->running + C, c, gamma[c], beta[c],
                                              l->args.eps, relu);
        cn_bn_normalise(dst + (size_t)c * HW, p->x + plane(b, C, HW, c), &one, &ch);
    }
}

static void make_input_gradient(const cn_layer_pass *p, const cn_layer_pass *next, int count,
                                int b, float *dst)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    const float *gamma = p->params, *beta = p->params + C;
    bn_inside in = inside_or_none(next, count);
    const float *dy = count ? next[count - 1].dy : p->dy;
    bn_pool q;
    const bn_pool *pool = pool_of(p, &in, &q);
    cn_bn_planes one = {HW, 1, (size_t)HW, 0};
    for (int c = 0; c < C; c++) {
        if (c + 1 < C) fetch_plane(p->x, pool ? NULL : dy, plane(b, C, HW, c + 1), HW);
        cn_bn_channel ch = channel(p->report[c], p->state[c], gamma[c], beta[c], in.relu);
        ch.mean_dy = p->state[C + c], ch.mean_dy_xhat = p->state[2 * C + c];
        size_t at = plane(b, C, HW, c);
        float *out = dst + (size_t)c * HW;
        if (pool) pool_gradient(out, pool, at, HW);
        cn_bn_input_gradient(out, pool ? out : dy + at, p->x + at, &one, &ch);
    }
}

/* Sums of sample b's planes, added to those kept in the state (started at sample 0): the
 * statistics' (its first value the shift) or, with ch, the gradient's. */
static void take_sample(const cn_layer_pass *p, int b, const float *x, const float *dy,
                        const bn_inside *in)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    const float *gamma = p->params, *beta = p->params + C;
    float *shift = taken_shift(p->state, C);
    cn_bn_planes one = {HW, 1, (size_t)HW, 0};
    for (int c = 0; c < C; c++) {
        bn_sums s = {{0}};
        if (b > 0) load_sums(&s, p->state, C, c);
        const float *xc = x + (size_t)c * HW;
        if (dy) {
            cn_bn_channel ch = channel(p->report[c], p->state[c], gamma[c], beta[c], in->relu);
            cn_bn_gradient_sums(s.lane, dy + (size_t)c * HW, xc, &one, &ch);
        } else {
            if (b == 0) shift[c] = xc[0];
            cn_bn_sums(s.lane, xc, &one, shift[c]);
        }
        store_sums(p->state, C, c, &s);
    }
}

static void take_input(const cn_layer_pass *p, const cn_layer_pass *next, int count, int b,
                       const float *x)
{
    bn_inside in = inside_or_none(next, count);
    take_sample(p, b, x, NULL, &in);
}

static void take_output_gradient(const cn_layer_pass *p, const cn_layer_pass *next, int count,
                                 int b, const float *dy)
{
    bn_inside in = inside_or_none(next, count);
    int C = p->l->out.c, HW = p->l->out.h * p->l->out.w;
    take_sample(p, b, p->x + plane(b, C, HW, 0), dy, &in);
}

/* One plane of scratch, for a max-pool inside the passes. */
static void scratch(const cn_layer *l, const cn_layer *fused, int bf16, size_t *col,
                    size_t *packed)
{
    (void)fused, (void)bf16;
    *col = (size_t)l->out.h * l->out.w, *packed = 0;
}

/* One replica's share of a running value: (1 - m) * running + m * batch. */
static inline float share(float mom, float running, float batch)
{
    return (1.0f - mom) * running + mom * batch;
}

/* running = mean over replicas r of share(running, batch_r), summed in order. */
static void update_running(const cn_layer *l, float *running, int64_t *counter,
                           const float *const *reports, int R)
{
    int C = l->out.c;
    const float mom = l->args.momentum;
    float *mean = running, *var = running + C;
    for (int c = 0; c < C; c++) {
        float sum_mean = 0.0f, sum_var = 0.0f;
        for (int r = 0; r < R; r++) {
            sum_mean += share(mom, mean[c], reports[r][c]);
            sum_var += share(mom, var[c], reports[r][C + c]);
        }
        mean[c] = sum_mean / (float)R;
        var[c] = sum_var / (float)R;
    }
    *counter += 1;
}

/* The addends of update_running for one replica: its shares of the mean and the variance. */
static void running_share(const cn_layer *l, const float *running, const float *report,
                          float *out)
{
    int C = l->out.c;
    const float mom = l->args.momentum;
    for (int c = 0; c < 2 * C; c++) out[c] = share(mom, running[c], report[c]);
}

static void describe(const cn_layer *l, char *line, size_t cap)
{
    if (l->args.momentum != 0.1f) cn_append_float(line, cap, "momentum", l->args.momentum);
    if (l->args.eps != 1e-5f) cn_append_float(line, cap, "eps", l->args.eps);
}

#define BATCHNORM_TYPE(word, plan_fn)                                                          \
    {                                                                                          \
        .kind = word, .flags = CN_KEEPS_INPUT | CN_WHOLE_BATCH, .keys = "name momentum eps",   \
        .required = "", .plan = plan_fn, .tensors = tensors, .init = init,                     \
        .batch_state = batch_state, .scratch = scratch, .forward = forward,                    \
        .backward = backward_pass, .fuses = fuses,                                             \
        .forward_fused = forward_fused, .backward_fused = backward_fused,                      \
        .forward_rectified = forward_rectified, .backward_rectified = backward_rectified,      \
        .update_running = update_running, .running_share = running_share,                      \
        .by_sample = by_sample, .make_output = make_output,                                    \
        .make_input_gradient = make_input_gradient, .take_input = take_input,                  \
        .take_output_gradient = take_output_gradient, .describe = describe,                    \
    }

const cn_layer_type cn_batchnorm2d_type = BATCHNORM_TYPE("batchnorm2d", plan2d);
const cn_layer_type cn_batchnorm1d_type = BATCHNORM_TYPE("batchnorm1d", plan1d);
