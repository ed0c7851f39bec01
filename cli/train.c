/* train.c — `cnnc train`: the seed's Fashion-MNIST job. Parses and checks every flag, loads the
 * data and checks the outputs (each a file of its own, of a kind it may be) before any work,
 * then trains epoch by epoch with a test pass (and a validation pass with --val-samples, whose
 * best epoch --keep-best keeps) after each, shows progress, writes a metrics line
 * per epoch, at the end saves the model and draws the result picture and the training curves.
 * The numerics live in the library; this file only drives them and reports. Reporting (epoch
 * lines, metrics file) is in train_report.c, the progress bar and plain lines in progress.c,
 * the curves in train_curves.c, checkpoints and resume in train_checkpoint.c, SIGINT/SIGTERM
 * and a closed stdout in train_signals.c, what an output file may be in outputs.c. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train.h"
#include "train_dist.h"

enum {
    OPT_DATA_DIR = 256,
    OPT_BATCH_SIZE,
    OPT_LEARNING_RATE,
    OPT_MOMENTUM,
    OPT_LABEL_SMOOTHING,
    OPT_NUM_EPOCHS,
    OPT_NUM_CORES,
    OPT_THREADS,
    OPT_LOG_STEPS,
    OPT_METRICS_DEBUG,
    OPT_SEED,
    OPT_PRECISION,
    OPT_TRAIN_SAMPLES,
    OPT_TEST_SAMPLES,
    OPT_SAVE,
    OPT_RESULT_IMAGE,
    OPT_METRICS_FILE,
    OPT_CHECKPOINT_DIR,
    OPT_SAVE_EVERY,
    OPT_KEEP,
    OPT_RESUME,
    OPT_PLOT,
    OPT_REPLICAS,
    OPT_MPI_TIMEOUT,
    OPT_MODEL,
    OPT_DATA_FORMAT,
    OPT_CLASSES,
    OPT_VAL_SAMPLES,
    OPT_KEEP_BEST,
    OPT_RESIZE,
    OPT_TEST_PERCENT,
    OPT_AUGMENT,
    OPT_OPTIMIZER,
    OPT_NESTEROV,
    OPT_WEIGHT_DECAY,
    OPT_LR_SCHEDULE,
    OPT_WARMUP_EPOCHS,
    OPT_LR_STEP_EPOCHS,
    OPT_LR_GAMMA,
};

static const struct option train_options[] = {
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"data-format", required_argument, NULL, OPT_DATA_FORMAT},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"resize", no_argument, NULL, OPT_RESIZE},
    {"test-percent", required_argument, NULL, OPT_TEST_PERCENT},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"learning-rate", required_argument, NULL, OPT_LEARNING_RATE},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"label-smoothing", required_argument, NULL, OPT_LABEL_SMOOTHING},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"nesterov", no_argument, NULL, OPT_NESTEROV},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"warmup-epochs", required_argument, NULL, OPT_WARMUP_EPOCHS},
    {"lr-step-epochs", required_argument, NULL, OPT_LR_STEP_EPOCHS},
    {"lr-gamma", required_argument, NULL, OPT_LR_GAMMA},
    {"num-epochs", required_argument, NULL, OPT_NUM_EPOCHS},
    {"num-cores", required_argument, NULL, OPT_NUM_CORES},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"log-steps", required_argument, NULL, OPT_LOG_STEPS},
    {"metrics-debug", no_argument, NULL, OPT_METRICS_DEBUG},
    {"seed", required_argument, NULL, OPT_SEED},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"train-samples", required_argument, NULL, OPT_TRAIN_SAMPLES},
    {"test-samples", required_argument, NULL, OPT_TEST_SAMPLES},
    {"val-samples", required_argument, NULL, OPT_VAL_SAMPLES},
    {"save", required_argument, NULL, OPT_SAVE},
    {"result-image", required_argument, NULL, OPT_RESULT_IMAGE},
    {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
    {"checkpoint-dir", required_argument, NULL, OPT_CHECKPOINT_DIR},
    {"save-every", required_argument, NULL, OPT_SAVE_EVERY},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"keep-best", no_argument, NULL, OPT_KEEP_BEST},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"mpi-timeout", required_argument, NULL, OPT_MPI_TIMEOUT},
    {"model", required_argument, NULL, OPT_MODEL},
    {"augment", required_argument, NULL, OPT_AUGMENT},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void cli_train_help(FILE *out)
{
    fprintf(out,
            "Usage: cnnc train [FLAGS]\n"
            "Trains a CNN (the seed's Fashion-MNIST network unless --model says otherwise)\n"
            "with data-parallel replicas, tests it after every epoch, then saves the model\n"
            "(--save) and a picture of 25 test predictions.\n"
            "\n"
            "  --data-dir DIR       the dataset's folder (default: %s,\n"
            "                       from Debian's package dataset-fashion-mnist)\n"
            "  --data-format F      auto, idx (train-* and t10k-* IDX files, .gz or not),\n"
            "                       cifar10 (data_batch_N.bin, test_batch.bin) or folder\n"
            "                       (train/CLASS/IMAGE, test/CLASS/IMAGE, PNG or JPEG);\n"
            "                       auto: from the files present (default: auto)\n"
            "  --classes FILE       class names, one per line (default: the format's, else\n"
            "                       DIR/classes.txt, else Fashion-MNIST's for its labels,\n"
            "                       else the label numbers)\n"
            "  --resize             scale folder images to the model's height and width\n"
            "                       (as predict does; no aspect ratio kept); defines the\n"
            "                       math (default: every image must have the model's size)\n"
            "  --test-percent P     a folder of class folders (CLASS/IMAGE, no train/ and\n"
            "                       test/): about P%% of the images, 1..99, chosen by the\n"
            "                       CRC-32 of their paths, are the test split; defines\n"
            "                       the math (default: none: DIR holds train/ and test/)\n"
            "  --batch-size N       samples per replica per step, 1..65536 (default: 128)\n"
            "  --learning-rate X    per replica, > 0; the step uses X times --num-cores\n"
            "                       (default: 0.01)\n"
            "  --momentum X         SGD momentum, 0 <= X < 1; not with adamw (default: 0.5)\n"
            "  --label-smoothing A  training loss with label smoothing A, 0 <= A < 1, as\n"
            "                       PyTorch's CrossEntropyLoss (default: 0; test loss: NLL)\n",
            CLI_DEFAULT_DATA_DIR);
    fputs("  --augment SPEC       random crops and flips of the training images, drawn\n"
          "                       from (seed, epoch, image): crop=P (pad with P zeros,\n"
          "                       crop back to size), hflip (mirror half of them), both\n"
          "                       (crop=P,hflip) or none; defines the math; test images\n"
          "                       are never augmented (default: none)\n"
          "  --optimizer O        sgd, or adamw (betas 0.9, 0.999, eps 1e-8), as\n"
          "                       torch.optim's (default: sgd)\n"
          "  --nesterov           sgd: Nesterov momentum; needs --momentum above 0\n"
          "                       (default: off)\n"
          "  --weight-decay W     W >= 0: sgd adds W x weight to the gradient, adamw\n"
          "                       decays the weights apart from it (default: 0)\n"
          "  --lr-schedule S      the rate of each step: constant, step (times --lr-gamma\n"
          "                       every --lr-step-epochs epochs), cosine (down to 0 at the\n"
          "                       end of --num-epochs) or onecycle (up to --learning-rate\n"
          "                       and down, over --num-epochs), as torch.optim.lr_scheduler\n"
          "                       per step (default: constant)\n"
          "  --warmup-epochs E    first E epochs: the rate rises linearly from a third of\n"
          "                       the schedule's first, 0..100000 (default: 0)\n"
          "  --lr-step-epochs S   step: epochs between decays, 1..100000 (default: none;\n"
          "                       step needs it)\n"
          "  --lr-gamma G         step: the factor of each decay, > 0 (default: 0.1)\n",
          out);
    fprintf(out,
            "  --num-epochs N       1..100000 (default: 50)\n"
            "  --num-cores N        data-parallel replicas, 1..1024 (default: 8): each takes\n"
            "                       --batch-size samples a step and their gradients are\n"
            "                       averaged, so N defines the math, unlike --threads\n"
            "  --replicas N         another name for --num-cores; give one of the two\n"
            "                       (default: 8)\n"
            "  --threads N          the most worker threads, 1..1024: no more than a step\n"
            "                       or a test pass can use; never changes results\n"
            "                       (default: the CPUs this process may use, shared with\n"
            "                       the other processes on the host; here %d)\n"
            "  --log-steps N        print the loss every N steps, >= 1, when the output is\n"
            "                       not a terminal (a terminal shows a live bar instead)\n"
            "                       (default: 20)\n"
            "  --metrics-debug      print where each epoch's time went (default: off)\n"
            "  --seed N             initialisation and shuffling, 0..2^64-1 (default: 1)\n"
            "  --precision P        fp32, or bf16: the convolutions multiply bfloat16\n"
            "                       values and sum in fp32 (needs AVX512_BF16); defines\n"
            "                       the math (default: fp32)\n"
            "  --train-samples N    use only the first N training images, 0 = all\n"
            "                       (default: 0)\n"
            "  --test-samples N     use only the first N test images, 0 = all (default: 0)\n"
            "  --val-samples N      hold the last N of the training images used out of\n"
            "                       training and score them after every epoch, as the\n"
            "                       test images; defines the math (default: 0, none)\n",
            cli_default_threads());
    fputs("  --model FILE         the network, a model file (models/*.model); it must read\n"
          "                       the data's images and give its classes; without mean=\n"
          "                       and std= the training images' are computed and kept;\n"
          "                       defines the math (default: the seed's network,\n"
          "                       models/fashion_mnist.model)\n"
          "  --save FILE          write the final model as safetensors\n"
          "                       (default: not saved)\n"
          "  --result-image FILE  PNG of the first 25 test images with their predictions;\n"
          "                       'none' or '' skips it (default: test_result.png)\n"
          "  --metrics-file FILE  one JSON object per epoch, JSON Lines; a resumed run\n"
          "                       appends to it. A regular file, a named pipe whose\n"
          "                       reader runs, or a character device such as\n"
          "                       /dev/stdout (default: none)\n"
          "  --checkpoint-dir DIR save training checkpoints in DIR, created if missing,\n"
          "                       as checkpoint-epoch-NNNN.safetensors (default: none)\n"
          "  --save-every N       checkpoint every N epochs and after the last one,\n"
          "                       1..100000 (default: 1)\n"
          "  --keep K             keep the newest K checkpoints in DIR, 1..100000\n"
          "                       (default: 3)\n"
          "  --keep-best          also keep the checkpoint of the epoch with the highest\n"
          "                       validation accuracy (the first of equals) as\n"
          "                       DIR/best.safetensors; needs --checkpoint-dir and\n"
          "                       --val-samples (default: off)\n"
          "  --resume FILE|DIR    continue the run saved in FILE, or in the newest\n"
          "                       checkpoint of DIR (then also --checkpoint-dir), as it\n"
          "                       was started: every setting comes from the checkpoint.\n"
          "                       One that defines the math cannot change; any other given\n"
          "                       here wins, and a larger --num-epochs extends the run\n"
          "                       (default: a fresh run)\n"
          "  --plot FILE          PNG of the loss and accuracy curves, written at the end;\n"
          "                       'none' or '' skips it (default: training_curves.png)\n"
          "  --mpi-timeout SEC    under mpirun or srun: when a process has waited SEC\n"
          "                       seconds for another in an exchange, every process stops\n"
          "                       with a message naming the one it waited for; the last\n"
          "                       complete checkpoint stays usable. 0..604800, 0 = wait\n"
          "                       for ever; not recorded in checkpoints (default: 300)\n"
          "  -q, --quiet          print only errors and the final result: the last\n"
          "                       epoch's summary and the total time (default: off)\n"
          "  -v, --verbose        also print where each epoch's time went (default: off)\n"
          "  -h, --help           show this help and exit\n"
          "\n"
          "Steps per epoch: floor(floor(training images / num-cores) / batch-size), at\n"
          "least 1. Output folders are checked before training starts.\n"
          "SIGINT or SIGTERM: the current step finishes, a checkpoint of that position is\n"
          "saved (with --checkpoint-dir), the command that resumes the run is printed, and\n"
          "cnnc exits with status 130 or 143; a second signal ends it at once, leaving the\n"
          "last whole checkpoint.\n"
          "\n"
          "Under mpirun or srun, P processes share the replicas (--num-cores a multiple of\n"
          "P) and end with the weights one process would; rank 0 alone prints and writes\n"
          "files, and a signal to any process stops them all after the same step.\n",
          out);
}

static void default_settings(train_settings *s)
{
    *s = (train_settings){
        .data_dir = CLI_DEFAULT_DATA_DIR,
        .data_format = "auto",
        .batch_size = 128,
        .learning_rate = 0.01f,
        .momentum = 0.5f,
        .num_epochs = 50,
        .num_cores = 8,
        .threads = cli_default_threads(),
        .log_steps = 20,
        .seed = 1,
        .result_image = "test_result.png",
        .save_every = 1,
        .keep = 3,
        .plot_path = "training_curves.png",
        .verbosity = PROGRESS_NORMAL,
        .mpi_timeout = CLI_MPI_TIMEOUT,
        .lr_gamma = 0.1f,
    };
}

static const char *optional_path(const char *text)
{
    return (text[0] == '\0' || strcmp(text, "none") == 0) ? NULL : text;
}

static int parse_learning_rate(const char *text, float *out)
{
    if (cli_parse_float("train", "--learning-rate", text, out) != 0)
        return -1;
    if (!(*out > 0)) {
        cli_usage_error("train", "--learning-rate: '%s' must be greater than 0", text);
        return -1;
    }
    return 0;
}

/* A flag's value in [0, 1) (what: its name in the message). */
static int parse_below_one(const char *flag, const char *what, const char *text, float *out)
{
    if (cli_parse_float("train", flag, text, out) != 0)
        return -1;
    if (!(*out >= 0 && *out < 1)) {
        cli_usage_error("train", "%s: '%s' is out of range (0 <= %s < 1)", flag, text, what);
        return -1;
    }
    return 0;
}

