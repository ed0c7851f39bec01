/* train_curves.c — the training-curves picture `cnnc train` writes at the end of a run (--plot):
 * it keeps each epoch's train loss, test loss and test accuracy (and validation loss and
 * accuracy with --val-samples) in memory and hands them to the
 * library's cn_plot_curves; also the list of epochs and the picture's title, which `cnnc plot`
 * shares. Every checkpoint carries the list as text (CURVES_HISTORY_KEY), so a resumed run
 * draws the whole run, not the epochs since the resume. It does not read the metrics file;
 * `cnnc plot` does that. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train.h"

int cli_epoch_list_append(cli_epoch_list *list, const cn_epoch_metrics *e)
{
    if (list->count == list->capacity) {
        int capacity = list->capacity ? 2 * list->capacity : 64;
        cn_epoch_metrics *grown = realloc(list->epochs, (size_t)capacity * sizeof *grown);
        if (!grown) return -1;
        list->epochs = grown;
        list->capacity = capacity;
    }
    list->epochs[list->count++] = *e;
    return 0;
}

int record_curves(train_run *run, const epoch_report *r)
{
    cn_epoch_metrics e = {
        .epoch = r->epoch,
        .train_loss = r->train_loss,
        .test_loss = r->test_loss,
        .test_accuracy = r->test_accuracy,
        .has_validation = r->val_samples > 0,
        .val_loss = r->val_loss,
        .val_accuracy = r->val_accuracy,
        .learning_rate = r->learning_rate,
    };
    return cli_epoch_list_append(&run->history, &e);
}

/* One epoch in the checkpoint's text: "EPOCH TRAIN_LOSS TEST_LOSS TEST_ACCURACY RATE;", or with a
 * validation split "EPOCH TRAIN_LOSS TEST_LOSS TEST_ACCURACY RATE VAL_LOSS VAL_ACCURACY;", each
 * value with the 17 digits that read back as the same double, so the picture is drawn the same;
 * files from before the rate was kept have no RATE (nor validation). */
#define HISTORY_ENTRY_MAX (12 + 6 * 26)

int curves_history_text(const train_run *run, char **text)
{
    const cli_epoch_list *list = &run->history;
    size_t cap = (size_t)list->count * HISTORY_ENTRY_MAX + 1, len = 0;
    *text = malloc(cap);
    if (!*text)
        return -1;
    (*text)[0] = '\0';
    for (int i = 0; i < list->count; i++) {
        const cn_epoch_metrics *e = &list->epochs[i];
        len += (size_t)snprintf(*text + len, cap - len, "%d %.17g %.17g %.17g %.17g", e->epoch,
                                e->train_loss, e->test_loss, e->test_accuracy, e->learning_rate);
        if (e->has_validation)
            len += (size_t)snprintf(*text + len, cap - len, " %.17g %.17g", e->val_loss,
                                    e->val_accuracy);
        len += (size_t)snprintf(*text + len, cap - len, ";");
    }
    return 0;
}

/* Reads one "EPOCH A B C;", "EPOCH A B C R;" or "EPOCH A B C R D E;" at *p into e; 0, or -1
 * when it is not one. */
static int read_entry(const char **p, cn_epoch_metrics *e)
{
    char *end;
    long epoch = strtol(*p, &end, 10);
    if (end == *p || epoch < 1 || epoch > TRAIN_MAX_EPOCHS)
        return -1;
    *e = (cn_epoch_metrics){.epoch = (int)epoch};
    double *value[6] = {&e->train_loss, &e->test_loss, &e->test_accuracy, &e->learning_rate,
                        &e->val_loss, &e->val_accuracy};
    int k = 0;
    for (; k < 6 && *end == ' '; k++) {
        const char *at = end;
        *value[k] = strtod(at + 1, &end);
        if (end == at + 1)
            return -1;
    }
    if ((k != 3 && k != 4 && k != 6) || *end != ';')
        return -1;
    e->has_validation = k == 6;
    *p = end + 1;
    return 0;
}

int curves_history_adopt(train_run *run, const cn_safetensors *f, const char *path, int done)
{
    const char *p = cn_safetensors_meta(f, CURVES_HISTORY_KEY);
    if (!p)
        return CLI_OK; /* written before the history was recorded: the curves start here */
    for (int n = 1; *p; n++) {
        cn_epoch_metrics e;
        int last = run->history.count ? run->history.epochs[run->history.count - 1].epoch : 0;
        if (read_entry(&p, &e) != 0 || e.epoch <= last || e.epoch > done)
            return cli_failure("%s: __metadata__ \"%s\": entry %d is not an epoch's losses and "
                               "accuracy in order (the file is damaged)", path,
                               CURVES_HISTORY_KEY, n);
        if (cli_epoch_list_append(&run->history, &e) != 0)
            return cli_failure("out of memory for the training curves");
    }
    return CLI_OK;
}

void cli_curves_title(char *buf, size_t size, const cn_epoch_metrics *epochs, int n)
{
    const cn_epoch_metrics *first = &epochs[0], *last = &epochs[n - 1];
    char span[64];
    if (first->epoch == last->epoch)
        snprintf(span, sizeof span, "epoch %d", last->epoch);
    else
        snprintf(span, sizeof span, "epochs %d\u2013%d", first->epoch, last->epoch);
    if (isfinite(last->test_accuracy))
        snprintf(buf, size, "Training curves, %s: final test accuracy %.2f%%", span,
                 last->test_accuracy);
    else
        snprintf(buf, size, "Training curves, %s", span);
}

int draw_training_curves(const train_settings *s, const train_run *run)
{
    if (!s->plot_path || run->history.count == 0) return CLI_OK;
    char title[160];
    cli_curves_title(title, sizeof title, run->history.epochs, run->history.count);
    cn_error err = {{0}};
    if (cn_plot_curves(s->plot_path, run->history.epochs, run->history.count, CN_PLOT_WIDTH,
                       CN_PLOT_HEIGHT, title, &err) != 0)
        return cli_library_error(&err, s->plot_path);
    if (progress_shows(&run->progress, PROGRESS_NORMAL))
        cli_print_line("Saved training curves to %s", s->plot_path);
    return CLI_OK;
}
