/* model.c — building a sequential model from layer specs: each layer's type plans its shape and
 * names its tensors, and the model gives them their places in the parameter, running-statistic
 * and counter buffers; PyTorch's default initialisation; the state_dict view used for
 * checkpoints; flop counts and per-layer facts. The seed's Fashion-MNIST network is one such
 * definition. Running the model lives in executor.c, the text format in model_file.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/formats.h"
#include "model/model.h"


static size_t tensor_size(const cn_tensor_plan *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

/* Gives l's tensors and batch statistics their places, advancing the model's totals. */
static int place_tensors(cn_model *m, cn_layer *l, cn_error *err)
{
    cn_tensor_plan t[CN_MAX_LAYER_TENSORS];
    int n = l->type->tensors ? l->type->tensors(l, t) : 0;
    l->params = m->num_params, l->running = m->num_running, l->counter = -1;
    for (int k = 0; k < n; k++) {
        if (t[k].home == CN_IN_PARAMS) l->num_params += tensor_size(&t[k]);
        if (t[k].home == CN_IN_RUNNING) l->num_running += tensor_size(&t[k]);
        if (t[k].home == CN_IN_COUNTER) l->counter = m->num_counters++;
    }
    m->num_params += l->num_params, m->num_running += l->num_running;
    if (m->num_params > CN_MODEL_MAX_PARAMS)
        return cn_fail(err, "the model would have more than %zu parameters", CN_MODEL_MAX_PARAMS);
    if (l->type->batch_state) l->type->batch_state(l, &l->num_report, &l->num_state);
    l->report = m->num_report, l->state = m->num_state;
    m->num_report += l->num_report, m->num_state += l->num_state;
    return 0;
}

/* The layer's name: its spec's, else kind and index ("relu2"); layers with tensors need one,
 * unique among them. */
static int name_layer(cn_model *m, cn_layer *l, const char *name, cn_error *err)
{
    int has_tensors = l->type->tensors != NULL;
    if (has_tensors && (!name || !name[0])) return cn_fail(err, "needs a name for its tensors");
    if (name && strlen(name) > CN_MODEL_NAME_MAX)
        return cn_fail(err, "name '%s' is too long", name);
    if (name && name[0])
        snprintf(l->name, sizeof l->name, "%s", name);
    else
        snprintf(l->name, sizeof l->name, "%s%d", l->type->kind, l->index);
    for (int k = 0; has_tensors && k < l->index; k++)
        if (m->layers[k].type->tensors && strcmp(m->layers[k].name, l->name) == 0)
            return cn_fail(err, "name '%s' is already used by layer %d", l->name, k);
    return 0;
}

static int plan_layer(cn_model *m, int i, const cn_layer_spec *s, cn_error *err)
{
    cn_layer *l = &m->layers[i];
    l->index = i;
    l->type = cn_layer_type_of((int)s->kind);
    if (!l->type) return cn_fail(err, "unknown kind %d", (int)s->kind);
    l->in = i > 0 ? m->layers[i - 1].out : (cn_shape){m->in_c, m->in_h, m->in_w, 0};
    if (l->type->plan(l, s, err) || name_layer(m, l, s->name, err)) return -1;
    if (cn_layer_out_size(l) > CN_MODEL_MAX_ACTIVATIONS)
        return cn_fail(err, "its output %dx%dx%d is more than %d values", l->out.c, l->out.h,
                       l->out.w, CN_MODEL_MAX_ACTIVATIONS);
    if ((l->type->flags & CN_FINAL) && i != m->num_layers - 1)
        return cn_fail(err, "must be the last layer");
    return place_tensors(m, l, err);
}

static int allocate(cn_model *m)
{
    m->params = calloc(m->num_params ? m->num_params : 1, sizeof *m->params);
    m->running = calloc(m->num_running ? m->num_running : 1, sizeof *m->running);
    m->counters = calloc(m->num_counters ? (size_t)m->num_counters : 1, sizeof *m->counters);
    m->mean = malloc((size_t)m->in_c * sizeof *m->mean);
    m->std = malloc((size_t)m->in_c * sizeof *m->std);
    m->pixel_values = malloc((size_t)m->in_c * 256 * sizeof *m->pixel_values);
    float *mean = malloc((size_t)m->in_c * sizeof *mean);
    float *std = malloc((size_t)m->in_c * sizeof *std);
    int ok = m->params && m->running && m->counters && m->mean && m->std && m->pixel_values &&
             mean && std;
    for (int c = 0; ok && c < m->in_c; c++) mean[c] = CN_PIXEL_MEAN, std[c] = CN_PIXEL_STD;
    m->has_normalization = 1;
    ok = ok && cn_model_normalize_with(m, mean, std) == 0;
    free(mean);
    free(std);
    return ok ? 0 : -1;
}

