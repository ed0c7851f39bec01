/* train_checkpoint.c — training checkpoints: the model's state_dict (PyTorch names), the
 * optimiser's state under torch.optim's names (SGD: optimizer.<param>.momentum_buffer; AdamW:
 * optimizer.<param>.exp_avg and .exp_avg_sq), and in __metadata__ the position (epoch, step,
 * loss sum, right answers), the optimiser's steps and every setting that defines the math, the
 * learning-rate schedule included, so that a run can continue bit for bit. Saving refuses
 * non-finite values; restoring checks everything before it copies.
 * It does not decide where checkpoints go or when (checkpoint_dir.c names and prunes them, the
 * caller decides when), and it does not compare settings with a new run's: the caller does. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "error.h"
#include "files/checkpoint.h"
#include "model/model.h" /* the class names' text */
#include "train/optimizer.h" /* adamw's defaults */

#define KIND_KEY "cnnc_checkpoint"
#define KIND_VALUE "training v1"
/* Names the generator and sampler: a checkpoint written with another order is refused. */
#define SAMPLER_VALUE "xoshiro256** Fisher-Yates permutation per (seed, epoch), v1"
#define MOMENTUM_PREFIX "optimizer."
#define NUM_META 35

/* The names of each optimiser's state tensors after optimizer.<param>: the k-th holds floats
 * k * num_params .. of the trainer's buffer. */
#define MAX_STATES 2
static const char *const state_suffixes[CN_OPTIMIZER_COUNT][MAX_STATES] = {
    [CN_OPTIMIZER_SGD] = {".momentum_buffer", NULL},
    [CN_OPTIMIZER_ADAMW] = {".exp_avg", ".exp_avg_sq"},
};
#define VALUE_CAP 96

/* ---------------------------------------------------------------- state */

static uint32_t data_crc32(const cn_dataset *train)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t pixels = (size_t)train->count * (size_t)train->channels * (size_t)train->height *
                    (size_t)train->width;
    const size_t chunk = 1u << 30;
    for (size_t at = 0; at < pixels; at += chunk)
        crc = crc32(crc, train->pixels + at, (uInt)(pixels - at < chunk ? pixels - at : chunk));
    crc = crc32(crc, train->labels, (uInt)train->count);
    return (uint32_t)crc;
}

void cn_train_state_init(cn_train_state *s, const cn_train_config *cfg, const cn_dataset *train)
{
    memset(s, 0, sizeof *s);
    s->position = (cn_epoch_position){.epoch = 1};
    uint32_t shard = cn_sampler_shard_size((uint32_t)train->count, cfg->num_replicas);
    s->steps_per_epoch = (int)(shard / (uint32_t)cfg->batch_size);
    s->seed = cfg->seed;
    s->num_replicas = cfg->num_replicas;
    s->batch_size = cfg->batch_size;
    s->learning_rate = cfg->learning_rate;
    s->momentum = cfg->momentum;
    s->label_smoothing = cfg->label_smoothing;
    s->augment = cfg->augment;
    s->precision = cfg->precision;
    s->optimizer = cfg->optimizer;
    s->nesterov = cfg->nesterov;
    s->weight_decay = cfg->weight_decay;
    cn_optim_rule rule;
    cn_optim_rule_init(&rule, cfg, cfg->learning_rate, 1);
    s->beta1 = rule.beta1, s->beta2 = rule.beta2, s->eps = rule.eps;
    s->lr_schedule = cfg->lr_schedule;
    s->train_samples = train->count;
    s->train_crc32 = data_crc32(train);
    s->data_channels = train->channels, s->data_height = train->height;
    s->data_width = train->width, s->data_classes = train->classes;
    snprintf(s->isa, sizeof s->isa, "%s", cn_isa_name(cn_isa_active()));
    if (cfg->precision == CN_PRECISION_BF16) /* "avx512/amx": the bf16 products' kernels too */
        snprintf(s->isa + strlen(s->isa), sizeof s->isa - strlen(s->isa), "/%s",
                 cn_bf16_kernel_name(cn_bf16_kernel_active()));
}

/* ---------------------------------------------------------------- tensors */

static size_t element_count(const cn_tensor_ref *t)
{
    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) count *= (size_t)t->shape[d];
    return count;
}

/* 1 when t is a trainable parameter of m (it points into the parameter buffer); its offset
 * there goes to *offset. */
