/* fuzz_idx.c — fuzz target for the IDX reader, raw and gzip-compressed (the reader tells them
 * apart by content): every input is read as an image file (3 dimensions) and as a label file
 * (1 dimension). A reader that accepts must hand back exactly the bytes its dimensions promise.
 * Built with libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for `make test`. */
#include <string.h>

#include "cnnc.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    for (int ndim = 1; ndim <= 3; ndim += 2) {
        uint8_t *pixels = NULL;
        int dims[3] = {0, 0, 0};
        cn_error err = {{0}};
        if (cn_idx_read(path, ndim, &pixels, dims, &err) == 0) {
            size_t n = 1;
            for (int i = 0; i < ndim; i++) n *= (size_t)dims[i];
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < n; i += 4096) sink ^= pixels[i]; /* touch every page */
            if (n) sink ^= pixels[n - 1];
            (void)sink;
            free(pixels);
        } else if (err.msg[0] == '\0') {
            abort(); /* a refusal always says why */
        }
    }
    return 0;
}
