/* batchnorm2d.c — batch normalisation over (batch, height, width) per channel, in training mode
 * (batch statistics, biased variance; the unbiased variance is handed out for the running
 * statistics) and evaluation mode (running statistics). Sums run in double in a fixed order.
 * Updating the running statistics is the caller's job: with data-parallel replicas they are
 * combined across replicas first. */
#include <math.h>

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
