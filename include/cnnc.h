/* cnnc.h — the public interface of cnnc: datasets, models built from layers, data-parallel
 * training, evaluation, checkpoints and pictures.
 *
 * Conventions: every public symbol starts with cn_ / CN_. Functions that can fail return 0 on
 * success and -1 on failure, with a one-line message ("what: what is wrong") in *err (err may be
 * NULL). Nothing here keeps global mutable state; randomness comes from explicit seeds.
 * Tensors are float32, row-major, batch first (NCHW). Not thread-safe per object: one model or
 * trainer is driven from one thread (the trainer runs its own worker pool inside). */
#ifndef CNNC_H
#define CNNC_H

#include <stddef.h>
#include <stdint.h>

#define CN_VERSION "0.1.0"

/* ---------------------------------------------------------------- errors */

typedef struct {
    char msg[1024];
} cn_error;

/* Writes the formatted message into err (when non-NULL) and returns -1, so that failing paths
 * read `return cn_fail(err, "%s: truncated", path);`. */
int cn_fail(cn_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- data */

#define CN_NUM_CLASSES 10
/* Fashion-MNIST class names, indexed by label. */
extern const char *const cn_class_names[CN_NUM_CLASSES];

typedef struct {
    int count;        /* number of samples */
    int rows, cols;   /* 28, 28 */
    uint8_t *pixels;  /* [count, rows, cols], owned */
    uint8_t *labels;  /* [count], each < CN_NUM_CLASSES, owned */
} cn_dataset;

/* Reads an IDX file of unsigned bytes, gzip-compressed or raw (detected from the content, not
 * the name). want_ndim is 3 for images (count, 28, 28) or 1 for labels (count). Validates the
 * header (zero bytes, type 0x08, dimensions), rejects sizes that do not match the file exactly
 * and never allocates more than the file justifies. On success *data is malloc'd (caller frees)
 * and dims[0..want_ndim) holds the dimensions. */
int cn_idx_read(const char *path, int want_ndim, uint8_t **data, int dims[3], cn_error *err);

/* Loads split "train" or "t10k" from dir: DIR/SPLIT-images-idx3-ubyte(.gz) and
 * DIR/SPLIT-labels-idx1-ubyte(.gz). Checks 28x28 images, equal non-zero counts and labels
 * 0..9. A missing file gets a message that says how to install the dataset. */
int cn_dataset_load(cn_dataset *ds, const char *dir, const char *split, cn_error *err);
void cn_dataset_free(cn_dataset *ds);

/* out[i] = (pixels[i] / 255 - 0.1307) / 0.3081, computed in float as PyTorch does. */
void cn_normalize(float *out, const uint8_t *pixels, size_t n);

/* ---------------------------------------------------------------- randomness */

/* xoshiro256** generator; the state is passed explicitly, never global. */
typedef struct {
    uint64_t s[4];
} cn_rng;

void cn_rng_seed(cn_rng *rng, uint64_t seed);
uint64_t cn_rng_next(cn_rng *rng);
float cn_rng_uniform(cn_rng *rng);                 /* [0, 1), 24 random bits */
uint32_t cn_rng_below(cn_rng *rng, uint32_t bound); /* [0, bound), unbiased; bound > 0 */

/* Distributed sampler. A fresh permutation of 0..n-1 for every (seed, epoch); replica r of R
 * takes perm[r], perm[r + R], perm[r + 2R], ... — floor(n / R) samples, so the shards are
 * disjoint and the last n mod R samples of the permutation are left out for that epoch. */
void cn_sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, int epoch);
static inline uint32_t cn_sampler_shard_size(uint32_t n, int replicas) { return n / (uint32_t)replicas; }

/* ---------------------------------------------------------------- models */

typedef enum {
    CN_CONV2D,      /* out_channels, kernel: valid padding, stride 1, with bias */
    CN_MAXPOOL2D,   /* kernel: window = stride = kernel */
    CN_RELU,
    CN_BATCHNORM2D, /* batch statistics in training, running statistics in evaluation */
    CN_FLATTEN,     /* [C,H,W] -> [C*H*W], index c*H*W + y*W + x */
    CN_LINEAR,      /* out_features (out_channels) */
    CN_LOG_SOFTMAX, /* over the features; the last layer of a classifier */
} cn_layer_kind;

