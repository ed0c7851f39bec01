/* train_report.c — what `cnnc train` prints and logs: the settings line, the per-epoch summary,
 * the --metrics-debug time breakdown and the JSON Lines metrics file. It measures nothing and
 * decides nothing; train.c hands it finished numbers. */
#include <math.h>

#include "cli.h"
#include "train.h"

/* "s" after a count other than one. */
static const char *plural(long n)
{
    return n == 1 ? "" : "s";
}

/* "random crop after zero padding 2, horizontal flip": what --augment does, in words. */
static void print_augment_line(const cn_augment *a)
{
    if (a->crop_padding > 0 && a->hflip)
        printf("  augment: random crop after zero padding %d, horizontal flip", a->crop_padding);
    else if (a->crop_padding > 0)
        printf("  augment: random crop after zero padding %d", a->crop_padding);
    else if (a->hflip)
        printf("  augment: horizontal flip");
    else
        return;
    printf(" (training images only)\n");
}

/* "  schedule: cosine over 10 epochs after 1 warmup epoch, weight decay 0.0005" */
static void print_recipe_line(const train_settings *s)
{
    printf("  schedule: %s", cn_lr_kind_name(s->lr_schedule));
    if (s->lr_schedule == CN_LR_STEP)
        printf(" (x %g every %d epoch%s)", (double)s->lr_gamma, s->lr_step_epochs,
               plural(s->lr_step_epochs));
    if (s->lr_schedule == CN_LR_COSINE || s->lr_schedule == CN_LR_ONECYCLE)
        printf(" over %d epoch%s", s->num_epochs, plural(s->num_epochs));
    if (s->warmup_epochs > 0)
        printf(", warmup %d epoch%s", s->warmup_epochs, plural(s->warmup_epochs));
    printf(", weight decay %g\n", (double)s->weight_decay);
}

void print_settings_line(const train_settings *s, const train_run *run)
{
    float scaled_lr = s->learning_rate * (float)s->num_cores;
    long per_epoch = (long)run->steps * s->num_cores * s->batch_size;
    printf("cnnc %s: %d epoch%s of %d step%s, %d replica%s x batch %d, %d thread%s (%s)\n",
           CN_VERSION, s->num_epochs, plural(s->num_epochs), run->steps, plural(run->steps),
           s->num_cores, plural(s->num_cores), s->batch_size, run->threads, plural(run->threads),
           cn_isa_name(cn_isa_active()));
    if (s->optimizer == CN_OPTIMIZER_SGD)
        printf("  SGD: learning rate %g (%g x %d), momentum %g%s, seed %llu, %s\n",
               (double)scaled_lr, (double)s->learning_rate, s->num_cores, (double)s->momentum,
               s->nesterov ? " (Nesterov)" : "", (unsigned long long)s->seed,
               cn_precision_name(s->precision));
    else
        printf("  AdamW: learning rate %g (%g x %d), betas 0.9 0.999, seed %llu, %s\n",
               (double)scaled_lr, (double)s->learning_rate, s->num_cores,
               (unsigned long long)s->seed, cn_precision_name(s->precision));
    if (s->weight_decay > 0 || s->lr_schedule != CN_LR_CONSTANT || s->warmup_epochs > 0)
        print_recipe_line(s);
    if (s->label_smoothing > 0)
        printf("  loss: cross-entropy with label smoothing %g (test loss: NLL)\n",
               (double)s->label_smoothing);
    print_augment_line(&s->augment);
    if (run->val.count > 0)
        printf("  data: %d training image%s (%ld an epoch), %d validation, %d test\n",
               run->train.count, plural(run->train.count), per_epoch, run->val.count,
               run->test.count);
    else
        printf("  data: %d training image%s (%ld an epoch), %d test image%s\n",
               run->train.count, plural(run->train.count), per_epoch, run->test.count,
               plural(run->test.count));
    if (s->test_percent)
        printf("  test split: about %d%% of the images of %s, by the CRC-32 of each path "
               "(--test-percent)\n", s->test_percent, s->data_dir);
    cli_print_skipped("  ", &run->train, &run->test);
}

static double per_second(double count, double seconds)
{
    return seconds > 0 ? count / seconds : 0;
}

static double phases_total(const cn_phase_times *p)
{
    return p->data + p->forward + p->backward + p->reduce + p->optimizer + p->wait +
           p->communicate;
}

