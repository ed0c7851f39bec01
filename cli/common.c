/* common.c — the helpers every cnnc subcommand uses: error messages in one format, strict
 * number parsing, output-folder checks, dataset loading and a clock. It does not decide exit
 * statuses beyond returning them, and it never writes to stdout. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void print_error_line(const char *fmt, va_list ap)
{
    fputs("cnnc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static void print_help_hint(const char *command)
{
    if (command)
        fprintf(stderr, "Try 'cnnc %s --help'.\n", command);
    else
        fputs("Try 'cnnc --help'.\n", stderr);
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_error_line(fmt, ap);
    va_end(ap);
    print_help_hint(command);
    return CLI_USAGE;
}

int cli_failure(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_error_line(fmt, ap);
    va_end(ap);
    return CLI_FAILURE;
}

/* As cli_failure, for the checks that return -1. */
static int check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int check_failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_error_line(fmt, ap);
    va_end(ap);
    return -1;
}

static const struct option *find_option_by_val(const struct option *options, int val)
{
    for (const struct option *o = options; o->name; o++)
        if (o->val == val)
            return o;
    return NULL;
}

int cli_option_error(const char *command, const struct option *options, char **argv, int c)
{
    const struct option *o = optopt ? find_option_by_val(options, optopt) : NULL;
    if (c == ':' && o)
        return cli_usage_error(command, "--%s: missing value", o->name);
    if (o && o->has_arg == no_argument)
        return cli_usage_error(command, "--%s: takes no value", o->name);
    if (optopt && !o && isprint(optopt))
        return cli_usage_error(command, "unknown option '-%c'", optopt);
    return cli_usage_error(command, "unknown option '%s'", argv[optind - 1]);
}

int cli_no_positional(const char *command, int argc, char **argv, int first)
{
    if (first < argc)
        return cli_usage_error(command, "unexpected argument '%s'", argv[first]);
    return CLI_OK;
}

static int starts_like_a_number(const char *text)
{
    return text[0] != '\0' && !isspace((unsigned char)text[0]);
}

int cli_parse_int(const char *command, const char *flag, const char *text, int min, int max,
                  int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!starts_like_a_number(text) || *end != '\0') {
        cli_usage_error(command, "%s: '%s' is not an integer", flag, text);
        return -1;
    }
    if (errno == ERANGE || v < min || v > max) {
        if (max == INT_MAX)
            cli_usage_error(command, "%s: '%s' is out of range (at least %d)", flag, text, min);
        else
            cli_usage_error(command, "%s: '%s' is out of range (%d..%d)", flag, text, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *command, const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!starts_like_a_number(text) || *end != '\0') {
        cli_usage_error(command, "%s: '%s' is not an integer", flag, text);
        return -1;
    }
    if (text[0] == '-' || errno == ERANGE) {
        cli_usage_error(command, "%s: '%s' is out of range (0..%llu)", flag, text,
                        (unsigned long long)UINT64_MAX);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_float(const char *command, const char *flag, const char *text, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (!starts_like_a_number(text) || *end != '\0') {
        cli_usage_error(command, "%s: '%s' is not a number", flag, text);
        return -1;
    }
    if (!isfinite(v)) {
        cli_usage_error(command, "%s: '%s' is not a finite number", flag, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* Processes that an MPI launcher started on this host, as its environment says; 1 if none. */
static long processes_on_this_host(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *text = getenv(names[i]);
        long n = text ? strtol(text, NULL, 10) : 0;
        if (n > 0)
            return n;
    }
    return 1;
}

/* The CPUs this process may run on: a launcher (mpirun, srun, taskset) may have bound it to
 * some; when none bound it, the host's CPUs are shared among the launcher's processes there. */
int cli_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) < n)
        n = CPU_COUNT(&allowed);
    else
        n /= processes_on_this_host();
    if (n < 1)
        return 1;
    return n > CLI_MAX_THREADS ? CLI_MAX_THREADS : (int)n;
}

/* The folder part of path: "." for a bare name, "/" for a file in the root. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int check_folder(const char *flag, const char *path, const char *folder)
{
    struct stat st;
    if (stat(folder, &st) != 0)
        return check_failed("%s: %s: folder %s: %s", flag, path, folder, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return check_failed("%s: %s: %s is not a folder", flag, path, folder);
    if (access(folder, W_OK | X_OK) != 0)
        return check_failed("%s: %s: folder %s is not writable: %s", flag, path, folder,
                            strerror(errno));
    return 0;
}

int cli_check_output_path(const char *flag, const char *path)
{
    struct stat st;
    size_t len = strlen(path);
    if (len == 0 || path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return check_failed("%s: '%s' is not a file name", flag, path);
    char *folder = folder_of(path);
    if (!folder)
        return check_failed("%s: out of memory", flag);
    int rc = check_folder(flag, path, folder);
    free(folder);
    return rc;
}

int cli_require_file(const char *command, const char *flag, const char *path)
{
    if (!path)
        return cli_usage_error(command, "%s FILE is required", flag);
    if (path[0] == '\0')
        return cli_usage_error(command, "%s: empty file name", flag);
    return CLI_OK;
}

int cli_checkpoint_file(const char *flag, const char *path, char **file)
{
    cn_error err = {{0}};
    char newest[CN_CHECKPOINT_NAME_MAX];
    struct stat st;
    *file = NULL;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        *file = strdup(path);
        return *file ? CLI_OK : cli_failure("out of memory");
    }
    int count = cn_checkpoint_find(path, newest, &err);
    if (count < 0)
        return cli_library_error(&err, flag);
    if (count == 0)
        return cli_failure("%s: %s: no checkpoint in this folder "
                           "(checkpoint-epoch-NNNN.safetensors)", flag, path);
    size_t len = strlen(path) + strlen(newest) + 2;
    *file = malloc(len);
    if (!*file)
        return cli_failure("out of memory");
    snprintf(*file, len, "%s/%s", path, newest);
    return CLI_OK;
}

int cli_load_model(const char *path, cn_model **model)
{
    cn_error err = {{0}};
    *model = cn_model_fashion_mnist(&err);
    if (!*model)
        return cli_library_error(&err, NULL);
    if (cn_model_load(*model, path, &err) != 0)
        return cli_library_error(&err, path);
    return CLI_OK;
}

int cli_load_dataset(cn_dataset *ds, const char *dir, const char *split, int limit)
{
    cn_error err = {{0}};
    memset(ds, 0, sizeof *ds);
    if (cn_dataset_load(ds, dir, split, &err) != 0) {
        memset(ds, 0, sizeof *ds);
        cli_library_error(&err, NULL);
        return -1;
    }
    if (limit > 0 && limit < ds->count)
        ds->count = limit;
    return 0;
}

int cli_library_error(const cn_error *err, const char *path)
{
    if (path && !strstr(err->msg, path))
        return cli_failure("%s: %s", path, err->msg);
    return cli_failure("%s", err->msg);
}

int cli_check_isa(void)
{
    cn_error err = {{0}};
    cn_isa isa;
    if (cn_isa_from_env(&isa, &err) != 0)
        return cli_usage_error(NULL, "%s", err.msg);
    return CLI_OK;
}

double cli_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
