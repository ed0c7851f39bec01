/* cnnc.h — the public interface of cnnc: datasets, models built from layers, data-parallel
 * training, evaluation, checkpoints and pictures. The only header a program needs:
 *     #include <cnnc.h>        cc prog.c $(pkg-config --cflags --libs cnnc)
 * It declares no internals; the layer kernels and the executor are reached through cn_model.
 *
 * Conventions, which hold for every function below unless its comment says otherwise:
 * - Every public symbol starts with cn_ / CN_.
 * - Errors: a function that can fail returns 0 on success and -1 on failure (or NULL for a
 *   constructor), with a one-line message ("what: what is wrong", naming the file where there
 *   is one) in *err; err may be NULL when the caller does not want the message. It never prints,
 *   never exits, and leaves its outputs unspecified on failure unless stated.
 * - Ownership: pointers passed in are borrowed for the call only, unless a comment says the
 *   object keeps them. A created object (cn_model, cn_trainer, cn_pool, cn_safetensors) is
 *   owned by the caller and released with its _free function, which accepts NULL. A cn_dataset
 *   owns its arrays until cn_dataset_free.
 * - Pointer arguments must not be NULL unless the comment says "may be NULL".
 * - Nothing here keeps global mutable state; randomness comes from explicit seeds. The one
 *   process-wide decision is the instruction set (cn_isa_active), fixed at first use.
 * - Tensors are float32, row-major, batch first (NCHW). Objects are not thread-safe: drive one
 *   model or trainer from one thread at a time (the trainer runs its own worker pool inside).
 * - Files are written whole or not at all (temporary file in the same folder, fsync, rename). */
#ifndef CNNC_H
#define CNNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CN_VERSION "0.1.0"

/* Marks what the shared library exports: the library is built with hidden visibility, so the
 * functions and data declared here, and nothing else, are its interface. */
#if defined(__GNUC__) || defined(__clang__)
#define CN_API __attribute__((visibility("default")))
#else
#define CN_API
#endif

/* ---------------------------------------------------------------- errors */

typedef struct {
    char msg[1024];
} cn_error;

/* Writes the formatted message into err (when non-NULL; cut at 1023 bytes) and returns -1, so
 * that failing paths read `return cn_fail(err, "%s: truncated", path);`. Never fails. */
CN_API int cn_fail(cn_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- input files */

/* Opens path for reading when it is a regular file, without ever waiting: it is opened with
 * O_NONBLOCK (a named pipe without a writer, or a device, would otherwise block the open or the
 * first read), checked with fstat, and only then made blocking. Returns the descriptor
 * (close-on-exec; the caller closes it), or -1 with "PATH: cannot open: REASON" or "PATH: not a
 * regular file (a named pipe)" (the kind as cn_file_kind says it) in err. Every file the
 * library reads is opened through it. */
CN_API int cn_open_regular(const char *path, cn_error *err);
/* The kind of file a stat mode (st_mode) describes, for messages: "a regular file", "a folder",
 * "a named pipe", "a character device", "a block device", "a socket", "a symbolic link".
 * A constant string. */
CN_API const char *cn_file_kind(unsigned mode);

/* ---------------------------------------------------------------- data */

#define CN_MAX_CLASSES 256    /* labels are bytes */
#define CN_CLASS_NAME_MAX 63  /* bytes of one class name */
#define CN_FASHION_MNIST_CLASSES 10
/* Fashion-MNIST's class names, indexed by label: "T-shirt/top", "Trouser", ..., "Ankle boot".
 * Constant strings; never freed. */
CN_API extern const char *const cn_fashion_mnist_names[CN_FASHION_MNIST_CLASSES];

/* The formats a dataset folder can hold (described in docs/datasets.md):
 * CN_DATA_IDX      the MNIST family: train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                  t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each raw or .gz; grey
 *                  images of any size.
 * CN_DATA_CIFAR10  CIFAR-10's binary version: data_batch_1.bin .. data_batch_5.bin (the first
 *                  one and those that follow it without a gap) and test_batch.bin, records of a
 *                  label byte and 3,072 bytes of 32x32 red, green and blue planes; class names
 *                  from batches.meta.txt when present.
 * CN_DATA_FOLDER   torchvision's ImageFolder: DIR/train/CLASS/IMAGE and DIR/test/CLASS/IMAGE
 *                  (or DIR/CLASS/IMAGE split by cn_data_source.test_percent), PNG or JPEG
 *                  files, in folders below CLASS too, classes in the sorted order of their
 *                  folder names.
 * CN_DATA_AUTO     whichever of these the folder holds (IDX, then CIFAR-10, then folders; a
 *                  folder of classes when test_percent is set and neither is there). */
typedef enum { CN_DATA_AUTO, CN_DATA_IDX, CN_DATA_CIFAR10, CN_DATA_FOLDER, CN_DATA_FORMAT_COUNT }
    cn_data_format;
CN_API const char *cn_data_format_name(cn_data_format f); /* "auto", "idx", ...; "unknown" */
/* Sets *f from its name; -1 for any other text. */
CN_API int cn_data_format_from_name(const char *name, cn_data_format *f);

/* Where a dataset is and how to read it; a field left 0 takes its default. */
typedef struct {
    const char *dir;          /* the dataset's folder */
    cn_data_format format;    /* CN_DATA_AUTO: from the files present */
    int channels;             /* folders: 1 (grey) or 3 (colour) images; 0: as the first image */
    const char *classes_file; /* one class name per line; may be NULL */
    /* Folders: every image scaled to height x width (cn_image_resize), whatever its size; 0, 0:
     * taken as they are, every one the first one's size. */
    int height, width;
    /* Folders: 1..99 reads DIR/CLASS/IMAGE (no train/ and test/), an image being a test image
     * when the CRC-32 of its path below DIR, modulo 100, is below test_percent; 0: DIR holds
     * train/CLASS/IMAGE and test/CLASS/IMAGE. */
    int test_percent;
    /* Folders: images decoded by this many threads at once (at most 64; 0 or 1: one); the
     * dataset, or the error, is the same whatever the number. */
    int threads;
} cn_data_source;

/* Images and labels of one split. Filled by cn_dataset_read; a caller may lower count to use
 * only the first samples (cn_dataset_free still frees everything). */
typedef struct {
    int count;                   /* number of samples */
    int channels, height, width; /* of every image */
    int classes;                 /* labels are 0..classes-1, 1..CN_MAX_CLASSES */
    uint8_t *pixels;             /* [count, channels, height, width], owned */
    uint8_t *labels;             /* [count], owned */
    char **class_names;          /* [classes], owned; NULL when nothing names the classes */
    cn_data_format format;       /* the format it was read from */
    int skipped; /* folders: files left out, not named as images (.png, .jpg, .jpeg) */
} cn_dataset;

/* Reads split "train" or "test" of src into ds. The format is src->format, or the one the
 * folder's files show. Class names come from src->classes_file, else from the format (CIFAR-10's
 * batches.meta.txt, the folder names), else from DIR/classes.txt, else Fashion-MNIST's when the
 * labels are Fashion-MNIST's (their CRC-32), else there are none; with names the class count is
 * their number, without them the largest label + 1 (CIFAR-10: 10). Every file is checked before
 * it is used: headers against each other before a body is read, record sizes, image sizes,
 * labels against the class count. On success ds owns its arrays (release with
 * cn_dataset_free); on failure ds is left empty (all zero). Errors name the file: a missing
 * folder or file (with how to install Fashion-MNIST for the default folder), a folder holding
 * no known format, a truncated or oversized file, a bad header, a label past the class count,
 * a bad or unreadable image, images of mixed sizes (folders without a size to scale to), an
 * empty class folder, a bad class name. */
CN_API int cn_dataset_read(cn_dataset *ds, const cn_data_source *src, const char *split,
                           cn_error *err);
/* cn_dataset_read of dir with every other setting at its default; split "train", or "test"
 * (also spelt "t10k"). */
CN_API int cn_dataset_load(cn_dataset *ds, const char *dir, const char *split, cn_error *err);
/* Frees ds's arrays and zeroes it; ds may be NULL or already empty. */
CN_API void cn_dataset_free(cn_dataset *ds);
/* Class c's name, or NULL when the data names none or c is out of range. */
CN_API const char *cn_dataset_class_name(const cn_dataset *ds, int c);

/* Reads an IDX file of unsigned bytes, gzip-compressed or raw (detected from the content, not
 * the name). want_ndim is 3 for images (count, height, width) or 1 for labels (count).
 * Validates the header (zero bytes, type 0x08, dimensions), rejects sizes that do not match the
 * file exactly and never allocates more than the file justifies. On success *data is malloc'd
 * (the caller frees it with free) and dims[0..want_ndim) holds the dimensions; on failure *data
 * is not set. Errors: missing or unreadable file, bad gzip stream, bad header, wrong size. */
CN_API int cn_idx_read(const char *path, int want_ndim, uint8_t **data, int dims[3], cn_error *err);

/* The normalisation that makes the first `count` samples of ds zero-mean and unit-variance per
 * channel: mean[c] and std[c] of the channel's values x / 255 (the population's standard
 * deviation), computed exactly from the pixel counts, so any thread or process gets the same
 * bits. mean and std hold ds->channels floats. -1 when a channel is constant (std 0) or count
 * is below 1. */
CN_API int cn_dataset_normalization(const cn_dataset *ds, float *mean, float *std,
                                    cn_error *err);

/* ---------------------------------------------------------------- randomness */

/* xoshiro256** generator; the state is passed explicitly, never global. A plain value: copy it
 * to fork a stream. */
typedef struct {
    uint64_t s[4];
} cn_rng;

/* Sets the state from seed (through splitmix64, so any seed, 0 included, is fine). */
CN_API void cn_rng_seed(cn_rng *rng, uint64_t seed);
CN_API uint64_t cn_rng_next(cn_rng *rng);                  /* 64 random bits; advances the state */
CN_API float cn_rng_uniform(cn_rng *rng);                 /* [0, 1), 24 random bits */
CN_API uint32_t cn_rng_below(cn_rng *rng, uint32_t bound); /* [0, bound), unbiased; bound > 0 */

/* Distributed sampler. A fresh permutation of 0..n-1 for every (seed, epoch), written to perm
 * (n entries, caller owned); the same (n, seed, epoch) always gives the same order. Replica r
 * of R takes perm[r], perm[r + R], perm[r + 2R], ... — floor(n / R) samples, so the shards are
 * disjoint and the last n mod R samples of the permutation are left out for that epoch. */
CN_API void cn_sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, int epoch);
/* Samples per replica: floor(n / replicas); replicas > 0. */
static inline uint32_t cn_sampler_shard_size(uint32_t n, int replicas)
{
    return n / (uint32_t)replicas;
}

