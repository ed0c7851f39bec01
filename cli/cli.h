/* cli.h — what the cnnc subcommands share: exit statuses, strict flag parsing with one-line
 * error messages and "did you mean" suggestions, output-folder checks, dataset loading with a
 * sample limit, and a clock. It keeps no state of its own and never exits; callers turn
 * failures into exit statuses. */
#ifndef CNNC_CLI_H
#define CNNC_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "cnnc.h"

enum { CLI_OK = 0, CLI_FAILURE = 1, CLI_USAGE = 2 };

#define CLI_DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"

/* Subcommands: argv[0] is the subcommand's name; the return value is the exit status. */
int cli_train(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_predict(int argc, char **argv);
void cli_train_help(FILE *out);
void cli_eval_help(FILE *out);
void cli_predict_help(FILE *out);
int cli_plot(int argc, char **argv);
int cli_info(int argc, char **argv);
void cli_plot_help(FILE *out);
void cli_info_help(FILE *out);

/* "Training curves, epochs 1-50: final test accuracy 90.54%": the title of the curves picture
 * that train and plot draw. */
void cli_curves_title(char *buf, size_t size, const cn_epoch_metrics *epochs, int n);

/* The growing list of epochs that train and plot draw the curves of; {NULL, 0, 0} is empty,
 * free(epochs) frees it. */
typedef struct {
    cn_epoch_metrics *epochs;
    int count, capacity;
} cli_epoch_list;
/* Appends a copy of e; -1 when out of memory (the list is unchanged then). */
int cli_epoch_list_append(cli_epoch_list *list, const cn_epoch_metrics *e);

/* Parse and check a subcommand's flags exactly as the subcommand does, and do nothing else:
 * CLI_OK (also for --help) or CLI_USAGE after printing the message. argv[0] is the subcommand;
 * the caller resets getopt (optind = 0) between calls. For the command-line fuzz target. */
int cli_train_check_flags(int argc, char **argv);
int cli_eval_check_flags(int argc, char **argv);
int cli_predict_check_flags(int argc, char **argv);
int cli_plot_check_flags(int argc, char **argv);
int cli_info_check_flags(int argc, char **argv);

/* Prints "cnnc: error: ..." and "Try 'cnnc CMD --help'." (or 'cnnc --help' when command is
 * NULL) to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "cnnc: error: ..." to stderr; returns CLI_FAILURE. */
int cli_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "Did you mean" for a mistyped name: the names among names[0..count) that word[0..len) was
 * most likely meant as, all equally good, at most CLI_SUGGEST_MAX, into found; returns how
 * many (0: none is close). In order of preference, word may start a name (an ambiguous prefix
 * gives each name it starts), be a whole dash-separated part of one ("epochs": num-epochs) or
 * the initials of its parts ("lr": learning-rate), start a part or have a name as its start,
 * or be a few edits (Damerau-Levenshtein, at most a third of its length) from a name or a
 * part. Case is ignored. */
#define CLI_SUGGEST_MAX 6
int cli_suggest(const char *word, size_t len, const char *const *names, int count,
                const char **found);
/* "--a", "--a or --b", "--a, --b or --c" (prefix "--") into buf, truncated to size. */
void cli_name_list(char *buf, size_t size, const char *prefix, const char *const *names, int n);

/* Reports what getopt_long rejected (return value c, ':' or '?') for command, with the nearest
 * flags of options for an unknown or ambiguous long one (cli_suggest); returns CLI_USAGE. */
int cli_option_error(const char *command, const struct option *options, char **argv, int c);
/* Reports the first positional argument left after option parsing, if any; returns CLI_USAGE
 * then, CLI_OK otherwise. */
int cli_no_positional(const char *command, int argc, char **argv, int first);

/* Strict parsers of a flag's value: the whole text must be the number and lie in the range.
 * On failure they print a usage error naming flag and return -1. */
int cli_parse_int(const char *command, const char *flag, const char *text, int min, int max,
                  int *out);
int cli_parse_u64(const char *command, const char *flag, const char *text, uint64_t *out);
/* A finite float; the range checks are the caller's (cli_usage_error). */
int cli_parse_float(const char *command, const char *flag, const char *text, float *out);

/* Online CPUs, clamped to 1..CLI_MAX_THREADS. */
#define CLI_MAX_THREADS 1024
int cli_default_threads(void);

/* Checks that path can be written later: its folder exists, is a folder and is writable, and
 * path itself is not a folder. Prints "cnnc: error: FLAG: PATH: ..." and returns -1 if not. */
int cli_check_output_path(const char *flag, const char *path);

/* For a required file flag of command: a usage error when path is NULL ("FLAG FILE is
 * required") or empty. Returns CLI_OK or CLI_USAGE. */
int cli_require_file(const char *command, const char *flag, const char *path);

/* "DIR/NAME", malloc'd (the caller frees it); NULL when out of memory. */
char *cli_join_path(const char *dir, const char *name);

/* The checkpoint file that path names for flag: path itself, or the newest checkpoint
 * (checkpoint-epoch-....safetensors) of the folder path, as --resume takes it. *file is
 * malloc'd (the caller frees it); CLI_OK, or CLI_FAILURE after a message (an empty folder). */
int cli_checkpoint_file(const char *flag, const char *path, char **file);

/* A new Fashion-MNIST model with the weights of the safetensors file that path names for
 * --checkpoint (cli_checkpoint_file: a model or training checkpoint of cnnc, a PyTorch
 * state_dict, or a checkpoint folder's newest); *file gets that file's name. Returns CLI_OK, or
 * CLI_FAILURE after the message; the caller frees *model (cn_model_free) and *file (free) in
 * both cases. */
int cli_load_model(const char *path, cn_model **model, char **file);

/* Loads split ("train" or "t10k") from dir and keeps only the first limit samples (0: all).
 * Prints the library's message and returns -1 on failure; ds is then empty. */
int cli_load_dataset(cn_dataset *ds, const char *dir, const char *split, int limit);

/* Prints the library's message as "cnnc: error: MSG", prefixed with path when the message
 * does not already name it (path may be NULL); returns CLI_FAILURE. */
int cli_library_error(const cn_error *err, const char *path);

/* Refuses a CNNC_ISA that names no instruction set or one this CPU lacks, before any work;
 * returns CLI_OK, or CLI_USAGE after printing the message with a pointer to cnnc --help. */
int cli_check_isa(void);

/* Monotonic wall-clock seconds. */
double cli_seconds(void);

#endif /* CNNC_CLI_H */
