/* train_run_settings.c — the settings of `cnnc train` recorded under "run.*" keys besides the
 * math the library records: the planned epochs, the test images, the log interval, the
 * checkpoint cadence and how many are kept, the data (folder, format and class-names file), the
 * output files, --keep-best, the validation split (--val-samples), --resize and
 * --test-percent, which define the math; and the best validation accuracy so far with its
 * epoch. Every checkpoint records them and --resume takes them back, so that a resumed run is
 * the run that was started. A flag given on the resume line wins, apart from those three, which
 * cannot change; --num-epochs may make the run longer or shorter, never end it at or before the
 * epochs already done. The other math settings are train_checkpoint.c's business; what changes only
 * how a run looks or how fast it goes (--threads, --quiet, --verbose, --metrics-debug) is not
 * recorded. Paths are recorded as they were given. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train.h"

/* RUN_MATH: an int that defines the math (--val-samples): taken back as the others, but a
 * differing value given on the resume line is refused, as train_checkpoint.c refuses those. */
typedef enum { RUN_INT, RUN_PATH, RUN_MATH } run_kind;

typedef struct {
    const char *key;  /* in __metadata__ */
    const char *flag; /* on the command line */
    uint64_t given;   /* TRAIN_GIVEN_* */
    run_kind kind;
    size_t offset;    /* of the int or the const char * in train_settings */
    int min, max;     /* an int's range */
} run_setting;

#define EPOCHS_KEY "run.num_epochs"
#define AT(field) offsetof(train_settings, field)
static const run_setting run_settings[] = {
    {EPOCHS_KEY, "--num-epochs", TRAIN_GIVEN_NUM_EPOCHS, RUN_INT, AT(num_epochs), 1,
     TRAIN_MAX_EPOCHS},
    {"run.test_samples", "--test-samples", TRAIN_GIVEN_TEST_SAMPLES, RUN_INT, AT(test_samples),
     0, INT_MAX},
    {"run.log_steps", "--log-steps", TRAIN_GIVEN_LOG_STEPS, RUN_INT, AT(log_steps), 1, INT_MAX},
    {"run.save_every", "--save-every", TRAIN_GIVEN_SAVE_EVERY, RUN_INT, AT(save_every), 1,
     TRAIN_MAX_EPOCHS},
    {"run.keep", "--keep", TRAIN_GIVEN_KEEP, RUN_INT, AT(keep), 1, TRAIN_MAX_EPOCHS},
    {"run.data_dir", "--data-dir", TRAIN_GIVEN_DATA_DIR, RUN_PATH, AT(data_dir), 1, 0},
    {"run.data_format", "--data-format", TRAIN_GIVEN_DATA_FORMAT, RUN_PATH, AT(data_format), 1,
     0},
    {"run.classes", "--classes", TRAIN_GIVEN_CLASSES, RUN_PATH, AT(classes_file), 0, 0},
    {"run.save", "--save", TRAIN_GIVEN_SAVE, RUN_PATH, AT(save_path), 0, 0},
    {"run.metrics_file", "--metrics-file", TRAIN_GIVEN_METRICS_FILE, RUN_PATH, AT(metrics_path),
     0, 0},
    {"run.result_image", "--result-image", TRAIN_GIVEN_RESULT_IMAGE, RUN_PATH, AT(result_image),
     0, 0},
    {"run.plot", "--plot", TRAIN_GIVEN_PLOT, RUN_PATH, AT(plot_path), 0, 0},
    {"run.val_samples", "--val-samples", TRAIN_GIVEN_VAL_SAMPLES, RUN_MATH, AT(val_samples), 0,
     INT_MAX},
    {"run.keep_best", "--keep-best", TRAIN_GIVEN_KEEP_BEST, RUN_INT, AT(keep_best), 0, 1},
    {"run.resize", "--resize", TRAIN_GIVEN_RESIZE, RUN_MATH, AT(resize), 0, 1},
    {"run.test_percent", "--test-percent", TRAIN_GIVEN_TEST_PERCENT, RUN_MATH, AT(test_percent), 0,
     99},
};
#undef AT
_Static_assert(sizeof run_settings / sizeof run_settings[0] == RUN_SETTINGS_COUNT,
               "RUN_SETTINGS_COUNT counts run_settings");
