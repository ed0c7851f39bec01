/* train_checkpoint.c — the checkpoint side of `cnnc train`: --resume (finding the checkpoint,
 * checking that its name says the position it holds, taking the math settings from it and
 * refusing differing ones, checking the data, restoring weights and the optimiser's state), the
 * --checkpoint-dir folder (created, locked against a second run, cleared of temporaries left by
 * a killed write, never holding checkpoints newer than the run, nor another output under a
 * checkpoint's name), saving and pruning, the best checkpoint of --keep-best
 * (DIR/best.safetensors, which pruning leaves alone), and the metrics file of a resumed run. The
 * file format and the folder's naming rules are the library's; when to save is train.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "train.h"

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---------------------------------------------------------------- settings */

int refuse_math_setting(const char *flag, const char *mine, const char *saved, const char *path)
{
    return cli_usage_error("train", "%s %s differs from the checkpoint's %s (%s): a resumed run "
                           "keeps the settings that define the math; leave %s out to use it",
                           flag, mine, saved, path, flag);
}

static int adopt_int(const train_settings *s, uint64_t bit, const char *flag, int *value,
                     int saved, const char *path)
{
    char mine[32], theirs[32];
    if ((s->given & bit) && *value != saved) {
        snprintf(mine, sizeof mine, "%d", *value);
        snprintf(theirs, sizeof theirs, "%d", saved);
        return refuse_math_setting(flag, mine, theirs, path);
    }
    *value = saved;
    return CLI_OK;
}

static int adopt_float(const train_settings *s, uint64_t bit, const char *flag, float *value,
                       float saved, const char *path)
{
    char mine[32], theirs[32];
    if ((s->given & bit) && *value != saved) {
        snprintf(mine, sizeof mine, "%g", (double)*value);
        snprintf(theirs, sizeof theirs, "%g", (double)saved);
        if (strcmp(mine, theirs) == 0) { /* too close for %g to tell apart */
            snprintf(mine, sizeof mine, "%.9g", (double)*value);
            snprintf(theirs, sizeof theirs, "%.9g", (double)saved);
        }
        return refuse_math_setting(flag, mine, theirs, path);
    }
    *value = saved;
    return CLI_OK;
}

static int adopt_seed(train_settings *s, uint64_t saved, const char *path)
{
    char mine[32], theirs[32];
    if ((s->given & TRAIN_GIVEN_SEED) && s->seed != saved) {
        snprintf(mine, sizeof mine, "%" PRIu64, s->seed);
        snprintf(theirs, sizeof theirs, "%" PRIu64, saved);
        return refuse_math_setting("--seed", mine, theirs, path);
    }
    s->seed = saved;
    return CLI_OK;
}

static int adopt_precision(train_settings *s, cn_precision saved, const char *path)
{
    if ((s->given & TRAIN_GIVEN_PRECISION) && s->precision != saved)
        return refuse_math_setting("--precision", cn_precision_name(s->precision),
                                   cn_precision_name(saved), path);
    if (!cn_precision_supported(saved))
        return cli_usage_error("train", "%s was trained with --precision %s, which this CPU "
                               "cannot run (it needs AVX512_BF16)", path,
                               cn_precision_name(saved));
    s->precision = saved;
    return CLI_OK;
}

static int adopt_augment(train_settings *s, const cn_augment *saved, const char *path)
{
    char mine[CN_AUGMENT_TEXT_MAX], theirs[CN_AUGMENT_TEXT_MAX];
    cn_augment_format(&s->augment, mine);
    cn_augment_format(saved, theirs);
    if ((s->given & TRAIN_GIVEN_AUGMENT) && strcmp(mine, theirs) != 0)
        return refuse_math_setting("--augment", mine, theirs, path);
    s->augment = *saved;
    return CLI_OK;
}

/* A named choice (optimiser, schedule kind): refused when given otherwise. */
static int adopt_name(const train_settings *s, uint64_t bit, const char *flag, int *value,
                      int saved, const char *mine, const char *theirs, const char *path)
{
    if ((s->given & bit) && *value != saved)
        return refuse_math_setting(flag, mine, theirs, path);
    *value = saved;
    return CLI_OK;
}

/* An epoch count the checkpoint records in steps (steps_per_epoch a step). */
static int adopt_epochs(const train_settings *s, uint64_t bit, const char *flag, int *value,
                        long saved_steps, int steps_per_epoch, const char *path)
{
    return adopt_int(s, bit, flag, value, (int)(saved_steps / steps_per_epoch), path);
}

