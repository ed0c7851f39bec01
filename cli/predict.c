/* predict.c — `cnnc predict`: the class, and the probability of each class, that a saved model
 * gives to images — PNG, JPEG or PGM files of any size, read as grey or colour as the model's
 * input channels ask and scaled to its height and width (area averaging when shrinking,
 * bilinear when enlarging; see cn_image_resize), or, for a grey model, one sample of an IDX
 * file, taken as it is. For a grey model, images with a light background are inverted unless
 * --invert says otherwise (see cn_image_light_background); each line says what was done to its
 * image. The model and every input are read and checked before anything is printed. It trains
 * nothing, writes no files, and does not crop or centre images. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct {
    const char *checkpoint; /* required */
    const char *model_path; /* --model: the network of a file that records none */
    const char *idx;        /* IDX images file, or NULL */
    int index;              /* sample of idx; -1 when not given */
    int invert;             /* INVERT_*: when to use 255 - v for every pixel */
    char **images;          /* image files */
    int num_images;
} predict_settings;

enum { INVERT_AUTO, INVERT_YES, INVERT_NO };
static const char *const invert_names[] = {"auto", "yes", "no"};

/* One input as read: its name, its size in the file, whether it was inverted. */
typedef struct {
    char *name; /* points into argv, except the IDX sample's (malloc'd, the last) */
    int height, width;
    int inverted;
} predict_input;

/* What the model reads and gives: images of channels x height x width (size bytes), classes
 * log-probabilities. */
typedef struct {
    int channels, height, width, classes;
    size_t size;
} predict_shape;

/* The inputs, read: n images of shape.size bytes, as the model sees them. */
typedef struct {
    predict_shape shape;
    int n;
    uint8_t *pixels;
    predict_input *items;
    int idx_name_owned;
} predict_inputs;

enum {
    OPT_CHECKPOINT = 256,
    OPT_MODEL,
    OPT_IDX,
    OPT_INDEX,
    OPT_INVERT,
};

