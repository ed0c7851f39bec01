/* model.c — building a sequential model from layer specs (shape checks, tensor planning),
 * PyTorch's default initialisation, and the state_dict view used for checkpoints. The seed's
 * Fashion-MNIST network is one such definition. Running the model lives in trainer.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static const char *kind_name(cn_layer_kind kind)
{
    static const char *const names[] = {"conv2d", "maxpool2d", "relu", "batchnorm2d",
                                        "flatten", "linear", "log_softmax"};
    _Static_assert(sizeof names / sizeof names[0] == CN_LOG_SOFTMAX + 1, "one name per kind");
    return (unsigned)kind <= CN_LOG_SOFTMAX ? names[kind] : "unknown";
}

/* Sets l's output shape from its input shape; -1 with a message when the spec cannot apply. */
static int plan_shape(cn_layer *l, const cn_layer_spec *s, int index, int last, cn_error *err)
{
    const char *what = kind_name(s->kind);
    l->out_c = l->in_c, l->out_h = l->in_h, l->out_w = l->in_w;
    int flat = l->in_h == 1 && l->in_w == 1;
    switch (s->kind) {
    case CN_CONV2D:
        if (s->kernel < 1 || s->kernel > l->in_h || s->kernel > l->in_w || s->out_channels < 1)
            return cn_fail(err, "layer %d (%s): kernel %d and %d channels do not fit input %dx%d",
                           index, what, s->kernel, s->out_channels, l->in_h, l->in_w);
        l->out_c = s->out_channels, l->out_h = l->in_h - s->kernel + 1;
        l->out_w = l->in_w - s->kernel + 1;
        return 0;
    case CN_MAXPOOL2D:
        if (s->kernel < 1 || s->kernel > l->in_h || s->kernel > l->in_w)
            return cn_fail(err, "layer %d (%s): window %d does not fit input %dx%d", index, what,
                           s->kernel, l->in_h, l->in_w);
        l->out_h = l->in_h / s->kernel, l->out_w = l->in_w / s->kernel;
        return 0;
    case CN_RELU: case CN_BATCHNORM2D:
        return 0;
    case CN_FLATTEN:
        l->out_c = l->in_c * l->in_h * l->in_w, l->out_h = l->out_w = 1;
        return 0;
    case CN_LINEAR:
        if (!flat || s->out_channels < 1)
            return cn_fail(err, "layer %d (%s): needs a flattened input and out_channels >= 1",
                           index, what);
        l->out_c = s->out_channels;
        return 0;
    case CN_LOG_SOFTMAX:
        if (!flat || !last)
            return cn_fail(err, "layer %d (%s): must be the last layer, on a flat input", index,
                           what);
        return 0;
    }
    return cn_fail(err, "layer %d: unknown kind %d", index, (int)s->kind);
}

/* Gives l its places in the parameter and statistics buffers, advancing the running totals. */
static void plan_tensors(cn_layer *l, cn_model *m, int *bn_channels)
{
    if (l->kind == CN_CONV2D || l->kind == CN_LINEAR) {
        l->num_weight = (size_t)l->out_c * (l->kind == CN_CONV2D
                            ? (size_t)l->in_c * l->kernel * l->kernel : (size_t)l->in_c);
        l->weight = m->num_params;
        l->bias = l->weight + l->num_weight;
        m->num_params = l->bias + (size_t)l->out_c;
    } else if (l->kind == CN_BATCHNORM2D) {
        l->num_weight = (size_t)l->out_c;
        l->weight = m->num_params;
        l->bias = l->weight + l->num_weight;
        m->num_params = l->bias + (size_t)l->out_c;
        l->stats = m->num_stats;
        m->num_stats += 2 * (size_t)l->out_c;
        l->bn_index = m->num_bn++;
        l->bn_channels = *bn_channels;
        *bn_channels += l->out_c;
    }
}

/* Two layers with tensors under one name would write two tensors of one name. */
static int check_unique_name(const cn_model *m, int i, cn_error *err)
{
    const cn_layer *l = &m->layers[i];
    if (!cn_layer_has_params(l)) return 0;
    for (int k = 0; k < i; k++)
        if (cn_layer_has_params(&m->layers[k]) && strcmp(m->layers[k].name, l->name) == 0)
            return cn_fail(err, "layer %d (%s): name '%s' is already used by layer %d", i,
                           kind_name(l->kind), l->name, k);
    return 0;
}

