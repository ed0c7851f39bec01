/* model_file.c — the text model format (one layer per line: a kind, then key=value words; `#`
 * comments; blank lines): parsing it into layer specs with every refusal as "SOURCE:LINE:
 * reason", and building the model with cn_model_build, whose layer types check the shapes as
 * PyTorch would (a refusal names the line of the layer that does not fit); and writing a model
 * back as text in one canonical form (cn_model_text). The kinds and the keys each takes are the
 * layer types' (layer.h); this file knows only the words and their value types. It does not run
 * anything. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/file_read.h"
#include "files/safetensors.h"
#include "model/model.h"

#define MAX_WORDS 16
#define MAX_SIZE 65536                   /* any channel count, side, kernel or feature count */
#define MODEL_FILE_LIMIT (1024 * 1024)   /* bytes of a model file */

typedef enum { V_INT, V_FLOAT, V_BOOL, V_NAME, V_LIST } value_type;

typedef struct {
    const char *key;
    value_type type;
} key_def;

/* Every key of the format; which ones a layer takes is its type's (cn_layer_type.keys). */
static const key_def all_keys[] = {
    {"channels", V_INT}, {"height", V_INT},  {"width", V_INT},   {"mean", V_LIST},
    {"std", V_LIST},     {"name", V_NAME},   {"out", V_INT},     {"kernel", V_INT},
    {"stride", V_INT},   {"padding", V_INT}, {"bias", V_BOOL},   {"p", V_FLOAT},
    {"momentum", V_FLOAT}, {"eps", V_FLOAT},
};

/* The input line, described as a layer type's keys are. */
static const char input_keys[] = "channels height width mean std";
static const char input_required[] = "channels height width";

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
    int c, h, w;             /* the input */
    float *mean, *std;       /* [c] */
    int has_normalization;   /* mean= and std= were given */
    int num_layers;
    cn_layer_spec specs[CN_MODEL_MAX_LAYERS];
    char names[CN_MODEL_MAX_LAYERS][CN_MODEL_NAME_MAX + 1];
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

