/* bench.c — measures cnnc on the seed's job: training throughput (8 replicas x 128, or
 * --replicas R --batch-size B, a few epochs after a warm-up one), evaluation throughput on the
 * 10,000 test images, where the time goes (each layer's forward and backward, the data,
 * reduction and optimiser phases), and the achieved GFLOP/s against the machine's measured
 * arithmetic peak. Prints a report and writes the figures as one JSON object. It compares
 * nothing itself: bench/run.sh puts PyTorch beside it. With --model FILE --random-data N it
 * trains another network (a model file) the same way on N generated samples of the model's
 * input shape with random labels (no evaluation then): the speed on shapes that are not the
 * seed's, before cnnc reads such datasets. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnnc.h"

#define MAX_LAYERS 64

typedef struct {
    const char *data_dir, *json_path;
    int threads, epochs;
    cn_precision precision;
    const char *model_path; /* NULL: the seed's network */
    int random_samples;     /* > 0: train on this many generated samples, no evaluation */
    int replicas, batch;    /* a step: replicas x batch samples (the seed's 8 x 128) */
} bench_settings;

typedef struct {
    double train_seconds, train_rate, eval_seconds, eval_rate, gflops, peak, flops_per_sample;
    double computed_per_sample, computed_gflops;
    cn_phase_times phases;
    int layers;
    double forward[MAX_LAYERS], backward[MAX_LAYERS];
} bench_result;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const cn_error *err)
{
    fprintf(stderr, "bench: error: %s\n", err->msg);
    return 1;
}

static int parse(int argc, char **argv, bench_settings *s)
{
    static const struct option options[] = {{"threads", required_argument, NULL, 't'},
                                             {"epochs", required_argument, NULL, 'e'},
                                             {"data-dir", required_argument, NULL, 'd'},
                                             {"json", required_argument, NULL, 'j'},
                                             {"precision", required_argument, NULL, 'p'},
                                             {"model", required_argument, NULL, 'm'},
                                             {"random-data", required_argument, NULL, 'r'},
                                             {"replicas", required_argument, NULL, 'R'},
                                             {"batch-size", required_argument, NULL, 'b'},
                                             {NULL, 0, NULL, 0}};
    *s = (bench_settings){"/usr/share/datasets/fashion-mnist", NULL,
                          (int)sysconf(_SC_NPROCESSORS_ONLN), 2, CN_PRECISION_FP32, NULL, 0,
                          8, 128};
    for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (c == 't') s->threads = atoi(optarg);
        else if (c == 'e') s->epochs = atoi(optarg);
        else if (c == 'd') s->data_dir = optarg;
        else if (c == 'j') s->json_path = optarg;
        else if (c == 'm') s->model_path = optarg;
        else if (c == 'r') s->random_samples = atoi(optarg);
        else if (c == 'R') s->replicas = atoi(optarg);
        else if (c == 'b') s->batch = atoi(optarg);
        else if (c != 'p' || cn_precision_from_name(optarg, &s->precision)) return -1;
    }
    if (s->threads < 1 || s->epochs < 1 || optind != argc) return -1;
    if (s->replicas < 1 || s->replicas > 64 || s->batch < 1 || s->batch > 4096) return -1;
    if (s->random_samples < 0 ||
        (s->random_samples && s->random_samples < s->replicas * s->batch))
        return -1;
    return 0;
}

/* Generated samples: pixels and labels (below the model's classes), the same for every run. */
typedef struct {
    uint8_t *pixels, *labels;
    int count, size;
} random_data;

static int make_random_data(random_data *d, const cn_model *m, int count)
{
    cn_rng rng;
    cn_rng_seed(&rng, 7);
    d->count = count, d->size = cn_model_input_size(m);
    d->pixels = malloc((size_t)count * d->size);
    d->labels = malloc((size_t)count);
    if (!d->pixels || !d->labels) return -1;
    for (size_t i = 0; i < (size_t)count * d->size; i++)
        d->pixels[i] = (uint8_t)cn_rng_below(&rng, 256);
    for (int i = 0; i < count; i++)
        d->labels[i] = (uint8_t)cn_rng_below(&rng, (uint32_t)cn_model_num_outputs(m));
    return 0;
}

