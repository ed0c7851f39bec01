/* train_mnist.c — cnnc used as a library, through <cnnc.h> alone: builds a small CNN of its own
 * from layer specs, trains it for a few epochs on the first images of Fashion-MNIST with two
 * data-parallel replicas, scores it on test images, and prints each class's accuracy. A short
 * example of the public interface, not a tool: no flags beyond the two arguments below.
 *
 * Build:  cc train_mnist.c $(pkg-config --cflags --libs cnnc) -o train_mnist
 * Run:    ./train_mnist [DATA_DIR [MODEL.safetensors]] */
#include <stdio.h>
#include <stdlib.h>

#include <cnnc.h>

#define TRAIN_IMAGES 4096
#define TEST_IMAGES 1000
#define EPOCHS 3

/* 28x28 -> conv 3x3 (8) -> 26x26 -> pool 2 -> 13x13 -> conv 3x3 (16) -> 11x11 -> pool 2 -> 5x5
 * -> 400 features -> 10 classes. Layers with tensors are named, as PyTorch would name them. */
static const cn_layer_spec small_net[] = {
    {.kind = CN_CONV2D, .name = "conv1", .out_channels = 8, .kernel = 3},   {.kind = CN_RELU},
    {.kind = CN_MAXPOOL2D, .kernel = 2},   {.kind = CN_BATCHNORM2D, .name = "bn1"},
    {.kind = CN_CONV2D, .name = "conv2", .out_channels = 16, .kernel = 3},  {.kind = CN_RELU},
    {.kind = CN_MAXPOOL2D, .kernel = 2},   {.kind = CN_FLATTEN},
    {.kind = CN_LINEAR, .name = "fc", .out_channels = 10},     {.kind = CN_LOG_SOFTMAX},
};

static void print_last_step(void *ctx, const cn_step_report *r)
{
    (void)ctx;
    if (r->step == r->steps - 1)
        printf("epoch %d: %d steps, last loss %.4f, %d of %d right\n", r->epoch, r->steps,
               (double)r->loss, r->correct, r->samples);
}

/* Trains and scores; returns 0, or -1 with the message in err. */
static int train_and_score(cn_model *model, cn_dataset *train, cn_dataset *test,
                           const char *save_path, cn_error *err)
{
    cn_train_config cfg = {.batch_size = 64, .num_replicas = 2, .threads = 2,
                           .learning_rate = 0.02f, .momentum = 0.5f, .seed = 7};
    cn_trainer *trainer = cn_trainer_create(model, &cfg, err);
    uint8_t *predictions = malloc((size_t)test->count);
    int rc = trainer && predictions ? 0 : -1;
    if (!predictions) cn_fail(err, "out of memory");
    float train_loss;
    for (int epoch = 1; epoch <= EPOCHS && rc == 0; epoch++)
        rc = cn_trainer_epoch(trainer, train, epoch, print_last_step, NULL, &train_loss, NULL,
                              err);
    double test_loss, accuracy;
    if (rc == 0)
        rc = cn_evaluate(trainer, test, test->count, &test_loss, &accuracy, predictions, err);
    int k = test->classes;
    int64_t *counts = malloc((size_t)k * (size_t)k * sizeof *counts);
    if (rc == 0 && !counts) rc = cn_fail(err, "out of memory");
    if (rc == 0)
        rc = cn_confusion_count(counts, k, test->labels, predictions, test->count, err);
    if (rc == 0) {
        printf("test loss %.4f, accuracy %.2f%% on %d images\n", test_loss, accuracy,
               test->count);
        for (int a = 0; a < k; a++) {
            int64_t right = counts[a * k + a], total = 0;
            for (int p = 0; p < k; p++) total += counts[a * k + p];
            const char *name = cn_dataset_class_name(test, a);
            printf("  %-12s %lld of %lld right\n", name ? name : "?", (long long)right,
                   (long long)total);
        }
    }
    if (rc == 0 && save_path && (rc = cn_model_save(model, save_path, err)) == 0)
        printf("saved %s\n", save_path);
    free(counts);
    free(predictions);
    cn_trainer_free(trainer);
    return rc;
}

int main(int argc, char **argv)
{
    const char *data_dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    const char *save_path = argc > 2 ? argv[2] : NULL;
    cn_error err = {{0}};
    cn_dataset train = {0}, test = {0};
    cn_model *model = NULL;
    int rc = cn_dataset_load(&train, data_dir, "train", &err);
    if (rc == 0) rc = cn_dataset_load(&test, data_dir, "test", &err);
    if (rc == 0) {
        if (train.count > TRAIN_IMAGES) train.count = TRAIN_IMAGES; /* the first images only */
        if (test.count > TEST_IMAGES) test.count = TEST_IMAGES;
        model = cn_model_create(1, 28, 28, small_net,
                                (int)(sizeof small_net / sizeof small_net[0]), &err);
        rc = model ? 0 : -1;
    }
    if (rc == 0) {
        cn_model_init(model, 7);
        printf("model: %d layers, %zu parameters\n", cn_model_num_layers(model),
               cn_model_num_params(model));
        rc = train_and_score(model, &train, &test, save_path, &err);
    }
    cn_model_free(model);
    cn_dataset_free(&train);
    cn_dataset_free(&test);
    if (rc != 0) fprintf(stderr, "train_mnist: %s\n", err.msg);
    return rc == 0 ? 0 : 1;
}