static int parameter_offset(cn_model *m, const cn_tensor_ref *t, size_t *offset)
{
    uintptr_t at = (uintptr_t)t->data, begin = (uintptr_t)cn_model_params(m);
    uintptr_t end = (uintptr_t)(cn_model_params(m) + cn_model_num_params(m));
    if (t->dtype != CN_F32 || at < begin || at >= end) return 0;
    *offset = (size_t)(at - begin) / sizeof(float);
    return 1;
}

/* The optimiser's state tensors of each parameter among state[0..n), pointing into buffer (as
 * the trainer lays it out for optimizer o), appended at out; returns how many, or -1 when a
 * name does not fit. */
static int optimizer_refs(cn_model *m, cn_optimizer o, const cn_tensor_ref *state, int n,
                          float *buffer, cn_tensor_ref *out, const char *path, cn_error *err)
{
    int count = 0;
    for (int k = 0; k < MAX_STATES && state_suffixes[o][k]; k++)
        for (int i = 0; i < n; i++) {
            size_t offset;
            if (!parameter_offset(m, &state[i], &offset)) continue;
            char name[sizeof out->name]; /* built apart: gcc cannot tell out from state */
            int len = snprintf(name, sizeof name, "%s%s%s", MOMENTUM_PREFIX, state[i].name,
                               state_suffixes[o][k]);
            if (len < 0 || (size_t)len >= sizeof name)
                return cn_fail(err, "%s: the optimizer state name of %s is longer than %d bytes",
                               path, state[i].name, (int)sizeof name - 1);
            cn_tensor_ref *r = &out[count++];
            *r = state[i];
            memcpy(r->name, name, sizeof name);
            r->data = buffer + (size_t)k * cn_model_num_params(m) + offset;
        }
    return count;
}

/* The model's tensors followed by the optimiser's state (malloc'd, *count of them). */
static cn_tensor_ref *all_refs(cn_model *m, cn_optimizer o, float *momentum, int *model_count,
                               int *count, const char *path, cn_error *err)
{
    int n = 0;
    cn_tensor_ref *state = cn_state_refs(m, &n, path, err);
    if (!state) return NULL;
    cn_tensor_ref *refs = calloc((1 + MAX_STATES) * (size_t)n + 1, sizeof *refs);
    if (!refs) {
        free(state);
        cn_fail(err, "%s: %s", path, strerror(ENOMEM));
        return NULL;
    }
    memcpy(refs, state, (size_t)n * sizeof *refs);
    free(state);
    int k = optimizer_refs(m, o, refs, n, momentum, refs + n, path, err);
    if (k < 0) {
        free(refs);
        return NULL;
    }
    *model_count = n;
    *count = n + k;
    return refs;
}

static int refuse_non_finite(const cn_tensor_ref *refs, int n, const char *path, cn_error *err)
{
    for (int i = 0; i < n; i++) {
        if (refs[i].dtype != CN_F32) continue;
        const float *v = refs[i].data;
        for (size_t j = 0; j < element_count(&refs[i]); j++)
            if (!isfinite(v[j]))
                return cn_fail(err, "%s: not saved: tensor %s holds non-finite values", path,
                               refs[i].name);
    }
    return 0;
}

/* ---------------------------------------------------------------- metadata out */

