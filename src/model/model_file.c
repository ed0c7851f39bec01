/* model_file.c — the text model format (one layer per line: a kind, then key=value words; `#`
 * comments; blank lines): parsing it into layer specs with every refusal as "SOURCE:LINE:
 * reason", checking shapes as PyTorch would, and building the model with cn_model_create; and
 * writing a model back as text in one canonical form (cn_model_text). It
 * recognises every kind and key of the format and refuses, by name, the values the layers
 * cannot compute yet; it does not run anything. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/file_read.h"
#include "model/model.h"

#define MAX_LAYERS 256
#define MAX_WORDS 16
#define MAX_SIZE 65536                   /* any channel count, side, kernel or feature count */
#define MAX_ACTIVATIONS (1 << 24)        /* floats one sample's layer output may hold */
#define MAX_PARAMS ((size_t)1 << 28)     /* floats of all trainable parameters */
#define MODEL_FILE_LIMIT (1024 * 1024)   /* bytes of a model file */
#define NAME_MAX_LEN 39                  /* "NAME.num_batches_tracked" fits a tensor name */

typedef enum { V_INT, V_FLOAT, V_BOOL, V_NAME, V_LIST } value_type;

typedef struct {
    const char *key;
    value_type type;
} key_def;

typedef struct {
    const char *kind;
    int layer_kind;          /* cn_layer_kind, or -1: recognised but not supported yet */
    const key_def *keys;     /* NULL-terminated */
    const char *required[3]; /* keys that must be given */
} kind_def;

static const key_def input_keys[] = {{"channels", V_INT}, {"height", V_INT}, {"width", V_INT},
                                     {"mean", V_LIST},    {"std", V_LIST},   {NULL, V_INT}};
static const key_def conv_keys[] = {{"name", V_NAME},   {"out", V_INT},     {"kernel", V_INT},
                                    {"stride", V_INT},  {"padding", V_INT}, {"bias", V_BOOL},
                                    {NULL, V_INT}};
static const key_def pool_keys[] = {{"kernel", V_INT}, {"stride", V_INT}, {NULL, V_INT}};
static const key_def bn_keys[] = {{"name", V_NAME}, {"momentum", V_FLOAT}, {"eps", V_FLOAT},
                                  {NULL, V_INT}};
static const key_def dropout_keys[] = {{"p", V_FLOAT}, {NULL, V_INT}};
static const key_def linear_keys[] = {{"name", V_NAME}, {"out", V_INT}, {"bias", V_BOOL},
                                      {NULL, V_INT}};
static const key_def no_keys[] = {{NULL, V_INT}};

static const kind_def kinds[] = {
    {"input", -2, input_keys, {"channels", "height", "width"}},
    {"conv2d", CN_CONV2D, conv_keys, {"out", "kernel", NULL}},
    {"maxpool2d", CN_MAXPOOL2D, pool_keys, {"kernel", NULL, NULL}},
    {"avgpool2d", -1, pool_keys, {"kernel", NULL, NULL}},
    {"global_avgpool", -1, no_keys, {NULL, NULL, NULL}},
    {"batchnorm2d", CN_BATCHNORM2D, bn_keys, {NULL, NULL, NULL}},
    {"batchnorm1d", -1, bn_keys, {NULL, NULL, NULL}},
    {"relu", CN_RELU, no_keys, {NULL, NULL, NULL}},
    {"dropout", -1, dropout_keys, {"p", NULL, NULL}},
    {"flatten", CN_FLATTEN, no_keys, {NULL, NULL, NULL}},
    {"linear", CN_LINEAR, linear_keys, {"out", NULL, NULL}},
    {"log_softmax", CN_LOG_SOFTMAX, no_keys, {NULL, NULL, NULL}},
};

/* One line's words, split in place: words[0] is the kind, the rest "key=value". */
typedef struct {
    char *words[MAX_WORDS];
    int n;
} line_words;

/* What the parser knows so far: the input, the specs, the current shape. */
typedef struct {
    const char *source;
    int line;
    int have_input, ended;
    int c0, h0, w0;          /* the input */
    int c, h, w, flat;       /* the current layer's output */
    float mean, std;
    int num_layers;
    cn_layer_spec specs[MAX_LAYERS];
    char names[MAX_LAYERS][NAME_MAX_LEN + 1];
    size_t params;
    cn_error *err;
} parser;

