/* eval.c — `cnnc eval`: loads a saved model (safetensors) and scores it on the test split of a
 * dataset (any format cn_dataset_read takes) in evaluation mode, printing the test loss, "Accuracy=NN.NN%" and each class's
 * accuracy (eval_report.c), and with --confusion the confusion-matrix picture. It trains nothing
 * and writes no other file. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval_report.h"

typedef struct {
    const char *checkpoint; /* required */
    const char *model_path; /* --model: the network of a file that records none */
    cli_data data;          /* --data-dir, --data-format, --classes, --resize, --test-percent */
    int test_samples;       /* 0: all */
    int threads;
    int threads_given;      /* --threads was on the command line */
    int batch_size;
    const char *confusion;  /* NULL: no picture */
} eval_settings;

enum {
    OPT_CHECKPOINT = 256,
    OPT_MODEL,
    OPT_DATA_DIR,
    OPT_TEST_SAMPLES,
    OPT_THREADS,
    OPT_BATCH_SIZE,
    OPT_CONFUSION,
    OPT_DATA_FORMAT,
    OPT_CLASSES,
    OPT_RESIZE,
    OPT_TEST_PERCENT,
};

static const struct option eval_options[] = {
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"model", required_argument, NULL, OPT_MODEL},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"data-format", required_argument, NULL, OPT_DATA_FORMAT},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"resize", no_argument, NULL, OPT_RESIZE},
    {"test-percent", required_argument, NULL, OPT_TEST_PERCENT},
    {"test-samples", required_argument, NULL, OPT_TEST_SAMPLES},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"confusion", required_argument, NULL, OPT_CONFUSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_eval_help(FILE *out)
{
    fprintf(out,
            "Usage: cnnc eval --checkpoint FILE|DIR [FLAGS]\n"
            "Scores a saved model on the test set; prints the test loss, Accuracy=NN.NN%%\n"
            "and the accuracy of each class.\n"
            "\n"
            "  --checkpoint FILE|DIR  model from 'cnnc train --save' or a training\n"
            "                       checkpoint, a PyTorch state_dict saved as safetensors,\n"
            "                       or a --checkpoint-dir folder: its newest (required)\n"
            "  --model FILE         the network of a file that records none, such as a\n"
            "                       PyTorch state_dict (default: the seed's network)\n"
            "  --data-dir DIR       dataset folder; its test split is scored\n"
            "                       (default: %s)\n"
            "  --data-format F      auto, idx, cifar10 or folder (default: auto: from the\n"
            "                       files present; see cnnc train --help)\n"
            "  --classes FILE       class names, one per line (default: the data's)\n"
            "  --resize             scale folder images to the model's height and width,\n"
            "                       as cnnc train --resize (default: every image must have\n"
            "                       the model's size)\n"
            "  --test-percent P     score the test share of a folder of class folders, as\n"
            "                       cnnc train --test-percent P split it (default: none)\n"
            "  --test-samples N     score only the first N test images, 0 = all (default: 0)\n"
            "  --threads N          the most worker threads, 1..1024, one a batch\n"
            "                       (default: the CPUs this process may use, here %d)\n"
            "  --batch-size N       the most images per forward pass, 1..65536 (default: 128)\n"
            "  --confusion FILE     PNG of the confusion matrix, actual against predicted\n"
            "                       class (default: none)\n"
            "  -h, --help           show this help and exit\n",
            CLI_DEFAULT_DATA_DIR, cli_default_threads());
}

