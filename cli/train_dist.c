/* train_dist.c — what `cnnc train` checks and says when it runs as several processes: that the
 * replicas divide evenly among them, that only rank 0 writes files and checkpoints, that every
 * rank has the same settings, kernels, data and resumed state as rank 0 (else the run would not
 * be the one-process run it claims to equal), and one line on how the run is spread. The
 * training itself is the library's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "train_dist.h"

int train_dist_outputs(const cli_dist *d, train_settings *s)
{
    if (cli_dist_rank(d) > 0) /* rank 0 alone writes files; its folders may be its own */
        s->save_path = s->result_image = s->metrics_path = s->plot_path = NULL;
    return CLI_OK;
}

/* The end of the message on a process lost past --mpi-timeout: what is left to resume from. */
static int set_deadline(cli_dist *d, const train_settings *s)
{
    const char *dir = s->checkpoint_dir;
    if (!dir)
        return cli_dist_deadline(d, s->mpi_timeout, "nothing was saved (no --checkpoint-dir)");
    size_t size = 2 * strlen(dir) + 80;
    char *afterword = malloc(size);
    if (!afterword)
        return cli_failure("out of memory");
    snprintf(afterword, size, "the last complete checkpoint in %s stays usable (--resume %s)",
             dir, dir);
    int rc = cli_dist_deadline(d, s->mpi_timeout, afterword);
    free(afterword);
    return rc;
}

int train_dist_replicas(cli_dist *d, train_settings *s)
{
    int size = cli_dist_size(d);
    if (s->num_cores % size != 0)
        return cli_usage_error("train", "--num-cores/--replicas %d cannot be shared evenly "
                               "among %d processes: give a multiple of %d (each process runs "
                               "the same number of replicas)", s->num_cores, size, size);
    if (set_deadline(d, s) != CLI_OK)
        return CLI_FAILURE;
    if (cli_dist_rank(d) > 0)
        s->checkpoint_dir = NULL;
    return CLI_OK;
}

/* What must be the same on every rank. */
typedef struct {
    int64_t batch_size, num_cores, num_epochs, threads;
    uint64_t seed;
    float learning_rate, momentum, label_smoothing;
    int32_t optimizer, nesterov, lr_schedule, warmup_epochs, lr_step_epochs;
    float weight_decay, lr_gamma;
    int32_t isa;
    int32_t precision, bf16; /* --precision, and with bf16 the kernels of its products (else -1) */
    int32_t train_count, test_count;
    uint32_t train_crc, test_crc;
    int32_t val_samples, val_count; /* --val-samples, and the images it holds out */
    uint32_t val_crc;
    uint32_t state_crc; /* weights, statistics, momentum and position the run starts from */
    int32_t crop_padding, hflip; /* --augment */
    char host[64];
} fingerprint;

/* The data's shape and classes, pixels, labels and class names. */
static uint32_t dataset_crc(const cn_dataset *ds)
{
    int32_t shape[4] = {ds->channels, ds->height, ds->width, ds->classes};
    size_t pixels = (size_t)ds->count * ds->channels * ds->height * ds->width;
    uLong crc = crc32_z(0L, (const Bytef *)shape, sizeof shape);
    crc = crc32_z(crc, ds->pixels, pixels);
    crc = crc32_z(crc, ds->labels, (size_t)ds->count);
    for (int c = 0; ds->class_names && c < ds->classes; c++)
        crc = crc32_z(crc, (const Bytef *)ds->class_names[c], strlen(ds->class_names[c]) + 1);
    return (uint32_t)crc;
}