int cn_model_normalize_with(cn_model *m, const float *mean, const float *std)
{
    for (int c = 0; c < m->in_c; c++) m->mean[c] = mean[c], m->std[c] = std[c];
    char *text = cn_model_describe(m);
    if (!text) return -1;
    free(m->text);
    m->text = text;
    for (int c = 0; c < m->in_c; c++)
        for (int p = 0; p < 256; p++) /* the seed's bits: cn_pixel_values */
            m->pixel_values[c * 256 + p] = ((float)p / 255.0f - mean[c]) / std[c];
    return 0;
}

int cn_model_has_normalization(const cn_model *m) { return m->has_normalization; }

int cn_model_set_normalization(cn_model *m, const float *mean, const float *std, cn_error *err)
{
    for (int c = 0; c < m->in_c; c++)
        if (!isfinite(mean[c]) || !isfinite(std[c]) || !(std[c] > 0.0f))
            return cn_fail(err, "normalisation of channel %d: mean %g and std %g (the std must "
                           "be above 0, both finite)", c, (double)mean[c], (double)std[c]);
    int had = m->has_normalization;
    m->has_normalization = 1; /* the text records it */
    if (cn_model_normalize_with(m, mean, std) == 0) return 0;
    m->has_normalization = had;
    return cn_fail(err, "out of memory for the model's text");
}

int cn_model_fits_data(const cn_model *m, const cn_dataset *ds, cn_error *err)
{
    int outputs = cn_model_num_outputs(m);
    /* unnamed classes are the labels seen: a few samples may not show them all */
    int classes_fit = ds->class_names ? ds->classes == outputs : ds->classes <= outputs;
    if (ds->channels != m->in_c || ds->height != m->in_h || ds->width != m->in_w || !classes_fit)
        return cn_fail(err, "the model reads %dx%dx%d images into %d classes, but the data has "
                       "%dx%dx%d images in %d classes", m->in_c, m->in_h, m->in_w, outputs,
                       ds->channels, ds->height, ds->width, ds->classes);
    for (int i = 0; i < ds->count; i++)
        if (ds->labels[i] >= outputs)
            return cn_fail(err, "the data's label of sample %d is %d, past the model's %d "
                           "classes", i, ds->labels[i], outputs);
    return 0;
}

static void normalize_plane(float *restrict out, const uint8_t *restrict pixels,
                            const float *restrict value, size_t n)
{
    for (size_t j = 0; j < n; j++) out[j] = value[pixels[j]];
}

void cn_model_normalize(const cn_model *m, float *out, const uint8_t *pixels, size_t samples)
{
    size_t plane = (size_t)m->in_h * m->in_w;
    for (size_t at = 0, s = 0; s < samples; s++)
        for (int c = 0; c < m->in_c; c++, at += plane)
            normalize_plane(out + at, pixels + at, m->pixel_values + c * 256, plane);
}

static cn_model *failed_build(cn_model *m, int *failed, int layer, cn_error *err,
                              const char *msg)
{
    cn_model_free(m);
    *failed = layer;
    if (msg) cn_fail(err, "%s", msg);
    return NULL;
}

cn_model *cn_model_build(int channels, int height, int width, const cn_layer_spec *layers,
                         int num_layers, int *failed, cn_error *err)
{
    *failed = -1;
    if (channels < 1 || height < 1 || width < 1 || num_layers < 1 ||
        num_layers > CN_MODEL_MAX_LAYERS ||
        (double)channels * height * width > CN_MODEL_MAX_ACTIVATIONS) {
        cn_fail(err, "model: bad input shape %dx%dx%d or layer count %d", channels, height,
                width, num_layers);
        return NULL;
    }
    cn_model *m = calloc(1, sizeof *m);
    if (!m || !(m->layers = calloc((size_t)num_layers, sizeof *m->layers)))
        return failed_build(m, failed, -1, err, "model: out of memory");
    m->in_c = channels, m->in_h = height, m->in_w = width, m->num_layers = num_layers;
    for (int i = 0; i < num_layers; i++)
        if (plan_layer(m, i, &layers[i], err)) return failed_build(m, failed, i, err, NULL);
    if (!(m->layers[num_layers - 1].type->flags & CN_FINAL))
        return failed_build(m, failed, -1, err, "model: the last layer must be log_softmax");
    if (allocate(m)) return failed_build(m, failed, -1, err, "model: out of memory");
    return m;
}

cn_model *cn_model_create(int channels, int height, int width, const cn_layer_spec *layers,
                          int num_layers, cn_error *err)
{
    int failed;
    cn_error why = {{0}};
    cn_model *m = cn_model_build(channels, height, width, layers, num_layers, &failed, &why);
    if (!m && failed >= 0) {
        const cn_layer_type *type = cn_layer_type_of((int)layers[failed].kind);
        cn_fail(err, "layer %d (%s): %s", failed, type ? type->kind : "unknown", why.msg);
    } else if (!m) {
        cn_fail(err, "%s", why.msg);
    }
    return m;
}

