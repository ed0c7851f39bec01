/* relu.c — the relu layer type: the rectifier, elementwise, on any shape. Backward is gated on
 * the output (> 0), which is what PyTorch does; the kink at 0 gets gradient 0. Before a layer
 * that reads its input rectified (BatchNorm's forward_rectified) both passes run inside that
 * layer's, and nothing of the relu's own is stored. */
#include "layers/layer.h"
#include "layers/layers.h"

void cn_relu_forward(float *restrict out, const float *restrict in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void cn_relu_backward(float *restrict din, const float *restrict dout, const float *restrict out,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = dout[i]; /* loaded unconditionally so the loop vectorises */
        din[i] = out[i] > 0.0f ? g : 0.0f;
    }
}

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    (void)s, (void)err;
    l->out = l->in;
    return 0;
}

static void forward(const cn_layer_pass *p)
{
    cn_relu_forward(p->y, p->x, (size_t)p->n * cn_shape_size(p->l->out));
}

static void backward(const cn_layer_pass *p)
{
    if (p->dx) cn_relu_backward(p->dx, p->dy, p->y, (size_t)p->n * cn_shape_size(p->l->out));
}

static cn_fusion fuses(const cn_layer *l, const cn_layer *next, int avail, int bf16)
{
    (void)l, (void)avail, (void)bf16;
    return next->type->forward_rectified ? (cn_fusion){CN_FUSE_FORWARD | CN_FUSE_BACKWARD, 1}
                                         : (cn_fusion){0, 0};
}

/* next's passes on this layer's input (and into its input gradient). */
static void forward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    (void)count;
    cn_layer_pass q = *next;
    q.x = p->x;
    next->l->type->forward_rectified(&q);
}

static void backward_fused(const cn_layer_pass *p, const cn_layer_pass *next, int count)
{
    (void)count;
    cn_layer_pass q = *next;
    q.x = p->x, q.dx = p->dx;
    next->l->type->backward_rectified(&q);
}

const cn_layer_type cn_relu_type = {
    .kind = "relu",
    .flags = CN_KEEPS_OUTPUT,
    .keys = "",
    .required = "",
    .plan = plan,
    .forward = forward,
    .backward = backward,
    .fuses = fuses,
    .forward_fused = forward_fused,
    .backward_fused = backward_fused,
};