static int parse_path(const char *flag, const char *text, const char **out)
{
    if (text[0] == '\0') {
        cli_usage_error("train", "%s: empty name", flag);
        return -1;
    }
    *out = text;
    return 0;
}

/* Whether this CPU runs it is asked once every flag is read: the last --precision counts, so
 * that a recipe's bf16 can be overridden by a later fp32 (make train-best TRAIN_ARGS=...). */
static int parse_precision(const char *text, cn_precision *out)
{
    if (cn_precision_from_name(text, out) != 0)
        return cli_usage_error("train", "--precision: '%s' is not fp32 or bf16", text);
    return 0;
}

static int parse_augment(const char *text, cn_augment *out)
{
    cn_error err = {{0}};
    if (cn_augment_parse(text, out, &err) != 0)
        return cli_usage_error("train", "--augment: %s", err.msg);
    return 0;
}

static int parse_optimizer(const char *text, cn_optimizer *out)
{
    if (cn_optimizer_from_name(text, out) != 0)
        return cli_usage_error("train", "--optimizer: '%s' is not sgd or adamw", text);
    return 0;
}

static int parse_schedule(const char *text, cn_lr_kind *out)
{
    if (cn_lr_kind_from_name(text, out) != 0)
        return cli_usage_error("train", "--lr-schedule: '%s' is not constant, step, cosine or "
                               "onecycle", text);
    return 0;
}

