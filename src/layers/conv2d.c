/* conv2d.c — the conv2d layer type: nn.Conv2d(C, out, kernel, stride, padding, bias) on [C,H,W]
 * inputs. Its tensors are weight [out,C,K,K] and bias [out] (PyTorch's names and order); the
 * products are the kernels of src/kernels/conv.c, fp32 or bf16 (bf16 where it pays: not with one
 * input channel). When the planner fuses it with a max-pool right after it, or after a relu right
 * after it (window = stride, see fuses), backward takes the gradients from the pool's picks and
 * neither the pool's backward nor the relu's is run. Otherwise a max-pool right after it runs
 * inside its forward pass a sample at a time, and in bf16 inside its backward pass too, the
 * pool's gradient put straight into the products' pairs. The fp32 passes (Winograd's without a
 * bias) take their input and output gradient made a sample at a time by the layer that owns
 * them where the planner says so (takes_made; BatchNorm's normalised output and input
 * gradient), instead of reading them from buffers. No dilation or groups. */
#include <stdio.h>

#include "kernels/conv.h"
#include "layers/layer.h"

static cn_conv_shape shape_of(const cn_layer *l)
{
    const cn_layer_args *a = &l->args;
    return cn_conv_shape_of(l->in.c, l->in.h, l->in.w, a->out, a->kernel, a->stride, a->padding);
}

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    cn_layer_args *a = &l->args;
    a->out = s->out_channels, a->kernel = s->kernel, a->stride = s->stride ? s->stride : 1;
    a->padding = s->padding, a->bias = !s->no_bias;
    if (cn_need_planes(l, err)) return -1;
    if (a->out < 1 || a->stride < 1 || a->padding < 0)
        return cn_fail(err, "out=%d stride=%d padding=%d: out and stride must be at least 1, "
                       "padding at least 0", a->out, a->stride, a->padding);
    if (cn_window_fits(l, a->kernel, a->padding, err)) return -1;
    cn_conv_shape cs = shape_of(l);
    l->out = (cn_shape){a->out, cs.OH, cs.OW, 0};
    return 0;
}

static size_t num_weight(const cn_layer *l)
{
    return (size_t)l->args.out * l->in.c * l->args.kernel * l->args.kernel;
}

/* The whole batch in one call where the kernels' work per call needs many samples to pay. */
static unsigned shape_flags(const cn_layer *l)
{
    cn_conv_shape cs = shape_of(l);
    return cn_conv2d_batched(&cs) ? CN_WHOLE_BATCH : 0;
}

static int tensors(const cn_layer *l, cn_tensor_plan *t)
{
    int64_t o = l->args.out, k = l->args.kernel;
    t[0] = (cn_tensor_plan){"weight", CN_IN_PARAMS, 4, {o, l->in.c, k, k}};
    t[1] = (cn_tensor_plan){"bias", CN_IN_PARAMS, 1, {o}};
    return l->args.bias ? 2 : 1;
}

static void init(const cn_layer *l, float *params, float *running, cn_rng *rng)
{
    (void)running;
    size_t fan_in = (size_t)l->in.c * l->args.kernel * l->args.kernel;
    cn_init_fan_in(params, num_weight(l), l->args.bias ? (size_t)l->args.out : 0, fan_in, rng);
}

static const float *bias_of(const cn_layer *l, const float *params)
{
    return l->args.bias ? params + num_weight(l) : NULL;
}

static float *dbias_of(const cn_layer *l, float *dparams)
{
    return l->args.bias ? dparams + num_weight(l) : NULL;
}

/* The window of the max-pool after l when backward can take its gradients from its picks (with
 * padding only in the model's first layer, whose input gradient nobody needs). */
static int is_pool(const cn_layer *l) { return l->type == &cn_maxpool2d_type; }

static int fused_window(const cn_layer *l, const cn_layer *next)
{
    cn_conv_shape cs = shape_of(l);
    int S = next->args.kernel;
    int pool = is_pool(next) && next->args.stride == S;
    return pool && cn_conv2d_pool_fusable(&cs, S, l->index > 0) ? S : 0;
}

static int is_relu(const cn_layer *l) { return l->type == &cn_relu_type; }

/* The layers after l, next[0 .. avail), that backward can take its gradients through: a max-pool
 * that fits (fused_window), right after l or after a relu right after it (a relu commutes with
 * the max, so the picks are the relu's input's, and its gate is the relu's output at each);
 * 0: none. */
static int picking_layers(const cn_layer *l, const cn_layer *next, int avail)
{
    int relu = is_relu(&next[0]);
    return relu < avail && fused_window(l, &next[relu]) > 0 ? relu + 1 : 0;
}

/* bf16 products where they pay: a convolution of one input channel pairs kernel columns, and
 * the pairs cost more to copy than the products save (the seed's conv1: 164.6 against 135.8
 * thread-ms an epoch forward; models/fashion_mnist_best.model's: 40 against 47-53 forward and
 * 39 against 70-78 backward, AMD EPYC; 228 against 163 forward on the Xeon's AMX tiles), so it
 * keeps fp32's. */
