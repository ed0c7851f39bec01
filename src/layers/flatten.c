/* flatten.c — the flatten layer type: [C,H,W] -> a flat vector of C*H*W features, index
 * c*H*W + y*W + x, as torch.nn.Flatten. A view: the executor gives it its input's buffers and
 * runs nothing. */
#include "layers/layer.h"

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    (void)s, (void)err;
    l->out = (cn_shape){(int)cn_shape_size(l->in), 1, 1, 1};
    return 0;
}

static void forward(const cn_layer_pass *p) { (void)p; }

const cn_layer_type cn_flatten_type = {
    .kind = "flatten",
    .flags = CN_VIEW,
    .keys = "",
    .required = "",
    .plan = plan,
    .forward = forward,
};
