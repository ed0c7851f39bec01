/* plot.c — `cnnc plot METRICS.jsonl`: reads the metrics file of `cnnc train --metrics-file` (one
 * JSON object per epoch) and draws the loss and accuracy curves with the library's
 * cn_plot_curves. A file it cannot use gets one message naming the file and line. It trains and
 * scores nothing. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

#define PLOT_LINE_MAX 65536 /* longest metrics line accepted, newline included */
#define PLOT_MAX_EPOCHS 1000000

typedef struct {
    const char *metrics;   /* the positional argument */
    const char *output;
    const char *title;     /* NULL: made from the epochs */
    int width, height;
} plot_settings;

enum { OPT_TITLE = 256, OPT_WIDTH, OPT_HEIGHT };

static const struct option plot_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"title", required_argument, NULL, OPT_TITLE},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"height", required_argument, NULL, OPT_HEIGHT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_plot_help(FILE *out)
{
    fprintf(out,
            "Usage: cnnc plot METRICS.jsonl [FLAGS]\n"
            "Draws train and test loss and test accuracy per epoch from the metrics file of\n"
            "'cnnc train --metrics-file' (one JSON object per line with epoch, train_loss,\n"
            "test_loss and test_accuracy) as a PNG.\n"
            "\n"
            "  -o, --output FILE    the picture (default: training_curves.png)\n"
            "  --title TEXT         the title (default: the epochs and the final accuracy)\n"
            "  --width N            pixels, 400..8192 (default: %d)\n"
            "  --height N           pixels, 300..8192 (default: %d)\n"
            "  -h, --help           show this help and exit\n",
            CN_PLOT_WIDTH, CN_PLOT_HEIGHT);
}