/* The optimiser and the learning-rate schedule: as the other math settings. */
static int adopt_recipe(train_settings *s, const cn_train_state *st, const char *path)
{
    const cn_lr_schedule *l = &st->lr_schedule;
    int optimizer = (int)s->optimizer, kind = (int)s->lr_schedule, spe = st->steps_per_epoch;
    int rc = adopt_name(s, TRAIN_GIVEN_OPTIMIZER, "--optimizer", &optimizer, (int)st->optimizer,
                        cn_optimizer_name(s->optimizer), cn_optimizer_name(st->optimizer), path);
    s->optimizer = (cn_optimizer)optimizer;
    if (rc == CLI_OK)
        rc = adopt_int(s, TRAIN_GIVEN_NESTEROV, "--nesterov", &s->nesterov, st->nesterov, path);
    if (rc == CLI_OK)
        rc = adopt_float(s, TRAIN_GIVEN_WEIGHT_DECAY, "--weight-decay", &s->weight_decay,
                         st->weight_decay, path);
    if (rc == CLI_OK)
        rc = adopt_name(s, TRAIN_GIVEN_LR_SCHEDULE, "--lr-schedule", &kind, (int)l->kind,
                        cn_lr_kind_name(s->lr_schedule), cn_lr_kind_name(l->kind), path);
    s->lr_schedule = (cn_lr_kind)kind;
    if (rc == CLI_OK)
        rc = adopt_epochs(s, TRAIN_GIVEN_WARMUP_EPOCHS, "--warmup-epochs", &s->warmup_epochs,
                          l->warmup_steps, spe, path);
    if (rc == CLI_OK)
        rc = adopt_epochs(s, TRAIN_GIVEN_LR_STEP_EPOCHS, "--lr-step-epochs", &s->lr_step_epochs,
                          l->step_size, spe, path);
    if (rc == CLI_OK && l->kind == CN_LR_STEP)
        rc = adopt_float(s, TRAIN_GIVEN_LR_GAMMA, "--lr-gamma", &s->lr_gamma, l->gamma, path);
    return rc;
}

/* A cosine or one-cycle schedule spans the run's recorded length: another --num-epochs would
 * change the rate of every step to come. */
static int check_schedule_span(const train_settings *s, const cn_train_state *st,
                               const char *path)
{
    const cn_lr_schedule *l = &st->lr_schedule;
    if (l->kind != CN_LR_COSINE && l->kind != CN_LR_ONECYCLE)
        return CLI_OK;
    long spe = st->steps_per_epoch;
    if ((long)s->num_epochs * spe == l->total_steps)
        return CLI_OK;
    return cli_usage_error("train", "--num-epochs %d: the %s schedule of %s spans %ld epochs "
                           "(%ld steps) and would change; a resumed %s run keeps its length: "
                           "leave --num-epochs out", s->num_epochs, cn_lr_kind_name(l->kind),
                           path, l->total_steps / spe, l->total_steps, cn_lr_kind_name(l->kind));
}

/* The math settings of s become the checkpoint's; --train-samples is compared once the data is
 * loaded (0 and a number over the set's size both mean all of it). */
static int adopt_settings(train_settings *s, const cn_train_state *st, const char *path)
{
    int rc = adopt_int(s, TRAIN_GIVEN_NUM_CORES, "--num-cores/--replicas", &s->num_cores,
                       st->num_replicas, path);
    if (rc == CLI_OK)
        rc = adopt_int(s, TRAIN_GIVEN_BATCH_SIZE, "--batch-size", &s->batch_size,
                       st->batch_size, path);
    if (rc == CLI_OK)
        rc = adopt_float(s, TRAIN_GIVEN_LEARNING_RATE, "--learning-rate", &s->learning_rate,
                         st->learning_rate, path);
    if (rc == CLI_OK)
        rc = adopt_float(s, TRAIN_GIVEN_MOMENTUM, "--momentum", &s->momentum, st->momentum,
                         path);
    if (rc == CLI_OK)
        rc = adopt_float(s, TRAIN_GIVEN_LABEL_SMOOTHING, "--label-smoothing",
                         &s->label_smoothing, st->label_smoothing, path);
    if (rc == CLI_OK)
        rc = adopt_augment(s, &st->augment, path);
    if (rc == CLI_OK)
        rc = adopt_seed(s, st->seed, path);
    if (rc == CLI_OK)
        rc = adopt_precision(s, st->precision, path);
    if (rc == CLI_OK)
        rc = adopt_recipe(s, st, path);
    if (rc == CLI_OK && !(s->given & TRAIN_GIVEN_TRAIN_SAMPLES))
        s->train_samples = st->train_samples;
    return rc;
}