static int bf16_pays(int bf16, const cn_conv_shape *cs)
{
    return bf16 && cs->C > 1;
}

/* A max-pool right after l whose picks the bf16 backward pass can take straight into its pairs
 * (cn_conv2d_pool_backward_bf16): windows that do not overlap, over a stride-1 output. */
static int pool_pairs_fit(const cn_layer *l, const cn_layer *pool, int bf16)
{
    cn_conv_shape cs = shape_of(l);
    return bf16_pays(bf16, &cs) && is_pool(pool) &&
           cn_conv2d_pool_pairs_fit(&cs, pool->args.kernel, pool->args.stride);
}

/* Backward through the picks of a max-pool that fits; else forward with a max-pool right after
 * l, a sample at a time (forward_fused), and in bf16 backward too where the pool's gradient can
 * go straight into the pairs (pool_pairs_fit). */
static cn_fusion fuses(const cn_layer *l, const cn_layer *next, int avail, int bf16)
{
    int layers = picking_layers(l, next, avail);
    if (layers) return (cn_fusion){CN_FUSE_BACKWARD, layers};
    if (!is_pool(&next[0])) return (cn_fusion){0, 0};
    unsigned backward = pool_pairs_fit(l, &next[0], bf16) ? CN_FUSE_BACKWARD : 0;
    return (cn_fusion){CN_FUSE_FORWARD | backward, 1};
}

/* The pool of a fusion whose first layer is fused (a relu, or the pool itself). */
static const cn_layer *fused_pool(const cn_layer *fused) { return fused + is_relu(fused); }

static void scratch(const cn_layer *l, const cn_layer *fused, int bf16, size_t *col,
                    size_t *packed)
{
    cn_conv_shape cs = shape_of(l);
    *col = cn_conv2d_col_floats(&cs);
    int S = fused ? fused_window(l, fused_pool(fused)) : 0;
    if (S) {
        size_t picks = cn_conv2d_pool_col_floats(&cs, S);
        *col = picks > *col ? picks : *col;
    } else if (fused) { /* forward_fused's output of one sample (or its pooled maxima and picks:
                           * fewer) */
        size_t one = cn_shape_size(l->out);
        *col = one > *col ? one : *col;
    }
    *packed = bf16 ? cn_conv2d_packed_words(&cs) : 0;
}

static void macs(const cn_layer *l, const cn_layer *fused, cn_layer_macs *m)
{
    double dense = (double)num_weight(l) * l->out.h * l->out.w;
    int S = fused ? fused_window(l, fused_pool(fused)) : 0;
    double share = S ? 1.0 / ((double)S * S) : 1.0;
    *m = (cn_layer_macs){dense, dense * share, dense * share};
}

/* The fp32 passes, where the layers beside it make and take its tensors a sample at a time
 * (layer.h, by_sample): under bf16 too for Winograd's shapes, unless bf16 runs on AMX's tiles.
 * BatchNorm's passes inside Winograd's then beat bf16's patch products with BatchNorm's passes
 * of their own: models/cifar10.model on the Zen 5 (AVX512_BF16), fp32 3,844-4,252 samples/s
 * against bf16's 2,732-2,990 (docs/speed.md). A convolution that feeds a max-pool (those of
 * models/fashion_mnist_best.model) has nothing made or taken, and keeps bf16's products. */
static int fp32_beside_makers(int bf16, const cn_conv_shape *cs)
{
    return !bf16_pays(bf16, cs) ||
           (cn_conv2d_batched(cs) && cn_bf16_kernel_active() != CN_BF16_AMX);
}

/* Whether a pass runs fp32's products: bf16 does not pay, or its tensors are made or taken. */
static int fp32_pass(const cn_layer_pass *p, const cn_conv_shape *cs)
{
    return !bf16_pays(p->bf16, cs) || p->made_x.make || p->made_dy.make || p->shown_y.take ||
           p->shown_dx.take;
}

/* Its input and output gradient made a sample at a time by the layers that own them (layer.h,
 * by_sample): the fp32 passes (cn_conv2d_takes_made). */
static int takes_made(const cn_layer *l, int bf16)
{
    cn_conv_shape cs = shape_of(l);
    return fp32_beside_makers(bf16, &cs) && cn_conv2d_takes_made(&cs, l->args.bias);
}

/* The pass's x or dy as cn_samples: made, or in its buffer. */
static cn_samples samples_of(const cn_samples *made, const float *at)
{
    return made->make ? *made : (cn_samples){.at = at};
}

/* Its fp32 passes show what they write (the whole batch in sample order: Winograd's). */
static int shows(const cn_layer *l, int bf16)
{
    cn_conv_shape cs = shape_of(l);
    return fp32_beside_makers(bf16, &cs) && cn_conv2d_batched(&cs);
}