/* ---------------------------------------------------------------- models */

typedef enum {
    CN_CONV2D,        /* out_channels, kernel, stride, padding, with a bias unless no_bias */
    CN_MAXPOOL2D,     /* kernel, stride (0: the kernel), floor */
    CN_RELU,
    CN_BATCHNORM2D,   /* batch statistics in training, running statistics in evaluation */
    CN_FLATTEN,       /* [C,H,W] -> [C*H*W], index c*H*W + y*W + x */
    CN_LINEAR,        /* out_features (out_channels), with a bias unless no_bias */
    CN_LOG_SOFTMAX,   /* over the features; the last layer of a classifier */
    CN_AVGPOOL2D,     /* kernel, stride (0: the kernel), floor, no padding */
    CN_GLOBAL_AVGPOOL, /* [C,H,W] -> [C,1,1], the mean of each plane */
    CN_DROPOUT,       /* p: training zeroes each value with probability p, scales the rest */
    CN_BATCHNORM1D,   /* BatchNorm over the features of a flat input */
    CN_NUM_LAYER_KINDS
} cn_layer_kind;

/* One layer of a model; a field left 0 takes its default, so
 * {.kind = CN_CONV2D, .name = "conv1", .out_channels = 10, .kernel = 5} is a 5x5 convolution
 * to 10 channels, stride 1, no padding, with a bias. */
typedef struct {
    cn_layer_kind kind;
    const char *name; /* PyTorch module name for layers with tensors ("conv1"); NULL otherwise */
    int out_channels; /* CN_CONV2D output channels, CN_LINEAR output features */
    int kernel;       /* CN_CONV2D kernel size, pooling window */
    int stride;       /* CN_CONV2D (0: 1), pooling (0: the window) */
    int padding;      /* CN_CONV2D: zeros on each side */
    int no_bias;      /* CN_CONV2D, CN_LINEAR: 1 for no bias */
    float p;          /* CN_DROPOUT: the probability of zeroing, 0 <= p < 1 */
    float momentum;   /* batchnorm: of the running statistics (0: 0.1) */
    float eps;        /* batchnorm: added to the variance (0: 1e-5) */
} cn_layer_spec;

typedef struct cn_model cn_model;

/* Builds a sequential model for inputs [channels, height, width] from layers[0..num_layers)
 * (1..256 layers; the specs and their names are copied, so they need not outlive the call).
 * Layers with tensors (conv, linear, batchnorm) need a name of at most 39 characters, used as
 * the PyTorch module name in checkpoints, and no two of them the same. Shapes are checked here;
 * the last layer must be CN_LOG_SOFTMAX. Parameters are zero until cn_model_init. Returns a
 * model the caller frees with cn_model_free, or NULL with the message in err: a spec that does
 * not fit its input (naming the layer's index and kind), a missing, too long or repeated name,
 * out of memory. */
CN_API cn_model *cn_model_create(int channels, int height, int width, const cn_layer_spec *layers,
                                 int num_layers, cn_error *err);
/* The seed's Fashion-MNIST CNN, built with cn_model_create from this list of specs:
 * conv1(1->10, k5) -> max_pool 2 -> relu -> bn1 -> conv2(10->20, k5) -> max_pool 2 -> relu ->
 * bn2 -> flatten -> fc1(320->50) -> relu -> fc2(50->10) -> log_softmax; 21,900 parameters.
 * NULL only when out of memory. */
CN_API cn_model *cn_model_fashion_mnist(cn_error *err);
/* Builds a model from the text of a model file (len bytes; one layer per line: a kind, then
 * key=value words, `#` comments, blank lines; `input` first, `log_softmax` last; the format is
 * described in models/README.md). Layers with tensors and no name= are named by their
 * position after the input line, as torch.nn.Sequential names them ("0", "4", ...). Returns a
 * model as cn_model_create does (parameters zero until cn_model_init), which keeps a copy of the
 * text (cn_model_text), or NULL with "SOURCE:LINE: reason" in err: an unknown kind or key, a
 * missing, repeated or malformed value, a shape that does not fit, a value the layers cannot
 * compute yet ("not supported yet"). */
CN_API cn_model *cn_model_from_text(const char *text, size_t len, const char *source,
                                    cn_error *err);
/* The same for the model file at path (a regular file of at most 1 MiB, read without waiting on
 * a pipe or a device); errors name path. */
CN_API cn_model *cn_model_from_file(const char *path, cn_error *err);
/* The model as the text of a model file, in one canonical form whatever it was built from (a
 * model file, specs): one line per layer, every layer with tensors named. cn_model_from_text
 * builds the same model from it. NUL-terminated; belongs to the model. Checkpoints record it
 * in __metadata__ under "model". */
