/* train_curves.c — the training-curves picture `cnnc train` writes at the end of a run (--plot):
 * it keeps each epoch's train loss, test loss and test accuracy in memory and hands them to the
 * library's cn_plot_curves; also the list of epochs and the picture's title, which `cnnc plot`
 * shares. It does not read the metrics file; `cnnc plot` does that. */
#include <math.h>
#include <stdlib.h>

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
    };
    return cli_epoch_list_append(&run->history, &e);
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
