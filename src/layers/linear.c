/* linear.c — the linear layer type: nn.Linear(in, out, bias), y = x W^T + b over a batch of
 * flat inputs, on top of cn_sgemm. Tensors weight [out, in] and bias [out], PyTorch's layout;
 * no other. */
#include "kernels/gemm.h"
#include <stdio.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/layers.h"

void cn_linear_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, int I, int O)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) out[(size_t)b * O + o] = bias ? bias[o] : 0.0f;
    cn_sgemm(0, 1, B, O, I, in, I, weight, I, 1, out, O);
}

void cn_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int I, int O)
{
    for (int b = 0; b < B && dbias; b++)
        for (int o = 0; o < O; o++) dbias[o] += dout[(size_t)b * O + o];
    cn_sgemm(1, 0, O, I, B, dout, O, in, I, 1, dweight, I);
    if (din) cn_sgemm(0, 0, B, I, O, dout, O, weight, I, 0, din, I);
}

/* ---- the layer type ---- */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    l->args.out = s->out_channels, l->args.bias = !s->no_bias;
    if (cn_need_flat(l, err)) return -1;
    if (l->args.out < 1) return cn_fail(err, "out=%d: must be at least 1", l->args.out);
    l->out = (cn_shape){l->args.out, 1, 1, 1};
    return 0;
}

static int tensors(const cn_layer *l, cn_tensor_plan *t)
{
    t[0] = (cn_tensor_plan){"weight", CN_IN_PARAMS, 2, {l->args.out, l->in.c}};
    t[1] = (cn_tensor_plan){"bias", CN_IN_PARAMS, 1, {l->args.out}};
    return l->args.bias ? 2 : 1;
}

static size_t num_weight(const cn_layer *l) { return (size_t)l->args.out * l->in.c; }

static void init(const cn_layer *l, float *params, float *running, cn_rng *rng)
{
    (void)running;
    cn_init_fan_in(params, num_weight(l), l->args.bias ? (size_t)l->args.out : 0,
                   (size_t)l->in.c, rng);
}

static void macs(const cn_layer *l, const cn_layer *fused, cn_layer_macs *m)
{
    (void)fused;
    double n = (double)num_weight(l);
    *m = (cn_layer_macs){n, n, n};
}

static void forward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    const float *bias = l->args.bias ? p->params + num_weight(l) : NULL;
    cn_linear_forward(p->y, p->x, p->params, bias, p->n, l->in.c, l->args.out);
}

static void backward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    float *dbias = l->args.bias ? p->dparams + num_weight(l) : NULL;
    cn_linear_backward(p->dx, p->dparams, dbias, p->dy, p->x, p->params, p->n, l->in.c,
                       l->args.out);
}

static void describe(const cn_layer *l, char *line, size_t cap)
{
    cn_appendf(line, cap, " out=%d", l->args.out);
    if (!l->args.bias) cn_appendf(line, cap, " bias=0");
}

const cn_layer_type cn_linear_type = {
    .kind = "linear",
    .flags = CN_KEEPS_INPUT,
    .keys = "name out bias",
    .required = "out",
    .plan = plan,
    .tensors = tensors,
    .init = init,
    .macs = macs,
    .forward = forward,
    .backward = backward,
    .describe = describe,
};