CN_API const char *cn_model_text(const cn_model *m);
/* The input's normalisation (x/255 - mean[c]) / std[c] into mean[0..max) and std[0..max);
 * returns the number of channels: the model file's mean= and std=, the seed's 0.1307 and 0.3081
 * for a model built from specs. */
CN_API int cn_model_normalization(const cn_model *m, float *mean, float *std, int max);
/* The names of the model's classes, names[0 .. cn_model_num_outputs), copied: checkpoints and
 * saved models record them (__metadata__ "classes", one name per line), cn_model_load and
 * cn_train_checkpoint_restore take them back, and the command prints them. -1 with the reason
 * for an empty name, one over 63 bytes or one holding a control character (a newline, say); the
 * model then keeps its names. A new model has none. */
CN_API int cn_model_set_class_names(cn_model *m, const char *const *names, cn_error *err);
/* Class c's name, or NULL when the model has no names or c is out of range. */
CN_API const char *cn_model_class_name(const cn_model *m, int c);

/* 1 when the model knows its input's normalisation (a model file's mean= and std=, the seed's
 * for a model built from specs, or one set since), 0 when its model file left it to the
 * training data: such a model cannot be trained or predict until one is set. */
CN_API int cn_model_has_normalization(const cn_model *m);
/* Sets the input's normalisation to (x/255 - mean[c]) / std[c] for each channel c (mean and std
 * hold the model's input channels), recorded in cn_model_text. -1 with the reason for a value
 * that is not finite or a std that is not above 0 (the model keeps its normalisation). */
CN_API int cn_model_set_normalization(cn_model *m, const float *mean, const float *std,
                                      cn_error *err);
/* 0 when ds holds images of the model's input shape in exactly its number of classes (at most
 * that many when nothing names them: they are then the labels seen), and no label past them;
 * else -1 with "the model reads CxHxW images into N classes, but the data has
 * ..." (or the sample whose label is out of range). */
CN_API int cn_model_fits_data(const cn_model *m, const cn_dataset *ds, cn_error *err);

/* Frees the model and its buffers; m may be NULL. Free trainers built on it first. */
CN_API void cn_model_free(cn_model *m);

/* PyTorch's default initialisation, drawn from cn_rng seeded with seed: conv/linear weights
 * and biases uniform in +-1/sqrt(fan_in); batchnorm weight 1, bias 0, running mean 0, running
 * var 1, num_batches_tracked 0. Overwrites every tensor. */
CN_API void cn_model_init(cn_model *m, uint64_t seed);

/* All trainable parameters in one buffer of cn_model_num_params floats, in PyTorch's
 * parameters() order; the pointer belongs to the model (valid until cn_model_free) and may be
 * read or written between training steps. Gradients and momentum use the same layout. */
CN_API size_t cn_model_num_params(const cn_model *m);
CN_API float *cn_model_params(cn_model *m);
CN_API int cn_model_input_size(const cn_model *m);   /* channels * height * width */
/* The per-sample input shape into *channels, *height, *width. */
CN_API void cn_model_input_shape(const cn_model *m, int *channels, int *height, int *width);
CN_API int cn_model_num_outputs(const cn_model *m);  /* classes: the last layer's features */
CN_API int cn_model_num_layers(const cn_model *m);
/* The layer's name: its spec's name, or kind and index ("relu2") for unnamed layers; "" for an
 * index out of range. The string belongs to the model. */
CN_API const char *cn_model_layer_name(const cn_model *m, int layer);
/* What `cnnc summary` prints of one layer. */
typedef struct {
    const char *kind;       /* the model file's word: "conv2d" */
    const char *name;       /* as cn_model_layer_name */
    int channels, height, width; /* its output, per sample */
    int flat;               /* 1: the output is a flat vector of channels features */
    size_t params;          /* trainable parameters */
    double forward_flops;   /* one sample's forward pass (2 per multiply-add) */
    double backward_flops;  /* and backward, as cn_model_flops counts it */
} cn_layer_info;
/* Fills *info for layer index 0..cn_model_num_layers-1; -1 for an index out of range. The
 * strings belong to the model. */
CN_API int cn_model_layer_info(const cn_model *m, int layer, cn_layer_info *info);
/* Floating-point operations of one sample's forward and backward pass through the conv and
 * linear layers (2 per multiply-add; the first layer computes no input gradient), into
 * *forward and *backward. */
CN_API void cn_model_flops(const cn_model *m, double *forward, double *backward);
/* The same count for the arithmetic cnnc's kernels do: a convolution that feeds a max-pool with
 * S x S windows takes its gradients from the one position in S*S the pool picked, so its
 * backward pass counts 1/S^2 of the dense one (picks whose gradient is zero, skipped too, are
 * still counted: the figure does not depend on the data). 3x3 convolutions that go through
 * Winograd's algorithm (fp32, stride 1) are counted as dense ones, though their products do
 * 4/9 of the multiply-adds. */
CN_API void cn_model_flops_computed(const cn_model *m, double *forward, double *backward);

typedef enum { CN_F32, CN_I64 } cn_dtype;

/* A named tensor of the model's state_dict (PyTorch names and shapes), or of a safetensors
 * file. data points into the object it came from (model or file) and is valid as long as that
 * object; it is not owned by the reference. */
typedef struct {
    char name[64];
    cn_dtype dtype;
    int ndim;          /* 0 for a scalar */
    int64_t shape[4];
    void *data;
} cn_tensor_ref;

/* Lists the state_dict tensors in PyTorch's order into out[0..max); returns how many the model
 * has (at most max are written; call with out NULL and max 0 to count). Writing through a
 * reference's data changes the model. */
CN_API int cn_model_tensors(cn_model *m, cn_tensor_ref *out, int max);

/* ---------------------------------------------------------------- instruction sets */

/* The vector instruction sets the compute kernels are built for, chosen at run time: generic
 * (portable C with vector types, on every processor), AVX2 and AVX-512 on x86-64, NEON on arm64.
 * A build has the kernels of its own processor family only; the others are never supported. */
typedef enum { CN_ISA_GENERIC, CN_ISA_AVX2, CN_ISA_AVX512, CN_ISA_NEON, CN_ISA_COUNT } cn_isa;

/* "generic", "avx2", "avx512", "neon"; "unknown" else */
CN_API const char *cn_isa_name(cn_isa isa);
CN_API int cn_isa_supported(cn_isa isa); /* 1 when this build and this CPU can run it, else 0 */
/* Sets *isa to the best supported set, or the one the environment variable CNNC_ISA names;
 * -1 with a message when CNNC_ISA is unknown or unsupported (*isa then holds the best set).
 * Callers that want to refuse such a setting check this before any work. */
CN_API int cn_isa_from_env(cn_isa *isa, cn_error *err);
/* The set in use by this process: decided on first use from cn_isa_from_env (falling back to
 * the best supported one when CNNC_ISA is invalid) and fixed from then on. */
CN_API cn_isa cn_isa_active(void);

/* Measures the single-precision arithmetic peak of `threads` (1..1024) threads with the kernels
 * in use (independent vector multiply-adds, no memory traffic, the best of five rounds: about
 * half a second); *gflops in GFLOP/s. Starts and stops its own thread pool. Errors: a thread
 * count out of range, threads that cannot start, out of memory. */
CN_API int cn_peak_gflops(int threads, double *gflops, cn_error *err);

/* ---------------------------------------------------------------- threads */

typedef struct cn_pool cn_pool;
/* Runs one task; thread is the index (0..threads-1) of the thread that runs it. */
typedef void (*cn_task_fn)(void *ctx, int task, int thread);

/* A persistent pool: threads-1 workers plus the calling thread (threads >= 1). The caller
 * frees it with cn_pool_free. NULL with a message when a thread cannot start or memory runs
 * out. */
