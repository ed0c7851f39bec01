/* common.c — the helpers every cnnc subcommand uses: error messages and lines that name files in
 * one escaped format, "did you mean" suggestions for mistyped flags and commands, strict number
 * parsing, opening input files, dataset loading and a clock. It does not decide exit statuses
 * beyond returning them, and writes to stdout only the lines handed to cli_print_line. Output
 * files are outputs.c's. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"


/* Writes text with every control character as \xNN: the bytes below 0x20 and 0x7f, and the C1
 * controls U+0080..U+009F as UTF-8 writes them (0xc2 0x80..0x9f), so that text from a file or
 * a file name can neither move the cursor, recolour the terminal nor start a line of its own. */
static void put_escaped(FILE *out, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            fprintf(out, "\\x%02x", *c);
        } else if (*c == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) {
            fprintf(out, "\\x%02x\\x%02x", c[0], c[1]);
            c++;
        } else {
            fputc(*c, out);
        }
    }
}

/* One line: prefix, then the formatted message escaped (put_escaped), then the newline. */
static void print_line(FILE *out, const char *prefix, const char *fmt, va_list ap)
{
    char *text = NULL;
    fputs(prefix, out);
    if (vasprintf(&text, fmt, ap) >= 0) {
        put_escaped(out, text);
        free(text);
    } else {
        fputs("(out of memory for the message)", out);
    }
    fputc('\n', out);
}

static void print_error_line(const char *fmt, va_list ap)
{
    print_line(stderr, "cnnc: error: ", fmt, ap);
}

void cli_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line(stderr, "cnnc: warning: ", fmt, ap);
    va_end(ap);
}

void cli_print_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line(stdout, "", fmt, ap);
    va_end(ap);
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

/* ---------------------------------------------------------------- suggestions */

#define WORD_MAX 64    /* longer words and names get no suggestion */
#define OPTIONS_MAX 64 /* long options of one command, at most */

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

static int same_letter(char a, char b)
{
    return tolower((unsigned char)a) == tolower((unsigned char)b);
}

/* The optimal-string-alignment distance (Damerau-Levenshtein: insertions, deletions,
 * substitutions and swaps of neighbours cost 1 each) between a[0..m) and b[0..n), ignoring
 * case; m and n are at most WORD_MAX. */
static int edit_distance(const char *a, size_t m, const char *b, size_t n)
{
    int rows[3][WORD_MAX + 1];
    int *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= n; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= m; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= n; j++) {
            int d = min_int(min_int(prev[j], cur[j - 1]) + 1,
                            prev[j - 1] + !same_letter(a[i - 1], b[j - 1]));
            if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) &&
                same_letter(a[i - 2], b[j - 1]))
                d = min_int(d, before[j - 2] + 1);
            cur[j] = d;
        }
        int *spare = before;
        before = prev;
        prev = cur;
        cur = spare;
    }
    return prev[n];
}

/* Whether word[0..len) is the initials of name's dash-separated parts ("lr": learning-rate). */
static int is_initials(const char *word, size_t len, const char *name)
{
    size_t i = 0;
    for (const char *p = name; *p; p++)
        if (p == name || p[-1] == '-') {
            if (i == len || !same_letter(*p, word[i]))
                return 0;
            i++;
        }
    return len >= 2 && i == len;
}