static void print_share(const char *separator, const char *name, double seconds, double total)
{
    double percent = total > 0 ? 100 * seconds / total : 0;
    printf("%s%s %.3f s (%.1f%%)", separator, name, seconds, percent);
}

static void print_time_breakdown(const epoch_report *r)
{
    const cn_phase_times *p = &r->phases;
    double total = r->train_seconds + r->eval_seconds;
    double other = r->train_seconds - phases_total(p);
    printf("Epoch %d time:", r->epoch);
    print_share(" ", "data", p->data, total);
    print_share(", ", "forward", p->forward, total);
    print_share(", ", "backward", p->backward, total);
    print_share(", ", "reduce", p->reduce, total);
    print_share(", ", "optimizer", p->optimizer, total);
    if (p->wait > 0 || p->communicate > 0) { /* several processes */
        print_share(", ", "wait", p->wait, total);
        print_share(", ", "communicate", p->communicate, total);
    }
    print_share(", ", "other", other > 0 ? other : 0, total);
    print_share(", ", "eval", r->eval_seconds, total);
    printf("; epoch %.3f s; exchange %lld bytes a step\n", total, (long long)r->exchange_bytes);
}

/* With a validation split the labels go: "Epoch 3/50  train 0.4321 84.55%  val 0.4410 84.10%
 * test 0.4502 83.70%  3.21 s", each set's loss then accuracy. */
void print_epoch_report(const epoch_report *r, int metrics_debug)
{
    if (r->val_samples > 0)
        printf("Epoch %d/%d  train %.4f %.2f%%  val %.4f %.2f%%  test %.4f %.2f%%  %.2f s\n",
               r->epoch, r->num_epochs, (double)r->train_loss, r->train_accuracy, r->val_loss,
               r->val_accuracy, r->test_loss, r->test_accuracy,
               r->train_seconds + r->eval_seconds);
    else
        printf("Epoch %d/%d  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.2f s\n",
               r->epoch, r->num_epochs, (double)r->train_loss, r->train_accuracy, r->test_loss,
               r->test_accuracy, r->train_seconds + r->eval_seconds);
    if (metrics_debug)
        print_time_breakdown(r);
}

/* Writes ,"key":value — or null where JSON has no number for the value. */
static void write_json_number(FILE *f, const char *key, double value)
{
    if (isfinite(value))
        fprintf(f, ",\"%s\":%.9g", key, value);
    else
        fprintf(f, ",\"%s\":null", key);
}

int write_metrics_line(FILE *f, const epoch_report *r)
{
    const cn_phase_times *p = &r->phases;
    fprintf(f, "{\"epoch\":%d", r->epoch);
    write_json_number(f, "train_loss", (double)r->train_loss);
    write_json_number(f, "train_accuracy", r->train_accuracy);
    write_json_number(f, "test_loss", r->test_loss);
    write_json_number(f, "test_accuracy", r->test_accuracy);
    if (r->val_samples > 0) {
        write_json_number(f, "val_loss", r->val_loss);
        write_json_number(f, "val_accuracy", r->val_accuracy);
    }
    write_json_number(f, "epoch_seconds", r->train_seconds + r->eval_seconds);
    write_json_number(f, "train_seconds", r->train_seconds);
    write_json_number(f, "eval_seconds", r->eval_seconds);
    write_json_number(f, "train_samples_per_second",
                      per_second((double)r->timed_samples, r->train_seconds));
    fprintf(f, ",\"train_samples\":%ld,\"test_samples\":%d", r->train_samples, r->test_samples);
    if (r->val_samples > 0)
        fprintf(f, ",\"val_samples\":%d", r->val_samples);
    write_json_number(f, "data_seconds", p->data);
    write_json_number(f, "forward_seconds", p->forward);
    write_json_number(f, "backward_seconds", p->backward);
    write_json_number(f, "reduce_seconds", p->reduce);
    write_json_number(f, "optimizer_seconds", p->optimizer);
    write_json_number(f, "wait_seconds", p->wait);
    write_json_number(f, "communicate_seconds", p->communicate);
    fprintf(f, ",\"exchange_bytes\":%lld", (long long)r->exchange_bytes);
    write_json_number(f, "learning_rate", (double)r->learning_rate);
    fputs("}\n", f);
    if (fflush(f) != 0 || ferror(f))
        return -1;
    return 0;
}