static const struct option predict_options[] = {
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"model", required_argument, NULL, OPT_MODEL},
    {"idx", required_argument, NULL, OPT_IDX},
    {"index", required_argument, NULL, OPT_INDEX},
    {"invert", optional_argument, NULL, OPT_INVERT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_predict_help(FILE *out)
{
    fputs("Usage: cnnc predict --checkpoint FILE|DIR [--invert[=WHEN]] IMAGE...\n"
          "       cnnc predict --checkpoint FILE|DIR [--invert[=WHEN]] --idx FILE --index I\n"
          "Prints the class a saved model predicts for each image, with the probability of\n"
          "each of its classes. A line says \"[resized from WxH]\" and \"[inverted]\"\n"
          "when that was done to its image.\n"
          "\n"
          "  --checkpoint FILE|DIR  model from 'cnnc train --save' or a training\n"
          "                       checkpoint, a PyTorch state_dict saved as safetensors,\n"
          "                       or a --checkpoint-dir folder: its newest (required)\n"
          "  --model FILE         the network of a file that records none, such as a\n"
          "                       PyTorch state_dict (default: the seed's network)\n"
          "  IMAGE                a PNG, JPEG or PGM (P2 or P5) file, told apart by its\n"
          "                       content, read as the model's input channels ask: for a\n"
          "                       grey model colour becomes grey (0.299 R + 0.587 G +\n"
          "                       0.114 B), for a colour model grey is repeated in red,\n"
          "                       green and blue; transparency is composited over black.\n"
          "                       Other sizes are scaled to the model's input (28x28 for\n"
          "                       Fashion-MNIST), each side on its own (the\n"
          "                       aspect ratio is not kept): a side that shrinks by area\n"
          "                       averaging, a side that grows by bilinear interpolation\n"
          "                       (the pixels of PIL's resize with BOX and BILINEAR). At\n"
          "                       most 32767 pixels a side, 33554432 in all, 16 MiB a file\n"
          "  --idx FILE           an IDX file of grey images of the model's size (.gz or\n"
          "                       not), such as t10k-images-idx3-ubyte.gz; grey models only\n"
          "  --index I            the sample of --idx to predict, from 0\n"
          "  --invert[=WHEN]      when to use 255 - v for every pixel (Fashion-MNIST has\n"
          "                       light objects on black): auto (the default) inverts an\n"
          "                       IMAGE whose border, its outermost pixels after scaling,\n"
          "                       has a mean of 128 or more (a light background), but no\n"
          "                       --idx sample and nothing for a colour model; yes (also\n"
          "                       --invert alone) inverts every input; no inverts none\n"
          "  -h, --help           show this help and exit\n",
          out);
}

/* --invert alone is --invert=yes. */
static int parse_invert(const char *arg, int *invert)
{
    if (!arg) {
        *invert = INVERT_YES;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (strcmp(arg, invert_names[i]) == 0) {
            *invert = i;
            return 0;
        }
    cli_usage_error("predict", "--invert=%s: WHEN is auto, yes or no", arg);
    return -1;
}

static int apply_option(predict_settings *s, int c, const char *arg)
{
    switch (c) {
    case OPT_CHECKPOINT: s->checkpoint = arg; return 0;
    case OPT_MODEL: s->model_path = arg; return 0;
    case OPT_IDX: s->idx = arg; return 0;
    case OPT_INDEX: return cli_parse_int("predict", "--index", arg, 0, INT_MAX, &s->index);
    case OPT_INVERT: return parse_invert(arg, &s->invert);
    default: return -1;
    }
}

/* "--invert no" (with a space) leaves "no" as an IMAGE: say how to write it. */
static int check_invert_words(const predict_settings *s)
{
    for (int i = 0; i < s->num_images; i++)
        for (int w = 0; w < 3; w++)
            if (strcmp(s->images[i], invert_names[w]) == 0 && access(s->images[i], F_OK) != 0)
                return cli_usage_error("predict", "IMAGE '%s' does not exist; to say when to "
                                       "invert, write --invert=%s", s->images[i],
                                       invert_names[w]);
    return CLI_OK;
}

static int check_settings(const predict_settings *s)
{
    if (cli_require_file("predict", "--checkpoint", s->checkpoint) != CLI_OK)
        return CLI_USAGE;
    if (s->model_path && cli_require_file("predict", "--model", s->model_path) != CLI_OK)
        return CLI_USAGE;
    if (s->idx && s->index < 0)
        return cli_usage_error("predict", "--idx needs --index I (which sample to predict)");
    if (!s->idx && s->index >= 0)
        return cli_usage_error("predict", "--index needs --idx FILE");
    if (!s->idx && s->num_images == 0)
        return cli_usage_error("predict", "nothing to predict: give IMAGE files or --idx FILE "
                                          "--index I");
    return check_invert_words(s);
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_predict_flags(int argc, char **argv, predict_settings *s, int *help)
{
    int c;
    while ((c = getopt_long(argc, argv, ":h", predict_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("predict", predict_options, argv, c);
        if (apply_option(s, c, optarg) != 0)
            return CLI_USAGE;
    }
    s->images = argv + optind;
    s->num_images = argc - optind;
    return check_settings(s);
}

/* ---------------------------------------------------------------- the model */

/* The model of --checkpoint, with names for its classes (the label numbers when the file
 * records none). The caller frees *model and *file. */
static int load_model(const predict_settings *s, cn_model **model, char **file)
{
    int rc = cli_load_model("predict", s->checkpoint, s->model_path, model, file);
    return rc == CLI_OK ? cli_name_classes(*model, NULL, NULL) : rc;
}

/* ---------------------------------------------------------------- inputs */

static int idx_sample(const predict_settings *s, const predict_shape *shape, const uint8_t *data,
                      const int dims[3], uint8_t *pixels, predict_input *item)
{
    if (dims[1] != shape->height || dims[2] != shape->width)
        return cli_failure("--idx: %s: images are %dx%d pixels; the model takes %dx%d", s->idx,
                           dims[2], dims[1], shape->width, shape->height);
    if (s->index >= dims[0])
        return cli_usage_error("predict", "--index %d: %s holds %d images (0..%d)", s->index,
                               s->idx, dims[0], dims[0] - 1);
    memcpy(pixels, data + (size_t)s->index * shape->size, shape->size);
    item->height = shape->height;
    item->width = shape->width;
    size_t len = strlen(s->idx) + 16;
    item->name = malloc(len);
    if (!item->name)
        return cli_failure("out of memory");
    snprintf(item->name, len, "%s[%d]", s->idx, s->index);
    return CLI_OK;
}

static int read_idx_sample(const predict_settings *s, const predict_shape *shape,
                           uint8_t *pixels, predict_input *item)
{
    if (shape->channels != 1)
        return cli_failure("--idx: %s: IDX files hold grey images; the model takes %d channels "
                           "(give it IMAGE files)", s->idx, shape->channels);
    cn_error err = {{0}};
    uint8_t *data = NULL;
    int dims[3] = {0, 0, 0};
    if (cn_idx_read(s->idx, 3, &data, dims, &err) != 0)
        return cli_library_error(&err, s->idx);
    int rc = idx_sample(s, shape, data, dims, pixels, item);
    free(data);
    return rc;
}

/* Inverts the image when WHEN says so; auto looks at grey image files only, never at IDX data
 * or colour. */
static void maybe_invert(int invert, int is_file, const predict_shape *shape, uint8_t *pixels,
                         predict_input *item)
{
    item->inverted = invert == INVERT_YES ||
                     (invert == INVERT_AUTO && is_file && shape->channels == 1 &&
                      cn_image_light_background(pixels, shape->height, shape->width));
    if (item->inverted)
        for (size_t i = 0; i < shape->size; i++) pixels[i] = (uint8_t)(255 - pixels[i]);
}

static int read_inputs(const predict_settings *s, const cn_model *model, predict_inputs *in)
{
    cn_error err = {{0}};
    predict_shape *shape = &in->shape;
    cn_model_input_shape(model, &shape->channels, &shape->height, &shape->width);
    shape->classes = cn_model_num_outputs(model);
    shape->size = (size_t)shape->channels * shape->height * shape->width;
    in->n = s->num_images + (s->idx != NULL);
    in->pixels = malloc((size_t)in->n * shape->size);
    in->items = calloc((size_t)in->n, sizeof *in->items);
    if (!in->pixels || !in->items)
        return cli_failure("out of memory for %d images", in->n);
    for (int i = 0; i < s->num_images; i++) {
        predict_input *item = &in->items[i];
        item->name = s->images[i];
        if (cn_image_read_resized(s->images[i], shape->channels, shape->height, shape->width,
                                  in->pixels + (size_t)i * shape->size, &item->height,
                                  &item->width, &err) != 0)
            return cli_library_error(&err, s->images[i]);
    }
    if (s->idx) {
        int rc = read_idx_sample(s, shape, in->pixels + (size_t)s->num_images * shape->size,
                                 &in->items[s->num_images]);
        in->idx_name_owned = in->items[s->num_images].name != NULL;
        if (rc != CLI_OK)
            return rc;
    }
    for (int i = 0; i < in->n; i++)
        maybe_invert(s->invert, i < s->num_images, shape, in->pixels + (size_t)i * shape->size,
                     &in->items[i]);
    return CLI_OK;
}

static void free_inputs(predict_inputs *in)
{
    if (in->items && in->idx_name_owned)
        free(in->items[in->n - 1].name);
    free(in->items);
    free(in->pixels);
}

/* ---------------------------------------------------------------- output */

static int best_class(const float *logp, int classes)
{
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (logp[c] > logp[best])
            best = c;
    return best;
}

/* "NAME: CLASS (P%)", then what was done to the image: " [resized from WxH, inverted]". */
static void print_prediction(const cn_model *model, const predict_shape *shape,
                             const predict_input *item, const float *logp)
{
    int best = best_class(logp, shape->classes);
    char note[64] = "";
    size_t at = 0;
    if (item->height != shape->height || item->width != shape->width)
        at = (size_t)snprintf(note, sizeof note, "resized from %dx%d", item->width,
                              item->height);
    if (item->inverted)
        snprintf(note + at, sizeof note - at, "%sinverted", at ? ", " : "");
    cli_print_line("%s: %s (%.2f%%)%s%s%s", item->name, cli_class_name(model, best),
                   100 * exp((double)logp[best]), *note ? " [" : "", note, *note ? "]" : "");
    int width = cli_class_name_width(model);
    for (int c = 0; c < shape->classes; c++)
        cli_print_line("  %-*s %.6f", width, cli_class_name(model, c), exp((double)logp[c]));
}

/* checkpoint names the model in a message about its outputs. */
static int predict_all(cn_model *model, const predict_inputs *in, const char *checkpoint)
{
    cn_error err = {{0}};
    const predict_shape *shape = &in->shape;
    float *logp = malloc((size_t)in->n * shape->classes * sizeof *logp);
    if (!logp)
        return cli_failure("out of memory for %d predictions", in->n);
    int rc = cn_model_predict(model, in->pixels, in->n, logp, &err);
    if (rc == 0)
        for (int i = 0; i < in->n; i++)
            print_prediction(model, shape, &in->items[i], logp + (size_t)i * shape->classes);
    free(logp);
    return rc == 0 ? CLI_OK : cli_library_error(&err, checkpoint);
}

static predict_settings predict_defaults(void)
{
    return (predict_settings){.index = -1, .invert = INVERT_AUTO};
}

int cli_predict_check_flags(int argc, char **argv)
{
    predict_settings s = predict_defaults();
    int help = 0;
    return parse_predict_flags(argc, argv, &s, &help);
}

int cli_predict(int argc, char **argv)
{
    predict_settings s = predict_defaults();
    int help = 0;
    int rc = parse_predict_flags(argc, argv, &s, &help);
    if (rc != CLI_OK || help) {
        if (help)
            cli_predict_help(stdout);
        return rc;
    }
    cn_model *model = NULL;
    predict_inputs in = {0};
    char *file = NULL;
    rc = cli_check_isa();
    if (rc == CLI_OK)
        rc = load_model(&s, &model, &file);
    if (rc == CLI_OK)
        rc = read_inputs(&s, model, &in);
    if (rc == CLI_OK)
        rc = predict_all(model, &in, file);
    free_inputs(&in);
    if (model)
        cn_model_free(model);
    free(file);
    return rc;
}