/* One epoch of the generated samples, R x B a step, in order. */
static int random_epoch(cn_trainer *t, const random_data *d, const bench_settings *s,
                        cn_phase_times *times, cn_error *err)
{
    float loss;
    size_t step_samples = (size_t)s->replicas * s->batch;
    for (size_t at = 0; at + step_samples <= (size_t)d->count; at += step_samples)
        if (cn_trainer_step(t, d->pixels + at * d->size, d->labels + at, &loss, times, err))
            return -1;
    return 0;
}

/* One warm-up epoch, then `epochs` timed ones, of the dataset or of the generated samples
 * (rd non-NULL); sets the training figures of r. */
static int measure_training(cn_trainer *t, const cn_dataset *train, const random_data *rd,
                            const bench_settings *s, bench_result *r, cn_error *err)
{
    float loss;
    for (int e = 1; e <= s->epochs + 1; e++) {
        double start = now_seconds();
        cn_phase_times *times = e > 1 ? &r->phases : NULL;
        if (e == 2) cn_trainer_reset_layer_times(t);
        if (rd ? random_epoch(t, rd, s, times, err)
               : cn_trainer_epoch(t, train, e, NULL, NULL, &loss, times, err))
            return -1;
        if (e > 1) r->train_seconds += now_seconds() - start;
    }
    int step_samples = s->replicas * s->batch;
    int steps = rd ? rd->count / step_samples : cn_trainer_steps_per_epoch(t, train);
    r->train_rate = (double)s->epochs * steps * step_samples / r->train_seconds;
    return 0;
}

/* Trains (measure_training); then times three test passes unless the data is generated. */
static int measure(cn_model *m, cn_trainer *t, const cn_dataset *train, const cn_dataset *test,
                   const random_data *rd, const bench_settings *s, bench_result *r,
                   cn_error *err)
{
    if (measure_training(t, train, rd, s, r, err)) return -1;
    double fwd, bwd;
    cn_model_flops(m, &fwd, &bwd);
    r->flops_per_sample = fwd + bwd;
    r->gflops = r->flops_per_sample * r->train_rate * 1e-9;
    cn_model_flops_computed(m, &fwd, &bwd);
    r->computed_per_sample = fwd + bwd;
    r->computed_gflops = r->computed_per_sample * r->train_rate * 1e-9;
    r->layers = cn_trainer_layer_times(t, r->forward, r->backward, MAX_LAYERS);
    if (rd) return cn_peak_gflops(s->threads, &r->peak, err);

    double best = 1e30, test_loss, accuracy;
    for (int i = 0; i < 3; i++) {
        double begin = now_seconds();
        if (cn_evaluate(t, test, test->count, &test_loss, &accuracy, NULL, err)) return -1;
        double took = now_seconds() - begin;
        best = took < best ? took : best;
    }
    r->eval_seconds = best;
    r->eval_rate = test->count / best;
    return cn_peak_gflops(s->threads, &r->peak, err);
}

static void print_report(const cn_model *m, const bench_settings *s, const bench_result *r)
{
    printf("cnnc: %s, %d threads, %s kernels, %s products, %d replicas x %d, %d timed epochs\n",
           s->model_path ? s->model_path : "the seed's network", s->threads,
           cn_isa_name(cn_isa_active()), cn_precision_name(s->precision), s->replicas, s->batch,
           s->epochs);
    printf("  training   %9.0f samples/s  (%.2f s per epoch)\n", r->train_rate,
           r->train_seconds / s->epochs);
    if (s->random_samples)
        printf("  evaluation not measured (%d generated samples)\n", s->random_samples);
    else
        printf("  evaluation %9.0f images/s   (%.3f s for the test set)\n", r->eval_rate,
               r->eval_seconds);
    printf("  arithmetic %9.1f GFLOP/s of a measured peak of %.1f (%.1f%%), %.2f MFLOP a sample\n"
           "             (the dense model's count, what PyTorch computes); cnnc computes %.2f "
           "MFLOP\n             a sample (gradients of pool-fed convolutions from the picked "
           "positions only):\n             %.1f GFLOP/s of arithmetic done, %.1f%% of the peak\n",
           r->gflops, r->peak, 100 * r->gflops / r->peak, r->flops_per_sample * 1e-6,
           r->computed_per_sample * 1e-6, r->computed_gflops, 100 * r->computed_gflops / r->peak);
    printf("  phases (wall s per epoch): data %.3f  forward %.3f  backward %.3f  reduce %.3f  "
           "optimizer %.3f\n", r->phases.data / s->epochs, r->phases.forward / s->epochs,
           r->phases.backward / s->epochs, r->phases.reduce / s->epochs,
           r->phases.optimizer / s->epochs);
    printf("  layers (thread-ms per epoch, summed over replicas):\n");
    for (int i = 0; i < r->layers; i++)
        printf("    %-14s forward %8.1f  backward %8.1f\n", cn_model_layer_name(m, i),
               1e3 * r->forward[i] / s->epochs, 1e3 * r->backward[i] / s->epochs);
}

