/* batchnorm.c — the batchnorm2d and batchnorm1d layer types (nn.BatchNorm2d over (batch,
 * height, width) per channel of a [C,H,W] input; nn.BatchNorm1d over the batch per feature of a
 * flat input: the same kernels with H*W = 1). Training mode uses the batch statistics (biased
 * variance; the unbiased one goes to the running statistics), evaluation mode the running ones.
 * Sums run in double in a fixed order. The batch statistics are the layer's report: each
 * replica reports its own and update_running combines them in replica order, so the running
 * statistics do not depend on where replicas ran; with several processes each replica's share
 * of that combination is made where it ran (running_share) and the shares are summed like the
 * gradient. No affine=False, no track_running_stats=False. */
#include <math.h>
#include <stdio.h>

#include "layers/layer.h"
#include "layers/layers.h"

/* Sums of one channel's values over the batch, in eight interleaved double partial sums per
 * plane folded in a fixed order (so they vectorise and stay exact enough). */
typedef struct {
    double lane[8];
} lanes8;

static void add_lanes(lanes8 *acc, const float *x, int n, double shift)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc->lane[l] += (double)x[i + l] - shift;
    for (int l = 0; i < n; i++, l++) acc->lane[l] += (double)x[i] - shift;
}

static void add_square_lanes(lanes8 *acc, const float *x, int n, double shift)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) {
            double d = (double)x[i + l] - shift;
            acc->lane[l] += d * d;
        }
    for (int l = 0; i < n; i++, l++) {
        double d = (double)x[i] - shift;
        acc->lane[l] += d * d;
    }
}

/* acc += dy * xhat, with xhat = (x - mean) * invstd in float as the forward pass has it. */
static void add_products(lanes8 *acc, const float *dy, const float *x, int n, float mean,
                         float invstd)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc->lane[l] += dy[i + l] * ((x[i + l] - mean) * invstd);
    for (int l = 0; i < n; i++, l++) acc->lane[l] += dy[i] * ((x[i] - mean) * invstd);
}

static double fold8(const lanes8 *acc)
{
    return ((acc->lane[0] + acc->lane[4]) + (acc->lane[1] + acc->lane[5])) +
           ((acc->lane[2] + acc->lane[6]) + (acc->lane[3] + acc->lane[7]));
}

static void channel_stats(const float *in, int B, int C, int HW, int c, double *mean, double *var)
{
    lanes8 sum = {{0}}, sq = {{0}};
    for (int b = 0; b < B; b++) add_lanes(&sum, in + ((size_t)b * C + c) * HW, HW, 0.0);
    double m = fold8(&sum) / ((double)B * HW);
    for (int b = 0; b < B; b++) add_square_lanes(&sq, in + ((size_t)b * C + c) * HW, HW, m);
    *mean = m;
    *var = fold8(&sq) / ((double)B * HW);
}

static void normalise_channel(float *out, const float *in, int B, int C, int HW, int c,
                              float shift, float scale, float beta)
{
    for (int b = 0; b < B; b++) {
        const float *x = in + ((size_t)b * C + c) * HW;
        float *y = out + ((size_t)b * C + c) * HW;
        for (int i = 0; i < HW; i++) y[i] = (x[i] - shift) * scale + beta;
    }
}

void cn_batchnorm2d_forward_train(float *out, float *mean, float *invstd, float *var_unbiased,
                                  const float *in, const float *gamma, const float *beta, int B,
                                  int C, int HW, float eps)
{
    double n = (double)B * HW;
    for (int c = 0; c < C; c++) {
        double m, v;
        channel_stats(in, B, C, HW, c, &m, &v);
        mean[c] = (float)m;
        invstd[c] = (float)(1.0 / sqrt(v + eps));
        var_unbiased[c] = (float)(n > 1 ? v * n / (n - 1) : v);
        normalise_channel(out, in, B, C, HW, c, mean[c], invstd[c] * gamma[c], beta[c]);
    }
}

void cn_batchnorm2d_forward_eval(float *out, const float *in, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, int B, int C, int HW, float eps)
{
    for (int c = 0; c < C; c++) {
        float scale = (float)(1.0 / sqrt((double)running_var[c] + eps)) * gamma[c];
        normalise_channel(out, in, B, C, HW, c, running_mean[c], scale, beta[c]);
    }
}

void cn_batchnorm2d_backward(float *din, float *dgamma, float *dbeta, const float *dout,
                             const float *in, const float *mean, const float *invstd,
                             const float *gamma, int B, int C, int HW)
{
    double n = (double)B * HW;
    for (int c = 0; c < C; c++) {
        lanes8 dy_lanes = {{0}}, dy_xhat_lanes = {{0}};
        for (int b = 0; b < B; b++) {
            const float *x = in + ((size_t)b * C + c) * HW;
            const float *dy = dout + ((size_t)b * C + c) * HW;
            add_lanes(&dy_lanes, dy, HW, 0.0);
            add_products(&dy_xhat_lanes, dy, x, HW, mean[c], invstd[c]);
        }
        double sum_dy = fold8(&dy_lanes), sum_dy_xhat = fold8(&dy_xhat_lanes);
        dgamma[c] += (float)sum_dy_xhat;
        dbeta[c] += (float)sum_dy;
        if (!din) continue; /* a first layer: no input gradient wanted */
        float k = gamma[c] * invstd[c];
        float mean_dy = (float)(sum_dy / n), mean_dy_xhat = (float)(sum_dy_xhat / n);
        for (int b = 0; b < B; b++) {
            const float *x = in + ((size_t)b * C + c) * HW;
            const float *dy = dout + ((size_t)b * C + c) * HW;
            float *dx = din + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                float xhat = (x[i] - mean[c]) * invstd[c];
                dx[i] = k * (dy[i] - mean_dy - xhat * mean_dy_xhat);
            }
        }
    }
}

/* ---- the layer types: tensors weight (gamma), bias (beta), running_mean, running_var,
 * num_batches_tracked; report [mean C][unbiased var C], state [invstd C] ---- */

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
    *report = 2 * (size_t)l->out.c, *state = (size_t)l->out.c;
}

static void forward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    const float *gamma = p->params, *beta = p->params + C;
    if (p->training)
        cn_batchnorm2d_forward_train(p->y, p->report, p->state, p->report + C, p->x, gamma, beta,
                                     p->n, C, HW, l->args.eps);
    else
        cn_batchnorm2d_forward_eval(p->y, p->x, gamma, beta, p->running, p->running + C, p->n, C,
                                    HW, l->args.eps);
}

static void backward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    int C = l->out.c, HW = l->out.h * l->out.w;
    cn_batchnorm2d_backward(p->dx, p->dparams, p->dparams + C, p->dy, p->x, p->report, p->state,
                            p->params, p->n, C, HW);
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
        .batch_state = batch_state, .forward = forward, .backward = backward,                  \
        .update_running = update_running, .running_share = running_share,                      \
        .describe = describe,                                                                  \
    }

const cn_layer_type cn_batchnorm2d_type = BATCHNORM_TYPE("batchnorm2d", plan2d);
const cn_layer_type cn_batchnorm1d_type = BATCHNORM_TYPE("batchnorm1d", plan1d);