/* A flag's value >= 0 (positive: > 0). */
static int parse_not_negative(const char *flag, const char *text, int positive, float *out)
{
    if (cli_parse_float("train", flag, text, out) != 0)
        return -1;
    if (positive ? !(*out > 0) : !(*out >= 0))
        return cli_usage_error("train", "%s: '%s' must be %s 0", flag, text,
                               positive ? "greater than" : "at least");
    return 0;
}

/* The TRAIN_GIVEN_* bit of an option, 0 for the others. */
static uint64_t given_bit(int c)
{
    switch (c) {
    case OPT_BATCH_SIZE: return TRAIN_GIVEN_BATCH_SIZE;
    case OPT_LEARNING_RATE: return TRAIN_GIVEN_LEARNING_RATE;
    case OPT_MOMENTUM: return TRAIN_GIVEN_MOMENTUM;
    case OPT_LABEL_SMOOTHING: return TRAIN_GIVEN_LABEL_SMOOTHING;
    case OPT_NUM_CORES: return TRAIN_GIVEN_NUM_CORES;
    case OPT_SEED: return TRAIN_GIVEN_SEED;
    case OPT_PRECISION: return TRAIN_GIVEN_PRECISION;
    case OPT_TRAIN_SAMPLES: return TRAIN_GIVEN_TRAIN_SAMPLES;
    case OPT_SAVE_EVERY: return TRAIN_GIVEN_SAVE_EVERY;
    case OPT_KEEP: return TRAIN_GIVEN_KEEP;
    case OPT_NUM_EPOCHS: return TRAIN_GIVEN_NUM_EPOCHS;
    case OPT_TEST_SAMPLES: return TRAIN_GIVEN_TEST_SAMPLES;
    case OPT_LOG_STEPS: return TRAIN_GIVEN_LOG_STEPS;
    case OPT_DATA_DIR: return TRAIN_GIVEN_DATA_DIR;
    case OPT_DATA_FORMAT: return TRAIN_GIVEN_DATA_FORMAT;
    case OPT_CLASSES: return TRAIN_GIVEN_CLASSES;
    case OPT_SAVE: return TRAIN_GIVEN_SAVE;
    case OPT_METRICS_FILE: return TRAIN_GIVEN_METRICS_FILE;
    case OPT_RESULT_IMAGE: return TRAIN_GIVEN_RESULT_IMAGE;
    case OPT_PLOT: return TRAIN_GIVEN_PLOT;
    case OPT_THREADS: return TRAIN_GIVEN_THREADS;
    case OPT_VAL_SAMPLES: return TRAIN_GIVEN_VAL_SAMPLES;
    case OPT_KEEP_BEST: return TRAIN_GIVEN_KEEP_BEST;
    case OPT_RESIZE: return TRAIN_GIVEN_RESIZE;
    case OPT_TEST_PERCENT: return TRAIN_GIVEN_TEST_PERCENT;
    case OPT_AUGMENT: return TRAIN_GIVEN_AUGMENT;
    case OPT_OPTIMIZER: return TRAIN_GIVEN_OPTIMIZER;
    case OPT_NESTEROV: return TRAIN_GIVEN_NESTEROV;
    case OPT_WEIGHT_DECAY: return TRAIN_GIVEN_WEIGHT_DECAY;
    case OPT_LR_SCHEDULE: return TRAIN_GIVEN_LR_SCHEDULE;
    case OPT_WARMUP_EPOCHS: return TRAIN_GIVEN_WARMUP_EPOCHS;
    case OPT_LR_STEP_EPOCHS: return TRAIN_GIVEN_LR_STEP_EPOCHS;
    case OPT_LR_GAMMA: return TRAIN_GIVEN_LR_GAMMA;
    default: return 0;
    }
}

