/* file_read.c — cn_read_file: one regular file, whole, into memory, with one message per way it
 * can fail (the path first). It does not parse the bytes, map the file, or read pipes and
 * devices, whose size is not known in advance. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file_read.h"

int cn_read_file(const char *path, uint64_t max_bytes, uint8_t **bytes, size_t *len,
                 cn_error *err)
{
    if (max_bytes > SIZE_MAX / 2) max_bytes = SIZE_MAX / 2;
    FILE *f = fopen(path, "rb");
    if (!f) return cn_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) != 0)
        rc = cn_fail(err, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = cn_fail(err, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max_bytes) {
        *len = (size_t)((uint64_t)st.st_size < SIZE_MAX ? (uint64_t)st.st_size : SIZE_MAX);
        rc = CN_FILE_TOO_LARGE;
    }
    if (rc == 0) {
        *len = (size_t)st.st_size;
        *bytes = malloc(*len ? *len : 1);
        if (!*bytes)
            rc = cn_fail(err, "%s: cannot read: %s", path, strerror(ENOMEM));
        else if (fread(*bytes, 1, *len, f) != *len)
            rc = cn_fail(err, "%s: cannot read: %s", path,
                         ferror(f) ? strerror(errno) : "file shrank while reading");
    }
    fclose(f);
    return rc;
}
