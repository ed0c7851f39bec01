/* outputs.c — what the cnnc commands accept as an output file, and which file an output is. An
 * output written whole (a model, a checkpoint, a picture: a temporary file renamed over it) must
 * be a regular file or not exist yet, since the rename would replace a device node or a named
 * pipe; a streamed output (the metrics file) may also be a named pipe or a character device, and
 * is opened without waiting for a pipe's reader. Two outputs are the same file when they are one
 * existing file (device and inode, through any symbolic link), or, not existing yet, when they
 * have one name in one real folder. It writes nothing and decides nothing about what a command
 * writes where; the callers do. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
        return cli_failure("%s: %s: folder %s: %s", flag, path, folder, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cli_failure("%s: %s: %s is not a folder", flag, path, folder);
    if (access(folder, W_OK | X_OK) != 0)
        return cli_failure("%s: %s: folder %s is not writable: %s", flag, path, folder,
                           strerror(errno));
    return CLI_OK;
}

char *cli_resolve_path(const char *path)
{
    char *real = realpath(path, NULL);
    if (real || errno != ENOENT)
        return real;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') /* "ck/": the folder ck */
        len--;
    char *trimmed = strndup(path, len), *folder = trimmed ? folder_of(trimmed) : NULL;
    char *real_folder = folder ? realpath(folder, NULL) : NULL;
    if (real_folder) {
        const char *slash = strrchr(trimmed, '/');
        real = cli_join_path(strcmp(real_folder, "/") == 0 ? "" : real_folder,
                             slash ? slash + 1 : trimmed);
    }
    free(real_folder);
    free(folder);
    free(trimmed);
    return real;
}

/* What an existing output may be: a regular file, and for a streamed one also a named pipe or
 * a character device (/dev/stdout, say). */
static int check_kind(const char *flag, const char *path, const struct stat *st,
                      cli_output_kind kind)
{
    if (S_ISREG(st->st_mode))
        return CLI_OK;
    if (kind == CLI_STREAMED && (S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode)))
        return CLI_OK;
    if (kind == CLI_STREAMED)
        return cli_failure("%s: %s is %s: give a regular file, a named pipe or a character "
                           "device", flag, path, cn_file_kind(st->st_mode));
    return cli_failure("%s: %s is %s, not a regular file: this output is written to a "
                       "temporary file that is then renamed over it, which would replace %s; "
                       "give a regular file or a new name", flag, path,
                       cn_file_kind(st->st_mode), cn_file_kind(st->st_mode));
}

/* Fills o->exists, dev and ino from stat (through symbolic links) and checks the kind; a link to
 * nothing is refused, as the file it would create is not the one its name says. */
static int check_existing(cli_output *o, cli_output_kind kind)
{
    struct stat st;
    if (stat(o->path, &st) == 0) {
        o->exists = 1;
        o->dev = st.st_dev;
        o->ino = st.st_ino;
        return check_kind(o->flag, o->path, &st, kind);
    }
    if (errno == ENOENT && lstat(o->path, &st) == 0 && S_ISLNK(st.st_mode))
        return cli_failure("%s: %s is a symbolic link to a missing file: give the file's own "
                           "name", o->flag, o->path);
    if (errno != ENOENT && errno != ENOTDIR)
        return cli_failure("%s: %s: %s", o->flag, o->path, strerror(errno));
    return CLI_OK; /* not there yet (a missing folder is check_folder's to report) */
}

int cli_output_check(cli_output *o, const char *flag, const char *path, cli_output_kind kind)
{
    struct stat st;
    size_t len = strlen(path);
    *o = (cli_output){.flag = flag, .path = path};
    if (len == 0 || path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return cli_failure("%s: '%s' is not a file name", flag, path);
    char *folder = folder_of(path);
    if (!folder)
        return cli_failure("%s: out of memory", flag);
    int rc = check_folder(flag, path, folder);
    free(folder);
    if (rc == CLI_OK)
        rc = check_existing(o, kind);
    if (rc == CLI_OK)
        o->where = cli_resolve_path(path); /* NULL when it cannot be resolved: then dev, ino */
    return rc;
}

void cli_output_free(cli_output *o)
{
    free(o->where);
    o->where = NULL;
}

int cli_output_is(const cli_output *o, const char *path)
{
    struct stat st;
    return o->exists && stat(path, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino;
}

int cli_check_output_path(const char *command, const char *flag, const char *path,
                          const char *input, const char *input_what)
{
    cli_output o;
    int rc = cli_output_check(&o, flag, path, CLI_REPLACED);
    if (rc == CLI_OK && input && cli_output_is(&o, input))
        rc = cli_usage_error(command, "%s: '%s' is %s itself", flag, path, input_what);
    cli_output_free(&o);
    return rc;
}

int cli_same_output(const cli_output *a, const cli_output *b)
{
    if (a->exists || b->exists)
        return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
    return a->where && b->where && strcmp(a->where, b->where) == 0;
}

int cli_outputs_distinct(const char *command, const cli_output *outputs, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (cli_same_output(&outputs[i], &outputs[j]))
                return cli_usage_error(command, "%s %s and %s %s are the same file: give each "
                                       "output a file of its own", outputs[i].flag,
                                       outputs[i].path, outputs[j].flag, outputs[j].path);
    return CLI_OK;
}

/* When path is the file this process's standard output or error already writes (--metrics-file
 * /dev/stdout with the output sent to a file), a copy of that descriptor, so that the lines land
 * where the shell's redirection says instead of overwriting them; -1 otherwise. */
static int standard_stream_of(const char *path)
{
    struct stat st, std;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
        if (fstat(fd, &std) == 0 && std.st_dev == st.st_dev && std.st_ino == st.st_ino)
            return fcntl(fd, F_DUPFD_CLOEXEC, 3);
    return -1;
}

/* Opens the streamed output without waiting: a named pipe with no reader fails at once
 * (ENXIO) instead of blocking until one comes. */
static int open_stream_fd(const char *flag, const char *path, int append)
{
    int fd = standard_stream_of(path);
    if (fd >= 0)
        return fd;
    fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : O_TRUNC),
              0666);
    if (fd < 0 && errno == ENXIO)
        cli_failure("%s: %s: a named pipe that no process is reading: start its reader first",
                    flag, path);
    else if (fd < 0)
        cli_failure("%s: %s: %s", flag, path, strerror(errno));
    return fd;
}

FILE *cli_open_stream(const char *flag, const char *path, int append)
{
    int fd = open_stream_fd(flag, path, append), flags;
    if (fd < 0)
        return NULL;
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) == -1 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        cli_failure("%s: %s: %s", flag, path, strerror(errno));
    else if (check_kind(flag, path, &st, CLI_STREAMED) == CLI_OK &&
             !(f = fdopen(fd, append ? "a" : "w")))
        cli_failure("%s: %s: %s", flag, path, strerror(errno));
    if (!f)
        close(fd);
    return f;
}