/* The shortest of %g and %.9g that reads back as v. */
static void format_float(char *buf, size_t cap, float v)
{
    snprintf(buf, cap, "%g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, cap, "%.9g", (double)v);
}

/* The optimiser's and the schedule's values, in the order of format_meta's keys from
 * "optimizer" on. */
static void format_optimizer(const cn_train_state *s, char text[][VALUE_CAP])
{
    const cn_lr_schedule *l = &s->lr_schedule;
    snprintf(text[0], VALUE_CAP, "%s", cn_optimizer_name(s->optimizer));
    snprintf(text[1], VALUE_CAP, "%d", s->nesterov);
    format_float(text[2], VALUE_CAP, s->weight_decay);
    format_float(text[3], VALUE_CAP, s->beta1);
    format_float(text[4], VALUE_CAP, s->beta2);
    format_float(text[5], VALUE_CAP, s->eps);
    snprintf(text[6], VALUE_CAP, "%lld", (long long)s->optimizer_steps);
    snprintf(text[7], VALUE_CAP, "%s", cn_lr_kind_name(l->kind));
    snprintf(text[8], VALUE_CAP, "%ld", l->warmup_steps);
    format_float(text[9], VALUE_CAP, l->warmup_start);
    snprintf(text[10], VALUE_CAP, "%ld", l->step_size);
    format_float(text[11], VALUE_CAP, l->gamma);
    snprintf(text[12], VALUE_CAP, "%ld", l->total_steps);
}

/* The metadata as key/value pairs in meta[2 * NUM_META], the values written into text. */
static void format_meta(const cn_train_state *s, char text[NUM_META][VALUE_CAP],
                        const char *meta[2 * NUM_META])
{
    const cn_epoch_position *p = &s->position;
    long long step = (long long)(p->epoch - 1) * s->steps_per_epoch + p->step;
    static const char *const keys[NUM_META] = {
        KIND_KEY, "cnnc_version", "epoch", "epoch_step", "steps_per_epoch", "step",
        "epoch_loss_sum", "seed", "num_cores", "batch_size", "learning_rate", "momentum",
        "train_samples", "train_data_crc32", "sampler", "isa", "precision", "epoch_correct",
        "data_shape", "data_classes", "label_smoothing", "optimizer", "nesterov",
        "weight_decay", "adamw_beta1", "adamw_beta2", "adamw_eps", "optimizer_steps",
        "lr_schedule", "warmup_steps", "warmup_start", "lr_step_size", "lr_gamma",
        "lr_total_steps", "augment"};
    snprintf(text[0], VALUE_CAP, "%s", KIND_VALUE);
    snprintf(text[1], VALUE_CAP, "%s", CN_VERSION);
    snprintf(text[2], VALUE_CAP, "%d", p->epoch);
    snprintf(text[3], VALUE_CAP, "%d", p->step);
    snprintf(text[4], VALUE_CAP, "%d", s->steps_per_epoch);
    snprintf(text[5], VALUE_CAP, "%lld", step);
    snprintf(text[6], VALUE_CAP, "%.17g", p->loss_sum);
    snprintf(text[7], VALUE_CAP, "%" PRIu64, s->seed);
    snprintf(text[8], VALUE_CAP, "%d", s->num_replicas);
    snprintf(text[9], VALUE_CAP, "%d", s->batch_size);
    format_float(text[10], VALUE_CAP, s->learning_rate);
    format_float(text[11], VALUE_CAP, s->momentum);
    snprintf(text[12], VALUE_CAP, "%d", s->train_samples);
    snprintf(text[13], VALUE_CAP, "%08" PRIx32, s->train_crc32);
    snprintf(text[14], VALUE_CAP, "%s", SAMPLER_VALUE);
    snprintf(text[15], VALUE_CAP, "%s", s->isa);
    snprintf(text[16], VALUE_CAP, "%s", cn_precision_name(s->precision));
    snprintf(text[17], VALUE_CAP, "%lld", (long long)p->correct);
    snprintf(text[18], VALUE_CAP, "%dx%dx%d", s->data_channels, s->data_height, s->data_width);
    snprintf(text[19], VALUE_CAP, "%d", s->data_classes);
    format_float(text[20], VALUE_CAP, s->label_smoothing);
    format_optimizer(s, text + 21);
    cn_augment_format(&s->augment, text[34]);
    for (int i = 0; i < NUM_META; i++) {
        meta[2 * i] = keys[i];
        meta[2 * i + 1] = text[i];
    }
}

/* The file: the tensors, the state's metadata, the model's text ("model"), its class names
 * ("classes", when it has them) and then the caller's extra pairs. */
static int write_file(const cn_model *m, const cn_tensor_ref *refs, int n,
                      const cn_train_state *s, const char *const *extra, int num_extra,
                      const char *path, cn_error *err)
{
    if (num_extra < 0 || num_extra > CN_TRAIN_EXTRA_MAX || (num_extra > 0 && !extra))
        return cn_fail(err, "%s: not saved: %d extra metadata pairs (at most %d)", path,
                       num_extra, CN_TRAIN_EXTRA_MAX);
    char text[NUM_META][VALUE_CAP];
    const char *meta[2 * (NUM_META + 2 + CN_TRAIN_EXTRA_MAX)];
    format_meta(s, text, meta);
    int k = NUM_META;
    meta[2 * k] = "model", meta[2 * k + 1] = cn_model_text(m), k++;
    if (cn_model_classes_text(m))
        meta[2 * k] = "classes", meta[2 * k + 1] = cn_model_classes_text(m), k++;
    for (int i = 0; i < 2 * num_extra; i++) meta[2 * k + i] = extra[i];
    return cn_safetensors_write(path, refs, n, meta, k + num_extra, err);
}

int cn_train_checkpoint_save(cn_model *m, const float *momentum, const cn_train_state *s,
                             const char *const *extra, int num_extra, const char *path,
                             cn_error *err)
{
    if ((unsigned)s->optimizer >= CN_OPTIMIZER_COUNT)
        return cn_fail(err, "%s: not saved: unknown optimizer %d", path, (int)s->optimizer);
    int n_model = 0, n = 0;
    cn_tensor_ref *refs = all_refs(m, s->optimizer, (float *)(uintptr_t)momentum, &n_model, &n,
                                   path, err);
    if (!refs) return -1;
    int rc = refuse_non_finite(refs, n, path, err);
    if (rc == 0) {
        rc = write_file(m, refs, n, s, extra, num_extra, path, err);
    }
    free(refs);
    return rc;
}

/* ---------------------------------------------------------------- metadata in */

static const char *meta_value(const cn_safetensors *f, const char *key, const char *path,
                              cn_error *err)
{
    const char *v = cn_safetensors_meta(f, key);
    if (!v) cn_fail(err, "%s: __metadata__ has no \"%s\" (the file is damaged)", path, key);
    return v;
}

static int bad_value(const char *path, const char *key, const char *v, const char *what,
                     cn_error *err)
{
    return cn_fail(err, "%s: __metadata__ \"%s\" is \"%.40s\", not %s", path, key, v, what);
}

static int meta_long(const cn_safetensors *f, const char *key, long long min, long long max,
                     long long *out, const char *path, cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    char *end, what[96];
    errno = 0;
    long long x = strtoll(v, &end, 10);
    snprintf(what, sizeof what, "an integer in %lld..%lld", min, max);
    if (end == v || *end != '\0' || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) ||
        errno == ERANGE || x < min || x > max)
        return bad_value(path, key, v, what, err);
    *out = x;
    return 0;
}