static int write_json(const cn_model *m, const bench_settings *s, const bench_result *r)
{
    FILE *f = fopen(s->json_path, "w");
    if (!f) {
        perror(s->json_path);
        return 1;
    }
    fprintf(f, "{\"model\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"precision\":\"%s\",\"epochs\":%d,"
               "\"replicas\":%d,\"batch_size\":%d,"
               "\"train_samples_per_second\":%.1f,\"eval_images_per_second\":%.1f,"
               "\"eval_seconds\":%.4f,\"gflops\":%.2f,"
               "\"peak_gflops\":%.2f,\"flops_per_sample\":%.0f,\"computed_flops_per_sample\":%.0f,"
               "\"computed_gflops\":%.2f,\"phases_per_epoch\":{\"data\":%.4f,"
               "\"forward\":%.4f,\"backward\":%.4f,\"reduce\":%.4f,\"optimizer\":%.4f},"
               "\"layers\":[",
            s->model_path ? s->model_path : "seed", s->threads, cn_isa_name(cn_isa_active()),
            cn_precision_name(s->precision), s->epochs, s->replicas, s->batch, r->train_rate,
            r->eval_rate,
            r->eval_seconds, r->gflops, r->peak, r->flops_per_sample, r->computed_per_sample,
            r->computed_gflops, r->phases.data / s->epochs,
            r->phases.forward / s->epochs, r->phases.backward / s->epochs,
            r->phases.reduce / s->epochs, r->phases.optimizer / s->epochs);
    for (int i = 0; i < r->layers; i++)
        fprintf(f, "%s{\"name\":\"%s\",\"forward_seconds\":%.4f,\"backward_seconds\":%.4f}",
                i ? "," : "", cn_model_layer_name(m, i), r->forward[i] / s->epochs,
                r->backward[i] / s->epochs);
    fprintf(f, "]}\n");
    return fclose(f) != 0;
}

/* The data: Fashion-MNIST, or generated samples for --random-data. */
static int load_data(const bench_settings *s, const cn_model *m, cn_dataset *train,
                     cn_dataset *test, random_data *rd, cn_error *err)
{
    if (s->random_samples)
        return make_random_data(rd, m, s->random_samples) ? cn_fail(err, "out of memory") : 0;
    return cn_dataset_load(train, s->data_dir, "train", err) ||
           cn_dataset_load(test, s->data_dir, "test", err) ? -1 : 0;
}

int main(int argc, char **argv)
{
    bench_settings s;
    if (parse(argc, argv, &s)) {
        fprintf(stderr, "usage: bench [--threads N] [--epochs N] [--data-dir DIR] [--json FILE] "
                        "[--precision fp32|bf16] [--model FILE --random-data N] "
                        "[--replicas R --batch-size B]\n");
        return 2;
    }
    cn_error err;
    cn_dataset train = {0}, test = {0};
    random_data rd = {0};
    cn_model *m = s.model_path ? cn_model_from_file(s.model_path, &err)
                               : cn_model_fashion_mnist(&err);
    if (!m || load_data(&s, m, &train, &test, &rd, &err)) return fail(&err);
    cn_model_init(m, 1);
    cn_train_config cfg = {.batch_size = s.batch, .num_replicas = s.replicas, .threads = s.threads,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 1,
                           .precision = s.precision};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    bench_result r = {0};
    if (!t || measure(m, t, &train, &test, s.random_samples ? &rd : NULL, &s, &r, &err))
        return fail(&err);
    print_report(m, &s, &r);
    int rc = s.json_path ? write_json(m, &s, &r) : 0;
    cn_trainer_free(t);
    cn_model_free(m);
    cn_dataset_free(&train);
    cn_dataset_free(&test);
    free(rd.pixels);
    free(rd.labels);
    return rc;
}
