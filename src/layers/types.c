/* types.c — the list of layer types, indexed by cn_layer_kind, and the small checks and helpers
 * their files share. The only place that knows every type; it knows nothing about any one. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

static const cn_layer_type *const types[] = {
    [CN_CONV2D] = &cn_conv2d_type,
    [CN_MAXPOOL2D] = &cn_maxpool2d_type,
    [CN_RELU] = &cn_relu_type,
    [CN_BATCHNORM2D] = &cn_batchnorm2d_type,
    [CN_FLATTEN] = &cn_flatten_type,
    [CN_LINEAR] = &cn_linear_type,
    [CN_LOG_SOFTMAX] = &cn_log_softmax_type,
    [CN_AVGPOOL2D] = &cn_avgpool2d_type,
    [CN_GLOBAL_AVGPOOL] = &cn_global_avgpool_type,
    [CN_DROPOUT] = &cn_dropout_type,
    [CN_BATCHNORM1D] = &cn_batchnorm1d_type,
};
_Static_assert(sizeof types / sizeof types[0] == CN_NUM_LAYER_KINDS, "one type per kind");

const cn_layer_type *cn_layer_type_of(int kind)
{
    return kind >= 0 && kind < CN_NUM_LAYER_KINDS ? types[kind] : NULL;
}

const cn_layer_type *cn_layer_type_named(const char *word, int *kind)
{
    for (int k = 0; k < CN_NUM_LAYER_KINDS; k++)
        if (strcmp(types[k]->kind, word) == 0) {
            *kind = k;
            return types[k];
        }
    return NULL;
}

int cn_need_planes(const cn_layer *l, cn_error *err)
{
    if (!l->in.flat) return 0;
    return cn_fail(err, "needs a [C,H,W] input, not the flat %d features of flatten or linear",
                   l->in.c);
}

int cn_need_flat(const cn_layer *l, cn_error *err)
{
    if (l->in.flat) return 0;
    return cn_fail(err, "needs a flat input, not %dx%dx%d: put flatten before it", l->in.c,
                   l->in.h, l->in.w);
}

int cn_window_fits(const cn_layer *l, int kernel, int padding, cn_error *err)
{
    if (kernel >= 1 && kernel <= l->in.h + 2 * padding && kernel <= l->in.w + 2 * padding)
        return 0;
    return cn_fail(err, "kernel=%d does not fit its input %dx%dx%d", kernel, l->in.c, l->in.h,
                   l->in.w);
}

void cn_appendf(char *line, size_t cap, const char *fmt, ...)
{
    size_t len = strnlen(line, cap);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + len, cap - len, fmt, ap);
    va_end(ap);
}

void cn_format_float(char num[32], float v)
{
    snprintf(num, 32, "%g", (double)v);
    if (strtof(num, NULL) != v) snprintf(num, 32, "%.9g", (double)v);
}

void cn_append_float(char *line, size_t cap, const char *key, float v)
{
    char num[32];
    cn_format_float(num, v);
    cn_appendf(line, cap, " %s=%s", key, num);
}

void cn_init_fan_in(float *params, size_t num_weight, size_t num_bias, size_t fan_in,
                    cn_rng *rng)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < num_weight + num_bias; i++)
        params[i] = bound * (2.0f * cn_rng_uniform(rng) - 1.0f);
}
