/* model.h — the inside of cn_model, shared by model.c (building, initialising, naming),
 * model_file.c (text), executor.c (running) and trainer.c (optimising). A model is a list of
 * layers (cn_layer, src/layers/layer.h) with their per-sample shapes and the places of their
 * tensors in three flat buffers: trainable parameters, running statistics, counters. What a
 * layer does is its type's; nothing here knows about replicas or threads. */
#ifndef CN_MODEL_H
#define CN_MODEL_H

#include "cnnc.h"
#include "layers/layer.h"

/* The seed's normalisation of the pixels (x/255 - mean) / std (cn_pixel_values), a model's
 * until its model file gives its own. */
#define CN_PIXEL_MEAN 0.1307f
#define CN_PIXEL_STD 0.3081f

/* What a model may be, whether built from specs or read from a model file. */
#define CN_MODEL_MAX_LAYERS 256
#define CN_MODEL_MAX_ACTIVATIONS (1 << 24)    /* floats one sample's layer output may hold */
#define CN_MODEL_MAX_PARAMS ((size_t)1 << 28) /* floats of all trainable parameters */
#define CN_MODEL_NAME_MAX 39 /* bytes of a layer name: "NAME.num_batches_tracked" fits */

struct cn_model {
    int in_c, in_h, in_w;
    int num_layers;
    cn_layer *layers;
    size_t num_params;
    float *params;
    size_t num_running;       /* running statistics (BatchNorm's mean and var) */
    float *running;
    int num_counters;
    int64_t *counters;        /* [num_counters] num_batches_tracked */
    size_t num_report;        /* floats of batch statistics a replica reports each step */
    size_t num_state;         /* floats forward keeps for backward besides them */
    float *mean, *std;        /* [in_c] each: the input's normalisation */
    int has_normalization;    /* 0: a model file left it to the training data */
    float *pixel_values;      /* [in_c][256]: what pixel value p of channel c becomes */
    char *text;               /* the model as a model file (cn_model_text) */
    char *classes;            /* the class names, one per line, or NULL */
    const char **class_names; /* [classes] into a copy of them, or NULL */
};

/* Builds the model as cn_model_create does; on failure *failed is the index of the layer that
 * failed (-1: not one layer's fault) and err holds the reason without a layer prefix. */
cn_model *cn_model_build(int channels, int height, int width, const cn_layer_spec *layers,
                         int num_layers, int *failed, cn_error *err);

/* Sets the input's normalisation, channel c's values (x/255 - mean[c]) / std[c], and the model
 * text that records it (when has_normalization says so); -1 when out of memory (the model keeps
 * its old one). Checks nothing: cn_model_set_normalization is the checked door. */
int cn_model_normalize_with(cn_model *m, const float *mean, const float *std);

/* out [samples, input size] = the pixels [samples, input size] normalised channel by channel. */
void cn_model_normalize(const cn_model *m, float *out, const uint8_t *pixels, size_t samples);

/* The class names as "__metadata__" records them (one per line), or NULL when there are none. */
static inline const char *cn_model_classes_text(const cn_model *m) { return m->classes; }
/* Adopts the names of text (one per line, as cn_model_classes_text gives them); -1 with the
 * reason, naming source, when they are not one valid name per class. */
int cn_model_set_classes_text(cn_model *m, const char *text, const char *source, cn_error *err);

/* The model as a model file in its canonical form (every layer with tensors named; mean and std
 * once when every channel has the same, else once per channel); malloc'd, or NULL when out of
 * memory. */
char *cn_model_describe(const cn_model *m);

static inline size_t cn_layer_in_size(const cn_layer *l) { return cn_shape_size(l->in); }
static inline size_t cn_layer_out_size(const cn_layer *l) { return cn_shape_size(l->out); }

/* What layer i's passes stand for besides its own, as its type says (cn_fusion): nothing when
 * it runs inside the passes of a layer before it (no chains of fusions). */
cn_fusion cn_model_fusion(const cn_model *m, int i, int bf16);

/* Layer i + 1 when layer i runs passes fused with it (and maybe with more after it), else NULL. */
static inline const cn_layer *cn_model_fused_next(const cn_model *m, int i, int bf16)
{
    return cn_model_fusion(m, i, bf16).layers > 0 ? &m->layers[i + 1] : NULL;
}

#endif /* CN_MODEL_H */
