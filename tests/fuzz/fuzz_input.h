/* fuzz_input.h — what the fuzz harnesses share: cnnc's readers take file names, so each input
 * is written to one temporary file per process (rewritten in place for every input) and its
 * name handed to the reader. Harness code only; the library never includes it. */
#ifndef CNNC_FUZZ_INPUT_H
#define CNNC_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_input_path[64];

static void fuzz_remove_input(void)
{
    unlink(fuzz_input_path);
}

/* The path of a file that holds exactly data[0..size), removed at exit; aborts when the file
 * system fails (that is the harness's problem, not a finding in cnnc). */
static inline const char *fuzz_input_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    const char *path = fuzz_input_path;
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_input_path, sizeof fuzz_input_path, "%s/cnnc-fuzz-%ld-XXXXXX",
                 dir && *dir && strlen(dir) < 32 ? dir : "/tmp", (long)getpid());
        fd = mkstemp(fuzz_input_path);
        if (fd < 0) abort();
        atexit(fuzz_remove_input);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    return path;
}

#endif /* CNNC_FUZZ_INPUT_H */