/* The state a run starts from: every model tensor, the momentum and the position. */
static uint32_t state_crc(train_run *run)
{
    cn_tensor_ref refs[64];
    int count = cn_model_tensors(run->model, refs, 64);
    uLong crc = crc32_z(0L, NULL, 0);
    for (int i = 0; i < count && i < 64; i++) {
        size_t n = refs[i].dtype == CN_I64 ? 8 : 4;
        for (int d = 0; d < refs[i].ndim; d++) n *= (size_t)refs[i].shape[d];
        crc = crc32_z(crc, refs[i].data, n);
    }
    size_t params = cn_model_num_params(run->model);
    if (run->config.optimizer == CN_OPTIMIZER_ADAMW) /* exp_avg, then exp_avg_sq */
        params *= 2;
    int64_t steps = cn_trainer_optimizer_steps(run->trainer);
    crc = crc32_z(crc, (const Bytef *)cn_trainer_momentum(run->trainer), params * sizeof(float));
    crc = crc32_z(crc, (const Bytef *)&steps, sizeof steps);
    return (uint32_t)crc32_z(crc, (const Bytef *)&run->position, sizeof run->position);
}

static fingerprint take_fingerprint(const train_settings *s, train_run *run)
{
    fingerprint f = {
        .batch_size = s->batch_size, .num_cores = s->num_cores, .num_epochs = s->num_epochs,
        .threads = s->threads, .seed = s->seed, .learning_rate = s->learning_rate,
        .momentum = s->momentum, .label_smoothing = s->label_smoothing,
        .optimizer = (int32_t)s->optimizer, .nesterov = s->nesterov,
        .lr_schedule = (int32_t)s->lr_schedule, .warmup_epochs = s->warmup_epochs,
        .lr_step_epochs = s->lr_step_epochs, .weight_decay = s->weight_decay,
        .lr_gamma = s->lr_gamma,
        .isa = (int32_t)cn_isa_active(),
        .precision = (int32_t)s->precision,
        .bf16 = s->precision == CN_PRECISION_BF16 ? (int32_t)cn_bf16_kernel_active() : -1,
        .train_count = run->train.count, .test_count = run->test.count,
        .train_crc = dataset_crc(&run->train), .test_crc = dataset_crc(&run->test),
        .state_crc = state_crc(run),
        .val_samples = s->val_samples, .val_count = run->val.count,
        .val_crc = dataset_crc(&run->val),
        .crop_padding = s->augment.crop_padding, .hflip = s->augment.hflip,
    };
    gethostname(f.host, sizeof f.host - 1);
    return f;
}

/* The first optimiser or schedule flag whose value rank k does not share with rank 0, or NULL. */
static const char *differing_recipe(const fingerprint *zero, const fingerprint *k)
{
    if (k->optimizer != zero->optimizer) return "--optimizer";
    if (k->nesterov != zero->nesterov) return "--nesterov";
    if (memcmp(&k->weight_decay, &zero->weight_decay, sizeof(float)) != 0)
        return "--weight-decay";
    if (k->lr_schedule != zero->lr_schedule) return "--lr-schedule";
    if (k->warmup_epochs != zero->warmup_epochs) return "--warmup-epochs";
    if (k->lr_step_epochs != zero->lr_step_epochs) return "--lr-step-epochs";
    if (memcmp(&k->lr_gamma, &zero->lr_gamma, sizeof(float)) != 0) return "--lr-gamma";
    return NULL;
}

/* The first flag whose value rank k does not share with rank 0, or NULL. */
static const char *differing_flag(const fingerprint *zero, const fingerprint *k)
{
    if (k->batch_size != zero->batch_size) return "--batch-size";
    if (k->num_cores != zero->num_cores) return "--num-cores";
    if (k->num_epochs != zero->num_epochs) return "--num-epochs";
    if (k->seed != zero->seed) return "--seed";
    if (memcmp(&k->learning_rate, &zero->learning_rate, sizeof(float)) != 0)
        return "--learning-rate";
    if (memcmp(&k->momentum, &zero->momentum, sizeof(float)) != 0) return "--momentum";
    if (memcmp(&k->label_smoothing, &zero->label_smoothing, sizeof(float)) != 0)
        return "--label-smoothing";
    if (k->val_samples != zero->val_samples) return "--val-samples";
    if (k->crop_padding != zero->crop_padding || k->hflip != zero->hflip) return "--augment";
    if (k->precision != zero->precision) return "--precision";
    return differing_recipe(zero, k);
}

