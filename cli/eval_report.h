/* eval_report.h — the per-class part of `cnnc eval`'s report (eval_report.c). No state. */
#ifndef CNNC_CLI_EVAL_REPORT_H
#define CNNC_CLI_EVAL_REPORT_H

#include "cnnc.h"

/* Prints each class's accuracy with its name (names[classes]) and, when confusion_path
 * is set, draws the confusion matrix there (titled with the checkpoint's file name and the
 * accuracy). predictions has test->count labels. Returns a CLI status. */
int report_classes(const cn_dataset *test, const uint8_t *predictions, int classes,
                   double accuracy, const char *checkpoint, const char *confusion_path,
                   const char *const *names);

#endif /* CNNC_CLI_EVAL_REPORT_H */