static int meta_int(const cn_safetensors *f, const char *key, int min, int *out,
                    const char *path, cn_error *err)
{
    long long x;
    if (meta_long(f, key, min, INT_MAX, &x, path, err)) return -1;
    *out = (int)x;
    return 0;
}

static int meta_u64(const cn_safetensors *f, const char *key, uint64_t *out, const char *path,
                    cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno == ERANGE)
        return bad_value(path, key, v, "an integer in 0..2^64-1", err);
    *out = (uint64_t)x;
    return 0;
}

static int meta_double(const cn_safetensors *f, const char *key, double *out, const char *path,
                       cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || !isfinite(x))
        return bad_value(path, key, v, "a finite number", err);
    *out = x;
    return 0;
}

static int meta_float(const cn_safetensors *f, const char *key, float *out, const char *path,
                      cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    char *end;
    float x = strtof(v, &end);
    if (end == v || *end != '\0' || !isfinite(x))
        return bad_value(path, key, v, "a finite number", err);
    *out = x;
    return 0;
}

static int meta_hex32(const cn_safetensors *f, const char *key, uint32_t *out, const char *path,
                      cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    if (strlen(v) != 8 || strspn(v, "0123456789abcdef") != 8)
        return bad_value(path, key, v, "8 lower-case hex digits", err);
    *out = (uint32_t)strtoul(v, NULL, 16);
    return 0;
}

static int meta_equals(const cn_safetensors *f, const char *key, const char *want,
                       const char *path, cn_error *err)
{
    const char *v = meta_value(f, key, path, err);
    if (!v) return -1;
    if (strcmp(v, want) != 0)
        return cn_fail(err, "%s: __metadata__ \"%s\" is \"%.60s\"; this cnnc reads \"%s\"", path,
                       key, v, want);
    return 0;
}