_Static_assert(RUN_SETTINGS_COUNT + 4 <= CN_TRAIN_EXTRA_MAX,
               "a checkpoint holds them all, the best epoch, the history and a val accuracy");
_Static_assert(RUN_SETTINGS_COUNT <= sizeof((train_run *)0)->adopted /
                                         sizeof((train_run *)0)->adopted[0],
               "room for every adopted path");

static int *int_at(train_settings *s, const run_setting *r)
{
    return (int *)(void *)((char *)s + r->offset);
}

static const char **path_at(train_settings *s, const run_setting *r)
{
    return (const char **)(void *)((char *)s + r->offset);
}

static size_t field_size(const run_setting *r)
{
    return r->kind == RUN_PATH ? sizeof(const char *) : sizeof(int);
}

void run_settings_record(const train_settings *s, char text[][RUN_VALUE_MAX], const char **meta)
{
    for (int i = 0; i < RUN_SETTINGS_COUNT; i++) {
        const run_setting *r = &run_settings[i];
        const char *field = (const char *)s + r->offset;
        meta[2 * i] = r->key;
        if (r->kind != RUN_PATH) {
            snprintf(text[i], RUN_VALUE_MAX, "%d", *(const int *)(const void *)field);
            meta[2 * i + 1] = text[i];
        } else { /* "" for an output that is not written */
            const char *path = *(const char *const *)(const void *)field;
            meta[2 * i + 1] = path ? path : "";
        }
    }
}

static int adopt_int(train_settings *s, const run_setting *r, const char *value,
                     const char *path)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end != '\0' || v < r->min || v > r->max)
        return cli_failure("%s: __metadata__ \"%s\" is \"%.40s\", not an integer in %d..%d "
                           "(the file is damaged)", path, r->key, value, r->min, r->max);
    *int_at(s, r) = (int)v;
    return CLI_OK;
}

static int adopt_path(train_settings *s, train_run *run, int i, const char *value,
                      const char *path)
{
    const run_setting *r = &run_settings[i];
    if (r->min > 0 && value[0] == '\0')
        return cli_failure("%s: __metadata__ \"%s\" is empty (the file is damaged)", path,
                           r->key);
    if (value[0] == '\0') {
        *path_at(s, r) = NULL;
        return CLI_OK;
    }
    run->adopted[i] = strdup(value);
    if (!run->adopted[i])
        return cli_failure("out of memory");
    *path_at(s, r) = run->adopted[i];
    return CLI_OK;
}

/* A RUN_MATH value given on the resume line must be the recorded one. */
static int check_math(train_settings *s, train_settings *recorded, const run_setting *r,
                      const char *path)
{
    if (r->kind != RUN_MATH || !(s->given & r->given) || *int_at(s, r) == *int_at(recorded, r))
        return CLI_OK;
    if (r->max == 1) /* a switch (--resize), given here: the run had it off */
        return cli_usage_error("train", "%s: the run of %s went without it, and a resumed run "
                               "keeps the settings that define the math; leave it out", r->flag,
                               path);
    char mine[16], theirs[16];
    snprintf(mine, sizeof mine, "%d", *int_at(s, r));
    snprintf(theirs, sizeof theirs, "%d", *int_at(recorded, r));
    return refuse_math_setting(r->flag, mine, theirs, path);
}

/* Every recorded value is read and checked, given on the command line or not; then those not
 * given are taken. */