typedef struct {
    cn_layer_kind kind;
    const char *name; /* PyTorch module name for layers with tensors ("conv1"); NULL otherwise */
    int out_channels; /* CN_CONV2D output channels, CN_LINEAR output features */
    int kernel;       /* CN_CONV2D kernel size, CN_MAXPOOL2D window */
} cn_layer_spec;

typedef struct cn_model cn_model;

/* Builds a sequential model for inputs [channels, height, width]. Shapes are checked here; the
 * last layer must be CN_LOG_SOFTMAX. Parameters are zero until cn_model_init. */
cn_model *cn_model_create(int channels, int height, int width, const cn_layer_spec *layers,
                          int num_layers, cn_error *err);
/* The seed's Fashion-MNIST CNN: conv1(1->10, k5) -> max_pool 2 -> relu -> bn1 -> conv2(10->20, k5)
 * -> max_pool 2 -> relu -> bn2 -> flatten -> fc1(320->50) -> relu -> fc2(50->10) -> log_softmax;
 * 21,900 parameters. */
cn_model *cn_model_fashion_mnist(cn_error *err);
void cn_model_free(cn_model *m);

/* PyTorch's default initialisation: conv/linear weights and biases uniform in
 * +-1/sqrt(fan_in); batchnorm weight 1, bias 0, running mean 0, running var 1. */
void cn_model_init(cn_model *m, uint64_t seed);

/* All trainable parameters in one buffer, in PyTorch's parameters() order. Gradients and
 * momentum use the same layout. */
size_t cn_model_num_params(const cn_model *m);
float *cn_model_params(cn_model *m);
int cn_model_input_size(const cn_model *m);   /* channels * height * width */
int cn_model_num_outputs(const cn_model *m);  /* classes */
int cn_model_num_layers(const cn_model *m);
/* The layer's name: its spec's name, or kind and index ("relu2") for unnamed layers. */
const char *cn_model_layer_name(const cn_model *m, int layer);
/* Floating-point operations of one sample's forward and backward pass through the conv and
 * linear layers (2 per multiply-add; the first layer computes no input gradient). */
void cn_model_flops(const cn_model *m, double *forward, double *backward);

typedef enum { CN_F32, CN_I64 } cn_dtype;

/* A named tensor of the model's state_dict (PyTorch names and shapes), pointing into the model. */
typedef struct {
    char name[64];
    cn_dtype dtype;
    int ndim;          /* 0 for a scalar */
    int64_t shape[4];
    void *data;
} cn_tensor_ref;

/* Lists the state_dict tensors in PyTorch's order; returns how many (at most max are written;
 * call with max = 0 to count). */
int cn_model_tensors(cn_model *m, cn_tensor_ref *out, int max);

/* ---------------------------------------------------------------- instruction sets */

/* The vector instruction sets the compute kernels are built for, chosen at run time. */
typedef enum { CN_ISA_GENERIC, CN_ISA_AVX2, CN_ISA_AVX512, CN_ISA_COUNT } cn_isa;

const char *cn_isa_name(cn_isa isa);        /* "generic", "avx2", "avx512" */
int cn_isa_supported(cn_isa isa);           /* 1 when this CPU can run it */
/* The best supported set, or the one CNNC_ISA names; -1 with a message when CNNC_ISA is unknown
 * or unsupported (callers that want to refuse such a setting check this first). */
int cn_isa_from_env(cn_isa *isa, cn_error *err);
/* The set in use by this process: decided on first use from cn_isa_from_env (falling back to
 * the best supported one when CNNC_ISA is invalid) and fixed from then on. */
cn_isa cn_isa_active(void);

/* Measures the single-precision arithmetic peak of `threads` cores with the kernels in use
 * (independent vector multiply-adds, about half a second); *gflops in GFLOP/s. */
int cn_peak_gflops(int threads, double *gflops, cn_error *err);

/* ---------------------------------------------------------------- threads */

