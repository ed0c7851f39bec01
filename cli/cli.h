/* cli.h — what the cnnc subcommands share: exit statuses, strict flag parsing with one-line
 * error messages and "did you mean" suggestions, output-folder checks, dataset loading with a
 * sample limit, and a clock. It keeps no state of its own and never exits; callers turn
 * failures into exit statuses. */
#ifndef CNNC_CLI_H
#define CNNC_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

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
int cli_summary(int argc, char **argv);
void cli_plot_help(FILE *out);
void cli_info_help(FILE *out);
void cli_summary_help(FILE *out);

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
int cli_summary_check_flags(int argc, char **argv);

/* Prints "cnnc: error: ..." and "Try 'cnnc CMD --help'." (or 'cnnc --help' when command is
 * NULL) to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "cnnc: error: ..." to stderr; returns CLI_FAILURE. */
int cli_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "cnnc: warning: ..." to stderr. */
void cli_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints one line to stdout (the newline is added), escaped as the messages are. For every
 * line that shows a file's name or text from a file. */
void cli_print_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Every message and every cli_print_line is one line whatever it quotes: each control character
 * (bytes 0x00-0x1f and 0x7f, and the C1 controls U+0080-U+009F in UTF-8) is written as \xNN, so
 * that a file name or a file's text cannot move the cursor, recolour the terminal or forge a
 * line. */

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
/* When --threads asked for more threads than the work can use (cn_trainer_threads), prints
 * to stderr "cnnc: note: --threads ASKED: USED thread(s) can have work (WHY); using USED". */
