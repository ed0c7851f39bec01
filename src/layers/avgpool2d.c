/* avgpool2d.c — average pooling, PyTorch's nn.AvgPool2d(kernel, stride): window K, stride S
 * (the window when not given), floor, each output the window's sum divided by K*K in float as
 * PyTorch computes it; backward spreads each output's gradient / K*K over its window, adding
 * where windows overlap (S < K). Its kernels and its layer table. No padding (so no
 * count_include_pad question), no ceil_mode, no divisor_override, and no multiply-adds counted:
 * pooling only adds, and the model's flops count multiply-adds. */
#include <stdio.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/layers.h"

static void pool_plane(float *y, const float *x, const cn_pool_shape *s)
{
    float count = (float)(s->K * s->K);
    for (int oy = 0; oy < s->OH; oy++)
        for (int ox = 0; ox < s->OW; ox++) {
            const float *w = x + (size_t)oy * s->S * s->W + (size_t)ox * s->S;
            float sum = 0.0f;
            for (int dy = 0; dy < s->K; dy++)
                for (int dx = 0; dx < s->K; dx++) sum += w[dy * s->W + dx];
            y[oy * s->OW + ox] = sum / count;
        }
}

void cn_avgpool2d_forward(float *out, const float *in, int B, const cn_pool_shape *s)
{
    size_t in_plane = (size_t)s->H * s->W, out_plane = (size_t)s->OH * s->OW;
    for (size_t plane = 0; plane < (size_t)B * s->C; plane++)
        pool_plane(out + plane * out_plane, in + plane * in_plane, s);
}

static void spread_plane(float *dx, const float *dy, const cn_pool_shape *s)
{
    float count = (float)(s->K * s->K);
    for (int oy = 0; oy < s->OH; oy++)
        for (int ox = 0; ox < s->OW; ox++) {
            float *w = dx + (size_t)oy * s->S * s->W + (size_t)ox * s->S;
            float g = dy[oy * s->OW + ox] / count;
            for (int ky = 0; ky < s->K; ky++)
                for (int kx = 0; kx < s->K; kx++) w[ky * s->W + kx] += g;
        }
}

void cn_avgpool2d_backward(float *din, const float *dout, int B, const cn_pool_shape *s)
{
    size_t in_plane = (size_t)s->H * s->W, out_plane = (size_t)s->OH * s->OW;
    memset(din, 0, (size_t)B * s->C * in_plane * sizeof *din);
    for (size_t plane = 0; plane < (size_t)B * s->C; plane++)
        spread_plane(din + plane * in_plane, dout + plane * out_plane, s);
}

/* ---------------------------------------------------------------- the layer table */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    int K = s->kernel, S = s->stride ? s->stride : s->kernel;
    if (cn_need_planes(l, err)) return -1;
    if (K < 1) return cn_fail(err, "kernel=%d must be at least 1", K);
    if (S < 1) return cn_fail(err, "stride=%d must be at least 1", S);
    if (cn_window_fits(l, K, 0, err)) return -1;
    l->args.kernel = K;
    l->args.stride = S;
    cn_pool_shape p = cn_pool_shape_of(l->in.c, l->in.h, l->in.w, K, S);
    l->out = (cn_shape){p.C, p.OH, p.OW, 0};
    return 0;
}

static cn_pool_shape shape_of(const cn_layer *l)
{
    return cn_pool_shape_of(l->in.c, l->in.h, l->in.w, l->args.kernel, l->args.stride);
}

static void forward(const cn_layer_pass *p)
{
    cn_pool_shape s = shape_of(p->l);
    cn_avgpool2d_forward(p->y, p->x, p->n, &s);
}

static void backward(const cn_layer_pass *p)
{
    if (!p->dx) return;
    cn_pool_shape s = shape_of(p->l);
    cn_avgpool2d_backward(p->dx, p->dy, p->n, &s);
}

/* " kernel=K", and " stride=S" when it is not the window. */
static void describe(const cn_layer *l, char *line, size_t cap)
{
    cn_appendf(line, cap, " kernel=%d", l->args.kernel);
    if (l->args.stride != l->args.kernel) cn_appendf(line, cap, " stride=%d", l->args.stride);
}

/* Backward reads neither x nor y: the window and its size are all it needs. */
const cn_layer_type cn_avgpool2d_type = {
    .kind = "avgpool2d",
    .flags = 0,
    .keys = "kernel stride",
    .required = "kernel",
    .plan = plan,
    .forward = forward,
    .backward = backward,
    .describe = describe,
};