/* ---------------------------------------------------------------- position */

static int epochs_done(const cn_epoch_position *p, int steps)
{
    return p->step == steps ? p->epoch : p->epoch - 1;
}

/* The position to start from: after a complete epoch, the start of the next. */
static cn_epoch_position start_of(const cn_train_state *st)
{
    const cn_epoch_position *p = &st->position;
    if (p->step == st->steps_per_epoch) return (cn_epoch_position){.epoch = p->epoch + 1};
    return *p;
}

/* "epoch 3", or "epoch 3, step 7" for a position inside the epoch (step -1: complete). */
static void describe_position(char *buf, size_t size, int epoch, int step)
{
    if (step < 0)
        snprintf(buf, size, "epoch %d", epoch);
    else
        snprintf(buf, size, "epoch %d, step %d", epoch, step);
}

/* A checkpoint's name says where its run stands, and the folder is ordered by the names: a
 * file that holds another position than its name (copied or renamed) is refused, saying both. */
static int check_name_matches(const char *path, const cn_train_state *st)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char expected[CN_CHECKPOINT_NAME_MAX], named[48], holds[48];
    int epoch, step;
    cn_checkpoint_name(expected, &st->position, st->steps_per_epoch);
    if (!cn_checkpoint_parse_name(name, &epoch, &step) || strcmp(name, expected) == 0)
        return CLI_OK; /* another kind of name says nothing about the position */
    describe_position(named, sizeof named, epoch, step);
    const cn_epoch_position *p = &st->position;
    describe_position(holds, sizeof holds, p->epoch,
                      p->step >= st->steps_per_epoch ? -1 : p->step);
    return cli_failure("%s: the name says %s, the contents say %s (a checkpoint renamed or "
                       "copied?): its own name is %s; rename it, or move it out of the folder",
                       path, named, holds, expected);
}

static int check_checkpoint_flags(const train_settings *s)
{
    if (!s->checkpoint_dir &&
        (s->given & (TRAIN_GIVEN_SAVE_EVERY | TRAIN_GIVEN_KEEP | TRAIN_GIVEN_KEEP_BEST)))
        return cli_usage_error("train", "--%s needs --checkpoint-dir (or --resume DIR)",
                               (s->given & TRAIN_GIVEN_SAVE_EVERY) ? "save-every"
                               : (s->given & TRAIN_GIVEN_KEEP)     ? "keep"
                                                                   : "keep-best");
    if (s->keep_best && s->val_samples == 0)
        return cli_usage_error("train", "--keep-best needs --val-samples N: the best epoch is "
                               "the one with the highest validation accuracy");
    return CLI_OK;
}

/* The checkpoint's training samples are those trained on; the held-out ones follow them. */
static int adopt_train_samples(train_settings *s, const train_run *run, const char *path)
{
    if ((s->given & TRAIN_GIVEN_TRAIN_SAMPLES) || s->val_samples == 0)
        return CLI_OK;
    if (s->val_samples > INT_MAX - run->state.train_samples)
        return cli_failure("%s: __metadata__ \"run.val_samples\" is %d, too many (the file is "
                           "damaged)", path, s->val_samples);
    s->train_samples = run->state.train_samples + s->val_samples;
    return CLI_OK;
}