CN_API cn_pool *cn_pool_create(int threads, cn_error *err);
/* Runs fn(ctx, i, thread) for tasks i = 0..num_tasks-1 and returns when all are done. Task i
 * always runs on thread i % threads, so per-thread scratch is safe and placement is
 * reproducible. ctx is passed through untouched. Call from the thread that created the pool,
 * never from inside a task. */
CN_API void cn_pool_run(cn_pool *pool, int num_tasks, cn_task_fn fn, void *ctx);
CN_API int cn_pool_threads(const cn_pool *pool);
/* Stops and joins the workers and frees the pool; pool may be NULL. */
CN_API void cn_pool_free(cn_pool *pool);

/* ---------------------------------------------------------------- processes */

/* The processes of one run, ranks 0..size-1, and the two collectives they exchange bytes with.
 * The library starts no processes and calls no MPI itself: the cnnc command supplies an Open MPI
 * communicator, tests an in-memory one. Every rank makes the same collective calls in the same
 * order, with the same block size. An implementation that cannot complete a collective must stop
 * every process itself (MPI_Abort): the ranks could not get back in step. */
typedef struct {
    int rank, size;
    void *ctx;
    /* blocks holds size * block bytes, this rank's own bytes at rank * block; on return every
     * rank holds every rank's block. 0, or -1 with a message. */
    int (*allgather)(void *ctx, void *blocks, size_t block, cn_error *err);
    /* send and recv hold size * block bytes each (not overlapping): block k of send goes to
     * rank k, and on return block k of recv holds what rank k sent this rank (this rank's own
     * block copied across). 0, or -1 with a message. */
    int (*alltoall)(void *ctx, const void *send, void *recv, size_t block, cn_error *err);
    /* Stops every process after printing message; for failures inside a collective. */
    void (*abort)(void *ctx, const char *message);
} cn_comm;

/* The items [*begin, *end) of 0..total-1 that rank owns: contiguous, in rank order, sizes
 * differing by at most one. */
CN_API void cn_comm_share(int total, int rank, int size, int *begin, int *end);

/* Every rank says whether it failed (*err holding why). Returns 0 on every rank when none
 * did; otherwise -1 on every rank with the same message in *err, "rank K: ..." from the lowest
 * failing rank. c may be NULL (one process): returns -failed. */
CN_API int cn_comm_agree(const cn_comm *c, int failed, cn_error *err);

/* ---------------------------------------------------------------- learning-rate schedules */

/* The rate of each optimiser step as torch.optim.lr_scheduler gives it: CONSTANT (the base
 * rate), STEP (StepLR: times gamma every step_size steps), COSINE (CosineAnnealingLR, eta_min 0,
 * T_max = total_steps - warmup_steps), ONECYCLE (OneCycleLR with its defaults and max_lr the base
 * rate over total_steps - warmup_steps steps; later steps keep its last rate). warmup_steps > 0
 * puts a LinearLR(start_factor=warmup_start, total_iters=warmup_steps) first, as SequentialLR
 * does: the schedule's first rate times warmup_start rising linearly to 1. */
typedef enum { CN_LR_CONSTANT, CN_LR_STEP, CN_LR_COSINE, CN_LR_ONECYCLE } cn_lr_kind;
/* "constant", "step", "cosine", "onecycle"; "unknown" else. */
CN_API const char *cn_lr_kind_name(cn_lr_kind k);
/* Sets *k from its name; -1 for any other text. */
CN_API int cn_lr_kind_from_name(const char *name, cn_lr_kind *k);
typedef struct {
    cn_lr_kind kind;
    long warmup_steps; /* 0: no warmup */
    float warmup_start; /* (0, 1]; 0: PyTorch's default 1/3 */
    long step_size;    /* STEP */
    float gamma;       /* STEP */
    long total_steps;  /* COSINE, ONECYCLE: the whole run's steps, the warmup's included */
} cn_lr_schedule;

/* 0, or -1 with a message for a schedule out of range: an unknown kind, warmup_steps < 0,
 * warmup_start outside [0, 1], STEP with step_size < 1 or gamma not above 0, COSINE or
 * ONECYCLE with fewer than 2 steps after the warmup. */
CN_API int cn_lr_schedule_check(const cn_lr_schedule *s, cn_error *err);
/* The learning rate of optimiser step `step` (0 first; below 0 counts as 0) for base rate base,
 * of a schedule that cn_lr_schedule_check accepts. */
CN_API float cn_lr_at(const cn_lr_schedule *s, float base, long step);

/* ---------------------------------------------------------------- training */

/* The precision of the convolutions' products. FP32: everything in single precision.
 * BF16: the convolutions multiply bfloat16 operands (weights, patches and output gradients
 * rounded to nearest even) and sum in fp32, as a TPU does; weights, momentum, gradients, the
 * backward pass of a convolution that feeds a max-pool (taken from the pool's picks), and every
 * other layer stay fp32. Needs a CPU with AVX512_BF16. */
typedef enum { CN_PRECISION_FP32, CN_PRECISION_BF16, CN_PRECISION_COUNT } cn_precision;
CN_API const char *cn_precision_name(cn_precision p); /* "fp32", "bf16"; "unknown" else */
/* Sets *p from its name; -1 for any other text. */
CN_API int cn_precision_from_name(const char *name, cn_precision *p);
/* 1 when this CPU can run it, else 0. */
CN_API int cn_precision_supported(cn_precision p);
/* The kernels of the bf16 products: AVX512_BF16's instructions, or the tiles of AMX (Intel
 * Xeon since Sapphire Rapids, under Linux 5.16 or later), which multiply 16 x 32 pairs at once.
 * Their sums differ in the last bits. The process uses the best this CPU and operating system
 * offer, unless the environment variable CNNC_BF16 names another. */
typedef enum { CN_BF16_AVX512, CN_BF16_AMX, CN_BF16_KERNEL_COUNT } cn_bf16_kernel;
CN_API const char *cn_bf16_kernel_name(cn_bf16_kernel k); /* "avx512", "amx"; "unknown" else */
CN_API int cn_bf16_kernel_supported(cn_bf16_kernel k);   /* 1 when usable here, else 0 */
/* As cn_isa_from_env for CNNC_BF16: *k = the best supported kernels or the ones it names; -1
 * with a message when it names unknown or unsupported ones. */
CN_API int cn_bf16_kernel_from_env(cn_bf16_kernel *k, cn_error *err);
/* The kernels in use by this process, decided on first use and fixed from then on. */
CN_API cn_bf16_kernel cn_bf16_kernel_active(void);

/* The optimisers of cn_train_config. */
typedef enum { CN_OPTIMIZER_SGD, CN_OPTIMIZER_ADAMW, CN_OPTIMIZER_COUNT } cn_optimizer;
CN_API const char *cn_optimizer_name(cn_optimizer o); /* "sgd", "adamw"; "unknown" else */
/* Sets *o from its name; -1 for any other text. */
CN_API int cn_optimizer_from_name(const char *name, cn_optimizer *o);

/* Training-time data augmentation, as torchvision's RandomCrop(size, padding=P) (P rows and
 * columns of zeros around the raw 0..255 pixels, then a crop of the image's size at a random
 * corner) followed by RandomHorizontalFlip() (mirrored left to right with probability 1/2), on
 * every training sample before normalisation; evaluation never augments. {0, 0}: none. */
typedef struct {
    int crop_padding; /* P, 0 <= P < the image's height and width; 0: no crop */
    int hflip;        /* 1: flip half the samples; 0: none */
} cn_augment;

/* What one sample drew: the crop's top-left corner in the padded image (0..2P each; P, P is
 * the image itself) and whether it is mirrored. */
typedef struct {
    int top, left;
    int flip;
} cn_augment_draw;

