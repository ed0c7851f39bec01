/* predict.c — scoring raw images with a model in evaluation mode outside any trainer: one plan
 * and one workspace for batches of up to PREDICT_BATCH images, on the calling thread. It
 * computes no loss or accuracy (cn_evaluate does, with labels) and starts no threads. An output
 * that is not finite is an error: such a model's answers cannot be trusted. */
#include <math.h>
#include <string.h>

#include "model/executor.h"

#define PREDICT_BATCH 64

int cn_model_predict(cn_model *m, const uint8_t *images, int n, float *log_probs,
                     cn_error *err)
{
    if (n < 1) return cn_fail(err, "nothing to predict (%d images)", n);
    if (!m->has_normalization)
        return cn_fail(err, "the model has no normalisation of its input (mean= and std=); "
                       "one that was trained records it");
    int batch = n < PREDICT_BATCH ? n : PREDICT_BATCH;
    cn_plan plan;
    cn_workspace w = {0};
    if (cn_plan_init(&plan, m, batch, CN_PRECISION_FP32) != 0 ||
        cn_workspace_init(&w, &plan) != 0) {
        cn_plan_free(&plan);
        return cn_fail(err, "out of memory for predicting a batch of %d images", batch);
    }
    size_t size = (size_t)cn_model_input_size(m), classes = (size_t)cn_model_num_outputs(m);
    int last = m->num_layers - 1;
    for (int first = 0; first < n; first += batch) {
        int count = n - first < batch ? n - first : batch;
        cn_model_normalize(m, w.input, images + (size_t)first * size, (size_t)count);
        cn_forward(&plan, &w, count, 0);
        memcpy(log_probs + (size_t)first * classes, w.out[last],
               (size_t)count * classes * sizeof *log_probs);
    }
    cn_workspace_free(&w);
    cn_plan_free(&plan);
    for (size_t i = 0; i < (size_t)n * classes; i++)
        if (!isfinite(log_probs[i]))
            return cn_fail(err, "the model's output for image %zu is not finite (its weights or "
                           "statistics are out of range)", i / classes + 1);
    return 0;
}