cn_model *cn_model_fashion_mnist(cn_error *err)
{
    static const cn_layer_spec seed_net[] = {
        {.kind = CN_CONV2D, .name = "conv1", .out_channels = 10, .kernel = 5},
        {.kind = CN_MAXPOOL2D, .kernel = 2},
        {.kind = CN_RELU},
        {.kind = CN_BATCHNORM2D, .name = "bn1"},
        {.kind = CN_CONV2D, .name = "conv2", .out_channels = 20, .kernel = 5},
        {.kind = CN_MAXPOOL2D, .kernel = 2},
        {.kind = CN_RELU},
        {.kind = CN_BATCHNORM2D, .name = "bn2"},
        {.kind = CN_FLATTEN},
        {.kind = CN_LINEAR, .name = "fc1", .out_channels = 50},
        {.kind = CN_RELU},
        {.kind = CN_LINEAR, .name = "fc2", .out_channels = 10},
        {.kind = CN_LOG_SOFTMAX},
    };
    return cn_model_create(1, 28, 28, seed_net, (int)(sizeof seed_net / sizeof seed_net[0]), err);
}

void cn_model_free(cn_model *m)
{
    if (!m) return;
    free(m->layers);
    free(m->params);
    free(m->running);
    free(m->counters);
    free(m->mean);
    free(m->std);
    free(m->pixel_values);
    free(m->text);
    free(m->classes);
    if (m->class_names) free((void *)m->class_names[0]);
    free(m->class_names);
    free(m);
}

void cn_model_init(cn_model *m, uint64_t seed)
{
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    memset(m->counters, 0, (size_t)m->num_counters * sizeof *m->counters);
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        if (l->type->init) l->type->init(l, m->params + l->params, m->running + l->running, &rng);
    }
}

size_t cn_model_num_params(const cn_model *m) { return m->num_params; }
float *cn_model_params(cn_model *m) { return m->params; }
int cn_model_input_size(const cn_model *m) { return m->in_c * m->in_h * m->in_w; }
void cn_model_input_shape(const cn_model *m, int *channels, int *height, int *width)
{
    *channels = m->in_c, *height = m->in_h, *width = m->in_w;
}
int cn_model_num_outputs(const cn_model *m) { return m->layers[m->num_layers - 1].out.c; }
int cn_model_num_layers(const cn_model *m) { return m->num_layers; }

int cn_model_normalization(const cn_model *m, float *mean, float *std, int max)
{
    for (int c = 0; c < m->in_c && c < max; c++) mean[c] = m->mean[c], std[c] = m->std[c];
    return m->in_c;
}

const char *cn_model_text(const cn_model *m) { return m->text; }

int cn_model_set_class_names(cn_model *m, const char *const *names, cn_error *err)
{
    int n = cn_model_num_outputs(m);
    size_t bytes = 0;
    for (int c = 0; c < n; c++) {
        if (cn_class_name_check(names[c], c, err)) return -1;
        bytes += strlen(names[c]) + 1;
    }
    char *text = malloc(bytes), *copy = malloc(bytes); /* "a\nb", and "a\0b" for the index */
    const char **index = malloc((size_t)n * sizeof *index);
    if (!text || !copy || !index) {
        free(text), free(copy), free(index);
        return cn_fail(err, "out of memory for %d class names", n);
    }
    for (size_t c = 0, at = 0; c < (size_t)n; c++) {
        size_t len = strlen(names[c]);
        memcpy(text + at, names[c], len), memcpy(copy + at, names[c], len);
        text[at + len] = c + 1 < (size_t)n ? '\n' : '\0';
        copy[at + len] = '\0';
        index[c] = copy + at;
        at += len + 1;
    }
    free(m->classes);
    if (m->class_names) free((void *)m->class_names[0]);
    free(m->class_names);
    m->classes = text, m->class_names = index;
    return 0;
}

const char *cn_model_class_name(const cn_model *m, int c)
{
    return m->class_names && c >= 0 && c < cn_model_num_outputs(m) ? m->class_names[c] : NULL;
}

int cn_model_set_classes_text(cn_model *m, const char *text, const char *source, cn_error *err)
{
    int n = cn_model_num_outputs(m), lines = 1;
    for (const char *at = text; *at; at++) lines += *at == '\n';
    if (lines != n)
        return cn_fail(err, "%s: __metadata__ \"classes\" names %d classes, the model has %d",
                       source, lines, n);
    char *copy = strdup(text);
    const char **names = malloc((size_t)n * sizeof *names);
    int rc = copy && names ? 0 : cn_fail(err, "%s: out of memory", source);
    for (int c = 0; rc == 0 && c < n; c++) {
        names[c] = c ? names[c - 1] + strlen(names[c - 1]) + 1 : copy;
        char *end = strchr((char *)names[c], '\n');
        if (end) *end = '\0';
    }
    cn_error why = {{0}};
    if (rc == 0 && cn_model_set_class_names(m, names, &why) != 0)
        rc = cn_fail(err, "%s: __metadata__ \"classes\": %s", source, why.msg);
    free(copy);
    free(names);
    return rc;
}