/* The data's shape and classes; files from before other data was read say nothing (0). */
static int read_data_shape(const cn_safetensors *f, const char *path, cn_train_state *s,
                           cn_error *err)
{
    const char *shape = cn_safetensors_meta(f, "data_shape");
    if (shape) {
        int c, h, w, end = 0;
        if (sscanf(shape, "%9dx%9dx%9d%n", &c, &h, &w, &end) != 3 || shape[end] != '\0' ||
            c < 1 || h < 1 || w < 1)
            return bad_value(path, "data_shape", shape, "CxHxW", err);
        s->data_channels = c, s->data_height = h, s->data_width = w;
    }
    if (!cn_safetensors_meta(f, "data_classes")) return 0;
    return meta_int(f, "data_classes", 1, &s->data_classes, path, err);
}

/* Files from before augmentation say nothing: they had none. */
static int read_augment(const cn_safetensors *f, const char *path, cn_train_state *s,
                        cn_error *err)
{
    const char *text = cn_safetensors_meta(f, "augment");
    cn_error why = {{0}};
    s->augment = (cn_augment){0, 0};
    if (text && cn_augment_parse(text, &s->augment, &why))
        return cn_fail(err, "%s: __metadata__ \"augment\": %s", path, why.msg);
    return 0;
}

/* A float key that files from before it may lack (*out keeps its default then), in [min, max)
 * (max 0: no upper bound). */
static int meta_float_or(const cn_safetensors *f, const char *key, float min, float max,
                         float *out, const char *path, cn_error *err)
{
    if (!cn_safetensors_meta(f, key)) return 0;
    if (meta_float(f, key, out, path, err)) return -1;
    if (*out < min || (max > 0 && *out >= max))
        return bad_value(path, key, cn_safetensors_meta(f, key), "a number in range", err);
    return 0;
}

/* The same for an integer key in min..max. */
static int meta_long_or(const cn_safetensors *f, const char *key, long long min, long long max,
                        long long *out, const char *path, cn_error *err)
{
    return cn_safetensors_meta(f, key) ? meta_long(f, key, min, max, out, path, err) : 0;
}

/* The learning-rate schedule; files from before it was recorded ran at a constant rate. */
static int read_schedule(const cn_safetensors *f, const char *path, cn_lr_schedule *l,
                         cn_error *err)
{
    *l = (cn_lr_schedule){.kind = CN_LR_CONSTANT};
    const char *kind = cn_safetensors_meta(f, "lr_schedule");
    if (kind && cn_lr_kind_from_name(kind, &l->kind) != 0)
        return bad_value(path, "lr_schedule", kind, "constant, step, cosine or onecycle", err);
    long long warmup = 0, size = 0, total = 0;
    if (meta_long_or(f, "warmup_steps", 0, LONG_MAX, &warmup, path, err) ||
        meta_long_or(f, "lr_step_size", 0, LONG_MAX, &size, path, err) ||
        meta_long_or(f, "lr_total_steps", 0, LONG_MAX, &total, path, err) ||
        meta_float_or(f, "warmup_start", 0, 0, &l->warmup_start, path, err) ||
        meta_float_or(f, "lr_gamma", 0, 0, &l->gamma, path, err))
        return -1;
    l->warmup_steps = (long)warmup, l->step_size = (long)size, l->total_steps = (long)total;
    if (cn_lr_schedule_check(l, err) == 0) return 0;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return cn_fail(err, "%s: __metadata__ %s (the file is damaged)", path, why);
}

/* The optimiser, its settings and steps; files from before they were recorded are SGD without
 * Nesterov or weight decay, and took one optimiser step per step of their position. */
static int read_optimizer(const cn_safetensors *f, const char *path, cn_train_state *s,
                          cn_error *err)
{
    const char *name = cn_safetensors_meta(f, "optimizer");
    s->optimizer = CN_OPTIMIZER_SGD;
    if (name && cn_optimizer_from_name(name, &s->optimizer) != 0)
        return bad_value(path, "optimizer", name, "sgd or adamw", err);
    long long nesterov = 0;
    long long steps = (long long)(s->position.epoch - 1) * s->steps_per_epoch + s->position.step;
    s->beta1 = 0.9f, s->beta2 = 0.999f, s->eps = 1e-8f, s->weight_decay = 0;
    if (meta_long_or(f, "nesterov", 0, 1, &nesterov, path, err) ||
        meta_long_or(f, "optimizer_steps", 0, LLONG_MAX, &steps, path, err) ||
        meta_float_or(f, "weight_decay", 0, 0, &s->weight_decay, path, err) ||
        meta_float_or(f, "adamw_beta1", 0, 1, &s->beta1, path, err) ||
        meta_float_or(f, "adamw_beta2", 0, 1, &s->beta2, path, err) ||
        meta_float_or(f, "adamw_eps", 0, 0, &s->eps, path, err))
        return -1;
    s->nesterov = (int)nesterov, s->optimizer_steps = steps;
    if (s->nesterov && (s->optimizer != CN_OPTIMIZER_SGD || !(s->momentum > 0)))
        return cn_fail(err, "%s: __metadata__ \"nesterov\" is 1 without sgd and a momentum above 0",
                       path);
    return read_schedule(f, path, &s->lr_schedule, err);
}