static int refuse(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(parser *p, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return cn_fail(p->err, "%s:%d: %s", p->source, p->line, reason);
}

static const kind_def *find_kind(const char *word)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].kind, word) == 0) return &kinds[i];
    return NULL;
}

/* The value of key in the line's words, or NULL when absent. */
static const char *value_of(const line_words *lw, const char *key)
{
    size_t n = strlen(key);
    for (int i = 1; i < lw->n; i++)
        if (strncmp(lw->words[i], key, n) == 0 && lw->words[i][n] == '=')
            return lw->words[i] + n + 1;
    return NULL;
}

static int parse_int(const char *s, long *out)
{
    if (!isdigit((unsigned char)s[0]) || strlen(s) > 9) return -1;
    char *end;
    *out = strtol(s, &end, 10);
    return *end ? -1 : 0;
}

static int parse_float(const char *s, double *out)
{
    if (!s[0] || isspace((unsigned char)s[0])) return -1;
    char *end;
    *out = strtod(s, &end);
    return *end || !isfinite(*out) ? -1 : 0;
}

static int valid_value(const char *v, value_type type)
{
    long n;
    double x;
    switch (type) {
    case V_INT: return parse_int(v, &n) == 0;
    case V_BOOL: return strcmp(v, "0") == 0 || strcmp(v, "1") == 0;
    case V_FLOAT: return parse_float(v, &x) == 0;
    case V_NAME:
        if (!v[0] || strlen(v) > NAME_MAX_LEN) return 0;
        for (const char *c = v; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_') return 0;
        return 1;
    case V_LIST:
        for (const char *c = v;; c++) {
            const char *comma = strchr(c, ',');
            char item[64];
            size_t len = comma ? (size_t)(comma - c) : strlen(c);
            if (len == 0 || len >= sizeof item) return 0;
            memcpy(item, c, len), item[len] = '\0';
            if (parse_float(item, &x) != 0) return 0;
            if (!comma) return 1;
            c = comma;
        }
    }
    return 0;
}

static const char *type_words(value_type type)
{
    static const char *const words[] = {"a whole number", "a number", "0 or 1",
                                        "a name of letters, digits and _ (at most 39)",
                                        "numbers separated by commas"};
    return words[type];
}

static const key_def *find_key(const kind_def *k, const char *word, size_t len)
{
    for (const key_def *d = k->keys; d->key; d++)
        if (strlen(d->key) == len && strncmp(d->key, word, len) == 0) return d;
    return NULL;
}

/* Every word is a known key of the kind, given once, with a well-formed value; the required
 * keys are there. */
static int check_keys(parser *p, const kind_def *k, const line_words *lw)
{
    for (int i = 1; i < lw->n; i++) {
        const char *eq = strchr(lw->words[i], '=');
        if (!eq) return refuse(p, "%s: '%s' is not key=value", k->kind, lw->words[i]);
        size_t len = (size_t)(eq - lw->words[i]);
        const key_def *d = find_key(k, lw->words[i], len);
        if (!d) return refuse(p, "%s: unknown key '%.*s'", k->kind, (int)len, lw->words[i]);
        for (int j = 1; j < i; j++)
            if (strncmp(lw->words[j], lw->words[i], len + 1) == 0)
                return refuse(p, "%s: key '%s' given twice", k->kind, d->key);
        if (!eq[1]) return refuse(p, "%s: '%s' has no value", k->kind, d->key);
        if (!valid_value(eq + 1, d->type))
            return refuse(p, "%s: %s=%.40s: expected %s", k->kind, d->key, eq + 1,
                          type_words(d->type));
    }
    for (int r = 0; r < 3 && k->required[r]; r++)
        if (!value_of(lw, k->required[r]))
            return refuse(p, "%s: missing %s=", k->kind, k->required[r]);
    return 0;
}

/* The integer value of key (already checked), or fallback when absent. */
static long int_of(const line_words *lw, const char *key, long fallback)
{
    const char *v = value_of(lw, key);
    long n = fallback;
    if (v) parse_int(v, &n);
    return n;
}

static double float_of(const line_words *lw, const char *key, double fallback)
{
    const char *v = value_of(lw, key);
    double x = fallback;
    if (v) parse_float(v, &x);
    return x;
}

static int size_in_range(parser *p, const kind_def *k, const line_words *lw, const char *key)
{
    long n = int_of(lw, key, 1);
    if (n < 1 || n > MAX_SIZE)
        return refuse(p, "%s: %s=%ld: must be 1 to %d", k->kind, key, n, MAX_SIZE);
    return 0;
}

/* The mean or std list of the input line: one value, or one per channel, each the value the
 * pixels are normalised with today (cn_normalize). */
static int read_normalization(parser *p, const line_words *lw, const char *key, float only,
                              float *out)
{
    const char *v = value_of(lw, key);
    if (!v)
        return refuse(p, "input: no %s=: computing it from the training set is not supported "
                         "yet; give mean=0.1307 std=0.3081", key);
    int count = 1;
    for (const char *c = v; *c; c++) count += *c == ',';
    if (count != 1 && count != p->c)
        return refuse(p, "input: %s= has %d values for %d channels (give 1 or %d)", key, count,
                      p->c, p->c);
    for (const char *c = v; c; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL)
        if ((float)strtod(c, NULL) != only)
            return refuse(p, "input: %s=%.40s: not supported yet: pixels are normalised with "
                             "mean=0.1307 std=0.3081 only", key, v);
    *out = only;
    return 0;
}

static int read_input(parser *p, const kind_def *k, const line_words *lw)
{
    if (p->have_input) return refuse(p, "input: a second input line");
    if (size_in_range(p, k, lw, "channels") || size_in_range(p, k, lw, "height") ||
        size_in_range(p, k, lw, "width"))
        return -1;
    p->c = (int)int_of(lw, "channels", 1), p->h = (int)int_of(lw, "height", 1);
    p->w = (int)int_of(lw, "width", 1);
    if ((double)p->c * p->h * p->w > MAX_ACTIVATIONS)
        return refuse(p, "input: %dx%dx%d is more than %d values", p->c, p->h, p->w,
                      MAX_ACTIVATIONS);
    p->c0 = p->c, p->h0 = p->h, p->w0 = p->w, p->have_input = 1;
    return read_normalization(p, lw, "mean", CN_PIXEL_MEAN, &p->mean) ||
           read_normalization(p, lw, "std", CN_PIXEL_STD, &p->std);
}

/* Value ranges of the layer keys, and the values today's layers cannot compute. */
static int check_layer_values(parser *p, const kind_def *k, const line_words *lw)
{
    for (const char *const *key = (const char *const[]){"out", "kernel", "stride", NULL}; *key;
         key++)
        if (value_of(lw, *key) && size_in_range(p, k, lw, *key)) return -1;
    double x = float_of(lw, "p", 0);
    if (x < 0 || x >= 1) return refuse(p, "%s: p=%g: must be at least 0 and below 1", k->kind, x);
    if (k->layer_kind == -1)
        return refuse(p, "%s: not supported yet (the layers today: conv2d, maxpool2d, relu, "
                         "batchnorm2d, flatten, linear, log_softmax)", k->kind);
    if (int_of(lw, "bias", 1) != 1)
        return refuse(p, "%s: bias=0: not supported yet (always with a bias)", k->kind);
    if (k->layer_kind == CN_CONV2D && int_of(lw, "stride", 1) != 1)
        return refuse(p, "conv2d: stride=%ld: not supported yet (stride 1 only)",
                      int_of(lw, "stride", 1));
    if (int_of(lw, "padding", 0) != 0)
        return refuse(p, "conv2d: padding=%ld: not supported yet (padding 0 only)",
                      int_of(lw, "padding", 0));
    long kernel = int_of(lw, "kernel", 1);
    if (k->layer_kind == CN_MAXPOOL2D && int_of(lw, "stride", kernel) != kernel)
        return refuse(p, "maxpool2d: stride=%ld with kernel=%ld: not supported yet (stride = "
                         "kernel only)", int_of(lw, "stride", kernel), kernel);
    if ((float)float_of(lw, "momentum", CN_BN_MOMENTUM) != CN_BN_MOMENTUM ||
        (float)float_of(lw, "eps", CN_BN_EPS) != CN_BN_EPS)
        return refuse(p, "%s: momentum=%g eps=%g: not supported yet (momentum=0.1 eps=1e-5 "
                         "only)", k->kind, float_of(lw, "momentum", CN_BN_MOMENTUM),
                      float_of(lw, "eps", CN_BN_EPS));
    return 0;
}

/* The layer's output shape and parameters from the current shape, as PyTorch would see it. */
static int plan_shape(parser *p, const kind_def *k, const line_words *lw)
{
    long out = int_of(lw, "out", 1), kernel = int_of(lw, "kernel", 1);
    int kind = k->layer_kind;
    if (p->flat && (kind == CN_CONV2D || kind == CN_MAXPOOL2D || kind == CN_BATCHNORM2D))
        return refuse(p, "%s: needs a [C,H,W] input, not the flat %d features of flatten or "
                         "linear", k->kind, p->c);
    if (!p->flat && (kind == CN_LINEAR || kind == CN_LOG_SOFTMAX))
        return refuse(p, "%s: needs a flat input, not %dx%dx%d: put flatten before it",
                      k->kind, p->c, p->h, p->w);
    if ((kind == CN_CONV2D || kind == CN_MAXPOOL2D) && (kernel > p->h || kernel > p->w))
        return refuse(p, "%s: kernel=%ld does not fit its input %dx%dx%d", k->kind, kernel, p->c,
                      p->h, p->w);
    double params = 0;
    if (kind == CN_CONV2D) {
        params = (double)out * p->c * kernel * kernel + out;
        p->c = (int)out, p->h -= (int)kernel - 1, p->w -= (int)kernel - 1;
    } else if (kind == CN_MAXPOOL2D) {
        p->h /= (int)kernel, p->w /= (int)kernel;
    } else if (kind == CN_BATCHNORM2D) {
        params = 2.0 * p->c;
    } else if (kind == CN_FLATTEN) {
        p->c *= p->h * p->w, p->h = p->w = 1, p->flat = 1;
    } else if (kind == CN_LINEAR) {
        params = (double)out * p->c + out;
        p->c = (int)out;
    }
    if ((double)p->c * p->h * p->w > MAX_ACTIVATIONS)
        return refuse(p, "%s: its output %dx%dx%d is more than %d values", k->kind, p->c, p->h,
                      p->w, MAX_ACTIVATIONS);
    if (params + (double)p->params > (double)MAX_PARAMS)
        return refuse(p, "%s: the model would have more than %zu parameters", k->kind,
                      MAX_PARAMS);
    p->params += (size_t)params;
    return 0;
}

/* The layer's module name: name=, or its position after input as in torch.nn.Sequential. */
static int name_layer(parser *p, const line_words *lw, int *lines)
{
    int i = p->num_layers;
    cn_layer_spec *s = &p->specs[i];
    s->name = NULL;
    if (s->kind != CN_CONV2D && s->kind != CN_LINEAR && s->kind != CN_BATCHNORM2D) return 0;
    const char *given = value_of(lw, "name");
    snprintf(p->names[i], sizeof p->names[i], "%s", given ? given : "");
    if (!given) snprintf(p->names[i], sizeof p->names[i], "%d", i);
    for (int j = 0; j < i; j++)
        if (p->specs[j].name && strcmp(p->names[j], p->names[i]) == 0)
            return refuse(p, "name '%s' is already the name of the layer on line %d",
                          p->names[i], lines[j]);
    s->name = p->names[i];
    return 0;
}

static int read_layer(parser *p, const kind_def *k, const line_words *lw, int *lines)
{
    if (!p->have_input) return refuse(p, "%s before input: the first line must be input", k->kind);
    if (p->ended) return refuse(p, "%s after log_softmax: log_softmax must be the last line",
                                k->kind);
    if (p->num_layers == MAX_LAYERS) return refuse(p, "more than %d layers", MAX_LAYERS);
    if (check_layer_values(p, k, lw) || plan_shape(p, k, lw)) return -1;
    cn_layer_spec *s = &p->specs[p->num_layers];
    s->kind = (cn_layer_kind)k->layer_kind;
    s->out_channels = (int)int_of(lw, "out", 0);
    s->kernel = (int)int_of(lw, "kernel", 0);
    if (name_layer(p, lw, lines)) return -1;
    lines[p->num_layers++] = p->line;
    p->ended = s->kind == CN_LOG_SOFTMAX;
    return 0;
}

/* Splits one line (its comment cut off) into words; 0 words for a blank line. */
static int split_line(parser *p, char *line, line_words *lw)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    lw->n = 0;
    for (char *save = NULL, *w = strtok_r(line, " \t\r\v\f", &save); w;
         w = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (lw->n == MAX_WORDS) return refuse(p, "more than %d words on a line", MAX_WORDS);
        lw->words[lw->n++] = w;
    }
    return 0;
}

