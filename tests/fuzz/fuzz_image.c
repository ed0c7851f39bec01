/* fuzz_image.c — fuzz target for the image reader of `cnnc predict` (PNG through cairo, JPEG
 * through libjpeg-turbo, PGM P2 and P5 by cnnc's own parser): every input is read as a 28x28
 * grey image, and again at any size scaled to 28x28, which also runs the scaler; then the same
 * as a 3-channel colour image (scaled to 32x32). A reader that refuses must say why. Built with
 * libFuzzer by `make fuzz`, and with tests/fuzz/replay.c for `make test`. */
#include "cnnc.h"
#include "fuzz_input.h"

static void check(int rc, const uint8_t *pixels, size_t n, const cn_error *err)
{
    if (rc == 0) {
        volatile unsigned sum = 0;
        for (size_t i = 0; i < n; i++) sum += pixels[i];
        (void)sum;
    } else if (err->msg[0] == '\0') {
        abort();
    }
}

/* Exactly side x side, then any size scaled to side x side, as channels. */
static void read_both(const char *path, int channels, int side, uint8_t *pixels)
{
    size_t n = (size_t)channels * side * side;
    cn_error err = {{0}}, err_resized = {{0}};
    check(cn_image_read(path, channels, side, side, pixels, &err), pixels, n, &err);
    int height = 0, width = 0;
    int rc = cn_image_read_resized(path, channels, side, side, pixels, &height, &width,
                                   &err_resized);
    if (rc == 0 && (height < 1 || width < 1)) abort();
    check(rc, pixels, n, &err_resized);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    static uint8_t pixels[3 * 32 * 32];
    read_both(path, 1, 28, pixels);
    read_both(path, 3, 32, pixels);
    return 0;
}