static int apply_option(plot_settings *s, int c, const char *arg)
{
    switch (c) {
    case 'o': s->output = arg; return 0;
    case OPT_TITLE: s->title = arg; return 0;
    case OPT_WIDTH: return cli_parse_int("plot", "--width", arg, 400, 8192, &s->width);
    case OPT_HEIGHT: return cli_parse_int("plot", "--height", arg, 300, 8192, &s->height);
    default: return -1;
    }
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_plot_flags(int argc, char **argv, plot_settings *s, int *help)
{
    int c;
    while ((c = getopt_long(argc, argv, ":ho:", plot_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("plot", plot_options, argv, c);
        if (apply_option(s, c, optarg) != 0)
            return CLI_USAGE;
    }
    if (optind >= argc)
        return cli_usage_error("plot", "missing the metrics file (from cnnc train "
                                       "--metrics-file)");
    s->metrics = argv[optind];
    if (s->output[0] == '\0')
        return cli_usage_error("plot", "--output: empty file name");
    return cli_no_positional("plot", argc, argv, optind + 1);
}

/* ------------------------------------------------------------------ reading */

/* A number, or NaN for null (a value the run could not compute); -1 when absent or not a
 * number. */
static int read_value(json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

/* Fills e from one parsed line; prints the message and returns -1 when the line is unusable. */
static int epoch_from_json(const char *path, long line, json_t *obj, cn_epoch_metrics *e)
{
    static const char *const keys[] = {"train_loss", "test_loss", "test_accuracy"};
    double *values[] = {&e->train_loss, &e->test_loss, &e->test_accuracy};
    if (!json_is_object(obj)) {
        cli_failure("%s:%ld: not a JSON object", path, line);
        return -1;
    }
    json_t *epoch = json_object_get(obj, "epoch");
    if (!json_is_integer(epoch) || json_integer_value(epoch) < 0 ||
        json_integer_value(epoch) > INT_MAX) {
        cli_failure("%s:%ld: \"epoch\" is missing or not a whole number >= 0", path, line);
        return -1;
    }
    e->epoch = (int)json_integer_value(epoch);
    for (int k = 0; k < 3; k++)
        if (read_value(obj, keys[k], values[k]) != 0) {
            cli_failure("%s:%ld: \"%s\" is missing or not a number", path, line, keys[k]);
            return -1;
        }
    /* a run with --val-samples: both or neither */
    e->has_validation = read_value(obj, "val_loss", &e->val_loss) == 0 &&
                        read_value(obj, "val_accuracy", &e->val_accuracy) == 0;
    e->learning_rate = 0; /* files from before it was written, and null, have no rate */
    if (json_object_get(obj, "learning_rate") && read_value(obj, "learning_rate",
                                                            &e->learning_rate) != 0) {
        cli_failure("%s:%ld: \"learning_rate\" is not a number", path, line);
        return -1;
    }
    return 0;
}

static int is_blank(const char *text)
{
    for (; *text; text++)
        if (*text != ' ' && *text != '\t' && *text != '\r' && *text != '\n') return 0;
    return 1;
}

/* Parses one line and appends its epoch; prints the message and returns -1 on failure. */
static int read_line(const char *path, long line, const char *text, cli_epoch_list *list)
{
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    if (!obj) {
        cli_failure("%s:%ld: not JSON: %s", path, line, jerr.text);
        return -1;
    }
    cn_epoch_metrics e = {0};
    int rc = epoch_from_json(path, line, obj, &e);
    json_decref(obj);
    if (rc != 0) return -1;
    if (list->count > 0 && e.epoch <= list->epochs[list->count - 1].epoch) {
        cli_failure("%s:%ld: epoch %d follows epoch %d (epochs must increase; does the file "
                    "hold more than one run?)", path, line, e.epoch,
                    list->epochs[list->count - 1].epoch);
        return -1;
    }
    if (list->count >= PLOT_MAX_EPOCHS || cli_epoch_list_append(list, &e) != 0) {
        cli_failure("%s:%ld: too many epochs", path, line);
        return -1;
    }
    return 0;
}

/* Reads every line of f; returns CLI_OK or CLI_FAILURE after printing the message. */
static int read_lines(const char *path, FILE *f, char *buf, cli_epoch_list *list)
{
    long line = 0;
    while (fgets(buf, PLOT_LINE_MAX, f)) {
        line++;
        size_t len = strlen(buf);
        if (len == PLOT_LINE_MAX - 1 && buf[len - 1] != '\n')
            return cli_failure("%s:%ld: line longer than %d bytes: not a metrics file", path,
                               line, PLOT_LINE_MAX - 2);
        if (is_blank(buf)) continue;
        if (read_line(path, line, buf, list) != 0) return CLI_FAILURE;
    }
    if (ferror(f)) return cli_failure("%s: %s", path, strerror(errno));
    if (list->count == 0)
        return cli_failure("%s: no epochs (expected one JSON object per line, as cnnc train "
                           "--metrics-file writes)", path);
    return CLI_OK;
}

static int read_metrics(const char *path, cli_epoch_list *list)
{
    FILE *f = cli_open_input(NULL, path);
    if (!f) return CLI_FAILURE;
    char *buf = malloc(PLOT_LINE_MAX);
    int rc = buf ? read_lines(path, f, buf, list) : cli_failure("%s: out of memory", path);
    free(buf);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------ the command */

static int draw(const plot_settings *s, const cli_epoch_list *list)
{
    char title[256];
    if (s->title) snprintf(title, sizeof title, "%s", s->title);
    else cli_curves_title(title, sizeof title, list->epochs, list->count);
    cn_error err = {{0}};
    if (cn_plot_curves(s->output, list->epochs, list->count, s->width, s->height, title,
                       &err) != 0)
        return cli_library_error(&err, s->output);
    cli_print_line("Plotted %d epoch%s from %s to %s", list->count, list->count == 1 ? "" : "s",
                   s->metrics, s->output);
    return CLI_OK;
}

static plot_settings plot_defaults(void)
{
    return (plot_settings){NULL, "training_curves.png", NULL, CN_PLOT_WIDTH, CN_PLOT_HEIGHT};
}

int cli_plot_check_flags(int argc, char **argv)
{
    plot_settings s = plot_defaults();
    int help = 0;
    return parse_plot_flags(argc, argv, &s, &help);
}

int cli_plot(int argc, char **argv)
{
    plot_settings s = plot_defaults();
    int help = 0;
    int rc = parse_plot_flags(argc, argv, &s, &help);
    if (rc != CLI_OK || help) {
        if (help) cli_plot_help(stdout);
        return rc;
    }
    rc = cli_check_output_path("plot", "--output", s.output, s.metrics, "the metrics file");
    if (rc != CLI_OK) return rc;
    cli_epoch_list list = {NULL, 0, 0};
    rc = read_metrics(s.metrics, &list);
    if (rc == CLI_OK) rc = draw(&s, &list);
    free(list.epochs);
    return rc;
}
