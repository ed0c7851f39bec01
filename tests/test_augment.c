/* test_augment.c — training-time augmentation (src/train/augment.c and the trainer's use of
 * it): images against a reference written here with plain loops (pad with zeros, crop at the
 * drawn corner, mirror), the draws as functions of (seed, epoch, sample) alone and their
 * spread, the settings' text and range checks, and the trainer: its augmented steps are plain
 * steps on the reference's images, bit for bit, and its weights do not depend on the threads.
 * The command line's --augment is tests/cli_augment.sh's business. */
#include "testutil.h"

/* ---------------------------------------------------------------- the reference */

/* out = in padded with P zeros on every side, cropped back to H x W at (top, left) of the
 * padded image, then mirrored left to right when flip: torchvision's RandomCrop(padding=P) and
 * RandomHorizontalFlip, one step at a time. */
static void reference(const uint8_t *in, uint8_t *out, int C, int H, int W, int P, int top,
                      int left, int flip)
{
    int PH = H + 2 * P, PW = W + 2 * P;
    uint8_t *padded = calloc((size_t)C * PH * PW, 1), *crop = malloc((size_t)C * H * W);
    assert_non_null(padded);
    assert_non_null(crop);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                padded[((size_t)c * PH + y + P) * PW + x + P] = in[((size_t)c * H + y) * W + x];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                crop[((size_t)c * H + y) * W + x] =
                    padded[((size_t)c * PH + y + top) * PW + x + left];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                out[((size_t)c * H + y) * W + x] =
                    crop[((size_t)c * H + y) * W + (flip ? W - 1 - x : x)];
    free(padded);
    free(crop);
}

/* n random bytes in 1..255 (no zeros, so that padding is told apart from pixels). */
static uint8_t *random_pixels(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n);
    assert_non_null(p);
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(1 + cn_rng_below(&rng, 255));
    return p;
}

/* ---------------------------------------------------------------- images */

/* Every corner and both mirrorings, for grey and colour, square and not, against the
 * reference. */
static void test_image_matches_reference_at_every_corner(void **state)
{
    (void)state;
    const int shapes[][3] = {{1, 5, 7}, {3, 7, 4}, {3, 6, 6}, {1, 28, 28}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], H = shapes[s][1], W = shapes[s][2], n = C * H * W;
        uint8_t *in = random_pixels((size_t)n, 7 + s), *got = malloc(n), *want = malloc(n);
        assert_non_null(got);
        assert_non_null(want);
        for (int P = 0; P <= 3 && P < (H < W ? H : W); P++)
            for (int top = 0; top <= 2 * P; top++)
                for (int left = 0; left <= 2 * P; left++)
                    for (int flip = 0; flip <= 1; flip++) {
                        cn_augment a = {P, 1};
                        cn_augment_draw d = {top, left, flip};
                        memset(got, 0xAA, (size_t)n);
                        cn_augment_image(&a, &d, in, got, C, H, W);
                        reference(in, want, C, H, W, P, top, left, flip);
                        assert_memory_equal(got, want, (size_t)n);
                    }
        free(in);
        free(got);
        free(want);
    }
}

/* The drawn corners and flips of many samples give the reference's images; without hflip
 * nothing is mirrored, and with P = 0 a sample is itself or its mirror image. */