static int apply_option(eval_settings *s, int c, const char *arg)
{
    switch (c) {
    case OPT_CHECKPOINT: s->checkpoint = arg; return 0;
    case OPT_MODEL: s->model_path = arg; return 0;
    case OPT_DATA_DIR: s->data.dir = arg; return 0;
    case OPT_DATA_FORMAT:
        return cli_parse_data_format("eval", arg, &s->data.format) == CLI_OK ? 0 : -1;
    case OPT_CLASSES: s->data.classes = arg; return 0;
    case OPT_RESIZE: s->data.resize = 1; return 0;
    case OPT_TEST_PERCENT:
        return cli_parse_int("eval", "--test-percent", arg, 1, 99, &s->data.test_percent);
    case OPT_TEST_SAMPLES:
        return cli_parse_int("eval", "--test-samples", arg, 0, INT_MAX, &s->test_samples);
    case OPT_THREADS:
        s->threads_given = 1;
        return cli_parse_int("eval", "--threads", arg, 1, CLI_MAX_THREADS, &s->threads);
    case OPT_BATCH_SIZE:
        return cli_parse_int("eval", "--batch-size", arg, 1, 65536, &s->batch_size);
    case OPT_CONFUSION:
        s->confusion = (arg[0] == '\0' || strcmp(arg, "none") == 0) ? NULL : arg;
        return 0;
    default: return -1;
    }
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_eval_flags(int argc, char **argv, eval_settings *s, int *help)
{
    int c;
    while ((c = getopt_long(argc, argv, ":h", eval_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("eval", eval_options, argv, c);
        if (apply_option(s, c, optarg) != 0)
            return CLI_USAGE;
    }
    int rc = cli_no_positional("eval", argc, argv, optind);
    if (rc == CLI_OK)
        rc = cli_require_file("eval", "--checkpoint", s->checkpoint);
    if (rc == CLI_OK && s->model_path)
        rc = cli_require_file("eval", "--model", s->model_path);
    return rc;
}

static int score(const eval_settings *s, cn_model *model, const cn_dataset *test)
{
    cn_error err = {{0}};
    cn_train_config cfg = {
        .batch_size = s->batch_size,
        .num_replicas = 1,
        .threads = s->threads,
        .learning_rate = 0.01f,
        .momentum = 0.5f,
        .seed = 1,
    };
    cn_trainer *trainer = cn_trainer_create(model, &cfg, &err);
    if (!trainer)
        return cli_library_error(&err, NULL);
    if (s->threads_given) {
        int batches = test->count / s->batch_size + (test->count % s->batch_size != 0);
        cli_threads_note(s->threads, cn_trainer_threads(trainer, 0, test->count),
                         "%d test images in %d batch%s of up to %d", test->count, batches,
                         batches == 1 ? "" : "es", s->batch_size);
    }
    uint8_t *predictions = malloc((size_t)test->count);
    if (!predictions) {
        cn_trainer_free(trainer);
        return cli_failure("out of memory for %d predictions", test->count);
    }
    double loss = 0, accuracy = 0;
    double start = cli_seconds();
    int rc = cn_evaluate(trainer, test, test->count, &loss, &accuracy, predictions, &err);
    double seconds = cli_seconds() - start;
    cn_trainer_free(trainer);
    if (rc != 0) {
        free(predictions);
        return cli_library_error(&err, s->checkpoint);
    }
    cli_print_line("Checkpoint %s: %d test images in %.2f s", s->checkpoint, test->count,
                   seconds);
    printf("Test loss=%.4f\n", loss);
    printf("Accuracy=%.2f%%\n", accuracy);
    int classes = cn_model_num_outputs(model);
    const char **names = malloc((size_t)classes * sizeof *names);
    for (int c = 0; names && c < classes; c++) names[c] = cli_class_name(model, c);
    rc = names ? report_classes(test, predictions, classes, accuracy, s->checkpoint,
                                s->confusion, names)
               : cli_failure("out of memory");
    free(names);
    free(predictions);
    return rc;
}

/* The test split, read as the model's input asks and checked against the model, which
 * takes its class names. */
static int load_test_data(const eval_settings *s, cn_model *model, cn_dataset *test)
{
    cli_data data = s->data;
    data.threads = s->threads;
    int rc = cli_load_dataset(test, &data, model, "test", s->test_samples);
    if (rc == CLI_OK)
        rc = cli_check_model_data(model, s->checkpoint, test, s->data.dir);
    if (rc == CLI_OK)
        rc = cli_name_classes(model, test, NULL); /* the names it was trained with win */
    return rc;
}

static eval_settings eval_defaults(void)
{
    return (eval_settings){
        .data = {.dir = CLI_DEFAULT_DATA_DIR},
        .threads = cli_default_threads(),
        .batch_size = 128,
    };
}

int cli_eval_check_flags(int argc, char **argv)
{
    eval_settings s = eval_defaults();
    int help = 0;
    return parse_eval_flags(argc, argv, &s, &help);
}

int cli_eval(int argc, char **argv)
{
    eval_settings s = eval_defaults();
    int help = 0;
    int rc = parse_eval_flags(argc, argv, &s, &help);
    if (rc != CLI_OK || help) {
        if (help)
            cli_eval_help(stdout);
        return rc;
    }
    cn_model *model = NULL;
    cn_dataset test = {0};
    char *file = NULL;
    rc = cli_check_isa();
    if (rc == CLI_OK)
        rc = cli_load_model("eval", s.checkpoint, s.model_path, &model, &file);
    s.checkpoint = file;
    if (rc == CLI_OK && s.confusion)
        rc = cli_check_output_path("eval", "--confusion", s.confusion, file, "the checkpoint");
    if (rc == CLI_OK)
        rc = load_test_data(&s, model, &test);
    if (rc == CLI_OK)
        rc = score(&s, model, &test);
    cn_dataset_free(&test);
    if (model)
        cn_model_free(model);
    free(file);
    return rc;
}