static void forward(const cn_layer_pass *p)
{
    cn_conv_shape cs = shape_of(p->l);
    const float *bias = bias_of(p->l, p->params);
    cn_samples in = samples_of(&p->made_x, p->x);
    if (!fp32_pass(p, &cs))
        cn_conv2d_forward_bf16(p->y, p->x, p->params, bias, p->n, &cs, p->packed);
    else
        cn_conv2d_forward_made(p->y, &in, p->params, bias, p->n, &cs, p->col, &p->shown_y);
}

static void backward(const cn_layer_pass *p)
{
    cn_conv_shape cs = shape_of(p->l);
    float *db = dbias_of(p->l, p->dparams);
    cn_samples dout = samples_of(&p->made_dy, p->dy), in = samples_of(&p->made_x, p->x);
    if (!fp32_pass(p, &cs))
        cn_conv2d_backward_bf16(p->dx, p->dparams, db, p->dy, p->x, p->params, p->n, &cs, p->col,
                                p->packed);
    else
        cn_conv2d_backward_made(p->dx, p->dparams, db, &dout, &in, p->params, p->n, &cs, p->col,
                                &p->shown_dx);
}

/* next[0] is the max-pool's pass. With bf16 products the weights are packed once and each
 * sample's output goes from col, still in cache, through the pool's forward pass, or, for a 2x2
 * pool over products that take the positions as rows, is pooled in that layout
 * (cn_conv2d_pool_forward_bf16); the same products and maxima as the two passes one after the
 * other. In fp32 (whose 3x3 products take
 * whole batches) the two passes run as they would unfused. */
static void forward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    (void)count;
    const cn_layer_pass *pool = &next[0];
    cn_conv_shape cs = shape_of(p->l);
    if (!bf16_pays(p->bf16, &cs)) {
        forward(p);
        pool->l->type->forward(pool);
        return;
    }
    size_t in = cn_shape_size(p->l->in), out = cn_shape_size(pool->l->out);
    size_t aux = pool->l->type->aux_bytes(pool->l); /* its picks */
    const cn_layer_args *a = &pool->l->args;
    cn_conv2d_forward_bf16_weights(p->params, &cs, p->packed);
    if (cn_conv2d_pool_rows_fit(&cs, a->kernel, a->stride)) {
        cn_conv2d_pool_forward_bf16(pool->y, pool->aux, p->x, bias_of(p->l, p->params), p->n,
                                    &cs, p->col, p->packed);
        return;
    }
    for (int b = 0; b < p->n; b++) {
        cn_conv2d_forward_bf16_samples(p->col, p->x + b * in, bias_of(p->l, p->params), 1, &cs,
                                       p->packed);
        cn_layer_pass q = *pool;
        q.n = 1, q.first = pool->first + b, q.x = p->col, q.y = pool->y + b * out;
        q.aux = (char *)pool->aux + b * aux;
        pool->l->type->forward(&q);
    }
}

/* next[count - 1] is the max-pool's pass: its output gradient and its picks (aux); with a relu
 * before it, next[0] is the relu's, whose output gates the picks. In bf16 without a window that
 * fits the picks' path (fused_window), the dense products from the picks put into pairs. */
static void backward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    cn_conv_shape cs = shape_of(p->l);
    const cn_layer_pass *pool = &next[count - 1];
    float *db = dbias_of(p->l, p->dparams);
    int S = fused_window(p->l, pool->l);
    if (!S) {
        const cn_layer_args *a = &pool->l->args;
        cn_pool_shape ps = cn_pool_shape_of(cs.OC, cs.OH, cs.OW, a->kernel, a->stride);
        cn_conv2d_pool_backward_bf16(p->dx, p->dparams, db, pool->dy, pool->aux, p->x,
                                     p->params, p->n, &cs, &ps, p->col, p->packed);
        return;
    }
    const float *gate = count > 1 ? next[0].y : NULL;
    cn_conv2d_pool_backward(p->dx, p->dparams, db, pool->dy, pool->aux, gate, p->x, p->params,
                            p->n, &cs, S, p->col);
}

static void describe(const cn_layer *l, char *line, size_t cap)
{
    const cn_layer_args *a = &l->args;
    cn_appendf(line, cap, " out=%d kernel=%d", a->out, a->kernel);
    if (a->stride != 1) cn_appendf(line, cap, " stride=%d", a->stride);
    if (a->padding) cn_appendf(line, cap, " padding=%d", a->padding);
    if (!a->bias) cn_appendf(line, cap, " bias=0");
}

const cn_layer_type cn_conv2d_type = {
    .kind = "conv2d",
    .flags = CN_KEEPS_INPUT,
    .shape_flags = shape_flags,
    .keys = "name out kernel stride padding bias",
    .required = "out kernel",
    .plan = plan,
    .tensors = tensors,
    .init = init,
    .scratch = scratch,
    .macs = macs,
    .forward = forward,
    .backward = backward,
    .fuses = fuses,
    .forward_fused = forward_fused,
    .backward_fused = backward_fused,
    .takes_made = takes_made,
    .shows = shows,
    .describe = describe,
};