static void test_drawn_images_match_reference(void **state)
{
    (void)state;
    const int shapes[][3] = {{1, 9, 5}, {3, 6, 11}};
    const cn_augment settings[] = {{2, 1}, {3, 0}, {0, 1}, {1, 1}};
    for (size_t s = 0; s < 2; s++) {
        int C = shapes[s][0], H = shapes[s][1], W = shapes[s][2], n = C * H * W;
        uint8_t *got = malloc(n), *want = malloc(n), *mirror = malloc(n);
        assert_non_null(got);
        assert_non_null(want);
        assert_non_null(mirror);
        for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
            const cn_augment *a = &settings[k];
            int flips = 0;
            for (uint32_t sample = 0; sample < 40; sample++) {
                uint8_t *in = random_pixels((size_t)n, 100 + sample);
                cn_augment_draw d = cn_augment_draw_sample(a, 42, 3, sample);
                assert_true(d.top >= 0 && d.top <= 2 * a->crop_padding);
                assert_true(d.left >= 0 && d.left <= 2 * a->crop_padding);
                assert_true(d.flip == 0 || (d.flip == 1 && a->hflip));
                flips += d.flip;
                cn_augment_image(a, &d, in, got, C, H, W);
                reference(in, want, C, H, W, a->crop_padding, d.top, d.left, d.flip);
                assert_memory_equal(got, want, (size_t)n);
                if (a->crop_padding == 0) { /* only flips: the sample or its mirror image */
                    reference(in, mirror, C, H, W, 0, 0, 0, 1);
                    assert_memory_equal(got, d.flip ? mirror : in, (size_t)n);
                }
                free(in);
            }
            if (a->hflip) assert_true(flips > 5 && flips < 35);
        }
        free(got);
        free(want);
        free(mirror);
    }
}

/* ---------------------------------------------------------------- draws */

static int same_draw(cn_augment_draw a, cn_augment_draw b)
{
    return a.top == b.top && a.left == b.left && a.flip == b.flip;
}

/* How many of samples 0..n-1 draw the same in (seed1, epoch1) as in (seed2, epoch2). */
static int agreements(const cn_augment *a, uint64_t seed1, int epoch1, uint64_t seed2,
                      int epoch2, int n)
{
    int same = 0;
    for (int i = 0; i < n; i++)
        same += same_draw(cn_augment_draw_sample(a, seed1, epoch1, (uint32_t)i),
                          cn_augment_draw_sample(a, seed2, epoch2, (uint32_t)i));
    return same;
}

/* A draw is a function of (seed, epoch, sample) alone: asked again, in another order, after
 * other draws, it is the same; another epoch, sample or seed draws afresh (two draws of P = 2
 * with a flip agree by chance with probability 1/50). */
static void test_draws_depend_on_seed_epoch_and_sample_alone(void **state)
{
    (void)state;
    cn_augment a = {2, 1};
    enum { N = 500 };
    cn_augment_draw first[N];
    for (int i = 0; i < N; i++) first[i] = cn_augment_draw_sample(&a, 9, 4, (uint32_t)i);
    for (int i = N - 1; i >= 0; i--) {
        (void)cn_augment_draw_sample(&a, 9, 5, (uint32_t)(N - i));
        assert_true(same_draw(first[i], cn_augment_draw_sample(&a, 9, 4, (uint32_t)i)));
    }
    assert_true(agreements(&a, 9, 4, 9, 5, N) < N / 10);  /* another epoch */
    assert_true(agreements(&a, 9, 4, 10, 4, N) < N / 10); /* another seed */
    assert_true(agreements(&a, 9, 0, 9, 1, N) < N / 10);
    int neighbours = 0; /* another sample */
    for (int i = 0; i + 1 < N; i++) neighbours += same_draw(first[i], first[i + 1]);
    assert_true(neighbours < N / 10);
    /* the flips do not depend on P, nor the corners on hflip */
    cn_augment flip_only = {0, 1}, crop_only = {2, 0}, wider = {4, 1};
    for (int i = 0; i < N; i++) {
        cn_augment_draw f = cn_augment_draw_sample(&flip_only, 9, 4, (uint32_t)i);
        cn_augment_draw c = cn_augment_draw_sample(&crop_only, 9, 4, (uint32_t)i);
        cn_augment_draw w = cn_augment_draw_sample(&wider, 9, 4, (uint32_t)i);
        assert_int_equal(f.flip, first[i].flip);
        assert_int_equal(w.flip, first[i].flip);
        assert_true(f.top == 0 && f.left == 0 && c.flip == 0);
        assert_true(c.top == first[i].top && c.left == first[i].left);
    }
}