void cli_threads_note(int asked, int used, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- outputs (outputs.c) */

/* How an output is written: whole, to a temporary file renamed over it (a model, a checkpoint,
 * a picture), or streamed into the file as it is (the metrics file). */
typedef enum { CLI_REPLACED, CLI_STREAMED } cli_output_kind;

/* An output file as the flag names it, and which file that is. */
typedef struct {
    const char *flag, *path; /* as given */
    int exists;              /* path names an existing file (through any symbolic link)... */
    dev_t dev;               /* ...which is this one */
    ino_t ino;
    char *where;             /* cli_resolve_path(path), or NULL when it cannot be resolved */
} cli_output;

/* Checks that path can be written later: its folder exists, is a folder and is writable; path
 * itself is not a folder, not a symbolic link to nothing, and, when it exists, a regular file
 * (CLI_REPLACED) or a regular file, named pipe or character device (CLI_STREAMED). Fills o
 * (free it with cli_output_free, also after a failure). CLI_OK, or CLI_FAILURE after printing
 * "cnnc: error: FLAG: PATH: ...". */
int cli_output_check(cli_output *o, const char *flag, const char *path, cli_output_kind kind);
void cli_output_free(cli_output *o);
/* cli_output_check of the one CLI_REPLACED output of command, which may not be the existing
 * file input that the command reads (NULL: none), input_what says what that is ("the metrics
 * file"): CLI_USAGE then. */
int cli_check_output_path(const char *command, const char *flag, const char *path,
                          const char *input, const char *input_what);
/* Whether a and b are one file: the same existing file (device and inode), or, when neither
 * exists yet, the same name in the same real folder. */
int cli_same_output(const cli_output *a, const cli_output *b);
/* Whether o is the existing file path names (an input, say), through any link. */
int cli_output_is(const cli_output *o, const char *path);
/* CLI_OK, or CLI_USAGE after saying which two of outputs[0..n) are the same file. */
int cli_outputs_distinct(const char *command, const cli_output *outputs, int n);
/* The absolute path of path with every symbolic link resolved (realpath); for a path that does
 * not exist yet, its folder's real path and its name. malloc'd; NULL when it cannot be told. */
char *cli_resolve_path(const char *path);
/* Opens a streamed output (cli_output_check'd) for writing, emptied or appended to, without
 * waiting: a named pipe that no process reads is refused at once. A file that is already this
 * process's standard output or error is written through that descriptor. NULL after printing
 * why. */
FILE *cli_open_stream(const char *flag, const char *path, int append);

/* For a required file flag of command: a usage error when path is NULL ("FLAG FILE is
 * required") or empty. Returns CLI_OK or CLI_USAGE. */
int cli_require_file(const char *command, const char *flag, const char *path);

/* "DIR/NAME", malloc'd (the caller frees it); NULL when out of memory. */
char *cli_join_path(const char *dir, const char *name);

/* Opens the text file path for reading (cn_open_regular: a named pipe or a device is refused,
 * never waited on). NULL after printing "cnnc: error: [FLAG: ]PATH: what is wrong". */
FILE *cli_open_input(const char *flag, const char *path);

/* The checkpoint file that path names for flag: path itself, or the newest checkpoint
 * (checkpoint-epoch-....safetensors) of the folder path, as --resume takes it. *file is
 * malloc'd (the caller frees it); CLI_OK, or CLI_FAILURE after a message (an empty folder). */
int cli_checkpoint_file(const char *flag, const char *path, char **file);

/* A new model with the weights of the safetensors file that path names for --checkpoint
 * (cli_checkpoint_file: a model or training checkpoint of cnnc, a PyTorch state_dict, or a
 * checkpoint folder's newest); *file gets that file's name. The model is the one the file
 * records (cli_checkpoint_model_or), else the model file model_path's (--model), else the
 * seed's; a model_path given with a file that records another network is refused
 * (cli_same_model). Returns CLI_OK, or CLI_FAILURE / CLI_USAGE after the message; the caller
 * frees *model (cn_model_free) and *file (free) in every case. */
int cli_load_model(const char *command, const char *path, const char *model_path,
                   cn_model **model, char **file);
/* Class c's name: the model's (cli_name_classes gives every model names), else "?". */
const char *cli_class_name(const cn_model *m, int c);
/* Gives m the names of the data's classes (ds may be NULL): when m has names already, they must
 * be the data's (else the message names model_what and both names), or with model_what NULL
 * they are kept; when the data names none, m keeps its own or gets the label numbers "0", "1",
 * .... CLI_OK, or CLI_FAILURE after the message. */
int cli_name_classes(cn_model *m, const cn_dataset *ds, const char *model_what);
/* The width of a column of the model's class names: the longest, at least 12. */
int cli_class_name_width(const cn_model *m);
/* Where a dataset's class names came from, for messages. */
const char *cli_data_names_source(const cn_dataset *ds);
/* For folder data with files left out (cn_dataset.skipped): a line saying how many, after
 * indent. */
void cli_print_skipped(const char *indent, const cn_dataset *train, const cn_dataset *test);
/* CLI_OK when the model reads the data's images into its classes (cn_model_fits_data); else
 * CLI_FAILURE after "MODEL_WHAT: the model reads ... but the data has ... (DATA_DIR, FORMAT)". */
int cli_check_model_data(const cn_model *m, const char *model_what, const cn_dataset *ds,
                         const char *data_dir);
/* CLI_OK when model_path is NULL or names the network model is; else CLI_USAGE after the
 * message naming command and the checkpoint file (CLI_FAILURE when model_path cannot be read). */
int cli_same_model(const char *command, const char *model_path, const cn_model *model,
                   const char *file);
/* The model of the model file at path (messages name it), or the seed's network
 * (cn_model_fashion_mnist, with Fashion-MNIST's class names) when path is NULL. Parameters are
 * zero. CLI_OK, or CLI_FAILURE after the message; the caller frees *model. */
int cli_read_model(const char *path, cn_model **model);
/* The model a checkpoint or saved model f (read from path) records in __metadata__ "model", or
 * the seed's network when it records none (a file of an older cnnc, or of PyTorch), checked as
 * cli_read_model reads it; parameters zero. CLI_OK, or CLI_FAILURE after the message naming
 * path. */
int cli_checkpoint_model(const cn_safetensors *f, const char *path, cn_model **model);
/* The same with the model of the model file model_path (--model) instead of the seed's network
 * for a file that records none. */
int cli_checkpoint_model_or(const cn_safetensors *f, const char *path, const char *model_path,
                            cn_model **model);

/* The flags that say where the data is and how to read it. */
typedef struct {
    const char *dir;     /* --data-dir */
    const char *format;  /* --data-format: "auto", "idx", "cifar10", "folder"; NULL: auto */
    const char *classes; /* --classes FILE; NULL: what the data says */
    int resize;          /* --resize: folder images scaled to the model's height and width */
    int test_percent;    /* --test-percent: a folder of classes split by a share; 0: train/, test/ */
    int threads;         /* --threads: folder images decoded by this many at once */
} cli_data;
/* Loads split ("train" or "test") of data, folder images with the channels the model reads
 * (scaled to its size with resize), and keeps only the first limit samples (0: all). CLI_OK,
 * or CLI_FAILURE after the library's message (or for --resize or --test-percent on data that is
 * not a folder's);
 * ds is then empty. */
int cli_load_dataset(cn_dataset *ds, const cli_data *data, const cn_model *model,
                     const char *split, int limit);
/* Checks the --data-format word of command; CLI_OK and *out = text, or CLI_USAGE. */
int cli_parse_data_format(const char *command, const char *text, const char **out);

/* Prints the library's message as "cnnc: error: MSG", prefixed with path when the message
 * does not already name it (path may be NULL); returns CLI_FAILURE. */
int cli_library_error(const cn_error *err, const char *path);

/* Refuses a CNNC_ISA that names no instruction set or one this CPU lacks, before any work;
 * returns CLI_OK, or CLI_USAGE after printing the message with a pointer to cnnc --help. */
int cli_check_isa(void);

/* Monotonic wall-clock seconds. */
double cli_seconds(void);

#endif /* CNNC_CLI_H */