/* 0, or -1 with a message when a is out of range for images of height x width. */
CN_API int cn_augment_check(const cn_augment *a, int height, int width, cn_error *err);
/* The draw of a sample (its index in the training set; a cn_trainer_step batch: its position
 * there) in an epoch of a run with seed: a function of (seed, epoch, sample) alone, drawn from
 * a stream of its own (never dropout's nor the sampler's), so any thread or process draws the
 * same. Uniform corners in 0..2P, as torchvision's; flips independent of P. */
CN_API cn_augment_draw cn_augment_draw_sample(const cn_augment *a, uint64_t seed, int epoch,
                                              uint32_t sample);
/* out = in ([channels, height, width] bytes, not overlapping) padded, cropped and mirrored as
 * d says for a's padding. */
CN_API void cn_augment_image(const cn_augment *a, const cn_augment_draw *d, const uint8_t *in,
                             uint8_t *out, int channels, int height, int width);
/* The text of a setting: "none", or items joined by commas, "crop=P" then "hflip". */
#define CN_AUGMENT_TEXT_MAX 32
CN_API void cn_augment_format(const cn_augment *a, char text[CN_AUGMENT_TEXT_MAX]);
/* Reads such a text (items in any order, each once; "none" alone) into *a; -1 with a message
 * naming what is wrong: an unknown or repeated item, an empty one, P not an integer in
 * 0..CN_AUGMENT_MAX_PADDING. *a changes only on success. */
#define CN_AUGMENT_MAX_PADDING 1024
CN_API int cn_augment_parse(const char *text, cn_augment *a, cn_error *err);

typedef struct {
    int batch_size;      /* per replica, 128 */
    int num_replicas;    /* data-parallel replicas ("cores"), 8: defines the math */
    int threads;         /* worker threads; never changes results */
    float learning_rate; /* per replica, 0.01; the step uses learning_rate * num_replicas */
    float momentum;      /* 0.5 */
    uint64_t seed;       /* 1: initialisation and shuffling */
    cn_precision precision; /* CN_PRECISION_FP32 (0) unless asked: part of the math */
    float label_smoothing;  /* 0 unless asked, in [0, 1): the training loss is PyTorch's
                             * CrossEntropyLoss(label_smoothing=a); evaluation's stays NLL */
    /* The optimiser, as torch.optim's SGD (momentum above, dampening 0) or AdamW (with bias
     * correction; momentum unused); weight decay applies to every parameter. */
    cn_optimizer optimizer; /* CN_OPTIMIZER_SGD (0) unless asked */
    int nesterov;           /* sgd: Nesterov momentum (needs momentum > 0); 0 */
    float weight_decay;     /* >= 0; sgd: L2 added to the gradient, adamw: decoupled; 0 */
    float beta1, beta2, eps; /* adamw, each 0 for PyTorch's 0.9, 0.999, 1e-8 */
    /* Random crops and flips of the training samples, drawn from (seed, epoch, sample); none. */
    cn_augment augment;
    /* The rate of each step: cn_lr_at(&lr_schedule, learning_rate, n) for optimiser step n of
     * the run (0 first; in an epoch, (epoch - 1) * steps per epoch + its step). All zero:
     * constant, no warmup, every step at exactly learning_rate. */
    cn_lr_schedule lr_schedule;
} cn_train_config;

/* Wall-clock seconds spent in each phase of training, summed over steps. With several
 * processes, wait is the time spent waiting for the slowest one to finish its replicas, and
 * communicate the exchange of every replica's results after that; both 0 for one process. */
typedef struct {
    double data, forward, backward, reduce, optimizer, wait, communicate;
} cn_phase_times;

typedef struct cn_trainer cn_trainer;

/* Plans the buffers (R replicas x batch). The model is borrowed: it must outlive the trainer,
 * which updates its parameters and statistics in place; cfg is copied. Momentum starts at zero.
 * cfg.threads is an upper bound: the threads and the buffers of each thread (a workspace for one
 * batch) are made by the first call that gives them work, as many as it can (cn_trainer_threads)
 * and for the samples it runs, and kept for later calls; so a trainer that only evaluates 10
 * samples makes one thread's buffers for 10 samples, whatever the batch size and threads asked.
 * Returns a trainer the caller frees with cn_trainer_free, or NULL with a message: a setting
 * out of range (batch 1..65536, replicas 1..1024, threads 1..1024, learning rate > 0, momentum
 * and label smoothing in [0, 1), a precision this CPU supports, an augmentation that
 * cn_augment_check refuses for the model's input, a schedule that cn_lr_schedule_check refuses),
 * out of memory. Threads that cannot start and
 * buffers that do not fit are reported by the call that needed them. */
CN_API cn_trainer *cn_trainer_create(cn_model *m, const cn_train_config *cfg, cn_error *err);
/* The same for one rank of several processes (comm borrowed, it must outlive the trainer; NULL
 * or size 1: one process). num_replicas must be a multiple of comm->size: each rank runs its
 * cn_comm_share of the replicas; each step every rank sums one slice of the gradient over all
 * replicas, in the order one process sums them (alltoall), and the sums are gathered back
 * (allgather), so every rank applies the same update and the weights are bit-identical to one
 * process's; evaluation is split across the ranks. Every rank drives its trainer with the same
 * calls and data; creating one makes no collective call. */
CN_API cn_trainer *cn_trainer_create_distributed(cn_model *m, const cn_train_config *cfg,
                                                 const cn_comm *comm, cn_error *err);
/* Stops the trainer's pool and frees its buffers (not the model); t may be NULL. */
CN_API void cn_trainer_free(cn_trainer *t);

/* The threads that can have work, never more than cfg.threads: in a training step (training
 * non-zero), one per local replica or, when the replicas run one after another, one per chunk
 * of the segment its batch is cut into the most chunks for; in an evaluation of eval_samples
 * samples (0: none), one per batch of batch_size (of the largest share, with several processes).
 * The largest of those asked for, at least 1: what the trainer will run on. */
CN_API int cn_trainer_threads(const cn_trainer *t, int training, int eval_samples);

/* Bytes this process sends plus receives in one training step's exchange of the replicas'
 * results (the payload of the alltoall and the allgather; not the one-byte agreements): with P
 * processes of L replicas each, n parameters and m running statistics (BatchNorm's mean and
 * var), 8 (P - 1) ((L + 1) ceil((n + m) / P) + 2 L): at most 8 (L + 1) (n + m + P) for the
 * summed values, and 8 bytes per replica to and from each other process for its loss and right
 * answers. 0 for one process. */
CN_API int64_t cn_trainer_exchange_bytes(const cn_trainer *t);

/* Steps in one epoch of data: floor(floor(count / R) / batch_size). */
CN_API int cn_trainer_steps_per_epoch(const cn_trainer *t, const cn_dataset *train);

/* One optimiser step on num_replicas * batch_size samples given as raw pixels [R*B, input size]
 * and labels [R*B] (each below the model's outputs): replica r takes samples r*B .. r*B+B-1;
 * the pixels are normalised as the model says (cn_model_normalization). Random draws
 * (dropout) take these steps as epoch 0, steps 0, 1, 2, ... in the order they landed, and so
 * does the schedule: the k-th step that landed here (0 first) runs at its rate of step k.
 * Gradients are averaged over the replicas in replica order, running statistics become the
 * mean of the replicas' updates. *loss gets the global loss (mean over all R*B samples); phase
 * times are added to *times (may be NULL). Errors: a non-finite loss, gradient or new weight
 * ("training diverged"); the step then does not land and the model keeps its weights. */
CN_API int cn_trainer_step(cn_trainer *t, const uint8_t *images, const uint8_t *labels, float *loss,
                           cn_phase_times *times, cn_error *err);

/* Thread-seconds spent in each layer's forward and backward during training steps since the
 * trainer was created or last reset, summed over replicas, into forward[0..max) and
 * backward[0..max); returns the number of layers (at most max entries are written). */
