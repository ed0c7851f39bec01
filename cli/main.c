/* main.c — the cnnc command: picks the subcommand (train, eval, predict, plot, info) and
 * answers --help and --version. It parses no subcommand flags itself; each subcommand's file
 * does. */
#include <errno.h>
#include <string.h>

#include "cli.h"

static void print_overview(FILE *out)
{
    fputs("Usage: cnnc COMMAND [FLAGS]\n"
          "Trains convolutional networks on CPUs with data-parallel replicas.\n"
          "\n"
          "Commands:\n"
          "  train   train the Fashion-MNIST CNN (the defaults reproduce the reference job)\n"
          "  eval    score a saved model on the test set, per class too\n"
          "  predict classify 28x28 grey images (PNG, PGM, or a sample of an IDX file)\n"
          "  plot    draw loss and accuracy curves from a metrics file\n"
          "  info    show the CPU, SIMD path, FMA peak, MPI support and dataset\n"
          "\n"
          "Global flags:\n"
          "  -h, --help     show this help and exit\n"
          "      --version  print the version and exit\n"
          "\n"
          "Environment:\n"
          "  CNNC_ISA       compute kernels: generic, avx2 or avx512\n"
          "                 (default: the best this CPU runs)\n"
          "\n"
          "Exit status: 0 on success, 1 on a failure (files, data, training), 2 on bad\n"
          "usage.\n"
          "\n",
          out);
}

static void print_full_help(FILE *out)
{
    print_overview(out);
    cli_train_help(out);
    fputc('\n', out);
    cli_eval_help(out);
    fputc('\n', out);
    cli_predict_help(out);
    fputc('\n', out);
    cli_plot_help(out);
    fputc('\n', out);
    cli_info_help(out);
}

static int is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "missing command (train, eval, predict, plot or info)");
    const char *command = argv[1];
    if (is_help(command)) {
        print_full_help(stdout);
        return CLI_OK;
    }
    if (strcmp(command, "--version") == 0) {
        printf("cnnc %s\n", CN_VERSION);
        return CLI_OK;
    }
    if (strcmp(command, "train") == 0)
        return cli_train(argc - 1, argv + 1);
    if (strcmp(command, "eval") == 0)
        return cli_eval(argc - 1, argv + 1);
    if (strcmp(command, "predict") == 0)
        return cli_predict(argc - 1, argv + 1);
    if (strcmp(command, "plot") == 0)
        return cli_plot(argc - 1, argv + 1);
    if (strcmp(command, "info") == 0)
        return cli_info(argc - 1, argv + 1);
    if (command[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s' (flags go after the command)", command);
    return cli_usage_error(NULL, "unknown command '%s'", command);
}

/* A full disk or closed pipe on stdout turns success into failure rather than passing
 * unnoticed. */
static int check_stdout(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int failed = cli_failure("cannot write to standard output: %s", strerror(errno));
        return status == CLI_OK ? failed : status;
    }
    return status;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return check_stdout(run_command(argc, argv));
}