int resume_read(train_settings *s, train_run *run)
{
    if (!s->resume)
        return check_checkpoint_flags(s);
    cn_error err = {{0}};
    int rc = cli_checkpoint_file("--resume", s->resume, &run->resume_path);
    if (rc != CLI_OK)
        return rc;
    const char *path = run->resume_path;
    run->resume_file = cn_safetensors_read(path, &err);
    if (!run->resume_file || cn_train_checkpoint_state(run->resume_file, path, &run->state,
                                                       &err) != 0)
        return cli_library_error(&err, path);
    int done = epochs_done(&run->state.position, run->state.steps_per_epoch);
    rc = check_name_matches(path, &run->state);
    if (rc == CLI_OK)
        rc = adopt_settings(s, &run->state, path);
    if (rc == CLI_OK)
        rc = run_settings_adopt(s, run, run->resume_file, path);
    if (rc == CLI_OK)
        rc = adopt_train_samples(s, run, path);
    if (rc == CLI_OK)
        rc = run_best_adopt(run, run->resume_file, path, done);
    if (rc == CLI_OK)
        rc = run_settings_check_epochs(s, done, path);
    if (rc == CLI_OK)
        rc = check_schedule_span(s, &run->state, path);
    if (rc == CLI_OK)
        rc = curves_history_adopt(run, run->resume_file, path, done);
    if (rc != CLI_OK)
        return rc;
    if (!s->checkpoint_dir && is_folder(s->resume))
        s->checkpoint_dir = s->resume;
    run->position = start_of(&run->state);
    run->saved = run->state.position;
    run->have_saved = 1;
    return check_checkpoint_flags(s);
}

/* ---------------------------------------------------------------- data and tensors */

static int check_resumed_data(const train_settings *s, const train_run *run,
                              const cn_train_state *now)
{
    const cn_train_state *saved = &run->state;
    if (saved->data_channels && (now->data_channels != saved->data_channels ||
                                 now->data_height != saved->data_height ||
                                 now->data_width != saved->data_width ||
                                 now->data_classes != saved->data_classes))
        return cli_failure("--data-dir: %s: %dx%dx%d images in %d classes, the checkpoint %s "
                           "was trained on %dx%dx%d in %d", s->data_dir, now->data_channels,
                           now->data_height, now->data_width, now->data_classes,
                           run->resume_path, saved->data_channels, saved->data_height,
                           saved->data_width, saved->data_classes);
    if (now->train_samples != saved->train_samples && (s->given & TRAIN_GIVEN_TRAIN_SAMPLES))
        return cli_usage_error("train", "--train-samples %d uses %d training images, the "
                               "checkpoint's run used %d (%s); leave it out to use the same",
                               s->train_samples, now->train_samples, saved->train_samples,
                               run->resume_path);
    if (now->train_samples != saved->train_samples)
        return cli_failure("--data-dir: %s: %d training images, the checkpoint %s was trained "
                           "on %d", s->data_dir, now->train_samples, run->resume_path,
                           saved->train_samples);
    if (now->train_crc32 != saved->train_crc32)
        return cli_failure("--data-dir: %s: the first %d training images differ from those the "
                           "checkpoint %s was trained on (CRC-32 %08" PRIx32 ", checkpoint %08"
                           PRIx32 ")", s->data_dir, now->train_samples, run->resume_path,
                           now->train_crc32, saved->train_crc32);
    if (strcmp(now->isa, saved->isa) != 0)
        cli_warning("%s was written with the %s kernels, this run uses %s: the weights may "
                    "differ in the last bits from an uninterrupted run", run->resume_path,
                    saved->isa, now->isa);
    return CLI_OK;
}

static int restore_tensors(train_run *run)
{
    cn_error err = {{0}};
    int rc = cn_train_checkpoint_restore(run->model, cn_trainer_momentum(run->trainer),
                                         run->config.optimizer, run->resume_file,
                                         run->resume_path, &err);
    if (rc == 0)
        rc = cn_trainer_set_optimizer_steps(run->trainer, run->state.optimizer_steps, &err);
    cn_safetensors_free(run->resume_file);
    run->resume_file = NULL;
    return rc == 0 ? CLI_OK : cli_library_error(&err, run->resume_path);
}

/* ---------------------------------------------------------------- the folder */

static int make_folder(const char *dir)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return CLI_OK;
    return cli_failure("--checkpoint-dir: %s: cannot create the folder: %s", dir,
                       strerror(errno));
}

static int lock_folder(const char *dir, train_run *run)
{
    run->checkpoint_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (run->checkpoint_fd < 0)
        return cli_failure("--checkpoint-dir: %s: %s", dir, strerror(errno));
    if (flock(run->checkpoint_fd, LOCK_EX | LOCK_NB) != 0)
        return errno == EWOULDBLOCK
                   ? cli_failure("--checkpoint-dir: %s: another cnnc train is using this folder",
                                 dir)
                   : cli_failure("--checkpoint-dir: %s: cannot lock: %s", dir, strerror(errno));
    if (access(dir, W_OK | X_OK) != 0)
        return cli_failure("--checkpoint-dir: %s: not writable: %s", dir, strerror(errno));
    return CLI_OK;
}

