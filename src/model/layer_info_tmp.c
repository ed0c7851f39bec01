/* layer_info_tmp.c — cn_model_layer_info over today's cn_model internals: a layer's kind word,
 * name, output shape, trainable parameters and the floating-point operations cn_model_flops
 * counts for it. A stand-in until the layer table answers it itself; it computes nothing that
 * model.c does not already decide, and counts only conv and linear arithmetic. */
#include "model/model.h"

/* The model file's word for each kind (models/README.md). */
static const char *layer_kind_word(cn_layer_kind kind)
{
    static const char *const words[] = {
        "conv2d", "maxpool2d", "relu", "batchnorm2d", "flatten", "linear", "log_softmax",
        "avgpool2d", "global_avgpool", "dropout", "batchnorm1d",
    };
    _Static_assert(sizeof words / sizeof words[0] == CN_NUM_LAYER_KINDS, "one word per kind");
    return (unsigned)kind < CN_NUM_LAYER_KINDS ? words[kind] : "unknown";
}

/* Trainable parameters: weight and bias of conv and linear, gamma and beta of batchnorm. */
static size_t layer_params(const cn_layer *l)
{
    switch (l->kind) {
    case CN_CONV2D: case CN_LINEAR: return l->num_weight + (size_t)l->out_c;
    case CN_BATCHNORM2D: case CN_BATCHNORM1D: return 2 * (size_t)l->out_c;
    default: return 0;
    }
}

int cn_model_layer_info(const cn_model *m, int layer, cn_layer_info *info)
{
    if (!m || layer < 0 || layer >= m->num_layers) return -1;
    const cn_layer *l = &m->layers[layer];
    double macs = 0;
    if (l->kind == CN_CONV2D || l->kind == CN_LINEAR)
        macs = (double)l->num_weight * l->out_h * l->out_w;
    *info = (cn_layer_info){
        .kind = layer_kind_word(l->kind),
        .name = l->name,
        .channels = l->out_c, .height = l->out_h, .width = l->out_w,
        .params = layer_params(l),
        .forward_flops = 2 * macs,
        .backward_flops = layer == 0 ? 2 * macs : 4 * macs,
    };
    return 0;
}
