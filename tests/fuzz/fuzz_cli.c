/* fuzz_cli.c — fuzz target for the command-line parsers: the input is split at NUL bytes into
 * at most 64 arguments; the first byte picks the subcommand (train, eval, predict, plot, info),
 * whose flags are parsed and checked exactly as `cnnc` does, without running anything. A parser
 * must return success or a usage error — never crash, read past an argument or loop. Built with
 * libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for `make test`. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "fuzz_input.h"

#define MAX_ARGS 64

typedef int (*check_fn)(int argc, char **argv);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"train", "eval", "predict", "plot", "info"};
    static const check_fn checks[] = {cli_train_check_flags, cli_eval_check_flags,
                                      cli_predict_check_flags, cli_plot_check_flags,
                                      cli_info_check_flags};
    _Static_assert(sizeof names / sizeof names[0] == sizeof checks / sizeof checks[0],
                   "a parser per subcommand");
    if (size < 1) return 0;
    int which = data[0] % (int)(sizeof checks / sizeof checks[0]);
    char *text = malloc(size); /* the arguments, each ending in NUL */
    if (!text) abort();
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char *argv[MAX_ARGS + 2] = {(char *)names[which]};
    int argc = 1;
    for (char *p = text; p < text + size - 1 && argc <= MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    optind = 0; /* a full getopt reset, as for a new process */
    int rc = checks[which](argc, argv);
    if (rc != CLI_OK && rc != CLI_USAGE) abort();
    free(text);
    return 0;
}