static int read_settings(const cn_safetensors *f, const char *path, cn_train_state *s,
                         cn_error *err)
{
    if (meta_u64(f, "seed", &s->seed, path, err) ||
        meta_int(f, "num_cores", 1, &s->num_replicas, path, err) ||
        meta_int(f, "batch_size", 1, &s->batch_size, path, err) ||
        meta_float(f, "learning_rate", &s->learning_rate, path, err) ||
        meta_float(f, "momentum", &s->momentum, path, err) ||
        meta_int(f, "train_samples", 1, &s->train_samples, path, err) ||
        meta_hex32(f, "train_data_crc32", &s->train_crc32, path, err) ||
        meta_equals(f, "sampler", SAMPLER_VALUE, path, err))
        return -1;
    if (!(s->learning_rate > 0))
        return bad_value(path, "learning_rate", cn_safetensors_meta(f, "learning_rate"),
                         "a positive number", err);
    if (!(s->momentum >= 0 && s->momentum < 1))
        return bad_value(path, "momentum", cn_safetensors_meta(f, "momentum"),
                         "a number in [0, 1)", err);
    /* files from before label smoothing say nothing: they had none */
    s->label_smoothing = 0;
    if (cn_safetensors_meta(f, "label_smoothing") &&
        meta_float(f, "label_smoothing", &s->label_smoothing, path, err))
        return -1;
    if (!(s->label_smoothing >= 0 && s->label_smoothing < 1))
        return bad_value(path, "label_smoothing", cn_safetensors_meta(f, "label_smoothing"),
                         "a number in [0, 1)", err);
    if (read_augment(f, path, s, err)) return -1;
    const char *isa = meta_value(f, "isa", path, err);
    if (!isa) return -1;
    snprintf(s->isa, sizeof s->isa, "%s", isa);
    /* files from before there was a choice say nothing: they are fp32 */
    const char *precision = cn_safetensors_meta(f, "precision");
    s->precision = CN_PRECISION_FP32;
    if (precision && cn_precision_from_name(precision, &s->precision) != 0)
        return bad_value(path, "precision", precision, "fp32 or bf16", err);
    if (read_data_shape(f, path, s, err)) return -1;
    return read_optimizer(f, path, s, err);
}

static int read_position(const cn_safetensors *f, const char *path, cn_train_state *s,
                         cn_error *err)
{
    long long step;
    cn_epoch_position *p = &s->position;
    if (meta_int(f, "epoch", 1, &p->epoch, path, err) ||
        meta_int(f, "steps_per_epoch", 1, &s->steps_per_epoch, path, err) ||
        meta_int(f, "epoch_step", 0, &p->step, path, err) ||
        meta_long(f, "step", 0, LLONG_MAX, &step, path, err) ||
        meta_double(f, "epoch_loss_sum", &p->loss_sum, path, err))
        return -1;
    /* files from before training accuracy was counted say nothing: none counted yet */
    long long correct = 0;
    if (cn_safetensors_meta(f, "epoch_correct") &&
        meta_long(f, "epoch_correct", 0, LLONG_MAX, &correct, path, err))
        return -1;
    p->correct = correct;
    if (p->step > s->steps_per_epoch)
        return cn_fail(err, "%s: __metadata__ \"epoch_step\" %d is past \"steps_per_epoch\" %d",
                       path, p->step, s->steps_per_epoch);
    if (step != (long long)(p->epoch - 1) * s->steps_per_epoch + p->step)
        return cn_fail(err, "%s: __metadata__ \"step\" %lld does not match epoch %d step %d of "
                       "%d", path, step, p->epoch, p->step, s->steps_per_epoch);
    return 0;
}