int run_settings_adopt(train_settings *s, train_run *run, const cn_safetensors *f,
                       const char *path)
{
    train_settings recorded = *s;
    for (int i = 0; i < RUN_SETTINGS_COUNT; i++) {
        const run_setting *r = &run_settings[i];
        const char *value = cn_safetensors_meta(f, r->key);
        int rc = CLI_OK;
        if (value)
            rc = r->kind != RUN_PATH ? adopt_int(&recorded, r, value, path)
                                     : adopt_path(&recorded, run, i, value, path);
        else if (r->kind == RUN_MATH) /* written before it was recorded: the run had none */
            *int_at(&recorded, r) = 0;
        else
            continue; /* written before the setting was recorded: the default stands */
        if (rc == CLI_OK)
            rc = check_math(s, &recorded, r, path);
        if (rc != CLI_OK)
            return rc;
    }
    if (cn_safetensors_meta(f, EPOCHS_KEY))
        run->planned_epochs = recorded.num_epochs;
    for (int i = 0; i < RUN_SETTINGS_COUNT; i++) {
        const run_setting *r = &run_settings[i];
        if (!(s->given & r->given))
            memcpy((char *)s + r->offset, (char *)&recorded + r->offset, field_size(r));
    }
    return CLI_OK;
}

int run_settings_check_epochs(const train_settings *s, int done, const char *path)
{
    if (done < s->num_epochs)
        return CLI_OK;
    if (!(s->given & TRAIN_GIVEN_NUM_EPOCHS))
        return cli_usage_error("train", "%s: the run is complete (%d of %d epochs); give "
                               "--num-epochs N, more than %d, to train it further", path, done,
                               s->num_epochs, done);
    return cli_usage_error("train", "--num-epochs %d: %s has already trained %d epoch%s; ask "
                           "for more to continue", s->num_epochs, path, done,
                           done == 1 ? "" : "s");
}

int run_best_record(const train_run *run, char text[][RUN_VALUE_MAX], const char **meta)
{
    if (run->best_epoch < 1)
        return 0;
    snprintf(text[0], RUN_VALUE_MAX, "%.17g", run->best_val_accuracy);
    snprintf(text[1], RUN_VALUE_MAX, "%d", run->best_epoch);
    meta[0] = BEST_ACCURACY_KEY, meta[1] = text[0];
    meta[2] = BEST_EPOCH_KEY, meta[3] = text[1];
    return 2;
}

int run_best_adopt(train_run *run, const cn_safetensors *f, const char *path, int done)
{
    run->best_val_accuracy = -1;
    run->best_epoch = 0;
    const char *accuracy = cn_safetensors_meta(f, BEST_ACCURACY_KEY);
    const char *epoch = cn_safetensors_meta(f, BEST_EPOCH_KEY);
    if (!accuracy && !epoch)
        return CLI_OK; /* no epoch validated yet */
    char *end_a = NULL, *end_e = NULL;
    double a = accuracy ? strtod(accuracy, &end_a) : NAN;
    long e = epoch ? strtol(epoch, &end_e, 10) : 0;
    if (!accuracy || !epoch || end_a == accuracy || *end_a != '\0' || !(a >= 0 && a <= 100) ||
        end_e == epoch || *end_e != '\0' || e < 1 || e > done)
        return cli_failure("%s: __metadata__ \"%s\" and \"%s\" are not an accuracy in percent "
                           "and an epoch the run has done (the file is damaged)", path,
                           BEST_ACCURACY_KEY, BEST_EPOCH_KEY);
    run->best_val_accuracy = a;
    run->best_epoch = (int)e;
    return CLI_OK;
}

void run_settings_print_resume(const train_settings *s, const train_run *run)
{
    const cn_train_state *st = &run->state;
    const cn_epoch_position *p = &st->position;
    if (p->step == st->steps_per_epoch)
        cli_print_line("Resuming from %s: epoch %d complete", run->resume_path, p->epoch);
    else
        cli_print_line("Resuming from %s: epoch %d, %d of %d steps done", run->resume_path,
                       p->epoch, p->step, st->steps_per_epoch);
    int planned = run->planned_epochs;
    if (planned > 0 && planned != s->num_epochs)
        printf("%s the run from %d to %d epochs (--num-epochs %d)\n",
               s->num_epochs > planned ? "Extending" : "Shortening", planned, s->num_epochs,
               s->num_epochs);
}

void run_settings_free(train_run *run)
{
    for (int i = 0; i < RUN_SETTINGS_COUNT; i++) {
        free(run->adopted[i]);
        run->adopted[i] = NULL;
    }
}