/* The folder may hold the checkpoints that lead up to the start, never later ones: they would be
 * overwritten or pruned by this run. */
static int check_nothing_newer(const train_settings *s, const train_run *run)
{
    cn_error err = {{0}};
    char newest[CN_CHECKPOINT_NAME_MAX];
    int count = cn_checkpoint_find(s->checkpoint_dir, newest, &err), epoch, step;
    if (count < 0)
        return cli_library_error(&err, "--checkpoint-dir");
    if (count == 0 || !cn_checkpoint_parse_name(newest, &epoch, &step))
        return CLI_OK;
    if (!run->resume_path)
        return cli_failure("--checkpoint-dir: %s already holds checkpoints (newest %s): continue "
                           "them with --resume %s, or choose another folder",
                           s->checkpoint_dir, newest, s->checkpoint_dir);
    const cn_epoch_position *p = &run->state.position;
    int resumed_step = p->step == run->state.steps_per_epoch ? -1 : p->step;
    if (cn_checkpoint_compare(epoch, step, p->epoch, resumed_step) > 0)
        return cli_failure("--checkpoint-dir: %s holds %s, newer than the checkpoint resumed "
                           "(%s): resume from the folder's newest, or choose another folder",
                           s->checkpoint_dir, newest, run->resume_path);
    return CLI_OK;
}

/* With --keep-best: the temporaries a killed write of the best checkpoint left (the library's
 * pruning clears those of the checkpoints). */
static int remove_best_temporaries(const train_settings *s)
{
    static const char mark[] = BEST_CHECKPOINT_NAME ".tmp.";
    DIR *d = s->keep_best ? opendir(s->checkpoint_dir) : NULL;
    if (!d)
        return CLI_OK; /* no --keep-best, or a folder cn_checkpoint_prune reports on */
    struct dirent *e;
    int rc = CLI_OK;
    while (rc == CLI_OK && (e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, mark, sizeof mark - 1) == 0 &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
            rc = cli_failure("--checkpoint-dir: %s/%s: cannot remove: %s", s->checkpoint_dir,
                             e->d_name, strerror(errno));
    }
    closedir(d);
    return rc;
}

static int open_folder(const train_settings *s, train_run *run)
{
    cn_error err = {{0}};
    int rc = make_folder(s->checkpoint_dir);
    if (rc == CLI_OK)
        rc = lock_folder(s->checkpoint_dir, run);
    if (rc == CLI_OK)
        rc = remove_best_temporaries(s);
    if (rc == CLI_OK && cn_checkpoint_prune(s->checkpoint_dir, INT_MAX, &err) != 0)
        rc = cli_library_error(&err, "--checkpoint-dir");
    if (rc == CLI_OK)
        rc = check_nothing_newer(s, run);
    return rc;
}

int checkpoints_prepare(const train_settings *s, train_run *run)
{
    if (!s->checkpoint_dir && !run->resume_path)
        return CLI_OK;
    cn_train_state now;
    cn_train_state_init(&now, &run->config, &run->train);
    int rc = CLI_OK;
    if (run->resume_path) {
        rc = check_resumed_data(s, run, &now);
        if (rc == CLI_OK)
            rc = restore_tensors(run);
    }
    now.position = run->state.position;
    run->state = now;
    if (rc == CLI_OK && s->checkpoint_dir)
        rc = open_folder(s, run);
    return rc;
}

/* A file name of the folder the run writes: a checkpoint's (by its beginning), or the best
 * checkpoint with --keep-best. */
static int is_run_file(const char *name, int keep_best)
{
    return strncmp(name, CN_CHECKPOINT_PREFIX, strlen(CN_CHECKPOINT_PREFIX)) == 0 ||
           (keep_best && strcmp(name, BEST_CHECKPOINT_NAME) == 0);
}

/* An output in the checkpoint folder under a name that begins like the checkpoints', or that is
 * the best checkpoint's, would be overwritten or deleted by the run's saves and pruning; the
 * folder itself is no output file. */