/* 1 when word (len bytes) is one of the space-separated words of list. */
static int listed(const char *list, const char *word, size_t len)
{
    for (const char *at = list; *at;) {
        size_t n = strcspn(at, " ");
        if (n == len && strncmp(at, word, len) == 0) return 1;
        at += n + (at[n] == ' ');
    }
    return 0;
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

/* A whole number of digits only; one of more than 9 digits after its leading zeros reads as
 * LONG_MAX, above every range, so that the range check, not this, refuses it. */
static int parse_int(const char *s, long *out)
{
    size_t digits = strspn(s, "0123456789"), zeros = strspn(s, "0");
    if (digits == 0 || s[digits]) return -1;
    *out = digits - zeros > 9 ? LONG_MAX : strtol(s, NULL, 10);
    return 0;
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
        if (!v[0] || strlen(v) > CN_MODEL_NAME_MAX) return 0;
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

static const key_def *find_key(const char *word, size_t len)
{
    for (size_t i = 0; i < sizeof all_keys / sizeof all_keys[0]; i++)
        if (strlen(all_keys[i].key) == len && strncmp(all_keys[i].key, word, len) == 0)
            return &all_keys[i];
    return NULL;
}

/* Every word is a key the kind takes (keys), given once, with a well-formed value; the
 * required keys are there. */
static int check_keys(parser *p, const char *kind, const char *keys, const char *required,
                      const line_words *lw)
{
    for (int i = 1; i < lw->n; i++) {
        const char *eq = strchr(lw->words[i], '=');
        if (!eq) return refuse(p, "%s: '%s' is not key=value", kind, lw->words[i]);
        size_t len = (size_t)(eq - lw->words[i]);
        const key_def *d = find_key(lw->words[i], len);
        if (!d || !listed(keys, lw->words[i], len))
            return refuse(p, "%s: unknown key '%.*s'", kind, (int)len, lw->words[i]);
        for (int j = 1; j < i; j++)
            if (strncmp(lw->words[j], lw->words[i], len + 1) == 0)
                return refuse(p, "%s: key '%s' given twice", kind, d->key);
        if (!eq[1]) return refuse(p, "%s: '%s' has no value", kind, d->key);
        if (!valid_value(eq + 1, d->type))
            return refuse(p, "%s: %s=%.40s: expected %s", kind, d->key, eq + 1,
                          type_words(d->type));
    }
    for (const char *at = required; *at;) {
        size_t n = strcspn(at, " ");
        char key[16];
        snprintf(key, sizeof key, "%.*s", (int)n, at);
        if (!value_of(lw, key)) return refuse(p, "%s: missing %s=", kind, key);
        at += n + (at[n] == ' ');
    }
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

static int size_in_range(parser *p, const char *kind, const line_words *lw, const char *key,
                         long least)
{
    long n = int_of(lw, key, least);
    if (n < least || n > MAX_SIZE)
        return refuse(p, "%s: %s=%.40s: must be %ld to %d", kind, key, value_of(lw, key), least,
                      MAX_SIZE);
    return 0;
}

/* The mean or std list of the input line into out[0..channels): one value for every channel,
 * or one per channel; a std must be above 0. */
static int read_normalization(parser *p, const line_words *lw, const char *key, float *out)
{
    const char *v = value_of(lw, key);
    if (!v) return 0; /* left to the training data */
    int count = 1;
    for (const char *c = v; *c; c++) count += *c == ',';
    if (count != 1 && count != p->c)
        return refuse(p, "input: %s= has %d values for %d channels (give 1 or %d)", key, count,
                      p->c, p->c);
    const char *at = v;
    for (int c = 0; c < p->c; c++) {
        out[c] = (float)strtod(at, NULL);
        if (!isfinite(out[c]))
            return refuse(p, "input: %s=%.40s: a value out of single precision's range", key, v);
        if (strcmp(key, "std") == 0 && !(out[c] > 0.0f))
            return refuse(p, "input: std=%.40s: every value must be above 0", v);
        if (count > 1 && c + 1 < p->c) at = strchr(at, ',') + 1;
    }
    return 0;
}

static int read_input(parser *p, const line_words *lw)
{
    if (p->have_input) return refuse(p, "input: a second input line");
    if (size_in_range(p, "input", lw, "channels", 1) ||
        size_in_range(p, "input", lw, "height", 1) || size_in_range(p, "input", lw, "width", 1))
        return -1;
    p->c = (int)int_of(lw, "channels", 1), p->h = (int)int_of(lw, "height", 1);
    p->w = (int)int_of(lw, "width", 1);
    if ((double)p->c * p->h * p->w > CN_MODEL_MAX_ACTIVATIONS)
        return refuse(p, "input: %dx%dx%d is more than %d values", p->c, p->h, p->w,
                      CN_MODEL_MAX_ACTIVATIONS);
    p->have_input = 1;
    p->mean = calloc((size_t)p->c, sizeof *p->mean);
    p->std = calloc((size_t)p->c, sizeof *p->std);
    if (!p->mean || !p->std) return refuse(p, "input: out of memory for %d channels", p->c);
    p->has_normalization = value_of(lw, "mean") != NULL;
    if (p->has_normalization != (value_of(lw, "std") != NULL))
        return refuse(p, "input: give mean= and std= together, or neither (then they are "
                         "computed from the training images)");
    return read_normalization(p, lw, "mean", p->mean) || read_normalization(p, lw, "std", p->std);
}

/* The ranges of the layer keys the format itself fixes; the layer's type checks the rest. */
static int check_layer_values(parser *p, const char *kind, const line_words *lw)
{
    for (const char *const *key = (const char *const[]){"out", "kernel", "stride", NULL}; *key;
         key++)
        if (value_of(lw, *key) && size_in_range(p, kind, lw, *key, 1)) return -1;
    if (value_of(lw, "padding") && size_in_range(p, kind, lw, "padding", 0)) return -1;
    double x = float_of(lw, "p", 0);
    if (x < 0 || x >= 1) return refuse(p, "%s: p=%g: must be at least 0 and below 1", kind, x);
    for (const char *const *key = (const char *const[]){"momentum", "eps", NULL}; *key; key++) {
        float v = (float)float_of(lw, *key, 1); /* as the layer will hold it */
        if (value_of(lw, *key) && !(v > 0 && isfinite(v)))
            return refuse(p, "%s: %s=%g: must be above 0 (and finite in single precision)",
                          kind, *key, float_of(lw, *key, 1));
    }
    return 0;
}

/* The layer's module name: name=, or its position after input as in torch.nn.Sequential. */
static int name_layer(parser *p, const cn_layer_type *type, const line_words *lw, int *lines)
{
    int i = p->num_layers;
    cn_layer_spec *s = &p->specs[i];
    s->name = NULL;
    if (!type->tensors) return 0;
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

static int read_layer(parser *p, const cn_layer_type *type, int kind, const line_words *lw,
                      int *lines)
{
    if (!p->have_input)
        return refuse(p, "%s before input: the first line must be input", type->kind);
    if (p->ended) {
        const char *last = cn_layer_type_of((int)p->specs[p->num_layers - 1].kind)->kind;
        return refuse(p, "%s after %s: %s must be the last line", type->kind, last, last);
    }
    if (p->num_layers == CN_MODEL_MAX_LAYERS)
        return refuse(p, "more than %d layers", CN_MODEL_MAX_LAYERS);
    if (check_layer_values(p, type->kind, lw)) return -1;
    cn_layer_spec *s = &p->specs[p->num_layers];
    *s = (cn_layer_spec){.kind = (cn_layer_kind)kind,
                         .out_channels = (int)int_of(lw, "out", 0),
                         .kernel = (int)int_of(lw, "kernel", 0),
                         .stride = (int)int_of(lw, "stride", 0),
                         .padding = (int)int_of(lw, "padding", 0),
                         .no_bias = int_of(lw, "bias", 1) == 0,
                         .p = (float)float_of(lw, "p", 0),
                         .momentum = (float)float_of(lw, "momentum", 0),
                         .eps = (float)float_of(lw, "eps", 0)};
    if (name_layer(p, type, lw, lines)) return -1;
    lines[p->num_layers++] = p->line;
    p->ended = (type->flags & CN_FINAL) != 0;
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
    if (strcmp(lw.words[0], "input") == 0)
        return check_keys(p, "input", input_keys, input_required, &lw) || read_input(p, &lw);
    int kind;
    const cn_layer_type *type = cn_layer_type_named(lw.words[0], &kind);
    if (!type) return refuse(p, "unknown layer kind '%.40s'", lw.words[0]);
    if (check_keys(p, type->kind, type->keys, type->required, &lw)) return -1;
    return read_layer(p, type, kind, &lw, lines);
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
    return 0;
}

/* The model; a layer that does not fit is refused at its line, with its kind. */
static cn_model *build(parser *p, const int *lines)
{
    cn_error why = {{0}};
    int failed = -1;
    cn_model *m = p->num_layers ? cn_model_build(p->c, p->h, p->w, p->specs, p->num_layers,
                                                 &failed, &why) : NULL;
    if (!m && failed < 0 && !p->ended) { /* every layer fits: the model is not finished */
        refuse(p, "the model must end with log_softmax");
    } else if (!m && failed >= 0) {
        p->line = lines[failed];
        refuse(p, "%s: %s", cn_layer_type_of((int)p->specs[failed].kind)->kind, why.msg);
    } else if (!m) {
        cn_fail(p->err, "%s: %s", p->source, why.msg);
    }
    if (m) m->has_normalization = p->has_normalization;
    if (m && cn_model_normalize_with(m, p->has_normalization ? p->mean : m->mean,
                                     p->has_normalization ? p->std : m->std) != 0) {
        cn_model_free(m);
        cn_fail(p->err, "%s: out of memory", p->source);
        return NULL;
    }
    return m;
}

/* What bytes that are not a model's text look like, for the refusal: a checkpoint or saved
 * model (safetensors), gzip data, a zip archive (torch.save's .pt files); NULL for none. */
static const char *not_a_model(const unsigned char *b, size_t len)
{
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) return "gzip data: decompress it first";
    if (len >= 4 && memcmp(b, "PK\3\4", 4) == 0)
        return "a zip archive (torch.save's format?): cnnc reads weights from safetensors";
    if (cn_safetensors_signature(b, len))
        return "safetensors weights: give a checkpoint or saved model as the checkpoint";
    return NULL;
}

cn_model *cn_model_from_text(const char *text, size_t len, const char *source, cn_error *err)
{
    const char *other = not_a_model((const unsigned char *)text, len);
    if (other) {
        cn_fail(err, "%s: not a model file but %s", source, other);
        return NULL;
    }
    parser *p = calloc(1, sizeof *p);
    int *lines = calloc(CN_MODEL_MAX_LAYERS, sizeof *lines);
    char *copy = malloc(len + 1);
    cn_model *m = NULL;
    if (!p || !lines || !copy) {
        cn_fail(err, "%s: out of memory", source);
    } else {
        p->source = source, p->err = err;
        memcpy(copy, text, len), copy[len] = '\0';
        if (read_lines(p, copy, len, lines) == 0) m = build(p, lines);
    }
    if (p) free(p->mean), free(p->std);
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

/* One layer's line: kind, name= for a layer with tensors, then its type's keys. */
static void put_layer(char *line, size_t cap, const cn_layer *l)
{
    snprintf(line, cap, "%s", l->type->kind);
    if (l->type->tensors) cn_appendf(line, cap, " name=%s", l->name);
    if (l->type->describe) l->type->describe(l, line, cap);
    cn_appendf(line, cap, "\n");
}

/* " key=V" when the n values are all V, else " key=V1,V2,..". */
static void append_list(char *text, size_t cap, const char *key, const float *v, int n)
{
    int same = 1;
    for (int c = 1; c < n; c++) same &= v[c] == v[0];
    cn_append_float(text, cap, key, v[0]);
    for (int c = 1; !same && c < n; c++) {
        char num[32];
        cn_format_float(num, v[c]);
        cn_appendf(text, cap, ",%s", num);
    }
}

char *cn_model_describe(const cn_model *m)
{
    size_t cap = 256 + (size_t)m->num_layers * 160 + (size_t)m->in_c * 40;
    char *text = malloc(cap);
    if (!text) return NULL;
    snprintf(text, cap, "input channels=%d height=%d width=%d", m->in_c, m->in_h, m->in_w);
    if (m->has_normalization) {
        append_list(text, cap, "mean", m->mean, m->in_c);
        append_list(text, cap, "std", m->std, m->in_c);
    }
    cn_appendf(text, cap, "\n");
    for (int i = 0; i < m->num_layers; i++) {
        char line[160];
        put_layer(line, sizeof line, &m->layers[i]);
        cn_appendf(text, cap, "%s", line);
    }
    return text;
}