/* Applies one parsed option; returns 0 or -1 after printing a usage error. */
static int apply_option(train_settings *s, int c, const char *arg)
{
    switch (c) {
    case OPT_DATA_DIR: s->data_dir = arg; return 0;
    case OPT_DATA_FORMAT:
        return cli_parse_data_format("train", arg, &s->data_format) == CLI_OK ? 0 : -1;
    case OPT_CLASSES: return parse_path("--classes", arg, &s->classes_file);
    case OPT_BATCH_SIZE:
        return cli_parse_int("train", "--batch-size", arg, 1, 65536, &s->batch_size);
    case OPT_LEARNING_RATE: return parse_learning_rate(arg, &s->learning_rate);
    case OPT_MOMENTUM: return parse_below_one("--momentum", "momentum", arg, &s->momentum);
    case OPT_LABEL_SMOOTHING:
        return parse_below_one("--label-smoothing", "A", arg, &s->label_smoothing);
    case OPT_NUM_EPOCHS:
        return cli_parse_int("train", "--num-epochs", arg, 1, TRAIN_MAX_EPOCHS, &s->num_epochs);
    case OPT_NUM_CORES:
        return cli_parse_int("train", "--num-cores", arg, 1, 1024, &s->num_cores);
    case OPT_THREADS:
        return cli_parse_int("train", "--threads", arg, 1, CLI_MAX_THREADS, &s->threads);
    case OPT_LOG_STEPS:
        return cli_parse_int("train", "--log-steps", arg, 1, INT_MAX, &s->log_steps);
    case OPT_METRICS_DEBUG: s->metrics_debug = 1; return 0;
    case OPT_SEED: return cli_parse_u64("train", "--seed", arg, &s->seed);
    case OPT_PRECISION: return parse_precision(arg, &s->precision);
    case OPT_TRAIN_SAMPLES:
        return cli_parse_int("train", "--train-samples", arg, 0, INT_MAX, &s->train_samples);
    case OPT_TEST_SAMPLES:
        return cli_parse_int("train", "--test-samples", arg, 0, INT_MAX, &s->test_samples);
    case OPT_VAL_SAMPLES:
        return cli_parse_int("train", "--val-samples", arg, 0, INT_MAX, &s->val_samples);
    case OPT_KEEP_BEST: s->keep_best = 1; return 0;
    case OPT_RESIZE: s->resize = 1; return 0;
    case OPT_TEST_PERCENT:
        return cli_parse_int("train", "--test-percent", arg, 1, 99, &s->test_percent);
    case OPT_SAVE: s->save_path = optional_path(arg); return 0;
    case OPT_RESULT_IMAGE: s->result_image = optional_path(arg); return 0;
    case OPT_METRICS_FILE: s->metrics_path = optional_path(arg); return 0;
    case OPT_CHECKPOINT_DIR: return parse_path("--checkpoint-dir", arg, &s->checkpoint_dir);
    case OPT_SAVE_EVERY:
        return cli_parse_int("train", "--save-every", arg, 1, TRAIN_MAX_EPOCHS, &s->save_every);
    case OPT_KEEP: return cli_parse_int("train", "--keep", arg, 1, TRAIN_MAX_EPOCHS, &s->keep);
    case OPT_RESUME: return parse_path("--resume", arg, &s->resume);
    case OPT_PLOT: s->plot_path = optional_path(arg); return 0;
    case OPT_MODEL: return parse_path("--model", arg, &s->model_path);
    case OPT_MPI_TIMEOUT:
        return cli_parse_int("train", "--mpi-timeout", arg, 0, 604800, &s->mpi_timeout);
    case OPT_AUGMENT: return parse_augment(arg, &s->augment);
    case OPT_OPTIMIZER: return parse_optimizer(arg, &s->optimizer);
    case OPT_NESTEROV: s->nesterov = 1; return 0;
    case OPT_WEIGHT_DECAY: return parse_not_negative("--weight-decay", arg, 0, &s->weight_decay);
    case OPT_LR_SCHEDULE: return parse_schedule(arg, &s->lr_schedule);
    case OPT_WARMUP_EPOCHS:
        return cli_parse_int("train", "--warmup-epochs", arg, 0, TRAIN_MAX_EPOCHS,
                             &s->warmup_epochs);
    case OPT_LR_STEP_EPOCHS:
        return cli_parse_int("train", "--lr-step-epochs", arg, 1, TRAIN_MAX_EPOCHS,
                             &s->lr_step_epochs);
    case OPT_LR_GAMMA: return parse_not_negative("--lr-gamma", arg, 1, &s->lr_gamma);
    case 'q': s->verbosity = PROGRESS_QUIET; return 0;
    case 'v': s->verbosity = PROGRESS_VERBOSE; return 0;
    default: return -1;
    }
}

/* --replicas N (0: not given) is --num-cores N under the name of what it counts; both given
 * must agree. */
