/* file_read.c — how the library opens and reads its input files: cn_open_regular, the one place
 * that opens an input (without ever waiting on a named pipe or a device), and cn_read_file, a
 * regular file whole into memory, with one message per way it can fail (the path first). It
 * does not parse the bytes, map the file, or read pipes and devices, whose size is not known in
 * advance and which may never answer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files/file_read.h"

const char *cn_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a folder";
    case S_IFIFO: return "a named pipe";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "of an unknown kind";
    }
}

/* Opening with O_NONBLOCK returns at once for a named pipe without a writer and for a device
 * that would wait; fstat then tells what was opened, and only a regular file is kept. */
int cn_open_regular(const char *path, cn_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cn_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0)
        cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        cn_fail(err, "%s: not a regular file (%s)", path, cn_file_kind(st.st_mode));
    else if ((flags = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else
        return fd;
    close(fd);
    return -1;
}

/* Reads len bytes from fd into bytes; a short read means the file shrank meanwhile. */
static int read_all(int fd, const char *path, uint8_t *bytes, size_t len, cn_error *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t got = read(fd, bytes + done, len - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
        if (got == 0) return cn_fail(err, "%s: cannot read: file shrank while reading", path);
        done += (size_t)got;
    }
    return 0;
}

int cn_read_file(const char *path, uint64_t max_bytes, uint8_t **bytes, size_t *len,
                 cn_error *err)
{
    if (max_bytes > SIZE_MAX / 2) max_bytes = SIZE_MAX / 2;
    int fd = cn_open_regular(path, err);
    if (fd < 0) return -1;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size > max_bytes) {
        *len = (size_t)((uint64_t)st.st_size < SIZE_MAX ? (uint64_t)st.st_size : SIZE_MAX);
        rc = CN_FILE_TOO_LARGE;
    }
    if (rc == 0) {
        *len = (size_t)st.st_size;
        *bytes = malloc(*len ? *len : 1);
        if (!*bytes)
            rc = cn_fail(err, "%s: cannot read: %s", path, strerror(ENOMEM));
        else if (read_all(fd, path, *bytes, *len, err) != 0) {
            free(*bytes);
            *bytes = NULL;
            rc = -1;
        }
    }
    close(fd);
    return rc;
}