static int check_output_name(const char *dir, const char *real_dir, const cli_output *o,
                             int keep_best)
{
    const char *slash = o->where ? strrchr(o->where, '/') : NULL;
    if (!slash)
        return CLI_OK;
    size_t folder_len = slash == o->where ? 1 : (size_t)(slash - o->where);
    if (strcmp(o->where, real_dir) == 0)
        return cli_usage_error("train", "%s %s is the --checkpoint-dir folder %s", o->flag,
                               o->path, dir);
    int in_folder = strlen(real_dir) == folder_len && strncmp(o->where, real_dir, folder_len) == 0;
    if (in_folder && keep_best && strcmp(slash + 1, BEST_CHECKPOINT_NAME) == 0)
        return cli_usage_error("train", "%s %s: with --keep-best, " BEST_CHECKPOINT_NAME " in the "
                               "--checkpoint-dir folder %s is the run's best checkpoint, which it "
                               "writes: give the output another name", o->flag, o->path, dir);
    if (in_folder && strncmp(slash + 1, CN_CHECKPOINT_PREFIX, strlen(CN_CHECKPOINT_PREFIX)) == 0)
        return cli_usage_error("train", "%s %s: in the --checkpoint-dir folder %s the names "
                               "that begin " CN_CHECKPOINT_PREFIX " are the run's checkpoints, "
                               "which it writes and deletes: give the output another name",
                               o->flag, o->path, dir);
    return CLI_OK;
}

/* An existing output that is one of the folder's checkpoints under another name (a hard link)
 * would be written through or lose its contents to a save. */
