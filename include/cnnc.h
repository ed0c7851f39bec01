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

/* The optimiser's momentum buffers: cn_model_num_params floats in the parameter layout, all
 * zero before the first step (so the first step's buffer is the gradient, as in PyTorch).
 * Training checkpoints save them; a resumed run writes them back before its first step. */
float *cn_trainer_momentum(cn_trainer *t);

/* Where training stands inside an epoch. A checkpoint records it so that a later run, in
 * another process, continues with exactly the steps, samples and sums of an uninterrupted one. */
typedef struct {
    int epoch;       /* 1-based */
    int step;        /* steps of this epoch done: 0 .. steps per epoch */
    double loss_sum; /* the sum of those steps' global losses */
} cn_epoch_position;

/* Asked after every step, with the ctx of cn_trainer_run_epoch; non-zero stops training there. */
typedef int (*cn_stop_fn)(void *ctx);

/* Runs epoch pos->epoch from step pos->step to its end, advancing pos->step and adding each
 * step's loss to pos->loss_sum. The epoch's sample order depends only on (seed, epoch), so any
 * step can come first. After each step on_step (may be NULL) is called, then should_stop (may
 * be NULL): when it returns non-zero, the function returns 0 with pos->step < steps per epoch.
 * A failing step (a non-finite loss, say) changes neither the model nor pos. */
int cn_trainer_run_epoch(cn_trainer *t, const cn_dataset *train, cn_epoch_position *pos,
                         cn_step_fn on_step, cn_stop_fn should_stop, void *ctx,
                         cn_phase_times *times, cn_error *err);

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

/* Class log-probabilities of n raw images ([n, input size] bytes, normalised here as in
 * training) in evaluation mode (BatchNorm running statistics), on the calling thread, up to 64
 * at a time: log_probs gets [n, classes]. */
int cn_model_predict(cn_model *m, const uint8_t *images, int n, float *log_probs,
                     cn_error *err);

/* ---------------------------------------------------------------- training checkpoints */

/* What a training checkpoint records in __metadata__ besides its tensors: where training
 * stands, and every setting that defines the math of the run. No generator state needs
 * recording: the initial weights depend on the seed alone, each epoch's order on (seed, epoch). */
typedef struct {
    cn_epoch_position position; /* position.step == steps_per_epoch: that epoch is complete */
    int steps_per_epoch;
    uint64_t seed;
    int num_replicas;           /* data-parallel replicas ("--num-cores") */
    int batch_size;             /* per replica */
    float learning_rate;        /* per replica, as configured */
    float momentum;
    int train_samples;          /* training images used */
    uint32_t train_crc32;       /* CRC-32 of those images' pixels followed by their labels */
    char isa[16];               /* instruction set of the kernels that wrote it; informational */
} cn_train_state;

/* The state of a run configured with cfg over train, at epoch 1 step 0, with the instruction
 * set in use. */
void cn_train_state_init(cn_train_state *s, const cn_train_config *cfg, const cn_dataset *train);

/* Writes a training checkpoint to path, atomically as cn_safetensors_write: the model's
 * state_dict under PyTorch's names, each parameter's momentum buffer (cn_model_num_params
 * floats in all) as "optimizer.<name>.momentum_buffer" in the parameter's shape, and s in
 * __metadata__. Refuses, writing nothing, when a weight, running statistic or momentum value
 * is not finite. */
int cn_train_checkpoint_save(cn_model *m, const float *momentum, const cn_train_state *s,
                             const char *path, cn_error *err);
/* Reads the training metadata of an open file (path names it in messages) into s, checking
 * every key; a file without it (a model from cn_model_save or PyTorch) is refused as "not a
 * training checkpoint". */
int cn_train_checkpoint_state(const cn_safetensors *f, const char *path, cn_train_state *s,
                              cn_error *err);
/* Copies the model and the momentum buffers out of an open training checkpoint after checking
 * every tensor against m (names, dtypes, shapes, finite values, no stray optimizer.* tensor);
 * on failure neither m nor momentum changes. */
int cn_train_checkpoint_restore(cn_model *m, float *momentum, const cn_safetensors *f,
                                const char *path, cn_error *err);

/* Checkpoint folders. checkpoint-epoch-EEEE.safetensors holds a run after epoch EEEE;
 * checkpoint-epoch-EEEE-step-SSSSS.safetensors a run stopped after step SSSSS of epoch EEEE
 * (numbers zero-padded to at least 4 and 5 digits). Nothing else in a folder is taken for a
 * checkpoint, the atomic writer's temporaries (NAME.tmp.PID.N) included. A folder is meant to
 * have one writer at a time; these functions do not lock it. */
#define CN_CHECKPOINT_NAME_MAX 64

/* The file name for a position (an epoch is complete when pos->step == steps_per_epoch). */
void cn_checkpoint_name(char name[CN_CHECKPOINT_NAME_MAX], const cn_epoch_position *pos,
                        int steps_per_epoch);
/* 1 when name is a checkpoint's file name exactly as cn_checkpoint_name writes it (then *epoch,
 * and *step: -1 for a complete epoch), 0 otherwise. */
int cn_checkpoint_parse_name(const char *name, int *epoch, int *step);
/* Orders positions as parsed: epoch, then step, a complete epoch (-1) after all its steps. */
int cn_checkpoint_compare(int epoch_a, int step_a, int epoch_b, int step_b);
/* Counts the checkpoints in dir and puts the newest one's name into newest (when there is one);
 * -1 with a message when dir cannot be read. */
int cn_checkpoint_find(const char *dir, char newest[CN_CHECKPOINT_NAME_MAX], cn_error *err);
/* Deletes all but the newest keep checkpoints of dir (keep >= 1; INT_MAX keeps all) and every
 * temporary file left there by an interrupted write of a checkpoint, then syncs the folder. */
int cn_checkpoint_prune(const char *dir, int keep, cn_error *err);

/* ---------------------------------------------------------------- images */

/* Reads a grey image of exactly rows x cols pixels from a PNG or a PGM (binary P5 or plain P2)
 * file, told apart by content. Colour becomes grey with the luma weights 0.299 R + 0.587 G +
 * 0.114 B (as PIL's convert("L") computes them), transparent parts are composited over black,
 * samples of more than 8 bits are scaled to 0..255. Another size is refused from the header,
 * before any pixel is decoded: nothing is resized. pixels gets rows * cols bytes. */
int cn_image_read_grey(const char *path, int rows, int cols, uint8_t *pixels, cn_error *err);

/* ---------------------------------------------------------------- pictures */

/* Draws a grid (rows x cols) of the first rows*cols images with captions
 * "Actual <class> / Predicted <class>", blue when right and red when wrong, under a title, and
 * writes it as a PNG. images is [n, 28, 28] raw pixels; n >= rows * cols. */
int cn_result_picture(const char *path, const uint8_t *images, const uint8_t *labels,
                      const uint8_t *predictions, int n, int rows, int cols, const char *title,
                      cn_error *err);

#endif /* CNNC_H */