static int read_line(parser *p, char *line, int *lines)
{
    line_words lw;
    if (split_line(p, line, &lw)) return -1;
    if (lw.n == 0) return 0;
    const kind_def *k = find_kind(lw.words[0]);
    if (!k) return refuse(p, "unknown layer kind '%.40s'", lw.words[0]);
    if (check_keys(p, k, &lw)) return -1;
    return k->layer_kind == -2 ? read_input(p, k, &lw) : read_layer(p, k, &lw, lines);
}

static int read_lines(parser *p, char *copy, size_t len, int *lines)
{
    p->line = 0;
    for (char *at = copy; at < copy + len || p->line == 0;) {
        char *nl = memchr(at, '\n', (size_t)(copy + len - at));
        char *end = nl ? nl : copy + len;
        p->line++;
        if (memchr(at, '\0', (size_t)(end - at))) return refuse(p, "a NUL byte: not a text file");
        *end = '\0';
        if (read_line(p, at, lines)) return -1;
        at = end + 1;
    }
    if (!p->have_input) return refuse(p, "no input line: a model starts with input");
    if (!p->ended) return refuse(p, "the model must end with log_softmax");
    return 0;
}

static cn_model *build(parser *p)
{
    cn_error why;
    cn_model *m = cn_model_create(p->c0, p->h0, p->w0, p->specs, p->num_layers, &why);
    if (!m) {
        cn_fail(p->err, "%s: %s", p->source, why.msg);
        return NULL;
    }
    for (int c = 0; c < m->in_c; c++) m->mean[c] = p->mean, m->std[c] = p->std;
    return m;
}