CN_API int cn_trainer_layer_times(const cn_trainer *t, double *forward, double *backward, int max);
CN_API void cn_trainer_reset_layer_times(cn_trainer *t);

/* What one training step did, over all replicas (and processes). */
typedef struct {
    int epoch;   /* 1-based, as given */
    int step;    /* 0 .. steps-1 */
    int steps;   /* steps in the epoch */
    float loss;  /* the global loss: mean over all replicas' samples */
    int correct; /* samples whose largest output was their label, before the update */
    int samples; /* samples in the step: replicas x batch */
    float learning_rate; /* the rate per replica the step used (its schedule's) */
} cn_step_report;

/* Called after each step. Runs on the calling thread between steps; it must not call back into
 * the trainer. */
typedef void (*cn_step_fn)(void *ctx, const cn_step_report *step);

/* Trains one epoch (1-based; it picks the sampler's permutation) over train: every step of
 * cn_trainer_steps_per_epoch, calling on_step (may be NULL) with ctx after each. The mean step
 * loss goes to *mean_loss (may be NULL); phase times are added to *times (may be NULL).
 * Errors: fewer samples than one step needs, images of another size than the model's input,
 * out of memory, divergence (as cn_trainer_step; the epoch stops there). */
CN_API int cn_trainer_epoch(cn_trainer *t, const cn_dataset *train, int epoch, cn_step_fn on_step,
                            void *ctx, float *mean_loss, cn_phase_times *times, cn_error *err);

/* The optimiser's momentum buffers: cn_model_num_params floats in the parameter layout, all
 * zero before the first step (so the first step's buffer is the gradient, as in PyTorch).
 * Training checkpoints save them; a resumed run writes them back before its first step. */
CN_API float *cn_trainer_momentum(cn_trainer *t);
/* With AdamW the same call gives its state instead: exp_avg followed by exp_avg_sq, 2 x
 * cn_model_num_params floats; the steps it has taken (its bias correction) are read and set
 * here (set: before a step, steps >= 0). */
CN_API int64_t cn_trainer_optimizer_steps(const cn_trainer *t);
CN_API int cn_trainer_set_optimizer_steps(cn_trainer *t, int64_t steps, cn_error *err);
/* The base learning rate per replica, as cfg's (> 0 and finite), from the next step on: the
 * rate of a constant schedule, and what cfg.lr_schedule's rates are computed from. */
CN_API int cn_trainer_set_learning_rate(cn_trainer *t, float learning_rate, cn_error *err);

/* Where training stands inside an epoch. A checkpoint records it so that a later run, in
 * another process, continues with exactly the steps, samples and sums of an uninterrupted one. */
typedef struct {
    int epoch;       /* 1-based */
    int step;        /* steps of this epoch done: 0 .. steps per epoch */
    double loss_sum; /* the sum of those steps' global losses */
    int64_t correct; /* the sum of those steps' right answers (cn_step_report.correct) */
} cn_epoch_position;

/* Asked after every step, with the ctx of cn_trainer_run_epoch; non-zero stops training there. */
typedef int (*cn_stop_fn)(void *ctx);

/* Runs epoch pos->epoch from step pos->step to its end, advancing pos->step and adding each
 * step's loss to pos->loss_sum and its right answers to pos->correct. The epoch's sample order
 * depends only on (seed, epoch), so any step can come first; so do the step's random draws
 * (dropout: seed, epoch, step, replica). After each step on_step (may be NULL) is called, then
 * should_stop (may be NULL): when it returns non-zero, the function returns 0 with pos->step <
 * steps per epoch.
 * With several processes should_stop is asked on every rank, and a stop asked for on any rank
 * stops them all after the same step. A failing step (a non-finite loss, say) changes neither
 * the model nor pos. */
CN_API int cn_trainer_run_epoch(cn_trainer *t, const cn_dataset *train, cn_epoch_position *pos,
                                cn_step_fn on_step, cn_stop_fn should_stop, void *ctx,
                                cn_phase_times *times, cn_error *err);

/* Scores the first n samples of ds (1 <= n <= ds->count) in evaluation mode (running
 * statistics), each exactly once, in chunks of the trainer's batch size, one chunk a thread
 * (cn_trainer_threads); the results do not depend on the threads.
 * *loss gets the mean NLL, *accuracy the percentage of right answers; predictions (may be
 * NULL, else n bytes, caller owned) gets each sample's predicted class. Changes nothing in the
 * model. Errors: n out of range, images of another size, out of memory, outputs that are not
 * finite (a model whose weights or statistics are out of range). With a communicator
 * every rank calls it with the same data and n, predictions NULL on all or none; each scores
 * its share of the chunks and every rank gets the loss, accuracy and predictions one process
 * would. */
CN_API int cn_evaluate(cn_trainer *t, const cn_dataset *ds, int n, double *loss, double *accuracy,
                       uint8_t *predictions, cn_error *err);

/* ---------------------------------------------------------------- files */

/* Writes tensors[0..num_tensors) as safetensors (little-endian, header padded to 8 bytes,
 * "format":"pt" in __metadata__ plus meta as num_meta key/value string pairs: meta[2i] the
 * key, meta[2i+1] the value; meta may be NULL with num_meta 0). The file appears whole or not
 * at all: a temporary file in the same folder, fsync, rename. Errors: bad names, dtypes,
 * shapes or metadata (duplicates, reserved keys, not UTF-8), write failures (path named). */
CN_API int cn_safetensors_write(const char *path, const cn_tensor_ref *tensors, int num_tensors,
                                const char *const *meta, int num_meta, cn_error *err);

typedef struct cn_safetensors cn_safetensors;
/* Reads and validates a whole safetensors file (header bound and JSON, dtypes, shapes against
 * byte ranges, ranges covering the data exactly) into memory. Returns a file the caller frees
 * with cn_safetensors_free, or NULL with a message naming path and what is wrong; a corrupt
 * header never drives a large allocation. */
CN_API cn_safetensors *cn_safetensors_read(const char *path, cn_error *err);
/* Frees the file and everything cn_safetensors_at/get/meta returned from it; f may be NULL. */
CN_API void cn_safetensors_free(cn_safetensors *f);
CN_API int cn_safetensors_count(const cn_safetensors *f);
/* The i-th tensor (file order, 0 <= i < count) or the tensor by name (NULL when absent). The
 * reference and its data belong to f; data points at the raw little-endian bytes and need not
 * be aligned (copy with memcpy). */
CN_API const cn_tensor_ref *cn_safetensors_at(const cn_safetensors *f, int i);
CN_API const cn_tensor_ref *cn_safetensors_get(const cn_safetensors *f, const char *name);
/* A __metadata__ value (owned by f), or NULL when the key is absent. */
CN_API const char *cn_safetensors_meta(const cn_safetensors *f, const char *key);

/* The model's state_dict as safetensors, written atomically (as cn_safetensors_write) / back.
 * Load checks the whole file first: every expected name there with its dtype and shape, finite
 * values, no negative running variance, nothing else (optimizer.* tensors are allowed and
 * ignored); a refused file leaves the model unchanged. Both carry the model's class names
 * (__metadata__ "classes", when it has them; load takes them back). Errors name path:
 * unreadable or corrupt file, a missing, extra or misshapen tensor, a value out of range, class
 * names that do not fit the model. */
CN_API int cn_model_save(cn_model *m, const char *path, cn_error *err);
CN_API int cn_model_load(cn_model *m, const char *path, cn_error *err);

/* Class log-probabilities of n raw images ([n, input size] bytes, normalised here as in
 * training) in evaluation mode (BatchNorm running statistics), on the calling thread, up to 64
 * at a time: log_probs gets [n, classes]. Errors: n < 1, out of memory, an output that is not
 * finite (a model whose weights or statistics are out of range). */