/* Over many samples every corner 0..2P turns up about as often as the others, row and column
 * independently, and about half the samples are mirrored; neighbouring samples, and one sample
 * in two epochs, agree as often as independent draws do: all within 5 standard deviations of
 * the expected counts, which a generator that is stuck, biased, uses few bits or follows the
 * sample's number fails. */
static void test_draws_cover_every_offset_and_flip_half(void **state)
{
    (void)state;
    enum { N = 40000, P = 2, SPAN = 2 * P + 1 };
    cn_augment a = {P, 1};
    int rows[SPAN] = {0}, cols[SPAN] = {0}, pairs[SPAN][SPAN] = {{0}}, flips = 0;
    int flips_by_row[SPAN] = {0}, next_flip = 0, next_top = 0, epoch_flip = 0, epoch_left = 0;
    cn_augment_draw last = {0, 0, 0};
    for (uint32_t i = 0; i < N; i++) {
        cn_augment_draw d = cn_augment_draw_sample(&a, 1, 1, i);
        cn_augment_draw later = cn_augment_draw_sample(&a, 1, 2, i);
        assert_true(d.top >= 0 && d.top < SPAN && d.left >= 0 && d.left < SPAN);
        rows[d.top]++, cols[d.left]++, pairs[d.top][d.left]++, flips += d.flip;
        flips_by_row[d.top] += d.flip;
        next_flip += i > 0 && d.flip == last.flip, next_top += i > 0 && d.top == last.top;
        epoch_flip += d.flip == later.flip, epoch_left += d.left == later.left;
        last = d;
    }
    double p = 1.0 / SPAN, sd = sqrt(N * p * (1 - p));
    assert_true(fabs(next_flip - N / 2.0) < 5 * sqrt(N / 4.0));
    assert_true(fabs(epoch_flip - N / 2.0) < 5 * sqrt(N / 4.0));
    assert_true(fabs(next_top - N * p) < 5 * sd);
    assert_true(fabs(epoch_left - N * p) < 5 * sd);
    for (int k = 0; k < SPAN; k++) {
        assert_true(fabs(rows[k] - N * p) < 5 * sd);
        assert_true(fabs(cols[k] - N * p) < 5 * sd);
        double half = rows[k] / 2.0;
        assert_true(fabs(flips_by_row[k] - half) < 5 * sqrt(rows[k] / 4.0));
        for (int j = 0; j < SPAN; j++) {
            double q = p * p, sdq = sqrt(N * q * (1 - q));
            assert_true(fabs(pairs[k][j] - N * q) < 5 * sdq);
        }
    }
    assert_true(fabs(flips - N / 2.0) < 5 * sqrt(N / 4.0));
    /* P = 1: three corners, all seen */
    cn_augment one = {1, 0};
    int seen[3] = {0};
    for (uint32_t i = 0; i < 300; i++) seen[cn_augment_draw_sample(&one, 3, 2, i).left]++;
    assert_true(seen[0] > 50 && seen[1] > 50 && seen[2] > 50);
}

/* ---------------------------------------------------------------- settings */

static void expect_parse_refused(const char *text, const char *why)
{
    cn_augment a = {7, 1};
    cn_error err = {{0}};
    assert_int_equal(cn_augment_parse(text, &a, &err), -1);
    if (!strstr(err.msg, why)) fail_msg("'%s': \"%s\" lacks \"%s\"", text, err.msg, why);
    assert_true(a.crop_padding == 7 && a.hflip == 1); /* unchanged */
}

static void expect_round_trip(const char *text, int P, int hflip, const char *canonical)
{
    cn_augment a = {99, 1};
    cn_error err = {{0}};
    char back[CN_AUGMENT_TEXT_MAX];
    if (cn_augment_parse(text, &a, &err) != 0) fail_msg("'%s': %s", text, err.msg);
    assert_int_equal(a.crop_padding, P);
    assert_int_equal(a.hflip, hflip);
    cn_augment_format(&a, back);
    assert_string_equal(back, canonical);
}

