/* model.h — the inside of cn_model, shared by model.c (building, initialising, naming),
 * executor.c (running) and trainer.c (optimising). A model is a list of layers with their
 * per-sample shapes and the offsets of their tensors in two flat buffers: trainable parameters
 * and BatchNorm running statistics. Nothing here knows about replicas or threads. */
#ifndef CN_MODEL_H
#define CN_MODEL_H

#include "cnnc.h"

#define CN_BN_EPS 1e-5f
#define CN_BN_MOMENTUM 0.1f
/* The normalisation of the pixels (x/255 - mean) / std, as the seed does it; the only one the
 * data pipeline computes today (cn_pixel_values). */
#define CN_PIXEL_MEAN 0.1307f
#define CN_PIXEL_STD 0.3081f

typedef struct {
    cn_layer_kind kind;
    char name[64]; /* at most 39 characters: "NAME.num_batches_tracked" fits a cn_tensor_ref */
    int in_c, in_h, in_w;    /* per-sample input shape */
    int out_c, out_h, out_w; /* per-sample output shape */
    int kernel;
    size_t weight, bias;     /* offsets in params (conv, linear: weight, bias; bn: gamma, beta) */
    size_t num_weight;       /* elements of the weight tensor (bias: out_c) */
    size_t stats;            /* bn: running_mean at stats, running_var at stats + out_c */
    int bn_index;            /* bn: index of its num_batches_tracked and of its channels */
    int bn_channels;         /* bn: offset of its channels among all bn channels */
} cn_layer;

struct cn_model {
    int in_c, in_h, in_w;
    int num_layers;
    cn_layer *layers;
    size_t num_params;
    float *params;
    size_t num_stats;        /* 2 x all bn channels */
    float *stats;
    int num_bn;
    int64_t *batches_tracked; /* [num_bn] */
    float *mean, *std;        /* [in_c] each: the input's normalisation */
    char *text;               /* the model file it was built from, or NULL */
};

/* The model as a model file in its canonical form (every layer with tensors named, one value
 * for mean and std: all channels share them today); malloc'd, or NULL when out of memory. */
char *cn_model_describe(const cn_model *m);

static inline int cn_layer_in_size(const cn_layer *l) { return l->in_c * l->in_h * l->in_w; }
static inline int cn_layer_out_size(const cn_layer *l) { return l->out_c * l->out_h * l->out_w; }
static inline int cn_layer_has_params(const cn_layer *l)
{
    return l->kind == CN_CONV2D || l->kind == CN_LINEAR || l->kind == CN_BATCHNORM2D;
}

/* The window of the max-pool that layer i feeds when layer i is a convolution followed by one,
 * else 0: such a convolution takes its gradients from the pool's picks (the executor runs it
 * so, and cn_model_flops_computed counts it so). */
static inline int cn_model_pool_after(const cn_model *m, int i)
{
    int pooled = i >= 0 && i + 1 < m->num_layers && m->layers[i].kind == CN_CONV2D &&
                 m->layers[i + 1].kind == CN_MAXPOOL2D;
    return pooled ? m->layers[i + 1].kernel : 0;
}

#endif /* CN_MODEL_H */
