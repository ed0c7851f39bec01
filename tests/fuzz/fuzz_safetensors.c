/* fuzz_safetensors.c — fuzz target for the safetensors reader and the model loader on top of
 * it: every input is read as a file (header, dtypes, shapes, byte ranges), its tensors and
 * metadata are walked, and it is loaded into the seed model, which must refuse anything that is
 * not exactly its state_dict. Built with libFuzzer by `make fuzz`, and with tests/fuzz/replay.c
 * for `make test`. */
#include <string.h>

#include "cnnc.h"
#include "fuzz_input.h"

static void walk(const cn_safetensors *f)
{
    volatile uint8_t sink = 0;
    for (int i = 0; i < cn_safetensors_count(f); i++) {
        const cn_tensor_ref *t = cn_safetensors_at(f, i);
        if (t != cn_safetensors_get(f, t->name)) abort(); /* names are unique */
        size_t n = t->dtype == CN_I64 ? 8 : 4;
        for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
        if (n) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[n - 1];
    }
    const char *format = cn_safetensors_meta(f, "format");
    if (format) sink ^= (uint8_t)format[0];
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (f) {
        walk(f);
        cn_safetensors_free(f);
    } else if (err.msg[0] == '\0') {
        abort();
    }
    cn_model *m = cn_model_fashion_mnist(&err);
    if (!m) abort();
    err.msg[0] = '\0';
    if (cn_model_load(m, path, &err) != 0 && err.msg[0] == '\0') abort();
    cn_model_free(m);
    return 0;
}