CN_API int cn_model_predict(cn_model *m, const uint8_t *images, int n, float *log_probs,
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
    float label_smoothing;      /* 0 for files that do not say */
    int train_samples;          /* training images used */
    uint32_t train_crc32;       /* CRC-32 of those images' pixels followed by their labels */
    int data_channels, data_height, data_width; /* of the images; 0 in files that do not say */
    int data_classes;           /* the data's class count; 0 in files that do not say */
    cn_precision precision;     /* of the products; fp32 for files that do not say */
    cn_optimizer optimizer;     /* sgd for files that do not say */
    char isa[16];               /* instruction set of the kernels that wrote it, with bf16 "/" and
                                 * the bf16 products' kernels ("avx512/amx"); informational */
    cn_augment augment;         /* none for files that do not say */
    int nesterov;               /* 0 for files that do not say */
    float weight_decay;         /* 0 for files that do not say */
    float beta1, beta2, eps;    /* adamw's, defaults filled in (0.9, 0.999, 1e-8 when unsaid) */
    /* The optimiser steps taken (adamw's bias correction): the caller sets it before saving
     * (cn_trainer_optimizer_steps) and gives it back after restoring; files that do not say
     * have taken one per step of their position. */
    int64_t optimizer_steps;
    cn_lr_schedule lr_schedule; /* constant without warmup for files that do not say */
} cn_train_state;

/* The state of a run configured with cfg over train, at epoch 1 step 0 (optimizer_steps 0),
 * with the instruction set in use. */
CN_API void cn_train_state_init(cn_train_state *s, const cn_train_config *cfg,
                                      const cn_dataset *train);

/* Writes a training checkpoint to path, atomically as cn_safetensors_write: the model's
 * state_dict under PyTorch's names, the optimiser's state as cn_trainer_momentum gives it under
 * torch.optim's names in each parameter's shape (sgd: "optimizer.<name>.momentum_buffer";
 * adamw: "optimizer.<name>.exp_avg" from the first cn_model_num_params floats and
 * "optimizer.<name>.exp_avg_sq" from the next), and s in __metadata__ (the optimiser, its
 * settings and steps, the schedule), followed by num_extra key/value string pairs of the
 * caller's (extra[2i] the key, extra[2i+1] the value; 0..CN_TRAIN_EXTRA_MAX of them, extra may
 * be NULL with 0; keys that s uses are refused as duplicates): what a program needs to continue
 * its run that the math does not, read back with cn_safetensors_meta. Refuses, writing
 * nothing, when a weight, running statistic or optimiser state value is not finite. */
#define CN_TRAIN_EXTRA_MAX 32
CN_API int cn_train_checkpoint_save(cn_model *m, const float *momentum, const cn_train_state *s,
                                    const char *const *extra, int num_extra, const char *path,
                                    cn_error *err);
/* Reads the training metadata of an open file (path names it in messages) into s, checking
 * every key; a file without it (a model from cn_model_save or PyTorch) is refused as "not a
 * training checkpoint". */
CN_API int cn_train_checkpoint_state(const cn_safetensors *f, const char *path, cn_train_state *s,
                                     cn_error *err);
/* Copies the model and the optimiser's state out of an open training checkpoint into m and
 * state, laid out for optimizer as cn_trainer_momentum's (a trainer of that optimiser), after
 * checking every tensor against m (names, dtypes, shapes, finite values, no negative
 * exp_avg_sq, no stray optimizer.* tensor), that the file records that optimiser (files that do
 * not say are sgd) and holds its state and no other's, and the class names it records; on
 * failure neither m nor state changes. The steps taken are the caller's to set from
 * cn_train_checkpoint_state's optimizer_steps. */
CN_API int cn_train_checkpoint_restore(cn_model *m, float *state, cn_optimizer optimizer,
                                       const cn_safetensors *f, const char *path, cn_error *err);

/* Checkpoint folders. checkpoint-epoch-EEEE.safetensors holds a run after epoch EEEE;
 * checkpoint-epoch-EEEE-step-SSSSS.safetensors a run stopped after step SSSSS of epoch EEEE
 * (numbers zero-padded to at least 4 and 5 digits). Nothing else in a folder is taken for a
 * checkpoint, the atomic writer's temporaries (NAME.tmp.PID.N) included; a checkpoint's name
 * that is not a regular file (a folder, a named pipe, a symbolic link) makes the folder's
 * listing fail, naming it. Every name of a checkpoint or of its temporary begins with
 * CN_CHECKPOINT_PREFIX. A folder is meant to have one writer at a time; these functions do not
 * lock it. */
#define CN_CHECKPOINT_NAME_MAX 64
#define CN_CHECKPOINT_PREFIX "checkpoint-epoch-"

/* The file name for a position (an epoch is complete when pos->step == steps_per_epoch). */
CN_API void cn_checkpoint_name(char name[CN_CHECKPOINT_NAME_MAX], const cn_epoch_position *pos,
                               int steps_per_epoch);
/* 1 when name is a checkpoint's file name exactly as cn_checkpoint_name writes it (then *epoch,
 * and *step: -1 for a complete epoch), 0 otherwise. */
CN_API int cn_checkpoint_parse_name(const char *name, int *epoch, int *step);
/* Orders positions as parsed: epoch, then step, a complete epoch (-1) after all its steps. */
CN_API int cn_checkpoint_compare(int epoch_a, int step_a, int epoch_b, int step_b);
/* Counts the checkpoints in dir and puts the newest one's name into newest (when there is one);
 * -1 with a message when dir cannot be read or a checkpoint's name there is not a regular
 * file. */
CN_API int cn_checkpoint_find(const char *dir, char newest[CN_CHECKPOINT_NAME_MAX], cn_error *err);
/* Deletes all but the newest keep checkpoints of dir (keep >= 1; INT_MAX keeps all) and every
 * temporary file left there by an interrupted write of a checkpoint, then syncs the folder. */
CN_API int cn_checkpoint_prune(const char *dir, int keep, cn_error *err);

/* ---------------------------------------------------------------- images */

/* Image files: PNG (decoded by cairo), JPEG (by libjpeg-turbo; baseline and progressive, grey
 * and colour) and PGM (binary P5 or plain P2), told apart by their first bytes, never by the
 * file name. Pixels come out planar, [channels, height, width] (the model's input layout), as
 * channels 1 (grey) or 3 (red, green, blue) as the caller asks: colour becomes grey with the
 * luma weights 0.299 R + 0.587 G + 0.114 B (as PIL's convert("L") computes them), grey becomes
 * colour by repeating it in each plane (PIL's convert("RGB")). Transparent parts of a PNG are
 * composited over black, samples of more than 8 bits are scaled to 0..255. A file is read
 * whole and is at most 16 MiB; the size in pixels is checked from the header before any pixel
 * is decoded, and an image with a side above CN_IMAGE_MAX_SIDE or more than
 * CN_IMAGE_MAX_PIXELS pixels is refused. A damaged file (bad checksum, truncated data, a
 * libjpeg warning about corrupt data) is refused. */
#define CN_IMAGE_MAX_SIDE 32767
#define CN_IMAGE_MAX_PIXELS (1L << 25) /* 33,554,432: an 8192 x 4096 picture */

/* Reads an image of exactly height x width pixels as channels 1 or 3. Another size is refused
 * from the header, before any pixel is decoded: nothing is resized. pixels gets
 * channels * height * width bytes (its contents are unspecified after a failure). */
CN_API int cn_image_read(const char *path, int channels, int height, int width, uint8_t *pixels,
                         cn_error *err);

/* Reads an image of any size as channels 1 or 3 and scales it to height x width with
 * cn_image_resize (an image of that size already is copied unchanged). pixels gets
 * channels * height * width bytes; *file_height and *file_width (each may be NULL) get the
 * size of the image in the file. */