static void test_text_reads_and_writes(void **state)
{
    (void)state;
    expect_round_trip("none", 0, 0, "none");
    expect_round_trip("crop=2,hflip", 2, 1, "crop=2,hflip");
    expect_round_trip("hflip,crop=4", 4, 1, "crop=4,hflip");
    expect_round_trip("crop=3", 3, 0, "crop=3");
    expect_round_trip("hflip", 0, 1, "hflip");
    expect_round_trip("crop=1024", 1024, 0, "crop=1024");
    expect_parse_refused("crop=2,crop=3", "crop is given twice");
    expect_parse_refused("hflip,crop=1,hflip", "hflip is given twice");
    expect_parse_refused("crop=2,vflip", "unknown item 'vflip'");
    expect_parse_refused("none,hflip", "none stands alone");
    expect_parse_refused("crop", "unknown item 'crop'");
    expect_parse_refused("Hflip", "unknown item");
    expect_parse_refused("", "an empty item");
    expect_parse_refused("crop=2,", "an empty item");
    expect_parse_refused(",hflip", "an empty item");
    expect_parse_refused("crop=", "P of crop=P must be an integer in 0..1024");
    expect_parse_refused("crop=-1", "P of crop=P must be an integer");
    expect_parse_refused("crop=+1", "P of crop=P must be an integer");
    expect_parse_refused("crop=2x", "P of crop=P must be an integer");
    expect_parse_refused("crop=1025", "P of crop=P must be an integer");
    expect_parse_refused("crop=99999999999", "P of crop=P must be an integer");
    expect_parse_refused("crop=1 ", "P of crop=P must be an integer");
    expect_parse_refused("hflip\n", "unknown item 'hflip?'"); /* kept on one line */
}

static void expect_range(int P, int hflip, int H, int W, const char *why)
{
    cn_augment a = {P, hflip};
    cn_error err = {{0}};
    if (!why) {
        if (cn_augment_check(&a, H, W, &err) != 0) fail_msg("%d,%d on %dx%d: %s", P, hflip,
                                                            H, W, err.msg);
        return;
    }
    assert_int_equal(cn_augment_check(&a, H, W, &err), -1);
    if (!strstr(err.msg, why)) fail_msg("\"%s\" lacks \"%s\"", err.msg, why);
}

/* The padding stays below the shorter side; hflip is 0 or 1; the trainer refuses what the
 * check refuses. */
static void test_settings_out_of_range_are_refused(void **state)
{
    (void)state;
    expect_range(0, 0, 28, 28, NULL);
    expect_range(27, 1, 28, 28, NULL);
    expect_range(5, 1, 6, 11, NULL);
    expect_range(6, 0, 6, 11, "crop padding 6 is out of range for 6x11 images (0..5)");
    expect_range(28, 0, 28, 28, "out of range for 28x28 images (0..27)");
    expect_range(-1, 0, 28, 28, "crop padding -1");
    expect_range(0, 2, 28, 28, "hflip is 0 or 1, not 2");
    expect_range(1025, 0, 2000, 2000, "(0..1024)");
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_train_config cfg = {.batch_size = 8, .num_replicas = 1, .threads = 1,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 1,
                           .augment = {28, 1}};
    assert_null(cn_trainer_create(m, &cfg, &err));
    assert_non_null(strstr(err.msg, "crop padding 28 is out of range"));
    cfg.augment = (cn_augment){2, -1};
    assert_null(cn_trainer_create(m, &cfg, &err));
    assert_non_null(strstr(err.msg, "hflip is 0 or 1"));
    cn_model_free(m);
}

/* ---------------------------------------------------------------- the trainer */

/* count random C x H x W images in 5 classes (the caller frees them with cn_dataset_free). */
static cn_dataset random_set(int count, int C, int H, int W, uint64_t seed)
{
    size_t n = (size_t)count * C * H * W;
    cn_dataset ds = {.count = count, .channels = C, .height = H, .width = W, .classes = 5,
                     .pixels = random_pixels(n, seed), .labels = malloc((size_t)count)};
    assert_non_null(ds.labels);
    for (int i = 0; i < count; i++) ds.labels[i] = (uint8_t)(ds.pixels[(size_t)i * C * H * W] % 5);
    return ds;
}

