/* global_avgpool.c — global average pooling, [C,H,W] -> [C,1,1]: the mean of each plane, as
 * PyTorch's nn.AdaptiveAvgPool2d(1) followed by nn.Flatten(). Its output is already flat, so a
 * linear layer may follow it directly; a flatten after it is allowed and changes nothing. The
 * sum runs in double (one rounding, whatever the plane's size); backward spreads dout / (H*W)
 * over the plane. Its kernels and its layer table. No other output size than 1x1 (that is
 * avgpool2d's job), no multiply-adds counted (pooling only adds). */
#include <stdio.h>

#include "layers/layer.h"
#include "layers/layers.h"

void cn_global_avgpool_forward(float *out, const float *in, size_t P, size_t HW)
{
    for (size_t plane = 0; plane < P; plane++) {
        const float *x = in + plane * HW;
        double sum = 0;
        for (size_t i = 0; i < HW; i++) sum += x[i];
        out[plane] = (float)(sum / (double)HW);
    }
}

void cn_global_avgpool_backward(float *din, const float *dout, size_t P, size_t HW)
{
    for (size_t plane = 0; plane < P; plane++) {
        float g = dout[plane] / (float)HW;
        float *dx = din + plane * HW;
        for (size_t i = 0; i < HW; i++) dx[i] = g;
    }
}

/* ---------------------------------------------------------------- the layer table */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    (void)s;
    if (cn_need_planes(l, err)) return -1;
    l->out = (cn_shape){l->in.c, 1, 1, 1};
    return 0;
}

static void forward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    cn_global_avgpool_forward(p->y, p->x, (size_t)p->n * l->in.c, (size_t)l->in.h * l->in.w);
}

static void backward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    if (p->dx)
        cn_global_avgpool_backward(p->dx, p->dy, (size_t)p->n * l->in.c,
                                   (size_t)l->in.h * l->in.w);
}

/* No keys; backward reads neither x nor y. */
const cn_layer_type cn_global_avgpool_type = {
    .kind = "global_avgpool",
    .flags = 0,
    .keys = "",
    .required = "",
    .plan = plan,
    .forward = forward,
    .backward = backward,
};