typedef struct cn_pool cn_pool;
/* Runs one task; thread is the index (0..threads-1) of the thread that runs it. */
typedef void (*cn_task_fn)(void *ctx, int task, int thread);

/* A persistent pool: threads-1 workers plus the calling thread. */
cn_pool *cn_pool_create(int threads, cn_error *err);
/* Runs tasks 0..num_tasks-1 and returns when all are done. Task i always runs on thread
 * i % threads, so per-thread scratch is safe and placement is reproducible. */
void cn_pool_run(cn_pool *pool, int num_tasks, cn_task_fn fn, void *ctx);
int cn_pool_threads(const cn_pool *pool);
void cn_pool_free(cn_pool *pool);

/* ---------------------------------------------------------------- training */

typedef struct {
    int batch_size;      /* per replica, 128 */
    int num_replicas;    /* data-parallel replicas ("cores"), 8: defines the math */
    int threads;         /* worker threads; never changes results */
    float learning_rate; /* per replica, 0.01; the step uses learning_rate * num_replicas */
    float momentum;      /* 0.5 */
    uint64_t seed;       /* 1: initialisation and shuffling */
} cn_train_config;

/* Wall-clock seconds spent in each phase of training, summed over steps. */
typedef struct {
    double data, forward, backward, reduce, optimizer;
} cn_phase_times;

typedef struct cn_trainer cn_trainer;

/* Plans every buffer once (R replicas x batch), starts the pool. The model is borrowed. */
cn_trainer *cn_trainer_create(cn_model *m, const cn_train_config *cfg, cn_error *err);
void cn_trainer_free(cn_trainer *t);

/* Steps in one epoch of data: floor(floor(count / R) / batch_size). */
int cn_trainer_steps_per_epoch(const cn_trainer *t, const cn_dataset *train);

/* One optimiser step on num_replicas * batch_size samples given as raw pixels [R*B, 28, 28]
 * and labels [R*B]: replica r takes samples r*B .. r*B+B-1. Gradients are averaged over the
 * replicas in replica order, running statistics become the mean of the replicas' updates.
 * *loss gets the global loss (mean over all R*B samples). */
int cn_trainer_step(cn_trainer *t, const uint8_t *images, const uint8_t *labels, float *loss,
                    cn_phase_times *times, cn_error *err);

/* Thread-seconds spent in each layer's forward and backward during training steps since the
 * trainer was created or last reset, summed over replicas; returns the number of layers (at
 * most max entries are written). */
int cn_trainer_layer_times(const cn_trainer *t, double *forward, double *backward, int max);
void cn_trainer_reset_layer_times(cn_trainer *t);

/* Called after each step with the global loss (mean over all replicas' samples). */
typedef void (*cn_step_fn)(void *ctx, int epoch, int step, int steps, float loss);

/* Trains one epoch (1-based) over train. Returns the mean step loss in *mean_loss. Phase times
 * are added to *times (may be NULL). */
int cn_trainer_epoch(cn_trainer *t, const cn_dataset *train, int epoch, cn_step_fn on_step,
                     void *ctx, float *mean_loss, cn_phase_times *times, cn_error *err);

/* Scores the first n samples of ds in evaluation mode (running statistics), all of them once.
 * predictions (may be NULL) gets n labels. Loss is the mean NLL. */
int cn_evaluate(cn_trainer *t, const cn_dataset *ds, int n, double *loss, double *accuracy,
                uint8_t *predictions, cn_error *err);

/* ---------------------------------------------------------------- files */

/* Writes tensors as safetensors (little-endian, header padded to 8 bytes, "format":"pt" in
 * __metadata__ plus meta as key/value string pairs, meta may be NULL with num_meta 0). The file
 * appears whole or not at all: a temporary file in the same folder, fsync, rename. */
int cn_safetensors_write(const char *path, const cn_tensor_ref *tensors, int num_tensors,
                         const char *const *meta, int num_meta, cn_error *err);

typedef struct cn_safetensors cn_safetensors;
/* Reads and validates a whole safetensors file (header bound and JSON, dtypes, shapes against
 * byte ranges, ranges covering the data exactly). */