/* ds with every image i replaced by the reference's image of its draw (seed, epoch, sample
 * number i), in a new set. */
static cn_dataset augmented_copy(const cn_dataset *ds, const cn_augment *a, uint64_t seed,
                                 int epoch)
{
    size_t size = (size_t)ds->channels * ds->height * ds->width;
    cn_dataset out = *ds;
    out.pixels = malloc(size * ds->count);
    out.labels = malloc((size_t)ds->count);
    assert_non_null(out.pixels);
    assert_non_null(out.labels);
    memcpy(out.labels, ds->labels, (size_t)ds->count);
    for (int i = 0; i < ds->count; i++) {
        cn_augment_draw d = cn_augment_draw_sample(a, seed, epoch, (uint32_t)i);
        reference(ds->pixels + i * size, out.pixels + i * size, ds->channels, ds->height,
                  ds->width, a->crop_padding, d.top, d.left, d.flip);
    }
    return out;
}

/* A small network for C x H x W images in 5 classes, with BatchNorm and dropout (whose draws
 * must not be disturbed by augmentation's). */
static cn_model *small_model(int C, int H, int W)
{
    cn_layer_spec specs[] = {{.kind = CN_CONV2D, .name = "conv", .out_channels = 4, .kernel = 3},
                             {.kind = CN_RELU},
                             {.kind = CN_BATCHNORM2D, .name = "norm"},
                             {.kind = CN_FLATTEN},
                             {.kind = CN_DROPOUT, .p = 0.25f},
                             {.kind = CN_LINEAR, .name = "head", .out_channels = 5},
                             {.kind = CN_LOG_SOFTMAX}};
    cn_error err = {{0}};
    cn_model *m = cn_model_create(C, H, W, specs, 7, &err);
    if (!m) fail_msg("%s", err.msg);
    cn_model_init(m, 4);
    return m;
}

static cn_trainer *small_trainer(cn_model *m, const cn_augment *a, int threads)
{
    cn_train_config cfg = {.batch_size = 8, .num_replicas = 2, .threads = threads,
                           .learning_rate = 0.05f, .momentum = 0.5f, .seed = 11,
                           .augment = *a};
    cn_error err = {{0}};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    if (!t) fail_msg("%s", err.msg);
    return t;
}

/* Two epochs with augmentation are two plain epochs on the reference's images of each epoch's
 * draws, and so is a cn_trainer_step (epoch 0, the samples' positions in the batch): the same
 * weights and statistics, bit for bit. For grey and colour images that are not square. */
static void check_trainer_steps_on_the_reference(int C, int H, int W)
{
    cn_augment a = {2, 1}, none = {0, 0};
    cn_dataset ds = random_set(64, C, H, W, 5);
    cn_model *ma = small_model(C, H, W), *mp = small_model(C, H, W);
    cn_trainer *ta = small_trainer(ma, &a, 2), *tp = small_trainer(mp, &none, 2);
    cn_error err = {{0}};
    float loss_a, loss_p;
    for (int e = 1; e <= 2; e++) {
        cn_dataset ref = augmented_copy(&ds, &a, 11, e);
        assert_int_equal(cn_trainer_epoch(ta, &ds, e, NULL, NULL, &loss_a, NULL, &err), 0);
        assert_int_equal(cn_trainer_epoch(tp, &ref, e, NULL, NULL, &loss_p, NULL, &err), 0);
        assert_memory_equal(&loss_a, &loss_p, sizeof loss_a);
        cn_dataset_free(&ref);
    }
    cn_dataset ref = augmented_copy(&ds, &a, 11, 0); /* the first 16 samples are the batch */
    assert_int_equal(cn_trainer_step(ta, ds.pixels, ds.labels, &loss_a, NULL, &err), 0);
    assert_int_equal(cn_trainer_step(tp, ref.pixels, ref.labels, &loss_p, NULL, &err), 0);
    assert_memory_equal(&loss_a, &loss_p, sizeof loss_a);
    assert_memory_equal(cn_model_params(ma), cn_model_params(mp),
                        cn_model_num_params(ma) * sizeof(float));
    cn_tensor_ref ra[16], rp[16];
    int n = cn_model_tensors(ma, ra, 16);
    assert_int_equal(cn_model_tensors(mp, rp, 16), n);
    for (int i = 0; i < n; i++) assert_memory_equal(ra[i].data, rp[i].data, tu_ref_bytes(&ra[i]));
    /* and the augmented images are not the plain ones: a plain run differs */
    cn_model *mq = small_model(C, H, W);
    cn_trainer *tq = small_trainer(mq, &none, 2);
    for (int e = 1; e <= 2; e++)
        assert_int_equal(cn_trainer_epoch(tq, &ds, e, NULL, NULL, &loss_p, NULL, &err), 0);
    assert_memory_not_equal(cn_model_params(ma), cn_model_params(mq),
                            cn_model_num_params(ma) * sizeof(float));
    cn_trainer_free(ta), cn_trainer_free(tp), cn_trainer_free(tq);
    cn_model_free(ma), cn_model_free(mp), cn_model_free(mq);
    cn_dataset_free(&ref);
    cn_dataset_free(&ds);
}

