/* batchnorm2d.c — batch normalisation over (batch, height, width) per channel, in training mode
 * (batch statistics, biased variance; the unbiased variance is handed out for the running
 * statistics) and evaluation mode (running statistics). Sums run in double in a fixed order.
 * Updating the running statistics is the caller's job: with data-parallel replicas they are
 * combined across replicas first. */
#include <math.h>

#include "layers.h"

static void channel_stats(const float *in, int B, int C, int HW, int c, double *mean, double *var)
{
    double sum = 0, sq = 0;
    for (int b = 0; b < B; b++) {
        const float *x = in + ((size_t)b * C + c) * HW;
        for (int i = 0; i < HW; i++) sum += x[i];
    }
    double m = sum / ((double)B * HW);
    for (int b = 0; b < B; b++) {
        const float *x = in + ((size_t)b * C + c) * HW;
        for (int i = 0; i < HW; i++) sq += (x[i] - m) * (x[i] - m);
    }
    *mean = m;
    *var = sq / ((double)B * HW);
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
        double sum_dy = 0, sum_dy_xhat = 0;
        for (int b = 0; b < B; b++) {
            const float *x = in + ((size_t)b * C + c) * HW;
            const float *dy = dout + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                sum_dy += dy[i];
                sum_dy_xhat += dy[i] * ((x[i] - mean[c]) * invstd[c]);
            }
        }
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