cn_safetensors *cn_safetensors_read(const char *path, cn_error *err);
void cn_safetensors_free(cn_safetensors *f);
int cn_safetensors_count(const cn_safetensors *f);
/* The i-th tensor (file order) or the tensor by name (NULL when absent). data points at the
 * raw little-endian bytes inside f; it need not be aligned (copy with memcpy). */
const cn_tensor_ref *cn_safetensors_at(const cn_safetensors *f, int i);
const cn_tensor_ref *cn_safetensors_get(const cn_safetensors *f, const char *name);
/* A __metadata__ value, or NULL. */
const char *cn_safetensors_meta(const cn_safetensors *f, const char *key);

/* The model's state_dict as safetensors / back: load checks that every expected name is there
 * with its dtype and shape, and that nothing else is (optimizer.* tensors are allowed). */
int cn_model_save(cn_model *m, const char *path, cn_error *err);
int cn_model_load(cn_model *m, const char *path, cn_error *err);

/* ---------------------------------------------------------------- pictures */

/* Draws a grid (rows x cols) of the first rows*cols images with captions
 * "Actual <class> / Predicted <class>", blue when right and red when wrong, under a title, and
 * writes it as a PNG. images is [n, 28, 28] raw pixels; n >= rows * cols. */
int cn_result_picture(const char *path, const uint8_t *images, const uint8_t *labels,
                      const uint8_t *predictions, int n, int rows, int cols, const char *title,
                      cn_error *err);

/* One epoch's numbers for cn_plot_curves. A value that is NaN or infinite is left out of its
 * curve (the line breaks there), so an epoch without a test pass can still be plotted. */
typedef struct {
    int epoch;            /* strictly increasing along the array */
    double train_loss;    /* mean training loss of the epoch */
    double test_loss;     /* mean NLL on the test images */
    double test_accuracy; /* percent */
} cn_epoch_metrics;

/* The size `cnnc train` and `cnnc plot` draw training curves at. */
#define CN_PLOT_WIDTH 960
#define CN_PLOT_HEIGHT 720

/* Draws training curves and writes them as an opaque width x height PNG: the title on top, a
 * legend under it, then two panels over one epoch axis: train loss (blue) and test loss (orange)
 * above, test accuracy in percent (green) below, each with grid lines, ticks at round numbers and
 * an axis label; "Epoch" along the bottom. Text keeps its proportions at other sizes.
 * epochs[0..n) is read only. width 400..8192, height 300..8192, n >= 1, epochs strictly
 * increasing; title may be NULL. The file appears whole or not at all (temporary file, rename).
 * Errors: bad arguments, or a folder that is missing or not writable (path named). */
int cn_plot_curves(const char *path, const cn_epoch_metrics *epochs, int n, int width,
                   int height, const char *title, cn_error *err);

/* Counts (actual, predicted) pairs: sets counts[a * classes + p] to the number of the n samples
 * whose label is a and whose prediction is p. counts has classes * classes entries (caller
 * owned; overwritten). classes 1..256. Errors: a label or prediction >= classes (counts is then
 * unchanged). */
int cn_confusion_count(int64_t *counts, int classes, const uint8_t *labels,
                       const uint8_t *predictions, int n, cn_error *err);

/* Draws a confusion matrix as an opaque PNG of (258 + 58 * classes) x (184 + 58 * classes) px
 * (838 x 764 for 10 classes): one cell per (actual row, predicted column) with its count, shaded
 * from white to dark blue by count / largest count, actual class names down the left, predicted
 * class names slanted along the bottom, a colour bar on the right and the title on top.
 * counts as cn_confusion_count writes them (read only, each >= 0); classes 1..64; class_names
 * has classes entries, or is NULL for the class numbers (cn_class_names for Fashion-MNIST);
 * title may be NULL. The file appears whole or not at all. Errors: bad arguments, or a folder
 * that is missing or not writable. */
int cn_confusion_picture(const char *path, const int64_t *counts, int classes,
                         const char *const *class_names, const char *title, cn_error *err);

#endif /* CNNC_H */