static void test_trainer_steps_on_the_reference_grey(void **state)
{
    (void)state;
    check_trainer_steps_on_the_reference(1, 9, 6);
}

static void test_trainer_steps_on_the_reference_colour(void **state)
{
    (void)state;
    check_trainer_steps_on_the_reference(3, 6, 10);
}

/* The seed's network trained for two epochs: every tensor's bytes (weights, running statistics,
 * counters), malloc'd, their length in *len. */
static uint8_t *train_state(const cn_dataset *ds, const cn_augment *a, int replicas,
                            int threads, size_t *len)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_model_init(m, 5);
    cn_train_config cfg = {.batch_size = 32, .num_replicas = replicas, .threads = threads,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 5, .augment = *a};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    assert_non_null(t);
    for (int e = 1; e <= 2; e++)
        assert_int_equal(cn_trainer_epoch(t, ds, e, NULL, NULL, NULL, NULL, &err), 0);
    cn_tensor_ref refs[18];
    assert_int_equal(cn_model_tensors(m, refs, 18), 18);
    uint8_t *copy = tu_concat_tensors(refs, 18, NULL, 0, len);
    cn_trainer_free(t);
    cn_model_free(m);
    return copy;
}

/* With crop=2,hflip: the same bits on 1, 2 and 3 threads, with one replica (its batch split
 * over the threads) or two (one a thread); another model than without augmentation. */
static void test_weights_bit_identical_across_threads(void **state)
{
    (void)state;
    cn_dataset ds = tu_synthetic_set(640, 13);
    cn_augment a = {2, 1}, none = {0, 0};
    for (int replicas = 1; replicas <= 2; replicas++) {
        size_t len, other_len;
        uint8_t *one = train_state(&ds, &a, replicas, 1, &len);
        for (int threads = 2; threads <= 3; threads++) {
            uint8_t *other = train_state(&ds, &a, replicas, threads, &other_len);
            assert_int_equal(len, other_len);
            assert_memory_equal(one, other, len);
            free(other);
        }
        uint8_t *plain = train_state(&ds, &none, replicas, 2, &other_len);
        assert_memory_not_equal(one, plain, len);
        free(plain);
        free(one);
    }
    cn_dataset_free(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_matches_reference_at_every_corner),
        cmocka_unit_test(test_drawn_images_match_reference),
        cmocka_unit_test(test_draws_depend_on_seed_epoch_and_sample_alone),
        cmocka_unit_test(test_draws_cover_every_offset_and_flip_half),
        cmocka_unit_test(test_text_reads_and_writes),
        cmocka_unit_test(test_settings_out_of_range_are_refused),
        cmocka_unit_test(test_trainer_steps_on_the_reference_grey),
        cmocka_unit_test(test_trainer_steps_on_the_reference_colour),
        cmocka_unit_test(test_weights_bit_identical_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