/* The dataset split whose images or labels rank k does not share with rank 0, or NULL. */
static const char *differing_split(const fingerprint *zero, const fingerprint *k)
{
    if (k->train_count != zero->train_count || k->train_crc != zero->train_crc) return "train";
    if (k->test_count != zero->test_count || k->test_crc != zero->test_crc) return "test";
    if (k->val_count != zero->val_count || k->val_crc != zero->val_crc) return "validation";
    return NULL;
}

/* Rank k against rank 0: CLI_OK, or the status after rank 0 (speak) said what differs. */
static int compare(const fingerprint *zero, const fingerprint *k, int rank, int speak)
{
    const char *flag = differing_flag(zero, k), *split = differing_split(zero, k);
    if (flag && speak)
        cli_usage_error("train", "rank %d runs with another %s than rank 0: give every "
                        "process the same flags", rank, flag);
    else if (k->isa != zero->isa && speak)
        cli_failure("rank %d (on host %s) uses the %s kernels, rank 0 the %s ones, so the "
                    "weights would not be one process's: set CNNC_ISA to an instruction set "
                    "every host has", rank, k->host, cn_isa_name((cn_isa)k->isa),
                    cn_isa_name((cn_isa)zero->isa));
    else if (k->bf16 != zero->bf16 && speak)
        cli_failure("rank %d (on host %s) multiplies bf16 with the %s kernels, rank 0 with the "
                    "%s ones, so the weights would not be one process's: set CNNC_BF16 to "
                    "kernels every host has", rank, k->host,
                    cn_bf16_kernel_name((cn_bf16_kernel)k->bf16),
                    cn_bf16_kernel_name((cn_bf16_kernel)zero->bf16));
    else if (split && speak)
        cli_failure("rank %d (on host %s) reads other %s images or labels than rank 0 (a "
                    "different count or CRC-32): every process needs the same dataset files "
                    "and --train-samples/--val-samples/--test-samples", rank, k->host, split);
    else if (k->state_crc != zero->state_crc && speak)
        cli_failure("rank %d (on host %s) starts from another model state than rank 0: with "
                    "--resume, every process must read the same checkpoint (a shared folder, "
                    "or the same file on every host)", rank, k->host);
    if (flag)
        return CLI_USAGE;
    if (k->isa != zero->isa || k->bf16 != zero->bf16 || split || k->state_crc != zero->state_crc)
        return CLI_FAILURE;
    return CLI_OK;
}

static int count_hosts(const fingerprint *all, int size)
{
    int hosts = 0;
    for (int k = 0; k < size; k++) {
        int seen = 0;
        for (int j = 0; j < k && !seen; j++) seen = strcmp(all[j].host, all[k].host) == 0;
        hosts += !seen;
    }
    return hosts;
}

static void print_spread(const cli_dist *d, const fingerprint *all)
{
    int size = cli_dist_size(d), hosts = count_hosts(all, size);
    printf("cnnc %s train: %d processes (%s) on %d host%s, %lld of the %lld replicas each; "
           "threads per process:", CN_VERSION, size, d->library, hosts, hosts == 1 ? "" : "s",
           (long long)(all[0].num_cores / size), (long long)all[0].num_cores);
    for (int k = 0; k < size; k++) printf(" %lld", (long long)all[k].threads);
    printf("\n");
}

int train_dist_check_same(cli_dist *d, const train_settings *s, train_run *run)
{
    const cn_comm *c = cli_dist_comm(d);
    if (!c)
        return CLI_OK;
    fingerprint *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        c->abort(c->ctx, "out of memory comparing the processes' settings");
    all[c->rank] = take_fingerprint(s, run);
    cn_error err = {{0}};
    int rc = c->allgather(c->ctx, all, sizeof *all, &err) ? cli_failure("%s", err.msg) : CLI_OK;
    for (int k = 1; k < c->size && rc == CLI_OK; k++) {
        all[k].host[sizeof all[k].host - 1] = '\0';
        rc = compare(&all[0], &all[k], k, c->rank == 0);
    }
    if (rc == CLI_OK && c->rank == 0)
        print_spread(d, all);
    free(all);
    return rc;
}
