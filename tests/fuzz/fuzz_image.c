/* fuzz_image.c — fuzz target for the image reader of `cnnc predict` (PNG through cairo, PGM P2
 * and P5 by cnnc's own parser): every input is read as a 28x28 grey image. A reader that
 * refuses must say why. Built with libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for
 * `make test`. */
#include "cnnc.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    uint8_t pixels[28 * 28];
    cn_error err = {{0}};
    if (cn_image_read_grey(path, 28, 28, pixels, &err) == 0) {
        volatile unsigned sum = 0;
        for (int i = 0; i < 28 * 28; i++) sum += pixels[i];
        (void)sum;
    } else if (err.msg[0] == '\0') {
        abort();
    }
    return 0;
}