/* The step count the settings give must be the recorded one, and the right answers can be no
 * more than the samples of the steps done. */
static int check_steps(const cn_train_state *s, const char *path, cn_error *err)
{
    long long samples = (long long)s->position.step * s->num_replicas * s->batch_size;
    if (s->position.correct > samples)
        return cn_fail(err, "%s: __metadata__ \"epoch_correct\" %lld is more than the %lld samples "
                       "of %d steps", path, (long long)s->position.correct, samples,
                       s->position.step);
    uint32_t shard = cn_sampler_shard_size((uint32_t)s->train_samples, s->num_replicas);
    long long steps = (long long)(shard / (uint32_t)s->batch_size);
    if (steps != s->steps_per_epoch)
        return cn_fail(err, "%s: __metadata__ \"steps_per_epoch\" %d does not match %d samples, "
                       "%d replicas and batch %d", path, s->steps_per_epoch, s->train_samples,
                       s->num_replicas, s->batch_size);
    return 0;
}

int cn_train_checkpoint_state(const cn_safetensors *f, const char *path, cn_train_state *s,
                              cn_error *err)
{
    memset(s, 0, sizeof *s);
    const char *kind = cn_safetensors_meta(f, KIND_KEY);
    if (!kind)
        return cn_fail(err, "%s: not a training checkpoint (its __metadata__ has no \"%s\"; a "
                       "model saved with --save or by PyTorch holds no training position)",
                       path, KIND_KEY);
    int rc = meta_equals(f, KIND_KEY, KIND_VALUE, path, err);
    if (rc == 0) rc = read_position(f, path, s, err);
    if (rc == 0) rc = read_settings(f, path, s, err);
    if (rc == 0) rc = check_steps(s, path, err);
    cn_keep_one_line(err);
    return rc;
}

/* ---------------------------------------------------------------- tensors in */

/* Every state tensor of the optimiser is there as expected, and no other optimizer.* tensor. */
static int check_optimizer_state(const cn_safetensors *f, cn_optimizer o,
                                 const cn_tensor_ref *refs, int n, const char *path,
                                 cn_error *err)
{
    for (int i = 0; i < n; i++)
        if (cn_check_expected_tensor(f, &refs[i], path, err)) return -1;
    size_t prefix = strlen(MOMENTUM_PREFIX);
    for (int i = 0; i < cn_safetensors_count(f); i++) {
        const char *name = cn_safetensors_at(f, i)->name;
        if (strncmp(name, MOMENTUM_PREFIX, prefix) == 0 && !cn_ref_listed(name, refs, n))
            return cn_fail(err, "%s: tensor %s is not part of %s's state for this model", path,
                           name, cn_optimizer_name(o));
    }
    return 0;
}

/* The file records optimiser o (files that do not say are sgd). */
static int check_recorded_optimizer(const cn_safetensors *f, cn_optimizer o, const char *path,
                                    cn_error *err)
{
    const char *name = cn_safetensors_meta(f, "optimizer");
    if (!name) name = cn_optimizer_name(CN_OPTIMIZER_SGD);
    if (strcmp(name, cn_optimizer_name(o)) == 0) return 0;
    return cn_fail(err, "%s: the checkpoint holds the state of optimizer \"%.20s\", not %s", path,
                   name, cn_optimizer_name(o));
}

int cn_train_checkpoint_restore(cn_model *m, float *state, cn_optimizer optimizer,
                                const cn_safetensors *f, const char *path, cn_error *err)
{
    if ((unsigned)optimizer >= CN_OPTIMIZER_COUNT)
        return cn_fail(err, "%s: unknown optimizer %d", path, (int)optimizer);
    int n_model = 0, n = 0;
    if (check_recorded_optimizer(f, optimizer, path, err)) return -1;
    cn_tensor_ref *refs = all_refs(m, optimizer, state, &n_model, &n, path, err);
    if (!refs) return -1;
    int rc = cn_check_model_tensors(f, refs, n_model, path, err);
    if (rc == 0) rc = check_optimizer_state(f, optimizer, refs + n_model, n - n_model, path, err);
    const char *classes = cn_safetensors_meta(f, "classes");
    if (rc == 0 && classes) rc = cn_model_set_classes_text(m, classes, path, err);
    if (rc == 0) cn_copy_tensors(f, refs, n);
    else cn_keep_one_line(err);
    free(refs);
    return rc;
}
