/* linear.c — the linear layer type: nn.Linear(in, out, bias), y = x W^T + b over a batch of
 * flat inputs, on top of cn_sgemm, or with bf16 products (cn_gemm_bf16) under --precision bf16
 * where they pay. Tensors weight [out, in] and bias [out], PyTorch's layout; no other. */
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

/* dbias [O] += the sums of dout [B, O] over the samples, in order (none without a bias). */
static void bias_gradient(float *dbias, const float *dout, int B, int O)
{
    for (int b = 0; b < B && dbias; b++)
        for (int o = 0; o < O; o++) dbias[o] += dout[(size_t)b * O + o];
}

void cn_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int I, int O)
{
    bias_gradient(dbias, dout, B, O);
    cn_sgemm(1, 0, O, I, B, dout, O, in, I, 1, dweight, I);
    if (din) cn_sgemm(0, 0, B, I, O, dout, O, weight, I, 0, din, I);
}

/* ---- bf16 ----
 * Forward: y [g, O] = bias + xp [g, Ip] * Wt [Ip, O], pairs of input features (W's rows packed
 * in pairs, then transposed). Weight gradient: dW [O, I] += dyq^T [O, g/2] * xq [g/2, I], pairs
 * of samples. Input gradient: dx [g, I] = dyp [g, Op] * Wq [Op, I], pairs of output features.
 * The samples go in groups of g <= CN_LINEAR_GROUP (an even number but for the last), so that
 * the scratch does not grow with the batch; the pairs of samples are the same for any grouping.
 * packed: the weights' pairs, then a group's. */

static size_t group_words(int I, int O)
{
    size_t G = CN_LINEAR_GROUP, Gp = (size_t)cn_bf16_pairs(CN_LINEAR_GROUP);
    size_t forward = G * cn_bf16_pairs(I), backward = Gp * O + Gp * I + G * cn_bf16_pairs(O);
    return forward > backward ? forward : backward;
}

size_t cn_linear_packed_words(int I, int O)
{
    size_t weights = 2 * (size_t)O * cn_bf16_pairs(I); /* W's row pairs and their transpose */
    size_t wq = (size_t)cn_bf16_pairs(O) * I;
    return (weights > wq ? weights : wq) + group_words(I, O);
}

void cn_linear_forward_bf16(float *out, const float *in, const float *weight, const float *bias,
                            int B, int I, int O, cn_bf16_pair *packed)
{
    int Ip = cn_bf16_pairs(I);
    cn_bf16_pair *wp = packed, *wt = wp + (size_t)O * Ip, *xp = wt + (size_t)O * Ip;
    cn_bf16_pack_rows(wp, weight, O, I, I);
    cn_bf16_transpose(wt, wp, O, Ip);
    for (int b0 = 0; b0 < B; b0 += CN_LINEAR_GROUP) {
        int g = B - b0 < CN_LINEAR_GROUP ? B - b0 : CN_LINEAR_GROUP;
        float *y = out + (size_t)b0 * O;
        for (int b = 0; b < g; b++)
            for (int o = 0; o < O; o++) y[(size_t)b * O + o] = bias ? bias[o] : 0.0f;
        cn_bf16_pack_rows(xp, in + (size_t)b0 * I, g, I, I);
        cn_gemm_bf16(g, O, Ip, xp, Ip, 1, wt, O, 1, y, O);
    }
}

void cn_linear_backward_bf16(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *weight, int B, int I, int O,
                             cn_bf16_pair *packed)
{
    int Op = cn_bf16_pairs(O);
    cn_bf16_pair *wq = packed, *dyq = wq + cn_linear_packed_words(I, O) - group_words(I, O);
    cn_bf16_pair *xq = dyq + (size_t)cn_bf16_pairs(CN_LINEAR_GROUP) * O;
    cn_bf16_pair *dyp = xq + (size_t)cn_bf16_pairs(CN_LINEAR_GROUP) * I;
    bias_gradient(dbias, dout, B, O);
    if (din) cn_bf16_pack_row_pairs(wq, weight, O, I, I);
    for (int b0 = 0; b0 < B; b0 += CN_LINEAR_GROUP) {
        int g = B - b0 < CN_LINEAR_GROUP ? B - b0 : CN_LINEAR_GROUP;
        const float *dy = dout + (size_t)b0 * O, *x = in + (size_t)b0 * I;
        cn_bf16_pack_row_pairs(dyq, dy, g, O, O);
        cn_bf16_pack_row_pairs(xq, x, g, I, I);
        cn_gemm_bf16(O, I, cn_bf16_pairs(g), dyq, 1, O, xq, I, 1, dweight, I);
        if (!din) continue;
        cn_bf16_pack_rows(dyp, dy, g, O, O);
        cn_gemm_bf16(g, I, Op, dyp, Op, 1, wq, I, 0, din + (size_t)b0 * I, I);
    }
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

/* bf16 products where they pay: on a whole tile of outputs or more (the hidden layer of
 * models/fashion_mnist_best.model, 1152 -> 256: 54-57 forward and 104 backward thread-ms an
 * epoch of 8192 samples in fp32, 29-32 and 52-58 in bf16, `build/bench --model ... --precision
 * bf16`, AMD EPYC family 25). A layer of a few outputs (a classifier) keeps fp32's. */
static int bf16_pays(const cn_layer *l, int bf16) { return bf16 && l->args.out >= 32; }

static void scratch(const cn_layer *l, const cn_layer *fused, int bf16, size_t *col,
                    size_t *packed)
{
    (void)fused;
    *col = 0;
    *packed = bf16_pays(l, bf16) ? cn_linear_packed_words(l->in.c, l->args.out) : 0;
}

static void forward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    const float *bias = l->args.bias ? p->params + num_weight(l) : NULL;
    if (bf16_pays(l, p->bf16))
        cn_linear_forward_bf16(p->y, p->x, p->params, bias, p->n, l->in.c, l->args.out,
                               p->packed);
    else
        cn_linear_forward(p->y, p->x, p->params, bias, p->n, l->in.c, l->args.out);
}

static void backward(const cn_layer_pass *p)
{
    const cn_layer *l = p->l;
    float *dbias = l->args.bias ? p->dparams + num_weight(l) : NULL;
    if (bf16_pays(l, p->bf16))
        cn_linear_backward_bf16(p->dx, p->dparams, dbias, p->dy, p->x, p->params, p->n,
                                l->in.c, l->args.out, p->packed);
    else
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
    .scratch = scratch,
    .macs = macs,
    .forward = forward,
    .backward = backward,
    .describe = describe,
};
