/* log_softmax.c — the log_softmax layer type (the last layer of a classifier): log-softmax over
 * the features, and the negative log-likelihood loss (mean over the batch), plain or with label
 * smoothing, each with its backward, and the count of right answers. The maximum is subtracted
 * first so large logits do not overflow. No class weights, no ignore_index. */
#include <math.h>

#include "layers/layer.h"
#include "layers/layers.h"

void cn_log_softmax_forward(float *out, const float *in, int B, int N)
{
    for (int b = 0; b < B; b++) {
        const float *x = in + (size_t)b * N;
        float *y = out + (size_t)b * N;
        float max = x[0];
        for (int i = 1; i < N; i++) max = x[i] > max ? x[i] : max;
        double sum = 0;
        for (int i = 0; i < N; i++) sum += exp((double)x[i] - max);
        float log_sum = (float)log(sum);
        for (int i = 0; i < N; i++) y[i] = (x[i] - max) - log_sum;
    }
}

void cn_log_softmax_backward(float *din, const float *dout, const float *out, int B, int N)
{
    for (int b = 0; b < B; b++) {
        const float *dy = dout + (size_t)b * N, *y = out + (size_t)b * N;
        float *dx = din + (size_t)b * N;
        float sum = 0;
        for (int i = 0; i < N; i++) sum += dy[i];
        for (int i = 0; i < N; i++) dx[i] = dy[i] - expf(y[i]) * sum;
    }
}

float cn_nll_loss(const float *logp, const uint8_t *labels, int B, int N)
{
    double sum = 0;
    for (int b = 0; b < B; b++) sum -= logp[(size_t)b * N + labels[b]];
    return (float)(sum / B);
}

void cn_nll_backward(float *dlogp, const uint8_t *labels, int B, int N)
{
    for (int i = 0; i < B * N; i++) dlogp[i] = 0.0f;
    for (int b = 0; b < B; b++) dlogp[(size_t)b * N + labels[b]] = -1.0f / (float)B;
}

float cn_smoothed_nll_loss(const float *logp, const uint8_t *labels, int B, int N, float a)
{
    if (a == 0.0f) return cn_nll_loss(logp, labels, B, N);
    double sum = 0;
    for (int b = 0; b < B; b++) {
        const float *row = logp + (size_t)b * N;
        double all = 0;
        for (int k = 0; k < N; k++) all -= row[k];
        sum += (1.0 - a) * -(double)row[labels[b]] + a * all / N;
    }
    return (float)(sum / B);
}

void cn_smoothed_nll_backward(float *dlogp, const uint8_t *labels, int B, int N, float a)
{
    if (a == 0.0f) {
        cn_nll_backward(dlogp, labels, B, N);
        return;
    }
    float spread = -a / (float)N / (float)B, hit = -(1.0f - a) / (float)B;
    for (int i = 0; i < B * N; i++) dlogp[i] = spread;
    for (int b = 0; b < B; b++) dlogp[(size_t)b * N + labels[b]] += hit;
}

int cn_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int cn_count_correct(const float *logp, const uint8_t *labels, int B, int N)
{
    int correct = 0;
    for (int b = 0; b < B; b++) correct += cn_argmax(logp + (size_t)b * N, N) == labels[b];
    return correct;
}

/* ---- the layer type ---- */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    (void)s;
    if (cn_need_flat(l, err)) return -1;
    l->out = l->in;
    return 0;
}

static void forward(const cn_layer_pass *p)
{
    cn_log_softmax_forward(p->y, p->x, p->n, p->l->in.c);
}

static void backward(const cn_layer_pass *p)
{
    if (p->dx) cn_log_softmax_backward(p->dx, p->dy, p->y, p->n, p->l->in.c);
}

const cn_layer_type cn_log_softmax_type = {
    .kind = "log_softmax",
    .flags = CN_KEEPS_OUTPUT | CN_FINAL,
    .keys = "",
    .required = "",
    .plan = plan,
    .forward = forward,
    .backward = backward,
};
