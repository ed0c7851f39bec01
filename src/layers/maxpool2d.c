/* maxpool2d.c — the maxpool2d layer type: max-pooling with window = stride = S (floor), remembering where each maximum
 * came from so backward routes the gradient there. Ties go to the first maximum in scan order,
 * as in PyTorch. The common 2x2 window is a vector kernel of the instruction set in use
 * (cn_maxpool2_plane, gemm.h). No padding, dilation or overlapping windows. */
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

void cn_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int B, int C, int H,
                          int W, int S)
{
    int OH = H / S, OW = W / S;
    for (int plane = 0; plane < B * C; plane++) {
        const float *x = in + (size_t)plane * H * W;
        float *y = out + (size_t)plane * OH * OW;
        int32_t *where = argmax + (size_t)plane * OH * OW;
        if (S == 2)
            cn_maxpool2_plane(y, where, x, H, W);
        else
            pool_plane(y, where, x, W, OH, OW, S);
    }
}

void cn_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int B, int C,
                           int H, int W, int S)
{
    int OHW = (H / S) * (W / S);
    memset(din, 0, (size_t)B * C * H * W * sizeof *din);
    for (int plane = 0; plane < B * C; plane++) {
        float *dx = din + (size_t)plane * H * W;
        const float *dy = dout + (size_t)plane * OHW;
        const int32_t *where = argmax + (size_t)plane * OHW;
        for (int i = 0; i < OHW; i++) dx[where[i]] += dy[i];
    }
}

/* ---- the layer type: nn.MaxPool2d(K) (stride = K), the picks kept for backward ---- */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    cn_layer_args *a = &l->args;
    a->kernel = s->kernel, a->stride = s->stride ? s->stride : s->kernel;
    if (cn_need_planes(l, err) || cn_window_fits(l, a->kernel, 0, err)) return -1;
    if (a->stride != a->kernel)
        return cn_fail(err, "stride=%d with kernel=%d: not supported yet (stride = kernel only)",
                       a->stride, a->kernel);
    l->out = (cn_shape){l->in.c, l->in.h / a->kernel, l->in.w / a->kernel, 0};
    return 0;
}

static size_t aux_bytes(const cn_layer *l) { return cn_shape_size(l->out) * sizeof(int32_t); }

static void forward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    cn_maxpool2d_forward(p->y, p->aux, p->x, p->n, l->in.c, l->in.h, l->in.w, l->args.kernel);
}

static void backward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    if (p->dx)
        cn_maxpool2d_backward(p->dx, p->dy, p->aux, p->n, l->in.c, l->in.h, l->in.w,
                              l->args.kernel);
}

static void describe(const cn_layer *l, char *line, size_t cap)
{
    cn_appendf(line, cap, " kernel=%d", l->args.kernel);
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
