/* predict.c — `cnnc predict`: the class, and the probability of each of the ten classes, that a
 * saved model gives to 28x28 grey images — PNG or PGM files, or one sample of an IDX file. The
 * model and every input are read and checked before anything is printed. It trains nothing,
 * writes no files, and does not resize or centre images (other sizes are refused). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define SIDE 28
#define PIXELS (SIDE * SIDE)

typedef struct {
    const char *checkpoint; /* required */
    const char *idx;        /* IDX images file, or NULL */
    int index;              /* sample of idx; -1 when not given */
    int invert;             /* 255 - v for every pixel */
    char **images;          /* image files */
    int num_images;
} predict_settings;

/* The inputs, read: n images of PIXELS bytes and a name each. */
typedef struct {
    int n;
    uint8_t *pixels;
    char **names; /* point into argv, except the IDX sample's (malloc'd, the last) */
    int idx_name_owned;
} predict_inputs;

enum {
    OPT_CHECKPOINT = 256,
    OPT_IDX,
    OPT_INDEX,
    OPT_INVERT,
};

static const struct option predict_options[] = {
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"idx", required_argument, NULL, OPT_IDX},
    {"index", required_argument, NULL, OPT_INDEX},
    {"invert", no_argument, NULL, OPT_INVERT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_predict_help(FILE *out)
{
    fputs("Usage: cnnc predict --checkpoint FILE [--invert] IMAGE...\n"
          "       cnnc predict --checkpoint FILE [--invert] --idx FILE --index I\n"
          "Prints the class a saved model predicts for each image, with the probability of\n"
          "each of the ten classes.\n"
          "\n"
          "  --checkpoint FILE    model from 'cnnc train --save' or --checkpoint-dir, or a\n"
          "                       PyTorch state_dict saved as safetensors (required)\n"
          "  IMAGE                a 28x28 PNG or PGM (P2 or P5) file, told apart by content;\n"
          "                       colour becomes grey (0.299 R + 0.587 G + 0.114 B),\n"
          "                       transparency is composited over black, other sizes are\n"
          "                       refused (nothing is resized)\n"
          "  --idx FILE           an IDX file of 28x28 images (.gz or not), such as\n"
          "                       t10k-images-idx3-ubyte.gz\n"
          "  --index I            the sample of --idx to predict, from 0\n"
          "  --invert             use 255 - v for every pixel: for dark objects on a light\n"
          "                       background (Fashion-MNIST has light objects on black)\n"
          "  -h, --help           show this help and exit\n",
          out);
}

static int apply_option(predict_settings *s, int c, const char *arg)
{
    switch (c) {
    case OPT_CHECKPOINT: s->checkpoint = arg; return 0;
    case OPT_IDX: s->idx = arg; return 0;
    case OPT_INDEX: return cli_parse_int("predict", "--index", arg, 0, INT_MAX, &s->index);
    case OPT_INVERT: s->invert = 1; return 0;
    default: return -1;
    }
}

static int check_settings(const predict_settings *s)
{
    if (cli_require_file("predict", "--checkpoint", s->checkpoint) != CLI_OK)
        return CLI_USAGE;
    if (s->idx && s->index < 0)
        return cli_usage_error("predict", "--idx needs --index I (which sample to predict)");
    if (!s->idx && s->index >= 0)
        return cli_usage_error("predict", "--index needs --idx FILE");
    if (!s->idx && s->num_images == 0)
        return cli_usage_error("predict", "nothing to predict: give IMAGE files or --idx FILE "
                                          "--index I");
    return CLI_OK;
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

/* ---------------------------------------------------------------- inputs */

static int read_idx_sample(const predict_settings *s, uint8_t *pixels, char **name)
{
    cn_error err = {{0}};
    uint8_t *data = NULL;
    int dims[3] = {0, 0, 0};
    if (cn_idx_read(s->idx, 3, &data, dims, &err) != 0)
        return cli_library_error(&err, s->idx);
    int rc = CLI_OK;
    if (dims[1] != SIDE || dims[2] != SIDE)
        rc = cli_failure("--idx: %s: images are %dx%d pixels; the model takes %dx%d", s->idx,
                         dims[2], dims[1], SIDE, SIDE);
    else if (s->index >= dims[0])
        rc = cli_usage_error("predict", "--index %d: %s holds %d images (0..%d)", s->index,
                             s->idx, dims[0], dims[0] - 1);
    if (rc == CLI_OK) {
        memcpy(pixels, data + (size_t)s->index * PIXELS, PIXELS);
        size_t len = strlen(s->idx) + 16;
        *name = malloc(len);
        if (*name)
            snprintf(*name, len, "%s[%d]", s->idx, s->index);
        else
            rc = cli_failure("out of memory");
    }
    free(data);
    return rc;
}

static int read_inputs(const predict_settings *s, predict_inputs *in)
{
    cn_error err = {{0}};
    in->n = s->num_images + (s->idx != NULL);
    in->pixels = malloc((size_t)in->n * PIXELS);
    in->names = calloc((size_t)in->n, sizeof *in->names);
    if (!in->pixels || !in->names)
        return cli_failure("out of memory for %d images", in->n);
    for (int i = 0; i < s->num_images; i++) {
        in->names[i] = s->images[i];
        if (cn_image_read_grey(s->images[i], SIDE, SIDE, in->pixels + (size_t)i * PIXELS,
                               &err) != 0)
            return cli_library_error(&err, s->images[i]);
    }
    if (s->idx) {
        int rc = read_idx_sample(s, in->pixels + (size_t)s->num_images * PIXELS,
                                 &in->names[s->num_images]);
        if (rc != CLI_OK)
            return rc;
        in->idx_name_owned = 1;
    }
    if (s->invert)
        for (size_t i = 0; i < (size_t)in->n * PIXELS; i++) in->pixels[i] = 255 - in->pixels[i];
    return CLI_OK;
}

static void free_inputs(predict_inputs *in)
{
    if (in->names && in->idx_name_owned)
        free(in->names[in->n - 1]);
    free(in->names);
    free(in->pixels);
}

/* ---------------------------------------------------------------- output */

static int best_class(const float *logp)
{
    int best = 0;
    for (int c = 1; c < CN_NUM_CLASSES; c++)
        if (logp[c] > logp[best])
            best = c;
    return best;
}

static void print_prediction(const char *name, const float *logp)
{
    int best = best_class(logp);
    printf("%s: %s (%.2f%%)\n", name, cn_class_names[best], 100 * exp((double)logp[best]));
    for (int c = 0; c < CN_NUM_CLASSES; c++)
        printf("  %-12s %.6f\n", cn_class_names[c], exp((double)logp[c]));
}

/* checkpoint names the model in a message about its outputs. */
static int predict_all(cn_model *model, const predict_inputs *in, const char *checkpoint)
{
    cn_error err = {{0}};
    float *logp = malloc((size_t)in->n * CN_NUM_CLASSES * sizeof *logp);
    if (!logp)
        return cli_failure("out of memory for %d predictions", in->n);
    int rc = cn_model_predict(model, in->pixels, in->n, logp, &err);
    if (rc == 0)
        for (int i = 0; i < in->n; i++)
            print_prediction(in->names[i], logp + (size_t)i * CN_NUM_CLASSES);
    free(logp);
    return rc == 0 ? CLI_OK : cli_library_error(&err, checkpoint);
}

static predict_settings predict_defaults(void)
{
    return (predict_settings){.index = -1};
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
    rc = cli_check_isa();
    if (rc == CLI_OK)
        rc = cli_load_model(s.checkpoint, &model);
    if (rc == CLI_OK)
        rc = read_inputs(&s, &in);
    if (rc == CLI_OK)
        rc = predict_all(model, &in, s.checkpoint);
    free_inputs(&in);
    if (model)
        cn_model_free(model);
    return rc;
}
