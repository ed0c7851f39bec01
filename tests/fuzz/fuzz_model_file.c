/* fuzz_model_file.c — fuzz target for the model file parser: every input is parsed as the text
 * of a model file. A refusal must say why; an accepted model must write itself as text that
 * builds the same model again, and initialise. Built with libFuzzer by
 * `make fuzz`, and with tests/fuzz/replay.c for `make test`. */
#include <string.h>

#include "cnnc.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_from_text((const char *)data, size, "fuzz.model", &err);
    if (!m) {
        if (strncmp(err.msg, "fuzz.model:", 11) != 0) abort(); /* a refusal names its source */
        return 0;
    }
    const char *text = cn_model_text(m);
    cn_model *again = cn_model_from_text(text, strlen(text), "again", &err);
    if (!again || strcmp(cn_model_text(again), text) != 0 ||
        cn_model_num_params(again) != cn_model_num_params(m))
        abort();
    if (cn_model_num_params(m) < 1000000) cn_model_init(m, 1);
    cn_model_free(again);
    cn_model_free(m);
    return 0;
}