cn_model *cn_model_from_text(const char *text, size_t len, const char *source, cn_error *err)
{
    parser *p = calloc(1, sizeof *p);
    int *lines = calloc(MAX_LAYERS, sizeof *lines);
    char *copy = malloc(len + 1);
    cn_model *m = NULL;
    if (!p || !lines || !copy) {
        cn_fail(err, "%s: out of memory", source);
    } else {
        p->source = source, p->err = err;
        memcpy(copy, text, len), copy[len] = '\0';
        if (read_lines(p, copy, len, lines) == 0) m = build(p);
    }
    free(copy), free(lines), free(p);
    return m;
}

cn_model *cn_model_from_file(const char *path, cn_error *err)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = cn_read_file(path, MODEL_FILE_LIMIT, &bytes, &len, err);
    if (rc == CN_FILE_TOO_LARGE)
        cn_fail(err, "%s: %zu bytes: too large for a model file (at most %d)", path, len,
                MODEL_FILE_LIMIT);
    if (rc != 0) return NULL;
    cn_model *m = cn_model_from_text((const char *)bytes, len, path, err);
    free(bytes);
    return m;
}

/* The shortest of %g and %.9g that reads back as v. */
static int put_float(char *at, size_t cap, float v)
{
    int n = snprintf(at, cap, "%g", (double)v);
    if (strtof(at, NULL) != v) n = snprintf(at, cap, "%.9g", (double)v);
    return n;
}

