/* main.c — the cnnc command: picks the subcommand (train, eval, predict, plot, info, summary),
 * answers --help (a short overview, or with a command that command's help) and --version, and
 * suggests the nearest command for a mistyped one. It parses no subcommand flags itself; each
 * subcommand's file does, and holds that subcommand's help text. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *out);
} command;

static const command commands[] = {
    {"train", "train the Fashion-MNIST CNN; the defaults reproduce the reference job",
     cli_train, cli_train_help},
    {"eval", "score a saved model on the test set, per class too", cli_eval, cli_eval_help},
    {"predict", "classify images (PNG, JPEG or PGM, any size) or a sample of an IDX file",
     cli_predict, cli_predict_help},
    {"plot", "draw loss and accuracy curves from a metrics file", cli_plot, cli_plot_help},
    {"info", "show the CPU, SIMD path, FMA peak, MPI support and dataset", cli_info,
     cli_info_help},
    {"summary", "show a network layer by layer: output shapes, parameters, MFLOP",
     cli_summary, cli_summary_help},
    {"help", "show this overview, or with a COMMAND that command's help", NULL, NULL},
};
#define NUM_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static const char *const global_flags[] = {"help", "version"};

static void print_overview(FILE *out)
{
    fputs("Usage: cnnc COMMAND [FLAGS]\n"
          "cnnc trains convolutional networks on CPUs with data-parallel replicas.\n"
          "\n"
          "Commands:\n",
          out);
    for (int i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-9s%s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "Global flags:\n"
          "  -h, --help     show this overview and exit\n"
          "      --version  print the version and exit\n"
          "\n"
          "Environment:\n"
          "  CNNC_ISA       compute kernels: generic, avx2, avx512 (x86-64) or neon (arm64)\n"
          "  CNNC_BF16      kernels of the bf16 products: avx512 or amx (x86-64)\n"
          "                 (default: the best this CPU runs)\n"
          "\n"
          "Exit status: 0 on success, 1 on a failure (files, data, training), 2 on bad\n"
          "usage.\n"
          "\n"
          "Each command's flags: 'cnnc COMMAND --help' or 'cnnc help COMMAND'.\n"
          "Everything, with examples: 'man cnnc'.\n",
          out);
}

static int is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

static const command *find_command(const char *name)
{
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* " (did you mean PREFIX NAME?)" for the names nearest word, or "" when none is close. */
static void suggestion(char *buf, size_t size, const char *word, const char *prefix,
                       const char *const *names, int count)
{
    const char *found[CLI_SUGGEST_MAX];
    char list[256];
    int n = cli_suggest(word, strlen(word), names, count, found);
    cli_name_list(list, sizeof list, prefix, found, n);
    buf[0] = '\0';
    if (n > 0)
        snprintf(buf, size, " (did you mean %s?)", list);
}

static int unknown_command(const char *name)
{
    const char *names[NUM_COMMANDS];
    char hint[300];
    for (int i = 0; i < NUM_COMMANDS; i++)
        names[i] = commands[i].name;
    suggestion(hint, sizeof hint, name, "", names, NUM_COMMANDS);
    if (!hint[0]) {
        char list[128];
        cli_name_list(list, sizeof list, "", names, NUM_COMMANDS);
        snprintf(hint, sizeof hint, " (the commands: %s)", list);
    }
    return cli_usage_error(NULL, "unknown command '%s'%s", name, hint);
}

static int unknown_global_flag(const char *arg)
{
    char hint[300];
    if (strncmp(arg, "--", 2) != 0)
        return cli_usage_error(NULL, "unknown option '%s' (flags go after the command)", arg);
    suggestion(hint, sizeof hint, arg + 2, "--", global_flags,
               (int)(sizeof global_flags / sizeof global_flags[0]));
    if (!hint[0])
        snprintf(hint, sizeof hint, " (flags go after the command)");
    return cli_usage_error(NULL, "unknown option '%s'%s", arg, hint);
}

/* `cnnc help [COMMAND]`, `cnnc --help [COMMAND]`: argv[0..argc) is what follows "help". */
static int help(int argc, char **argv)
{
    int overview = argc == 0 || is_help(argv[0]);
    const command *c = overview ? NULL : find_command(argv[0]);
    if (!overview && !c)
        return unknown_command(argv[0]);
    if (argc > 1)
        return cli_usage_error(NULL, "unexpected argument '%s' (help takes one command)",
                               argv[1]);
    if (c && c->help)
        c->help(stdout);
    else
        print_overview(stdout);
    return CLI_OK;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "missing command (train, eval, predict, plot, info or "
                                     "summary)");
    const char *name = argv[1];
    if (is_help(name))
        return help(argc - 2, argv + 2);
    if (strcmp(name, "--version") == 0) {
        printf("cnnc %s\n", CN_VERSION);
        return CLI_OK;
    }
    const command *c = find_command(name);
    if (c)
        return c->run(argc - 1, argv + 1);
    if (name[0] == '-')
        return unknown_global_flag(name);
    return unknown_command(name);
}

/* Why stdout failed: the last flush's error, or, when an earlier write failed and its errno is
 * long gone, a pipe or socket nobody reads (its write end polls POLLERR). */
static const char *stdout_trouble(int flush_errno)
{
    if (flush_errno != 0 && flush_errno != EPIPE)
        return strerror(flush_errno);
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    if (flush_errno == EPIPE || (poll(&p, 1, 0) == 1 && (p.revents & POLLERR)))
        return "nothing reads it any more";
    return "an earlier write failed";
}

/* A full disk or closed pipe on stdout turns success into failure rather than passing
 * unnoticed. */
static int check_stdout(int status)
{
    errno = 0;
    int flushed = fflush(stdout) == 0, flush_errno = flushed ? 0 : errno;
    if (!flushed || ferror(stdout)) {
        int failed = cli_failure("cannot write to standard output: %s",
                                 stdout_trouble(flush_errno));
        return status == CLI_OK ? failed : status;
    }
    return status;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return check_stdout(run_command(argc, argv));
}