static int check_output_links(const char *dir, const cli_output *outputs, int n, int keep_best)
{
    DIR *d = opendir(dir);
    if (!d)
        return CLI_OK; /* a new folder; one that cannot be read is open_folder's to report */
    struct dirent *e;
    int rc = CLI_OK;
    while (rc == CLI_OK && (e = readdir(d)) != NULL) {
        struct stat st;
        if (!is_run_file(e->d_name, keep_best) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        for (int i = 0; rc == CLI_OK && i < n; i++)
            if (outputs[i].exists && outputs[i].dev == st.st_dev && outputs[i].ino == st.st_ino)
                rc = cli_usage_error("train", "%s %s is the same file as %s/%s, a checkpoint of "
                                     "the --checkpoint-dir folder: give the output a file of "
                                     "its own", outputs[i].flag, outputs[i].path, dir,
                                     e->d_name);
    }
    closedir(d);
    return rc;
}

int checkpoints_check_outputs(const char *dir, const cli_output *outputs, int n, int keep_best)
{
    char *real_dir = cli_resolve_path(dir);
    int rc = CLI_OK;
    for (int i = 0; real_dir && rc == CLI_OK && i < n; i++)
        rc = check_output_name(dir, real_dir, &outputs[i], keep_best);
    free(real_dir);
    return rc == CLI_OK ? check_output_links(dir, outputs, n, keep_best) : rc;
}

void checkpoints_close(train_run *run)
{
    if (run->checkpoint_fd >= 0)
        close(run->checkpoint_fd);
    run->checkpoint_fd = -1;
    cn_safetensors_free(run->resume_file);
    run->resume_file = NULL;
    free(run->resume_path);
    run->resume_path = NULL;
    run_settings_free(run);
}

/* ---------------------------------------------------------------- saving */

static int same_position(const cn_epoch_position *a, const cn_epoch_position *b)
{
    return a->epoch == b->epoch && a->step == b->step;
}

/* Writes the checkpoint of run->position to path: the run settings, the best epoch so far and
 * the curves' history, and with val_accuracy (may be NULL) that epoch's validation accuracy. */
static int write_checkpoint(const train_settings *s, train_run *run, const char *path,
                            const char *val_accuracy)
{
    cn_error err = {{0}};
    char text[RUN_SETTINGS_COUNT + 2][RUN_VALUE_MAX], *history;
    const char *meta[2 * (RUN_SETTINGS_COUNT + 4)];
    run->state.position = run->position;
    run->state.optimizer_steps = cn_trainer_optimizer_steps(run->trainer);
    run_settings_record(s, text, meta);
    int n = RUN_SETTINGS_COUNT;
    n += run_best_record(run, &text[RUN_SETTINGS_COUNT], &meta[2 * n]);
    if (curves_history_text(run, &history) != 0)
        return cli_failure("out of memory");
    meta[2 * n] = CURVES_HISTORY_KEY;
    meta[2 * n + 1] = history;
    n++;
    if (val_accuracy) {
        meta[2 * n] = VAL_ACCURACY_KEY;
        meta[2 * n + 1] = val_accuracy;
        n++;
    }
    int rc = cn_train_checkpoint_save(run->model, cn_trainer_momentum(run->trainer), &run->state,
                                      meta, n, path, &err);
    free(history);
    return rc == 0 ? CLI_OK : cli_library_error(&err, NULL);
}

int checkpoint_save(const train_settings *s, train_run *run)
{
    if (!s->checkpoint_dir || (run->have_saved && same_position(&run->saved, &run->position)))
        return CLI_OK;
    cn_error err = {{0}};
    char name[CN_CHECKPOINT_NAME_MAX];
    cn_checkpoint_name(name, &run->position, run->steps);
    char *path = cli_join_path(s->checkpoint_dir, name);
    if (!path)
        return cli_failure("out of memory");
    double start = cli_seconds();
    int rc = write_checkpoint(s, run, path, NULL);
    if (rc == CLI_OK) {
        if (s->verbosity >= PROGRESS_NORMAL)
            cli_print_line("Saved checkpoint %s in %.3f s", path, cli_seconds() - start);
        run->saved = run->position;
        run->have_saved = 1;
    }
    free(path);
    if (rc != CLI_OK)
        return rc;
    if (cn_checkpoint_prune(s->checkpoint_dir, s->keep, &err) != 0)
        return cli_library_error(&err, "--checkpoint-dir");
    return CLI_OK;
}

int best_checkpoint_save(const train_settings *s, train_run *run, double val_accuracy)
{
    if (!s->keep_best || !s->checkpoint_dir)
        return CLI_OK;
    char *path = cli_join_path(s->checkpoint_dir, BEST_CHECKPOINT_NAME);
    if (!path)
        return cli_failure("out of memory");
    char accuracy[32];
    snprintf(accuracy, sizeof accuracy, "%.17g", val_accuracy);
    int rc = write_checkpoint(s, run, path, accuracy);
    if (rc == CLI_OK && s->verbosity >= PROGRESS_NORMAL)
        cli_print_line("Best validation accuracy so far (%.2f%%, epoch %d): saved %s",
                       val_accuracy, run->position.epoch, path);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------- metrics file */

/* The offset where the lines of epochs after done begin (or a last line cut short by a kill);
 * -1 after printing an error when a whole line is not one of cnnc's metrics lines. */
static long keep_length(FILE *f, const char *path, int done, int *dropped)
{
    char *line = NULL;
    size_t cap = 0;
    long at = 0, keep = -1;
    ssize_t len;
    int number = 0;
    *dropped = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        int epoch = 0, whole = line[len - 1] == '\n';
        int ours = sscanf(line, "{\"epoch\":%d", &epoch) == 1;
        number++;
        if (keep < 0 && whole && !ours) {
            free(line);
            cli_failure("--metrics-file: %s: line %d is not a cnnc metrics line; not appending "
                        "to it", path, number);
            return -1;
        }
        if (keep < 0 && (!whole || epoch > done))
            keep = at;
        if (keep >= 0)
            (*dropped)++;
        at += (long)len;
    }
    free(line);
    return keep < 0 ? at : keep;
}

/* A regular metrics file keeps the lines of the epochs the checkpoint holds and loses later
 * ones; a named pipe or a device has no earlier lines to read back. */
static int drop_later_lines(const train_settings *s, const train_run *run)
{
    const char *path = s->metrics_path;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return CLI_OK; /* a new file, or one cli_open_stream refuses or streams into */
    FILE *f = cli_open_input("--metrics-file", path);
    if (!f)
        return CLI_FAILURE;
    int dropped = 0;
    long keep = keep_length(f, path, epochs_done(&run->saved, run->steps), &dropped);
    fclose(f);
    if (keep < 0)
        return CLI_FAILURE;
    if (dropped > 0 && truncate(path, keep) != 0)
        return cli_failure("--metrics-file: %s: %s", path, strerror(errno));
    if (dropped > 0 && s->verbosity >= PROGRESS_NORMAL)
        cli_print_line("Dropped %d line%s of epochs after the checkpoint from %s", dropped,
                       dropped == 1 ? "" : "s", path);
    return CLI_OK;
}

int metrics_open_for_resume(const train_settings *s, train_run *run)
{
    if (drop_later_lines(s, run) != CLI_OK)
        return CLI_FAILURE;
    run->metrics = cli_open_stream("--metrics-file", s->metrics_path, 1);
    return run->metrics ? CLI_OK : CLI_FAILURE;
}
