/* fuzz_image.c — fuzz target for the image reader of `cnnc predict` (PNG through cairo, JPEG
 * through libjpeg-turbo, PGM P2 and P5 by cnnc's own parser): every input is read as a 28x28
 * grey image, and again at any size scaled to 28x28, which also runs the scaler. A reader that
 * refuses must say why. Built with libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for
 * `make test`. */
#include "cnnc.h"
#include "fuzz_input.h"

static void check(int rc, const uint8_t *pixels, const cn_error *err)
{
    if (rc == 0) {
        volatile unsigned sum = 0;
        for (int i = 0; i < 28 * 28; i++) sum += pixels[i];
        (void)sum;
    } else if (err->msg[0] == '\0') {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    uint8_t pixels[28 * 28];
    cn_error err = {{0}}, err_resized = {{0}};
    check(cn_image_read_grey(path, 28, 28, pixels, &err), pixels, &err);
    int rows = 0, cols = 0;
    int rc = cn_image_read_grey_resized(path, 28, 28, pixels, &rows, &cols, &err_resized);
    if (rc == 0 && (rows < 1 || cols < 1)) abort();
    check(rc, pixels, &err_resized);
    return 0;
}
