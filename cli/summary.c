/* summary.c — `cnnc summary`: the network of the built-in seed, of a model file (--model) or of a
 * checkpoint (--checkpoint) as a table, one row per layer: its name, kind, output shape,
 * trainable parameters and forward MFLOP per sample, then the totals (parameters and their size
 * as fp32, forward and forward+backward MFLOP per sample). It reads no data, trains nothing and
 * writes no file; the figures are the library's (cn_model_layer_info). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define SUMMARY_WIDTH 100 /* the most columns a table line takes */
#define SUMMARY_GAP "  "  /* between two columns */

typedef struct {
    const char *model_path; /* NULL: the seed's network */
    const char *checkpoint; /* NULL: none */
} summary_settings;

enum { OPT_MODEL = 256, OPT_CHECKPOINT };

static const struct option summary_options[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_summary_help(FILE *out)
{
    fputs("Usage: cnnc summary [--model FILE | --checkpoint FILE|DIR]\n"
          "Prints a network layer by layer: name, kind, output shape (CxHxW, or N when\n"
          "flat), trainable parameters and forward MFLOP per sample; then the total\n"
          "parameters, their size as fp32, and the forward and forward+backward MFLOP\n"
          "per sample.\n"
          "\n"
          "  --model FILE         model file (models/*.model); with --checkpoint, the\n"
          "                       network of a file that records none (default: the\n"
          "                       built-in seed network, models/fashion_mnist.model)\n"
          "  --checkpoint FILE|DIR  the network a saved model or training checkpoint\n"
          "                       records, or a --checkpoint-dir folder's newest\n"
          "                       (default: none)\n"
          "  -h, --help           show this help and exit\n",
          out);
}

static int apply_option(summary_settings *s, int c, const char *arg)
{
    switch (c) {
    case OPT_MODEL: s->model_path = arg; return 0;
    case OPT_CHECKPOINT: s->checkpoint = arg; return 0;
    default: return -1;
    }
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_summary_flags(int argc, char **argv, summary_settings *s, int *help)
{
    int c;
    while ((c = getopt_long(argc, argv, ":h", summary_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("summary", summary_options, argv, c);
        if (apply_option(s, c, optarg) != 0)
            return CLI_USAGE;
    }
    int rc = cli_no_positional("summary", argc, argv, optind);
    if (rc == CLI_OK && s->model_path)
        rc = cli_require_file("summary", "--model", s->model_path);
    if (rc == CLI_OK && s->checkpoint)
        rc = cli_require_file("summary", "--checkpoint", s->checkpoint);
    return rc;
}

/* ---------------------------------------------------------------- the table */

enum { COL_INDEX, COL_NAME, COL_KIND, COL_SHAPE, COL_PARAMS, COL_MFLOP, NUM_COLS };
static const char *const col_titles[NUM_COLS] = {"#", "Layer", "Kind", "Output", "Params",
                                                  "Fwd MFLOP"};
static const int col_right[NUM_COLS] = {1, 0, 0, 0, 1, 1}; /* right-aligned columns */

typedef struct {
    char cell[NUM_COLS][48];
} summary_row;

/* n with a comma between groups of three digits: "21,900". */
static void group_digits(char *buf, size_t size, size_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%zu", n), at = 0;
    for (int i = 0; i < len && (size_t)at + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = '\0';
}

/* flops as MFLOP with three decimals; "<0.001" for a count that would show as zero, "-" for
 * none. */
static void format_mflop(char *buf, size_t size, double flops)
{
    if (flops == 0)
        snprintf(buf, size, "-");
    else if (flops > 0 && flops < 500)
        snprintf(buf, size, "<0.001");
    else
        snprintf(buf, size, "%.3f", flops / 1e6);
}

static void fill_row(summary_row *r, int index, const cn_layer_info *info)
{
    snprintf(r->cell[COL_INDEX], sizeof r->cell[0], "%d", index);
    snprintf(r->cell[COL_NAME], sizeof r->cell[0], "%s", info->name);
    snprintf(r->cell[COL_KIND], sizeof r->cell[0], "%s", info->kind);
    if (info->flat)
        snprintf(r->cell[COL_SHAPE], sizeof r->cell[0], "%d", info->channels);
    else
        snprintf(r->cell[COL_SHAPE], sizeof r->cell[0], "%dx%dx%d", info->channels,
                 info->height, info->width);
    group_digits(r->cell[COL_PARAMS], sizeof r->cell[0], info->params);
    format_mflop(r->cell[COL_MFLOP], sizeof r->cell[0], info->forward_flops);
}

/* Column widths from the titles and cells; the name column gives way when the line would be
 * wider than SUMMARY_WIDTH. Returns the width of a line. */
static int column_widths(const summary_row *rows, int n, int *width)
{
    int total = 0;
    for (int c = 0; c < NUM_COLS; c++) {
        width[c] = (int)strlen(col_titles[c]);
        for (int i = 0; i < n; i++)
            if ((int)strlen(rows[i].cell[c]) > width[c]) width[c] = (int)strlen(rows[i].cell[c]);
        total += width[c] + (c > 0 ? (int)strlen(SUMMARY_GAP) : 0);
    }
    int over = total - SUMMARY_WIDTH, name_min = (int)strlen(col_titles[COL_NAME]) + 2;
    if (over > 0 && width[COL_NAME] - over >= name_min) {
        width[COL_NAME] -= over;
        total -= over;
    }
    return total;
}

/* One table line of cells (a name too long for its column ends in ".."). */
static void print_cells(const char *const *cells, const int *width)
{
    char line[SUMMARY_WIDTH * 4], name[64];
    int at = 0;
    for (int c = 0; c < NUM_COLS; c++) {
        const char *text = cells[c];
        if ((int)strlen(text) > width[c]) {
            snprintf(name, sizeof name, "%.*s..", width[c] - 2, text);
            text = name;
        }
        at += snprintf(line + at, sizeof line - (size_t)at, "%s%*s", c > 0 ? SUMMARY_GAP : "",
                       col_right[c] ? width[c] : -width[c], text);
    }
    while (at > 0 && line[at - 1] == ' ') line[--at] = '\0'; /* no trailing blanks */
    cli_print_line("%s", line);
}

static void print_rule(char c, int width)
{
    char line[SUMMARY_WIDTH * 4];
    memset(line, c, (size_t)width);
    line[width] = '\0';
    puts(line);
}

/* ---------------------------------------------------------------- the model */

/* The totals under the table. */
static void print_totals(size_t params, double forward, double backward)
{
    char count[32], f[32], fb[32];
    group_digits(count, sizeof count, params);
    format_mflop(f, sizeof f, forward);
    format_mflop(fb, sizeof fb, forward + backward);
    printf("Total parameters:  %s (%.1f KiB as fp32)\n", count, (double)params * 4 / 1024);
    printf("Forward:           %s MFLOP per sample\n", f);
    printf("Forward+backward:  %s MFLOP per sample\n", fb);
}

/* Prints the summary of model, which came from source. */
static int print_summary(const cn_model *model, const char *source)
{
    int n = cn_model_num_layers(model), c, h, w, width[NUM_COLS];
    summary_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return cli_failure("out of memory for a table of %d layers", n);
    size_t params = 0;
    double forward = 0, backward = 0;
    for (int i = 0; i < n; i++) {
        cn_layer_info info;
        if (cn_model_layer_info(model, i, &info) != 0) {
            free(rows);
            return cli_failure("%s: layer %d cannot be described", source, i);
        }
        fill_row(&rows[i], i, &info);
        params += info.params;
        forward += info.forward_flops, backward += info.backward_flops;
    }
    int line = column_widths(rows, n, width);
    cn_model_input_shape(model, &c, &h, &w);
    cli_print_line("Model: %s", source);
    printf("Input: %dx%dx%d (channels x height x width), %d classes\n", c, h, w,
           cn_model_num_outputs(model));
    print_rule('=', line);
    print_cells(col_titles, width);
    print_rule('-', line);
    for (int i = 0; i < n; i++) {
        const char *cells[NUM_COLS];
        for (int k = 0; k < NUM_COLS; k++) cells[k] = rows[i].cell[k];
        print_cells(cells, width);
    }
    print_rule('=', line);
    print_totals(params, forward, backward);
    free(rows);
    return CLI_OK;
}

/* A checkpoint's network (with --model's for a file that records none) must be --model's
 * network when both are given. */
static int check_same_model(const summary_settings *s, const cn_model *model, const char *file)
{
    cn_model *given = NULL;
    if (!s->model_path) return CLI_OK;
    if (cli_read_model(s->model_path, &given) != CLI_OK) return CLI_FAILURE;
    int same = strcmp(cn_model_text(given), cn_model_text(model)) == 0;
    cn_model_free(given);
    return same ? CLI_OK : cli_usage_error("summary", "--model %s is not the network that the "
                                           "checkpoint %s records; leave --model out",
                                           s->model_path, file);
}

static int summarize_checkpoint(const summary_settings *s)
{
    cn_model *model = NULL;
    char *file = NULL;
    int rc = cli_load_model_or(s->checkpoint, s->model_path, &model, &file);
    if (rc == CLI_OK) rc = check_same_model(s, model, file);
    if (rc == CLI_OK) rc = print_summary(model, file);
    cn_model_free(model);
    free(file);
    return rc;
}

static int summarize(const summary_settings *s)
{
    if (s->checkpoint) return summarize_checkpoint(s);
    cn_model *model = NULL;
    int rc = cli_read_model(s->model_path, &model);
    if (rc == CLI_OK)
        rc = print_summary(model, s->model_path ? s->model_path
                                                : "the built-in seed network (Fashion-MNIST CNN)");
    cn_model_free(model);
    return rc;
}

int cli_summary_check_flags(int argc, char **argv)
{
    summary_settings s = {0};
    int help = 0;
    return parse_summary_flags(argc, argv, &s, &help);
}

int cli_summary(int argc, char **argv)
{
    summary_settings s = {0};
    int help = 0;
    int rc = parse_summary_flags(argc, argv, &s, &help);
    if (rc != CLI_OK || help) {
        if (help) cli_summary_help(stdout);
        return rc;
    }
    return summarize(&s);
}
