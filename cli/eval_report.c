/* eval_report.c — what `cnnc eval` reports beyond the overall accuracy: each class's accuracy
 * with its name, and the confusion-matrix picture (--confusion). It scores nothing itself;
 * eval.c hands it the labels and the model's predictions. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval_report.h"

static void print_class_accuracy(const int64_t *counts, int classes, const char *const *names)
{
    int width = 12; /* the names' column: Fashion-MNIST's longest, or the longest name */
    for (int a = 0; a < classes; a++)
        width = (int)strlen(names[a]) > width ? (int)strlen(names[a]) : width;
    printf("Per-class accuracy:\n");
    for (int a = 0; a < classes; a++) {
        int64_t total = 0, right = counts[a * classes + a];
        for (int p = 0; p < classes; p++) total += counts[a * classes + p];
        if (total == 0) {
            cli_print_line("  %-*s      -  (0 images)", width, names[a]);
            continue;
        }
        cli_print_line("  %-*s %6.2f%%  (%lld/%lld)", width, names[a],
                       100.0 * (double)right / (double)total, (long long)right,
                       (long long)total);
    }
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int draw_confusion(const char *path, const int64_t *counts, int classes,
                          const char *checkpoint, int images, double accuracy,
                          const char *const *names)
{
    char title[256];
    snprintf(title, sizeof title, "Confusion matrix: %s, %d test images, accuracy %.2f%%",
             base_name(checkpoint), images, accuracy);
    cn_error err = {{0}};
    if (cn_confusion_picture(path, counts, classes, names, title, &err) != 0)
        return cli_library_error(&err, path);
    cli_print_line("Saved confusion matrix to %s", path);
    return CLI_OK;
}

int report_classes(const cn_dataset *test, const uint8_t *predictions, int classes,
                   double accuracy, const char *checkpoint, const char *confusion_path,
                   const char *const *names)
{
    int64_t *counts = malloc((size_t)classes * (size_t)classes * sizeof *counts);
    if (!counts) return cli_failure("out of memory for a confusion matrix of %d classes", classes);
    cn_error err = {{0}};
    int rc = CLI_OK;
    if (cn_confusion_count(counts, classes, test->labels, predictions, test->count, &err) != 0)
        rc = cli_library_error(&err, NULL);
    if (rc == CLI_OK) print_class_accuracy(counts, classes, names);
    if (rc == CLI_OK && confusion_path)
        rc = draw_confusion(confusion_path, counts, classes, checkpoint, test->count, accuracy,
                            names);
    free(counts);
    return rc;
}