static int merge_replicas(train_settings *s, int replicas)
{
    if (replicas == 0)
        return CLI_OK;
    if ((s->given & TRAIN_GIVEN_NUM_CORES) && s->num_cores != replicas)
        return cli_usage_error("train", "--num-cores %d and --replicas %d differ: they are one "
                                        "setting (the number of replicas); give one of them",
                               s->num_cores, replicas);
    s->num_cores = replicas;
    s->given |= TRAIN_GIVEN_NUM_CORES;
    return CLI_OK;
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_train_flags(int argc, char **argv, train_settings *s, int *help)
{
    int c, replicas = 0;
    while ((c = getopt_long(argc, argv, ":hqv", train_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("train", train_options, argv, c);
        if (c == OPT_REPLICAS) {
            if (cli_parse_int("train", "--replicas", optarg, 1, 1024, &replicas) != 0)
                return CLI_USAGE;
        } else if (apply_option(s, c, optarg) != 0) {
            return CLI_USAGE;
        }
        s->given |= given_bit(c);
    }
    int rc = cli_no_positional("train", argc, argv, optind);
    if (rc != CLI_OK)
        return rc;
    if (!cn_precision_supported(s->precision))
        return cli_usage_error("train", "--precision %s: this CPU cannot run it (it needs "
                               "AVX512_BF16); use fp32", cn_precision_name(s->precision));
    return merge_replicas(s, replicas);
}

/* The files the run writes, each checked (cli_output_check) into outputs; *n of them. */
static int check_each_output(const train_settings *s, cli_output outputs[4], int *n)
{
    const struct {
        const char *flag, *path;
        cli_output_kind kind;
    } all[] = {
        {"--save", s->save_path, CLI_REPLACED},
        {"--result-image", s->result_image, CLI_REPLACED},
        {"--metrics-file", s->metrics_path, CLI_STREAMED},
        {"--plot", s->plot_path, CLI_REPLACED},
    };
    *n = 0;
    for (int i = 0; i < 4; i++) {
        if (!all[i].path)
            continue;
        int rc = cli_output_check(&outputs[*n], all[i].flag, all[i].path, all[i].kind);
        (*n)++;
        if (rc != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

/* Every output is a file of its own, apart from the checkpoints and the file resumed from. */
static int check_outputs(const train_settings *s, const train_run *run)
{
    cli_output outputs[4];
    int n = 0;
    int rc = check_each_output(s, outputs, &n);
    if (rc == CLI_OK)
        rc = cli_outputs_distinct("train", outputs, n);
    for (int i = 0; rc == CLI_OK && i < n && run->resume_path; i++)
        if (cli_output_is(&outputs[i], run->resume_path))
            rc = cli_usage_error("train", "%s %s is the checkpoint being resumed (%s): give "
                                 "the output a file of its own", outputs[i].flag,
                                 outputs[i].path, run->resume_path);
    if (rc == CLI_OK && s->checkpoint_dir)
        rc = checkpoints_check_outputs(s->checkpoint_dir, outputs, n, s->keep_best);
    for (int i = 0; i < n; i++)
        cli_output_free(&outputs[i]);
    return rc;
}

/* --val-samples N: the last N of the training samples used become run->val, a view of train's
 * arrays, and train keeps the ones before; refused when what is left cannot make one step. */
static int split_validation(const train_settings *s, train_run *run)
{
    cn_dataset *train = &run->train;
    long per_step = (long)s->num_cores * s->batch_size;
    int n = s->val_samples, used = train->count;
    if (n == 0)
        return CLI_OK;
    if (n >= used || used - n < per_step)
        return cli_usage_error("train", "--val-samples %d leaves %d of the %d training images "
                               "used for training, but --num-cores/--replicas %d x "
                               "--batch-size %d needs at least %ld for one step",
                               n, n >= used ? 0 : used - n, used, s->num_cores, s->batch_size,
                               per_step);
    size_t image = (size_t)train->channels * train->height * train->width;
    run->val = *train;
    run->val.count = n;
    run->val.pixels = train->pixels + (size_t)(used - n) * image;
    run->val.labels = train->labels + (used - n);
    train->count = used - n;
    return CLI_OK;
}

static int check_one_step_fits(const train_settings *s, const cn_dataset *train)
{
    long per_step = (long)s->num_cores * s->batch_size;
    if (train->count >= per_step)
        return CLI_OK;
    return cli_usage_error("train",
                           "--num-cores/--replicas %d x --batch-size %d needs at least %ld "
                           "training images per step, but only %d are used: not even one step "
                           "per epoch",
                           s->num_cores, s->batch_size, per_step, train->count);
}

/* The flags that only some optimisers and schedules take, after a resumed run took its own. */
static int check_recipe(const train_settings *s)
{
    if (s->optimizer == CN_OPTIMIZER_ADAMW && (s->given & TRAIN_GIVEN_MOMENTUM))
        return cli_usage_error("train", "--momentum is sgd's: adamw does not use it (its betas "
                               "are 0.9 and 0.999)");
    if (s->nesterov && s->optimizer != CN_OPTIMIZER_SGD)
        return cli_usage_error("train", "--nesterov is sgd's: --optimizer %s has no momentum",
                               cn_optimizer_name(s->optimizer));
    if (s->nesterov && !(s->momentum > 0))
        return cli_usage_error("train", "--nesterov needs --momentum above 0");
    if (s->lr_schedule != CN_LR_STEP && (s->given & (TRAIN_GIVEN_LR_STEP_EPOCHS |
                                                     TRAIN_GIVEN_LR_GAMMA)))
        return cli_usage_error("train", "--%s needs --lr-schedule step",
                               (s->given & TRAIN_GIVEN_LR_STEP_EPOCHS) ? "lr-step-epochs"
                                                                       : "lr-gamma");
    if (s->lr_schedule == CN_LR_STEP && s->lr_step_epochs == 0)
        return cli_usage_error("train", "--lr-schedule step needs --lr-step-epochs S (decay "
                               "every S epochs)");
    return CLI_OK;
}

int train_schedule(const train_settings *s, int steps_per_epoch, cn_lr_schedule *out)
{
    long spe = steps_per_epoch;
    *out = (cn_lr_schedule){.kind = s->lr_schedule, .warmup_steps = s->warmup_epochs * spe};
    if (s->lr_schedule == CN_LR_STEP)
        out->step_size = s->lr_step_epochs * spe, out->gamma = s->lr_gamma;
    if (s->lr_schedule != CN_LR_COSINE && s->lr_schedule != CN_LR_ONECYCLE)
        return CLI_OK;
    out->total_steps = s->num_epochs * spe;
    if (out->total_steps - out->warmup_steps >= 2)
        return CLI_OK;
    return cli_usage_error("train", "--lr-schedule %s needs at least 2 steps after the warmup: "
                           "--num-epochs %d of %ld steps leave %ld after --warmup-epochs %d",
                           cn_lr_kind_name(s->lr_schedule), s->num_epochs, spe,
                           out->total_steps - out->warmup_steps, s->warmup_epochs);
}

/* The optimiser and schedule of the config: the flags', or for a resumed run the checkpoint's
 * (whose flags resume_read took), with the values the command line cannot give. */
static int config_recipe(const train_settings *s, train_run *run)
{
    cn_train_config *c = &run->config;
    c->optimizer = s->optimizer, c->nesterov = s->nesterov, c->weight_decay = s->weight_decay;
    if (!run->resume_path) {
        uint32_t shard = cn_sampler_shard_size((uint32_t)run->train.count, s->num_cores);
        return train_schedule(s, (int)(shard / (uint32_t)s->batch_size), &c->lr_schedule);
    }
    const cn_train_state *st = &run->state;
    c->beta1 = st->beta1, c->beta2 = st->beta2, c->eps = st->eps;
    c->lr_schedule = st->lr_schedule;
    return CLI_OK;
}

static int build_model(const train_settings *s, train_run *run)
{
    cn_error err = {{0}};
    cn_model_init(run->model, s->seed);
    run->config = (cn_train_config){
        .batch_size = s->batch_size,
        .num_replicas = s->num_cores,
        .threads = s->threads,
        .learning_rate = s->learning_rate,
        .momentum = s->momentum,
        .seed = s->seed,
        .precision = s->precision,
        .label_smoothing = s->label_smoothing,
        .augment = s->augment,
    };
    if (config_recipe(s, run) != CLI_OK)
        return CLI_USAGE;
    run->trainer = cn_trainer_create_distributed(run->model, &run->config,
                                                 cli_dist_comm(run->dist), &err);
    if (!run->trainer)
        return cli_library_error(&err, NULL);
    run->steps = cn_trainer_steps_per_epoch(run->trainer, &run->train);
    run->threads = cn_trainer_threads(run->trainer, 1, run->test.count);
    if ((s->given & TRAIN_GIVEN_THREADS) && cli_dist_rank(run->dist) == 0)
        cli_threads_note(s->threads, run->threads, "%d replica%s x batch %d a step, %d test "
                         "images in batches of %d", s->num_cores, s->num_cores == 1 ? "" : "s",
                         s->batch_size, run->test.count, s->batch_size);
    if (!run->resume_path)
        run->position = (cn_epoch_position){.epoch = 1};
    return CLI_OK;
}

static int open_metrics_file(const train_settings *s, train_run *run)
{
    if (!s->metrics_path)
        return CLI_OK;
    if (run->resume_path)
        return metrics_open_for_resume(s, run);
    run->metrics = cli_open_stream("--metrics-file", s->metrics_path, 0);
    return run->metrics ? CLI_OK : CLI_FAILURE;
}

/* The network: --model's, or the seed's; a resumed run's is the checkpoint's, and a --model
 * given with it must be the same (it defines the math). */
static int make_model(const train_settings *s, train_run *run)
{
    if (!run->resume_file)
        return cli_read_model(s->model_path, &run->model);
    if (cli_checkpoint_model(run->resume_file, run->resume_path, &run->model) != CLI_OK)
        return CLI_FAILURE;
    return cli_same_model("train", s->model_path, run->model, run->resume_path);
}

/* What the model is called in messages. */
static const char *model_what(const train_settings *s, const train_run *run)
{
    return run->resume_path ? run->resume_path : s->model_path ? s->model_path
                                                               : "the seed's network";
}

/* The two splits must be one dataset: the same images' shape, classes and names. */
static int check_splits_agree(const train_settings *s, const cn_dataset *a, const cn_dataset *b)
{
    int same = a->channels == b->channels && a->height == b->height && a->width == b->width &&
               (a->class_names == NULL) == (b->class_names == NULL) &&
               (a->class_names ? a->classes == b->classes : b->classes <= a->classes);
    for (int c = 0; same && a->class_names && c < a->classes; c++)
        same = strcmp(a->class_names[c], b->class_names[c]) == 0;
    if (same)
        return CLI_OK;
    return cli_failure("%s: the training images are %dx%dx%d in %d classes, the test images "
                       "%dx%dx%d in %d classes%s", s->data_dir, a->channels, a->height,
                       a->width, a->classes, b->channels, b->height, b->width, b->classes,
                       a->classes == b->classes && a->channels == b->channels &&
                               a->height == b->height && a->width == b->width
                           ? " of other names" : "");
}

/* The training and test data, read as the model's input asks, checked against the model
 * (which takes their class names). */
static int load_data(const train_settings *s, train_run *run)
{
    cli_data data = {s->data_dir, s->data_format, s->classes_file, s->resize, s->test_percent,
                     s->threads};
    if (cli_load_dataset(&run->train, &data, run->model, "train", s->train_samples) != CLI_OK ||
        cli_load_dataset(&run->test, &data, run->model, "test", s->test_samples) != CLI_OK)
        return CLI_FAILURE;
    int rc = check_splits_agree(s, &run->train, &run->test);
    if (rc == CLI_OK)
        rc = cli_check_model_data(run->model, model_what(s, run), &run->train, s->data_dir);
    if (rc == CLI_OK && run->train.classes != cn_model_num_outputs(run->model))
        rc = cli_failure("%s: the model gives %d classes, but the training labels are 0..%d",
                         model_what(s, run), cn_model_num_outputs(run->model),
                         run->train.classes - 1);
    if (rc == CLI_OK)
        rc = cli_name_classes(run->model, &run->train, model_what(s, run));
    return rc;
}

/* A model file without mean= and std= gets the training images' (the samples used). */
static int normalize_from_data(const train_settings *s, train_run *run)
{
    if (cn_model_has_normalization(run->model))
        return CLI_OK;
    int c = run->train.channels;
    float mean[3], std[3];
    cn_error err = {{0}};
    if (c > 3 || cn_dataset_normalization(&run->train, mean, std, &err) != 0 ||
        cn_model_set_normalization(run->model, mean, std, &err) != 0)
        return cli_failure("%s: %s", s->data_dir, c > 3 ? "more than 3 channels" : err.msg);
    if (s->verbosity < PROGRESS_NORMAL || cli_dist_rank(run->dist) != 0)
        return CLI_OK;
    char text[2][64] = {"", ""};
    for (int i = 0; i < c; i++) {
        size_t at[2] = {strlen(text[0]), strlen(text[1])};
        snprintf(text[0] + at[0], sizeof text[0] - at[0], "%s%.4f", i ? "," : "", (double)mean[i]);
        snprintf(text[1] + at[1], sizeof text[1] - at[1], "%s%.4f", i ? "," : "", (double)std[i]);
    }
    cli_print_line("Normalisation computed from the %d training images: mean=%s std=%s",
                   run->train.count, text[0], text[1]);
    return CLI_OK;
}

/* --augment's padding must be below the sides of the model's images. */
static int check_augment_fits(const train_settings *s, const train_run *run)
{
    int channels, height, width;
    cn_error err = {{0}};
    cn_model_input_shape(run->model, &channels, &height, &width);
    if (cn_augment_check(&s->augment, height, width, &err) == 0)
        return CLI_OK;
    char text[CN_AUGMENT_TEXT_MAX];
    cn_augment_format(&s->augment, text);
    return cli_usage_error("train", "--augment %s: %s", text, err.msg);
}

/* Everything that can fail before the first step: data, sizes, model, trainer, files. */
static int prepare_run(const train_settings *s, train_run *run)
{
    int rc = make_model(s, run);
    if (rc == CLI_OK)
        rc = check_augment_fits(s, run);
    if (rc == CLI_OK)
        rc = load_data(s, run);
    if (rc == CLI_OK)
        rc = split_validation(s, run);
    if (rc == CLI_OK)
        rc = check_one_step_fits(s, &run->train);
    if (rc == CLI_OK)
        rc = normalize_from_data(s, run);
    if (rc == CLI_OK)
        rc = build_model(s, run);
    if (rc == CLI_OK)
        rc = checkpoints_prepare(s, run);
    if (rc != CLI_OK)
        return rc;
    run->predictions = calloc((size_t)run->test.count, 1);
    if (!run->predictions)
        return cli_failure("out of memory for %d predictions", run->test.count);
    if (run->resume_path && s->verbosity >= PROGRESS_NORMAL)
        run_settings_print_resume(s, run);
    return open_metrics_file(s, run);
}

static void free_run(train_run *run)
{
    checkpoints_close(run);
    if (run->metrics)
        fclose(run->metrics);
    free(run->predictions);
    free(run->history.epochs);
    if (run->trainer)
        cn_trainer_free(run->trainer);
    if (run->model)
        cn_model_free(run->model);
    cn_dataset_free(&run->train); /* and with it run->val, a view of its arrays */
    cn_dataset_free(&run->test);
}

static int stop_requested(void *ctx)
{
    (void)ctx;
    return train_stop_signal() != 0;
}

/* Trains from run->position to the end of its epoch, or until a signal asks to stop; then, for
 * a complete epoch, tests the model. */
static int run_epoch(const train_settings *s, train_run *run, epoch_report *r)
{
    cn_error err = {{0}};
    cn_epoch_position *pos = &run->position;
    int first_step = pos->step;
    *r = (epoch_report){.epoch = pos->epoch, .num_epochs = s->num_epochs};
    double start = cli_seconds();
    progress_epoch_begin(&run->progress, pos);
    if (cn_trainer_run_epoch(run->trainer, &run->train, pos, progress_step, stop_requested,
                             &run->progress, &r->phases, &err) != 0) {
        progress_break(&run->progress);
        return cli_dist_library_error(run->dist, &err); /* every rank has the same error */
    }
    double trained = cli_seconds();
    r->train_seconds = trained - start;
    r->exchange_bytes = cn_trainer_exchange_bytes(run->trainer);
    long per_step = (long)s->num_cores * s->batch_size;
    r->timed_samples = (long)(pos->step - first_step) * per_step;
    r->train_samples = (long)run->steps * per_step;
    if (pos->step < run->steps) {
        progress_break(&run->progress);
        return CLI_OK; /* stopped inside the epoch */
    }
    r->train_loss = (float)(pos->loss_sum / run->steps);
    r->learning_rate = cn_lr_at(&run->config.lr_schedule, run->config.learning_rate,
                                (long)pos->epoch * run->steps - 1);
    r->train_accuracy = 100.0 * (double)pos->correct / (double)r->train_samples;
    progress_epoch_trained(&run->progress, pos->epoch, run->steps);
    if (cn_evaluate(run->trainer, &run->test, run->test.count, &r->test_loss, &r->test_accuracy,
                    run->predictions, &err) != 0) {
        progress_break(&run->progress);
        return cli_dist_library_error(run->dist, &err);
    }
    if (run->val.count > 0 && cn_evaluate(run->trainer, &run->val, run->val.count, &r->val_loss,
                                          &r->val_accuracy, NULL, &err) != 0) {
        progress_break(&run->progress);
        return cli_dist_library_error(run->dist, &err);
    }
    r->eval_seconds = cli_seconds() - trained;
    r->test_samples = run->test.count;
    r->val_samples = run->val.count;
    return CLI_OK;
}

/* word as a shell reads it back: as it is when that is safe, else in single quotes. */
static void print_shell_word(FILE *out, const char *word)
{
    static const char *const safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789_./-+=:,@%";
    if (word[0] != '\0' && strspn(word, safe) == strlen(word)) {
        fputs(word, out);
        return;
    }
    fputc('\'', out);
    for (const char *c = word; *c; c++)
        fputs(*c == '\'' ? "'\\''" : (char[]){*c, '\0'}, out);
    fputc('\'', out);
}

/* After a stop: the command that continues the run (its checkpoints record every setting), or
 * that nothing was kept and how to make a run resumable. */
static void print_how_to_resume(FILE *out, const train_settings *s, const train_run *run)
{
    if (!s->checkpoint_dir) {
        fprintf(out, "Nothing was saved (no --checkpoint-dir%s).\n"
                "Give a run --checkpoint-dir DIR to make it resumable.\n",
                s->save_path ? "; --save writes the model only at the end" : "");
        return;
    }
    fputs("Resume with: ", out);
    if (cli_dist_launched(run->dist))
        fprintf(out, "mpirun -np %d ", cli_dist_size(run->dist));
    print_shell_word(out, program_invocation_name);
    fputs(" train --resume ", out);
    print_shell_word(out, s->checkpoint_dir);
    fputc('\n', out);
}

/* Saves where training stands and returns 128 + the signal, as a shell reports it. When stdout
 * is lost (SIGPIPE), rank 0 says so on stderr instead. */
static int stop_training(const train_settings *s, train_run *run)
{
    int sig = cli_dist_first(run->dist, train_stop_signal()); /* the signal one rank got */
    FILE *out = sig == SIGPIPE && cli_dist_rank(run->dist) == 0 ? stderr : stdout;
    if (sig == SIGPIPE) /* from now on stdout goes nowhere, without another error */
        (void)!freopen("/dev/null", "w", stdout);
    progress_break(&run->progress);
    fprintf(out, "Stopped by %s at epoch %d, %d of %d steps done\n",
            sig == SIGPIPE   ? "SIGPIPE (nothing reads standard output any more)"
            : sig == SIGTERM ? "SIGTERM"
                             : "SIGINT",
            run->position.epoch, run->position.step, run->steps);
    int rc = checkpoint_save(s, run);
    if (rc == CLI_OK)
        print_how_to_resume(out, s, run);
    return rc == CLI_OK ? 128 + sig : rc;
}

/* The last epoch's checkpoint waits for the run's outputs (train_and_finish): a folder whose
 * newest checkpoint completes the run then always comes with the model and pictures, and a kill
 * before it leaves a run that resumes and writes them. */
static int checkpoint_after_epoch(const train_settings *s, train_run *run)
{
    int epoch = run->position.epoch;
    if (epoch % s->save_every != 0 || epoch == s->num_epochs)
        return CLI_OK;
    return checkpoint_save(s, run);
}

/* An epoch whose validation accuracy beats every earlier one's (the first of equals stays) is
 * the best so far, and with --keep-best its checkpoint is kept. */
static int track_best(const train_settings *s, train_run *run, const epoch_report *last)
{
    if (last->val_samples == 0 || !(last->val_accuracy > run->best_val_accuracy))
        return CLI_OK;
    run->best_val_accuracy = last->val_accuracy;
    run->best_epoch = last->epoch;
    return best_checkpoint_save(s, run, last->val_accuracy);
}

/* After a complete epoch: its report, metrics line, curve point and checkpoints. */
static int finish_epoch(const train_settings *s, train_run *run, const epoch_report *last)
{
    progress_epoch_report(&run->progress, last, s->metrics_debug);
    if (run->metrics && write_metrics_line(run->metrics, last) != 0)
        return cli_failure("--metrics-file: %s: %s", s->metrics_path, strerror(errno));
    if (record_curves(run, last) != 0)
        return cli_failure("out of memory for the training curves");
    int rc = track_best(s, run, last);
    return rc == CLI_OK ? checkpoint_after_epoch(s, run) : rc;
}

/* Every rank runs the same epochs: each ends with an agreement, so that a failure on any rank
 * (rank 0 writing its metrics or checkpoint, say) or a signal stops all of them there. */
static int train_epochs(const train_settings *s, train_run *run, epoch_report *last)
{
    while (run->position.epoch <= s->num_epochs) {
        int rc = run_epoch(s, run, last);
        int stopped = rc == CLI_OK && run->position.step < run->steps;
        if (rc == CLI_OK && !stopped)
            rc = finish_epoch(s, run, last);
        rc = cli_dist_agree(run->dist, rc); /* a failure on any rank stops them all here */
        if (rc != CLI_OK)
            return rc;
        if (stopped)
            return stop_training(s, run);
        if (run->position.epoch == s->num_epochs)
            break; /* the position stays at the run's end, for its last checkpoint */
        if (cli_dist_first(run->dist, train_stop_signal()))
            return stop_training(s, run);
        run->position = (cn_epoch_position){.epoch = run->position.epoch + 1};
    }
    return CLI_OK;
}

static int save_model(const train_settings *s, train_run *run)
{
    cn_error err = {{0}};
    if (!s->save_path)
        return CLI_OK;
    if (cn_model_save(run->model, s->save_path, &err) != 0)
        return cli_library_error(&err, s->save_path);
    if (progress_shows(&run->progress, PROGRESS_NORMAL))
        cli_print_line("Saved model to %s", s->save_path);
    return CLI_OK;
}

static int draw_result_picture(const train_settings *s, const train_run *run,
                               const epoch_report *last)
{
    cn_error err = {{0}};
    if (!s->result_image)
        return CLI_OK;
    int n = run->test.count;
    int cols = n < 5 ? n : 5;
    int rows = n / cols < 5 ? n / cols : 5;
    char title[128];
    snprintf(title, sizeof title, "Predicted labels (epoch %d, test accuracy %.2f%%)",
             last->epoch, last->test_accuracy);
    int classes = cn_model_num_outputs(run->model);
    const char **names = malloc((size_t)classes * sizeof *names);
    if (!names)
        return cli_failure("out of memory");
    for (int c = 0; c < classes; c++) names[c] = cli_class_name(run->model, c);
    const cn_dataset *t = &run->test;
    cn_labelled_images set = {t->pixels, t->channels, t->height, t->width, t->labels,
                              run->predictions, n, classes, names};
    int rc = cn_result_picture(s->result_image, &set, rows, cols, title, &err);
    free(names);
    if (rc != 0)
        return cli_library_error(&err, s->result_image);
    if (progress_shows(&run->progress, PROGRESS_NORMAL))
        cli_print_line("Saved result picture to %s", s->result_image);
    return CLI_OK;
}

static int train_and_finish(const train_settings *s, train_run *run)
{
    epoch_report last;
    progress_init(&run->progress, stdout, s->verbosity, s->log_steps, s->num_epochs,
                  (long)s->num_cores * s->batch_size);
    if (cli_dist_launched(run->dist)) /* mpirun's pseudo-terminal, even into a file: lines */
        run->progress.live = 0;
    if (progress_shows(&run->progress, PROGRESS_NORMAL))
        print_settings_line(s, run);
    double start = cli_seconds();
    train_signals_install();
    int rc = train_epochs(s, run, &last);
    if (rc != CLI_OK)
        return rc;
    printf("Total Training time = %.2f\n", cli_seconds() - start);
    rc = save_model(s, run);
    if (rc == CLI_OK)
        rc = draw_result_picture(s, run, &last);
    if (rc == CLI_OK)
        rc = draw_training_curves(s, run);
    if (rc == CLI_OK)
        rc = checkpoint_save(s, run);
    return rc;
}

int cli_train_check_flags(int argc, char **argv)
{
    train_settings s;
    int help = 0;
    default_settings(&s);
    return parse_train_flags(argc, argv, &s, &help);
}

/* What each process does on its own before training: flags, checks, checkpoint, data, model.
 * Returns CLI_DONE after --help. */
static int set_up(train_settings *s, train_run *run, int argc, char **argv)
{
    int help = 0;
    default_settings(s);
    int rc = parse_train_flags(argc, argv, s, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        cli_train_help(stdout);
        return CLI_DONE;
    }
    rc = cli_check_isa();
    if (rc == CLI_OK)
        rc = resume_read(s, run); /* a resumed run's settings, outputs too, come from it */
    if (rc == CLI_OK)
        rc = check_recipe(s);
    if (rc == CLI_OK)
        rc = train_dist_outputs(run->dist, s);
    if (rc == CLI_OK)
        rc = check_outputs(s, run);
    if (rc == CLI_OK)
        rc = train_dist_replicas(run->dist, s);
    if (rc == CLI_OK)
        rc = prepare_run(s, run);
    return rc;
}

/* Under mpirun or srun every step below runs on every rank: a failure on one rank reaches the
 * others at the next agreement (cli_dist_agree) or collective, and all stop together. */
int cli_train(int argc, char **argv)
{
    cli_dist dist;
    train_signals_ignore_pipe(); /* a closed stdout stops training (train_stop_signal) */
    int rc = cli_dist_start(&dist);
    if (rc != CLI_OK)
        return rc;
    train_settings s;
    train_run run = {.dist = &dist, .checkpoint_fd = -1, .best_val_accuracy = -1};
    cli_dist_hold_errors(&dist); /* one message where every rank would say the same */
    rc = cli_dist_agree(&dist, set_up(&s, &run, argc, argv));
    if (rc == CLI_OK)
        rc = train_dist_check_same(&dist, &s, &run);
    if (rc == CLI_OK)
        rc = train_and_finish(&s, &run);
    train_signals_restore();
    free_run(&run);
    return cli_dist_finish(&dist, rc);
}