static int plan_layer(cn_model *m, int i, const cn_layer_spec *s, int *bn_channels, cn_error *err)
{
    cn_layer *l = &m->layers[i];
    const cn_layer *prev = i > 0 ? &m->layers[i - 1] : NULL;
    l->kind = s->kind;
    l->kernel = s->kernel;
    l->in_c = prev ? prev->out_c : m->in_c;
    l->in_h = prev ? prev->out_h : m->in_h;
    l->in_w = prev ? prev->out_w : m->in_w;
    if (plan_shape(l, s, i, i == m->num_layers - 1, err)) return -1;
    if (cn_layer_has_params(l) && (!s->name || !s->name[0]))
        return cn_fail(err, "layer %d (%s): needs a name for its tensors", i, kind_name(s->kind));
    if (s->name && strlen(s->name) >= sizeof l->name - 24)
        return cn_fail(err, "layer %d (%s): name '%s' is too long", i, kind_name(s->kind),
                       s->name);
    if (s->name && s->name[0])
        snprintf(l->name, sizeof l->name, "%s", s->name);
    else
        snprintf(l->name, sizeof l->name, "%s%d", kind_name(s->kind), i);
    if (check_unique_name(m, i, err)) return -1;
    plan_tensors(l, m, bn_channels);
    return 0;
}

cn_model *cn_model_create(int channels, int height, int width, const cn_layer_spec *layers,
                          int num_layers, cn_error *err)
{
    if (channels < 1 || height < 1 || width < 1 || num_layers < 1 || num_layers > 256) {
        cn_fail(err, "model: bad input shape %dx%dx%d or layer count %d", channels, height,
                width, num_layers);
        return NULL;
    }
    cn_model *m = calloc(1, sizeof *m);
    if (!m || !(m->layers = calloc((size_t)num_layers, sizeof *m->layers))) {
        free(m);
        cn_fail(err, "model: out of memory");
        return NULL;
    }
    m->in_c = channels, m->in_h = height, m->in_w = width, m->num_layers = num_layers;
    int bn_channels = 0;
    for (int i = 0; i < num_layers; i++)
        if (plan_layer(m, i, &layers[i], &bn_channels, err)) {
            cn_model_free(m);
            return NULL;
        }
    if (layers[num_layers - 1].kind != CN_LOG_SOFTMAX) {
        cn_model_free(m);
        cn_fail(err, "model: the last layer must be log_softmax");
        return NULL;
    }
    m->params = calloc(m->num_params ? m->num_params : 1, sizeof *m->params);
    m->stats = calloc(m->num_stats ? m->num_stats : 1, sizeof *m->stats);
    m->batches_tracked = calloc(m->num_bn ? (size_t)m->num_bn : 1, sizeof *m->batches_tracked);
    m->mean = malloc((size_t)channels * sizeof *m->mean);
    m->std = malloc((size_t)channels * sizeof *m->std);
    if (!m->params || !m->stats || !m->batches_tracked || !m->mean || !m->std) {
        cn_model_free(m);
        cn_fail(err, "model: out of memory");
        return NULL;
    }
    for (int c = 0; c < channels; c++) m->mean[c] = CN_PIXEL_MEAN, m->std[c] = CN_PIXEL_STD;
    if (!(m->text = cn_model_describe(m))) {
        cn_model_free(m);
        cn_fail(err, "model: out of memory");
        return NULL;
    }
    return m;
}

cn_model *cn_model_fashion_mnist(cn_error *err)
{
    static const cn_layer_spec seed_net[] = {
        {CN_CONV2D, "conv1", 10, 5}, {CN_MAXPOOL2D, NULL, 0, 2}, {CN_RELU, NULL, 0, 0},
        {CN_BATCHNORM2D, "bn1", 0, 0}, {CN_CONV2D, "conv2", 20, 5}, {CN_MAXPOOL2D, NULL, 0, 2},
        {CN_RELU, NULL, 0, 0}, {CN_BATCHNORM2D, "bn2", 0, 0}, {CN_FLATTEN, NULL, 0, 0},
        {CN_LINEAR, "fc1", 50, 0}, {CN_RELU, NULL, 0, 0}, {CN_LINEAR, "fc2", 10, 0},
        {CN_LOG_SOFTMAX, NULL, 0, 0},
    };
    return cn_model_create(1, 28, 28, seed_net, (int)(sizeof seed_net / sizeof seed_net[0]), err);
}

void cn_model_free(cn_model *m)
{
    if (!m) return;
    free(m->layers);
    free(m->params);
    free(m->stats);
    free(m->batches_tracked);
    free(m->mean);
    free(m->std);
    free(m->text);
    free(m);
}

static void fill_uniform(float *x, size_t n, float bound, cn_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = bound * (2.0f * cn_rng_uniform(rng) - 1.0f);
}

void cn_model_init(cn_model *m, uint64_t seed)
{
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    for (int i = 0; i < m->num_layers; i++) {
        cn_layer *l = &m->layers[i];
        if (l->kind == CN_CONV2D || l->kind == CN_LINEAR) {
            float bound = 1.0f / sqrtf((float)(l->num_weight / (size_t)l->out_c));
            fill_uniform(m->params + l->weight, l->num_weight, bound, &rng);
            fill_uniform(m->params + l->bias, (size_t)l->out_c, bound, &rng);
        } else if (l->kind == CN_BATCHNORM2D) {
            for (int c = 0; c < l->out_c; c++) {
                m->params[l->weight + c] = 1.0f, m->params[l->bias + c] = 0.0f;
                m->stats[l->stats + c] = 0.0f, m->stats[l->stats + l->out_c + c] = 1.0f;
            }
            m->batches_tracked[l->bn_index] = 0;
        }
    }
}