static int put_layer(char *at, size_t cap, const cn_layer *l)
{
    switch (l->kind) {
    case CN_CONV2D:
        return snprintf(at, cap, "conv2d name=%s out=%d kernel=%d\n", l->name, l->out_c,
                        l->kernel);
    case CN_MAXPOOL2D: return snprintf(at, cap, "maxpool2d kernel=%d\n", l->kernel);
    case CN_RELU: return snprintf(at, cap, "relu\n");
    case CN_BATCHNORM2D: return snprintf(at, cap, "batchnorm2d name=%s\n", l->name);
    case CN_FLATTEN: return snprintf(at, cap, "flatten\n");
    case CN_LINEAR: return snprintf(at, cap, "linear name=%s out=%d\n", l->name, l->out_c);
    case CN_LOG_SOFTMAX: return snprintf(at, cap, "log_softmax\n");
    }
    return 0;
}

char *cn_model_describe(const cn_model *m)
{
    size_t cap = 256 + (size_t)m->num_layers * 128;
    char *text = malloc(cap);
    if (!text) return NULL;
    size_t n = (size_t)snprintf(text, cap, "input channels=%d height=%d width=%d mean=", m->in_c,
                                m->in_h, m->in_w);
    n += (size_t)put_float(text + n, cap - n, m->mean[0]);
    n += (size_t)snprintf(text + n, cap - n, " std=");
    n += (size_t)put_float(text + n, cap - n, m->std[0]);
    n += (size_t)snprintf(text + n, cap - n, "\n");
    for (int i = 0; i < m->num_layers; i++)
        n += (size_t)put_layer(text + n, cap - n, &m->layers[i]);
    return text;
}
