/* maxpool2d.c — the maxpool2d layer type: max-pooling with window K and stride S (floor),
 * remembering where each maximum came from (the pass's aux) so backward routes the gradient
 * there (overlapping windows add up). Ties go to the first maximum in scan order, as in
 * PyTorch. The common 2x2 window with stride 2 is a vector kernel of the instruction set in use,
 * both ways (cn_maxpool2_planes, cn_maxpool2_gradient; gemm.h). A convolution right before a
 * pool may run its forward pass, and its backward where the windows do not overlap (conv2d.c,
 * fuses); a BatchNorm right before
 * it, or before a relu right before it, runs both its passes a plane at a time (batchnorm.c).
 * No padding, dilation or ceil mode. */
#include <string.h>

#include "kernels/gemm.h"
#include "layers/layer.h"
#include "layers/layers.h"

static void pool_plane(float *y, int32_t *where, const float *x, int W, int OH, int OW, int S)
{
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            int best = oy * S * W + ox * S;
            for (int dy = 0; dy < S; dy++)
                for (int dx = 0; dx < S; dx++) {
                    int at = (oy * S + dy) * W + ox * S + dx;
                    if (x[at] > x[best]) best = at;
                }
            y[oy * OW + ox] = x[best];
            where[oy * OW + ox] = best;
        }
}

/* Windows that overlap or leave gaps (stride other than the window). */
static void pool_plane_strided(float *y, int32_t *where, const float *x, const cn_pool_shape *s)
{
    for (int oy = 0; oy < s->OH; oy++)
        for (int ox = 0; ox < s->OW; ox++) {
            int best = oy * s->S * s->W + ox * s->S;
            for (int dy = 0; dy < s->K; dy++)
                for (int dx = 0; dx < s->K; dx++) {
                    int at = (oy * s->S + dy) * s->W + ox * s->S + dx;
                    if (x[at] > x[best]) best = at;
                }
            y[oy * s->OW + ox] = x[best];
            where[oy * s->OW + ox] = best;
        }
}

void cn_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int B,
                          const cn_pool_shape *s)
{
    int HW = s->H * s->W, OHW = s->OH * s->OW, S = s->S;
    if (s->K == 2 && S == 2) { /* the whole batch in one call: small planes pay no call each */
        cn_maxpool2_planes(out, argmax, in, B * s->C, s->H, s->W);
        return;
    }
    for (int plane = 0; plane < B * s->C; plane++) {
        const float *x = in + (size_t)plane * HW;
        float *y = out + (size_t)plane * OHW;
        int32_t *where = argmax + (size_t)plane * OHW;
        if (s->K != S)
            pool_plane_strided(y, where, x, s);
        else
            pool_plane(y, where, x, s->W, s->OH, s->OW, S);
    }
}

void cn_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int B,
                           const cn_pool_shape *s)
{
    int HW = s->H * s->W, OHW = s->OH * s->OW;
    if (s->K == 2 && s->S == 2) { /* vectors, no scatter: the same bits */
        cn_maxpool2_gradient(din, dout, argmax, B * s->C, s->H, s->W);
        return;
    }
    for (int plane = 0; plane < B * s->C; plane++) { /* zeroed a plane at a time: in L1 */
        float *dx = din + (size_t)plane * HW;
        const float *dy = dout + (size_t)plane * OHW;
        const int32_t *where = argmax + (size_t)plane * OHW;
        if (plane + 1 < B * s->C) { /* the next plane's, past the 4 KB pages' prefetch stops */
            cn_fetch_ahead(dy + OHW, OHW), cn_fetch_ahead((const float *)(where + OHW), OHW);
            cn_fetch_ahead_to_write(dx + HW, HW);
        }
        memset(dx, 0, (size_t)HW * sizeof *dx);
        for (int i = 0; i < OHW; i++) dx[where[i]] += dy[i];
    }
}

/* ---- the layer type: nn.MaxPool2d(K, S), the picks kept for backward ---- */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    cn_layer_args *a = &l->args;
    a->kernel = s->kernel, a->stride = s->stride ? s->stride : s->kernel;
    if (cn_need_planes(l, err) || cn_window_fits(l, a->kernel, 0, err)) return -1;
    if (a->stride < 1) return cn_fail(err, "stride=%d must be at least 1", a->stride);
    cn_pool_shape ps = cn_pool_shape_of(l->in.c, l->in.h, l->in.w, a->kernel, a->stride);
    l->out = (cn_shape){ps.C, ps.OH, ps.OW, 0};
    return 0;
}

static size_t aux_bytes(const cn_layer *l) { return cn_shape_size(l->out) * sizeof(int32_t); }

static cn_pool_shape shape_of(const cn_layer *l)
{
    return cn_pool_shape_of(l->in.c, l->in.h, l->in.w, l->args.kernel, l->args.stride);
}

static void forward(const cn_layer_pass *p)
{
    cn_pool_shape s = shape_of(p->l);
    cn_maxpool2d_forward(p->y, p->aux, p->x, p->n, &s);
}

static void backward(const cn_layer_pass *p)
{
    cn_pool_shape s = shape_of(p->l);
    if (p->dx) cn_maxpool2d_backward(p->dx, p->dy, p->aux, p->n, &s);
}

static void describe(const cn_layer *l, char *line, size_t cap)
{
    cn_appendf(line, cap, " kernel=%d", l->args.kernel);
    if (l->args.stride != l->args.kernel) cn_appendf(line, cap, " stride=%d", l->args.stride);
}

const cn_layer_type cn_maxpool2d_type = {
    .kind = "maxpool2d",
    .keys = "kernel stride",
    .required = "kernel",
    .plan = plan,
    .aux_bytes = aux_bytes,
    .forward = forward,
    .backward = backward,
    .describe = describe,
};