/* The lower of two fits, -1 meaning none. */
static int better_fit(int a, int b)
{
    return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* How well word[0..len) fits text[0..text_len), a name or a part of one (see fit). */
static int text_fit(const char *word, size_t len, const char *text, size_t text_len)
{
    if (text_len == len && strncasecmp(text, word, len) == 0)
        return 1;
    if (len >= 3 && text_len > len && strncasecmp(text, word, len) == 0)
        return 2;
    int d = edit_distance(word, len, text, text_len);
    return d <= (len >= 6 ? (int)len / 3 : 1) ? 3 + d : -1;
}

/* How well word[0..len) fits name, lower is better; -1: not at all.
 *   0      word starts name ("s": seed; "pred": predict);
 *   1      word is a dash-separated part of name ("epochs": num-epochs) or the initials of its
 *          parts ("lr": learning-rate);
 *   2      (3 letters or more) word starts a part of name ("epoch": num-epochs), or name
 *          starts word ("evaluate": eval);
 *   3 + d  word is d edits from name or one of its parts, d at most a third of word's length
 *          and at least 1 ("tarin": train; "cors": num-cores). */
static int fit(const char *word, size_t len, const char *name)
{
    size_t name_len = strlen(name);
    if (len == 0 || len > WORD_MAX || name_len > WORD_MAX)
        return -1;
    if (len <= name_len && strncasecmp(name, word, len) == 0)
        return 0;
    int best = is_initials(word, len, name) ? 1 : -1;
    if (name_len >= 3 && name_len < len && strncasecmp(name, word, name_len) == 0)
        best = better_fit(best, 2);
    best = better_fit(best, text_fit(word, len, name, name_len));
    for (const char *part = name; *part;) {
        size_t part_len = strcspn(part, "-");
        best = better_fit(best, text_fit(word, len, part, part_len));
        part += part_len + (part[part_len] == '-');
    }
    return best;
}

int cli_suggest(const char *word, size_t len, const char *const *names, int count,
                const char **found)
{
    int best = -1, n = 0;
    for (int i = 0; i < count; i++) {
        int f = fit(word, len, names[i]);
        if (f < 0 || (best >= 0 && f > best))
            continue;
        if (f != best)
            n = 0;
        best = f;
        if (n < CLI_SUGGEST_MAX)
            found[n++] = names[i];
    }
    return n;
}

void cli_name_list(char *buf, size_t size, const char *prefix, const char *const *names, int n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        int w = snprintf(buf + used, size - used, "%s%s%s", sep, prefix, names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* The long names in options, at most OPTIONS_MAX. */
static int option_names(const struct option *options, const char **names)
{
    int n = 0;
    for (const struct option *o = options; o->name && n < OPTIONS_MAX; o++)
        names[n++] = o->name;
    return n;
}

/* A long option that getopt_long found in no option or in several (a shared prefix): arg is
 * what followed the dashes, possibly with "=VALUE". */
static int unknown_long_option(const char *command, const struct option *options,
                               const char *arg)
{
    const char *names[OPTIONS_MAX], *found[CLI_SUGGEST_MAX];
    size_t len = strcspn(arg, "=");
    int count = option_names(options, names);
    int n = cli_suggest(arg, len, names, count, found);
    char list[512];
    cli_name_list(list, sizeof list, "--", found, n);
    if (n > 1 && strncmp(found[0], arg, len) == 0 && strncmp(found[1], arg, len) == 0) {
        for (int i = 0; i < count; i++) /* "lr": also the initials of learning-rate */
            if (strncmp(names[i], arg, len) != 0 && is_initials(arg, len, names[i]))
                return cli_usage_error(command, "ambiguous option '--%.*s' (could be %s; did "
                                       "you mean --%s?)", (int)len, arg, list, names[i]);
        return cli_usage_error(command, "ambiguous option '--%.*s' (could be %s)", (int)len, arg,
                               list);
    }
    if (n > 0)
        return cli_usage_error(command, "unknown option '--%.*s' (did you mean %s?)", (int)len,
                               arg, list);
    return cli_usage_error(command, "unknown option '--%.*s'", (int)len, arg);
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
    const char *arg = argv[optind - 1];
    if (strncmp(arg, "--", 2) == 0 && arg[2] != '=')
        return unknown_long_option(command, options, arg + 2);
    return cli_usage_error(command, "unknown option '%s'", arg);
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
    long long v = strtoll(text, &end, 10); /* clamped when out of its range: refused below */
    if (!starts_like_a_number(text) || *end != '\0') {
        cli_usage_error(command, "%s: '%s' is not an integer", flag, text);
        return -1;
    }
    if (max == INT_MAX && v > max)
        cli_usage_error(command, "%s: '%s' is too large (at most %d)", flag, text, max);
    else if (max == INT_MAX && v < min)
        cli_usage_error(command, "%s: '%s' is out of range (at least %d)", flag, text, min);
    else if (v < min || v > max)
        cli_usage_error(command, "%s: '%s' is out of range (%d..%d)", flag, text, min, max);
    else {
        *out = (int)v;
        return 0;
    }
    return -1;
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

void cli_threads_note(int asked, int used, const char *fmt, ...)
{
    if (used >= asked)
        return;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cnnc: note: --threads %d: %d thread%s can have work (%s); using %d\n", asked,
            used, used == 1 ? "" : "s", why, used);
}

int cli_require_file(const char *command, const char *flag, const char *path)
{
    if (!path)
        return cli_usage_error(command, "%s FILE is required", flag);
    if (path[0] == '\0')
        return cli_usage_error(command, "%s: empty file name", flag);
    return CLI_OK;
}

char *cli_join_path(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    if (path)
        snprintf(path, len, "%s/%s", dir, name);
    return path;
}

FILE *cli_open_input(const char *flag, const char *path)
{
    cn_error err = {{0}};
    int fd = cn_open_regular(path, &err);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (fd >= 0 && !f) {
        cn_fail(&err, "%s: %s", path, strerror(errno));
        close(fd);
    }
    if (!f && flag)
        cli_failure("%s: %s", flag, err.msg);
    else if (!f)
        cli_failure("%s", err.msg);
    return f;
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
    *file = cli_join_path(path, newest);
    return *file ? CLI_OK : cli_failure("out of memory");
}

int cli_same_model(const char *command, const char *model_path, const cn_model *model,
                   const char *file)
{
    cn_model *given = NULL;
    if (!model_path) return CLI_OK;
    if (cli_read_model(model_path, &given) != CLI_OK) return CLI_FAILURE;
    int same = strcmp(cn_model_text(given), cn_model_text(model)) == 0;
    cn_model_free(given);
    return same ? CLI_OK : cli_usage_error(command, "--model %s is not the network of the "
                                           "checkpoint %s: the model defines the math; leave "
                                           "--model out to use the checkpoint's", model_path,
                                           file);
}

int cli_load_model(const char *command, const char *path, const char *model_path,
                   cn_model **model, char **file)
{
    cn_error err = {{0}};
    *model = NULL;
    if (cli_checkpoint_file("--checkpoint", path, file) != CLI_OK)
        return CLI_FAILURE;
    path = *file;
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f)
        return cli_library_error(&err, path);
    int rc = cli_checkpoint_model_or(f, path, model_path, model);
    int recorded = cn_safetensors_meta(f, "model") != NULL;
    cn_safetensors_free(f);
    if (rc == CLI_OK) rc = cli_same_model(command, model_path, *model, path);
    if (rc != CLI_OK)
        return rc;
    if (cn_model_load(*model, path, &err) == 0)
        return CLI_OK;
    if (recorded)
        return cli_library_error(&err, path);
    int named = strstr(err.msg, path) != NULL; /* the message names the file already */
    return cli_failure("%s%s%s, but the file records no network and was read as %s; give "
                       "--model with the model file of its network", named ? "" : path,
                       named ? "" : ": ", err.msg, model_path ? model_path : "the seed's network");
}

const char *cli_class_name(const cn_model *m, int c)
{
    const char *name = cn_model_class_name(m, c);
    return name ? name : "?";
}

/* The label numbers as names: "0", "1", ... */
static int number_classes(cn_model *m)
{
    int n = cn_model_num_outputs(m);
    char *text = malloc((size_t)n * 12);
    const char **names = malloc((size_t)n * sizeof *names);
    cn_error err = {{0}};
    int rc = text && names ? CLI_OK : cli_failure("out of memory for %d class names", n);
    for (int c = 0; rc == CLI_OK && c < n; c++) {
        snprintf(text + 12 * c, 12, "%d", c);
        names[c] = text + 12 * c;
    }
    if (rc == CLI_OK && cn_model_set_class_names(m, names, &err) != 0)
        rc = cli_library_error(&err, NULL);
    free(text), free(names);
    return rc;
}

int cli_class_name_width(const cn_model *m)
{
    int width = 12; /* Fashion-MNIST's longest name, so its tables keep their look */
    for (int c = 0; c < cn_model_num_outputs(m); c++)
        if ((int)strlen(cli_class_name(m, c)) > width)
            width = (int)strlen(cli_class_name(m, c));
    return width;
}

const char *cli_data_names_source(const cn_dataset *ds)
{
    return ds->format == CN_DATA_FOLDER ? "its folders' names" : "its class names";
}

void cli_print_skipped(const char *indent, const cn_dataset *train, const cn_dataset *test)
{
    if (train->skipped == 0 && test->skipped == 0) return;
    cli_print_line("%sleft out: %d file%s in train/ and %d in test/ not named as images (.png, "
                   ".jpg, .jpeg)", indent, train->skipped, train->skipped == 1 ? "" : "s",
                   test->skipped);
}

int cli_name_classes(cn_model *m, const cn_dataset *ds, const char *model_what)
{
    cn_error err = {{0}};
    if (!ds || !ds->class_names || (cn_model_class_name(m, 0) && !model_what))
        return cn_model_class_name(m, 0) ? CLI_OK : number_classes(m);
    int n = cn_model_num_outputs(m);
    for (int c = 0; cn_model_class_name(m, 0) && c < n; c++)
        if (strcmp(cn_model_class_name(m, c), ds->class_names[c]) != 0)
            return cli_failure("%s: class %d is \"%s\", but the data's is \"%s\" (%s): data "
                               "of other classes", model_what, c, cn_model_class_name(m, c),
                               ds->class_names[c], cli_data_names_source(ds));
    if (cn_model_set_class_names(m, (const char *const *)ds->class_names, &err) != 0)
        return cli_library_error(&err, NULL);
    return CLI_OK;
}

int cli_check_model_data(const cn_model *m, const char *model_what, const cn_dataset *ds,
                         const char *data_dir)
{
    cn_error err = {{0}};
    if (cn_model_fits_data(m, ds, &err) == 0) return CLI_OK;
    int c, h, w;
    cn_model_input_shape(m, &c, &h, &w);
    int scalable = ds->format == CN_DATA_FOLDER && (h != ds->height || w != ds->width);
    return cli_failure("%s: %s (%s, %s)%s", model_what, err.msg, data_dir,
                       cn_data_format_name(ds->format),
                       scalable ? "; --resize scales the images to the model's size" : "");
}

int cli_read_model(const char *path, cn_model **model)
{
    cn_error err = {{0}};
    *model = path ? cn_model_from_file(path, &err) : cn_model_fashion_mnist(&err);
    if (!*model) return cli_library_error(&err, path);
    if (path) return CLI_OK;
    /* the seed's network is Fashion-MNIST's */
    if (cn_model_set_class_names(*model, cn_fashion_mnist_names, &err) == 0) return CLI_OK;
    cn_model_free(*model);
    *model = NULL;
    return cli_library_error(&err, NULL);
}

int cli_checkpoint_model(const cn_safetensors *f, const char *path, cn_model **model)
{
    return cli_checkpoint_model_or(f, path, NULL, model);
}

int cli_checkpoint_model_or(const cn_safetensors *f, const char *path, const char *model_path,
                            cn_model **model)
{
    cn_error err = {{0}};
    const char *text = cn_safetensors_meta(f, "model");
    if (!text)
        return cli_read_model(model_path, model);
    char source[4200];
    snprintf(source, sizeof source, "%s: __metadata__ \"model\"", path);
    *model = cn_model_from_text(text, strlen(text), source, &err);
    return *model ? CLI_OK : cli_failure("%s", err.msg);
}

int cli_load_dataset(cn_dataset *ds, const cli_data *data, const cn_model *model,
                     const char *split, int limit)
{
    cn_error err = {{0}};
    cn_data_source src = {.dir = data->dir, .classes_file = data->classes};
    cn_model_input_shape(model, &src.channels, &src.height, &src.width);
    if (!data->resize) src.height = src.width = 0;
    src.test_percent = data->test_percent;
    src.threads = data->threads;
    memset(ds, 0, sizeof *ds);
    if (cn_data_format_from_name(data->format ? data->format : "auto", &src.format) != 0)
        return cli_failure("--data-format: '%s' is not auto, idx, cifar10 or folder",
                           data->format);
    if (cn_dataset_read(ds, &src, split, &err) != 0) {
        memset(ds, 0, sizeof *ds);
        return cli_library_error(&err, NULL);
    }
    if ((data->resize || data->test_percent) && ds->format != CN_DATA_FOLDER) {
        int rc = data->resize
                     ? cli_failure("--resize: %s holds %s data: only the images of folder data "
                                   "are scaled", data->dir, cn_data_format_name(ds->format))
                     : cli_failure("--test-percent: %s holds %s data, with its own test split: "
                                   "only a folder of class folders is split by a share",
                                   data->dir, cn_data_format_name(ds->format));
        cn_dataset_free(ds);
        return rc;
    }
    if (limit > 0 && limit < ds->count)
        ds->count = limit;
    return CLI_OK;
}

int cli_parse_data_format(const char *command, const char *text, const char **out)
{
    cn_data_format f;
    if (cn_data_format_from_name(text, &f) != 0)
        return cli_usage_error(command, "--data-format: '%s' is not auto, idx, cifar10 or "
                               "folder", text);
    *out = text;
    return CLI_OK;
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
    cn_bf16_kernel bf16;
    if (cn_isa_from_env(&isa, &err) != 0 || cn_bf16_kernel_from_env(&bf16, &err) != 0)
        return cli_usage_error(NULL, "%s", err.msg);
    return CLI_OK;
}

double cli_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