size_t cn_model_num_params(const cn_model *m) { return m->num_params; }
float *cn_model_params(cn_model *m) { return m->params; }
int cn_model_input_size(const cn_model *m) { return m->in_c * m->in_h * m->in_w; }
void cn_model_input_shape(const cn_model *m, int *channels, int *height, int *width)
{
    *channels = m->in_c, *height = m->in_h, *width = m->in_w;
}
int cn_model_num_outputs(const cn_model *m) { return m->layers[m->num_layers - 1].out_c; }
int cn_model_num_layers(const cn_model *m) { return m->num_layers; }

int cn_model_normalization(const cn_model *m, float *mean, float *std, int max)
{
    for (int c = 0; c < m->in_c && c < max; c++) mean[c] = m->mean[c], std[c] = m->std[c];
    return m->in_c;
}

const char *cn_model_text(const cn_model *m) { return m->text; }

const char *cn_model_layer_name(const cn_model *m, int i)
{
    return i >= 0 && i < m->num_layers ? m->layers[i].name : "";
}

/* Multiply-adds of one sample through layer l: forward, and backward (parameter gradients, plus
 * input gradients unless l is the first layer). Only conv and linear count; the rest is
 * elementwise and small beside them. */
static void layer_macs(const cn_layer *l, int first, double *forward, double *backward)
{
    double macs = 0;
    if (l->kind == CN_CONV2D || l->kind == CN_LINEAR)
        macs = (double)l->num_weight * l->out_h * l->out_w;
    *forward = macs;
    *backward = first ? macs : 2 * macs;
}

void cn_model_flops(const cn_model *m, double *forward, double *backward)
{
    *forward = *backward = 0;
    for (int i = 0; i < m->num_layers; i++) {
        double f, b;
        layer_macs(&m->layers[i], i == 0, &f, &b);
        *forward += 2 * f;
        *backward += 2 * b;
    }
}

void cn_model_flops_computed(const cn_model *m, double *forward, double *backward)
{
    *forward = *backward = 0;
    for (int i = 0; i < m->num_layers; i++) {
        double f, b;
        layer_macs(&m->layers[i], i == 0, &f, &b);
        int S = cn_model_pool_after(m, i) ? cn_model_pool_after(m, i) : 1;
        *forward += 2 * f;
        *backward += 2 * b / ((double)S * S);
    }
}

/* Appends one tensor description when there is room; always counts it. */
static void add_ref(cn_tensor_ref *out, int max, int *n, const cn_layer *l, const char *suffix,
                    cn_dtype dtype, void *data, int ndim, const int64_t *shape)
{
    if (*n < max) {
        cn_tensor_ref *r = &out[*n];
        snprintf(r->name, sizeof r->name, "%.39s.%s", l->name, suffix); /* names <= 39 chars */
        r->dtype = dtype, r->data = data, r->ndim = ndim;
        for (int d = 0; d < 4; d++) r->shape[d] = d < ndim ? shape[d] : 0;
    }
    (*n)++;
}

static void layer_refs(cn_model *m, const cn_layer *l, cn_tensor_ref *out, int max, int *n)
{
    int64_t c = l->out_c, k = l->kernel;
    if (l->kind == CN_CONV2D) {
        int64_t shape[4] = {c, l->in_c, k, k};
        add_ref(out, max, n, l, "weight", CN_F32, m->params + l->weight, 4, shape);
    } else if (l->kind == CN_LINEAR) {
        int64_t shape[2] = {c, l->in_c};
        add_ref(out, max, n, l, "weight", CN_F32, m->params + l->weight, 2, shape);
    } else {
        add_ref(out, max, n, l, "weight", CN_F32, m->params + l->weight, 1, &c);
    }
    add_ref(out, max, n, l, "bias", CN_F32, m->params + l->bias, 1, &c);
    if (l->kind != CN_BATCHNORM2D) return;
    add_ref(out, max, n, l, "running_mean", CN_F32, m->stats + l->stats, 1, &c);
    add_ref(out, max, n, l, "running_var", CN_F32, m->stats + l->stats + l->out_c, 1, &c);
    add_ref(out, max, n, l, "num_batches_tracked", CN_I64, &m->batches_tracked[l->bn_index], 0,
            NULL);
}

int cn_model_tensors(cn_model *m, cn_tensor_ref *out, int max)
{
    int n = 0;
    for (int i = 0; i < m->num_layers; i++)
        if (cn_layer_has_params(&m->layers[i])) layer_refs(m, &m->layers[i], out, max, &n);
    return n;
}