/* What layer i's type says its passes can stand for, if it ran no one else's. */
static cn_fusion own_fusion(const cn_model *m, int i, int bf16)
{
    const cn_layer *l = &m->layers[i];
    int avail = m->num_layers - 1 - i;
    if (!l->type->fuses || avail < 1) return (cn_fusion){0, 0};
    cn_fusion f = l->type->fuses(l, &m->layers[i + 1], avail, bf16);
    return f.passes && f.layers > 0 && f.layers <= avail && f.layers <= CN_MAX_FUSED
               ? f
               : (cn_fusion){0, 0};
}

cn_fusion cn_model_fusion(const cn_model *m, int i, int bf16)
{
    for (int head = 0; head < m->num_layers && head <= i;) { /* the fusions from the first layer */
        cn_fusion f = own_fusion(m, head, bf16);
        if (head == i) return f;
        head += 1 + f.layers; /* layers inside head's passes head nothing */
    }
    return (cn_fusion){0, 0};
}

const char *cn_model_layer_name(const cn_model *m, int i)
{
    return i >= 0 && i < m->num_layers ? m->layers[i].name : "";
}

/* Flops (2 per multiply-add) of one sample through layer i: forward, and backward (parameter
 * gradients, plus input gradients unless i is the first layer). fused: count the fused
 * backward as it computes (the fusions that change the count are those of either precision). */
static void layer_flops(const cn_model *m, int i, int fused, double *forward, double *backward)
{
    const cn_layer *l = &m->layers[i];
    cn_layer_macs macs = {0, 0, 0};
    if (l->type->macs) l->type->macs(l, fused ? cn_model_fused_next(m, i, 0) : NULL, &macs);
    *forward = 2 * macs.forward;
    *backward = 2 * (macs.params_grad + (i > 0 ? macs.input_grad : 0));
}

static void model_flops(const cn_model *m, int fused, double *forward, double *backward)
{
    *forward = *backward = 0;
    for (int i = 0; i < m->num_layers; i++) {
        double f, b;
        layer_flops(m, i, fused, &f, &b);
        *forward += f, *backward += b;
    }
}

void cn_model_flops(const cn_model *m, double *forward, double *backward)
{
    model_flops(m, 0, forward, backward);
}

void cn_model_flops_computed(const cn_model *m, double *forward, double *backward)
{
    model_flops(m, 1, forward, backward);
}

int cn_model_layer_info(const cn_model *m, int i, cn_layer_info *info)
{
    if (i < 0 || i >= m->num_layers) return -1;
    const cn_layer *l = &m->layers[i];
    *info = (cn_layer_info){.kind = l->type->kind, .name = l->name, .channels = l->out.c,
                            .height = l->out.h, .width = l->out.w, .flat = l->out.flat,
                            .params = l->num_params};
    layer_flops(m, i, 0, &info->forward_flops, &info->backward_flops);
    return 0;
}

/* Appends layer l's tensors to out[0..max) where there is room; counts them all in *n. */
static void layer_refs(cn_model *m, const cn_layer *l, cn_tensor_ref *out, int max, int *n)
{
    cn_tensor_plan t[CN_MAX_LAYER_TENSORS];
    int count = l->type->tensors ? l->type->tensors(l, t) : 0;
    float *param = m->params + l->params, *running = m->running + l->running;
    for (int k = 0; k < count; k++, (*n)++) {
        void *data = t[k].home == CN_IN_COUNTER ? (void *)&m->counters[l->counter] : NULL;
        if (t[k].home == CN_IN_PARAMS) data = param, param += tensor_size(&t[k]);
        if (t[k].home == CN_IN_RUNNING) data = running, running += tensor_size(&t[k]);
        if (*n >= max) continue;
        cn_tensor_ref *r = &out[*n];
        snprintf(r->name, sizeof r->name, "%.39s.%s", l->name, t[k].suffix);
        r->dtype = t[k].home == CN_IN_COUNTER ? CN_I64 : CN_F32;
        r->data = data, r->ndim = t[k].ndim;
        for (int d = 0; d < 4; d++) r->shape[d] = d < t[k].ndim ? t[k].shape[d] : 0;
    }
}

int cn_model_tensors(cn_model *m, cn_tensor_ref *out, int max)
{
    int n = 0;
    for (int i = 0; i < m->num_layers; i++) layer_refs(m, &m->layers[i], out, max, &n);
    return n;
}