CN_API int cn_image_read_resized(const char *path, int channels, int height, int width,
                                 uint8_t *pixels, int *file_height, int *file_width,
                                 cn_error *err);

/* Scales the image src ([channels, src_height, src_width], channels 1 or 3) to dst
 * ([channels, height, width]), each plane on its own and each axis on its own, without keeping
 * the aspect ratio. Along an axis that shrinks, an output pixel is the mean of the source
 * pixels whose centres lie under it (area averaging; exact for whole factors); along an axis
 * that grows, it is interpolated linearly between the two nearest source pixels (edge pixels
 * repeated). The pixels are those of PIL's Image.resize with Image.BOX along a shrinking axis
 * and Image.BILINEAR along a growing one (8-bit fixed point; the width first, then the
 * height), so Python code can prepare images exactly as cnnc reads them (checked against
 * Pillow 9.4). Sides 1..CN_IMAGE_MAX_SIDE.
 * Errors: a bad size or channel count, out of memory. */
CN_API int cn_image_resize(const uint8_t *src, int channels, int src_height, int src_width,
                           uint8_t *dst, int height, int width, cn_error *err);

/* 1 when the grey image (rows x cols) has a light background, 0 otherwise: the mean of its
 * border (the outermost row and column on each side) is 128 or more. Fashion-MNIST draws
 * light objects on black; over its 10,000 test images this holds for none, and for every one
 * of them inverted (255 - v). `cnnc predict` inverts such images unless told not to. */
CN_API int cn_image_light_background(const uint8_t *pixels, int rows, int cols);

/* ---------------------------------------------------------------- pictures */

/* The longest side of an image cn_result_picture draws. */
#define CN_PICTURE_MAX_SIDE 1024

/* A set of labelled images with a model's predictions, for cn_result_picture. */
typedef struct {
    const uint8_t *images;           /* [n, channels, height, width] raw pixels, planes in order */
    int channels;                    /* 1 (grey) or 3 (red, green, blue planes) */
    int height, width;               /* 1..CN_PICTURE_MAX_SIDE each */
    const uint8_t *labels;           /* [n] class numbers < classes */
    const uint8_t *predictions;      /* [n] class numbers < classes */
    int n;
    int classes;                     /* 1..256 */
    const char *const *class_names;  /* [classes], or NULL: the class numbers are drawn */
} cn_labelled_images;

/* Draws a grid (rows x cols) of the set's first rows*cols images with captions
 * "Actual <class> / Predicted <class>", blue when right and red when wrong, under a title
 * (may be NULL), and writes it as an opaque PNG, whole or not at all. The set is read only;
 * set->n >= rows * cols, and only the labels and predictions in the grid are checked. A class
 * whose name is NULL (or all of them, class_names NULL) is shown by its number.
 * Each image is scaled up by s = max(1, round(115 / max(height, width))) with nearest-neighbour
 * sampling (28 x 28 at 4x: 112 px), grey as it is (0 black, 255 white), 3 channels in colour.
 * Layout, in px: each cell is C = max(260, s * width + 12) wide and holds a 22 px caption band
 * over the image; the picture is (32 + cols * C) x (72 + rows * (22 + s * height) +
 * (rows - 1) * 12) (1332 x 790 for 5 x 5 Fashion-MNIST images). A caption is drawn at 12 px;
 * one wider than C - 12 shrinks down to 9 px, and if still too wide the longer of its two
 * names loses characters at its end for "…" until it fits, so it never leaves its cell.
 * The text of this and the other pictures is drawn in DejaVu Sans read from the files of
 * Debian's fonts-dejavu-core (/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf and
 * DejaVuSans-Bold.ttf), never through fontconfig, so the pixels do not depend on its cache.
 * Errors: bad arguments (channels not 1 or 3, a side or the class count out of range, a label
 * or prediction in the grid >= classes, too few images, a grid over cairo's 32767 px), a
 * folder that is missing or not writable, a font file that is missing or unreadable. */
CN_API int cn_result_picture(const char *path, const cn_labelled_images *set, int rows,
                             int cols, const char *title, cn_error *err);

/* One epoch's numbers for cn_plot_curves. A value that is NaN or infinite is left out of its
 * curve (the line breaks there), so an epoch without a test pass can still be plotted. */
typedef struct {
    int epoch;            /* strictly increasing along the array */
    double train_loss;    /* mean training loss of the epoch */
    double test_loss;     /* mean NLL on the test images */
    double test_accuracy; /* percent */
    int has_validation;   /* 1: the next two are a validation split's; 0: there is none */
    double val_loss;      /* mean NLL on the validation images */
    double val_accuracy;  /* percent */
    double learning_rate; /* per replica, of the epoch's last step; 0 (or NaN): not known */
} cn_epoch_metrics;

/* The size `cnnc train` and `cnnc plot` draw training curves at. */
#define CN_PLOT_WIDTH 960
#define CN_PLOT_HEIGHT 720

/* Draws training curves and writes them as an opaque width x height PNG: the title on top, a
 * legend under it, then two panels over one epoch axis: train loss (blue) and test loss (orange)
 * above, test accuracy in percent (green) below, and when an epoch gives its learning rate (> 0)
 * a third, lower panel of the rate (cyan), each with grid lines, ticks at round numbers and an
 * axis label; "Epoch" along the bottom. When an epoch has_validation, validation loss (red) joins
 * the upper panel and validation accuracy (purple) the lower one, and the legend. Text keeps its
 * proportions at other sizes.
 * epochs[0..n) is read only. width 400..8192, height 300..8192, n >= 1, epochs strictly
 * increasing; title may be NULL. The file appears whole or not at all (temporary file, rename).
 * Errors: bad arguments, a folder that is missing or not writable (path named), or a missing
 * font file (as cn_result_picture). */
CN_API int cn_plot_curves(const char *path, const cn_epoch_metrics *epochs, int n, int width,
                          int height, const char *title, cn_error *err);

/* Counts (actual, predicted) pairs: sets counts[a * classes + p] to the number of the n samples
 * whose label is a and whose prediction is p. counts has classes * classes entries (caller
 * owned; overwritten). classes 1..256. Errors: a label or prediction >= classes (counts is then
 * unchanged). */
CN_API int cn_confusion_count(int64_t *counts, int classes, const uint8_t *labels,
                              const uint8_t *predictions, int n, cn_error *err);

/* Draws a confusion matrix as an opaque PNG: one cell per (actual row, predicted column),
 * shaded from white to dark blue by count / largest count, actual class names down the left,
 * predicted class names along the bottom, a colour bar on the right and the title on top.
 * Cells are K = 580 / classes px (rounded down) but within 14..116, so the picture is
 * (258 + K * classes) x (184 + K * classes) px: 490 x 416 for 2 classes, 838 x 764 for 10,
 * 1658 x 1584 for 100, 3842 x 3768 at most. A cell shows its count in 14 px text (smaller in
 * cells under 47 px or for counts too wide), or none where that would be under 6.5 px (from 27
 * classes on). Class names are 13 px, smaller in cells under 17 px, and cut short with "…"
 * where they would need to go under 9 px to fit their band (about 100 px); column names are
 * slanted in cells of 24 px or more (up to 24 classes), upright above that.
 * counts as cn_confusion_count writes them (read only, each >= 0); classes 1..256; class_names
 * has classes entries (an entry or the whole array may be NULL for the class numbers); title
 * may be NULL. The file appears whole or not at all. Errors: bad arguments, a folder that is
 * missing or not writable, or a missing font file (as cn_result_picture). */
CN_API int cn_confusion_picture(const char *path, const int64_t *counts, int classes,
                                const char *const *class_names, const char *title, cn_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CNNC_H */
