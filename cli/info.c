/* info.c — `cnnc info`: what this machine offers and what this build uses: the CPU model, the
 * build's processor family and the machine it runs on, the cores, the instruction set the
 * kernels run with and those of the bf16 products, the measured fp32 multiply-add peak, whether
 * MPI is built in, the compiler, and where the dataset is. It reports problems (no dataset, a bad
 * CNNC_ISA or CNNC_BF16) as facts rather than failing; only bad flags fail. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "dist.h"

typedef struct {
    const char *data_dir;
    int data_dir_given;
    int threads;
    int test_percent; /* --test-percent: a folder of class folders split by a share */
} info_settings;

enum { OPT_DATA_DIR = 256, OPT_THREADS, OPT_TEST_PERCENT };

static const struct option info_options[] = {
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"test-percent", required_argument, NULL, OPT_TEST_PERCENT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Whether this build runs replicas across processes and hosts (dist_mpi.c knows). */
static const char *mpi_support(char *text, size_t size)
{
    char library[64];
    if (!cli_mpi_library(library, sizeof library))
        return "no (built without MPI: all replicas run in this one process)";
    snprintf(text, size, "yes, %s (cnnc train under mpirun or srun shares the replicas)",
             library);
    return text;
}

void cli_info_help(FILE *out)
{
    fprintf(out,
            "Usage: cnnc info [FLAGS]\n"
            "Prints what this machine offers and what this build uses: CPU model, cores, the\n"
            "SIMD instruction set the kernels use, the measured fp32 multiply-add peak (about\n"
            "a second), whether MPI is built in, and where the dataset is.\n"
            "\n"
            "  --data-dir DIR       dataset folder to look in\n"
            "                       (default: %s)\n"
            "  --test-percent P     the dataset is a folder of class folders split as\n"
            "                       cnnc train --test-percent P splits it (default: none)\n"
            "  --threads N          threads for the peak measurement and for decoding\n"
            "                       folder images, 1..1024\n"
            "                       (default: online CPUs, here %d)\n"
            "  -h, --help           show this help and exit\n",
            CLI_DEFAULT_DATA_DIR, cli_default_threads());
}

/* Returns CLI_OK (with *help set when --help was given) or CLI_USAGE. */
static int parse_info_flags(int argc, char **argv, info_settings *s, int *help)
{
    int c;
    while ((c = getopt_long(argc, argv, ":h", info_options, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            return CLI_OK;
        }
        if (c == ':' || c == '?')
            return cli_option_error("info", info_options, argv, c);
        if (c == OPT_DATA_DIR) {
            s->data_dir = optarg;
            s->data_dir_given = 1;
        } else if (c == OPT_THREADS &&
                   cli_parse_int("info", "--threads", optarg, 1, CLI_MAX_THREADS,
                                 &s->threads) != 0)
            return CLI_USAGE;
        else if (c == OPT_TEST_PERCENT &&
                 cli_parse_int("info", "--test-percent", optarg, 1, 99, &s->test_percent) != 0)
            return CLI_USAGE;
    }
    return cli_no_positional("info", argc, argv, optind);
}

/* The processor family this build is for, and the core names arm64 kernels give by number. */
#if defined(__x86_64__)
#define BUILD_TARGET "x86-64"
#elif defined(__aarch64__)
#define BUILD_TARGET "arm64"
#else
#define BUILD_TARGET "portable"
#endif

#if defined(__aarch64__)
typedef struct {
    unsigned implementer, part;
    const char *name;
} arm_core;

static const arm_core arm_cores[] = {
    {0x41, 0xd03, "Arm Cortex-A53"},   {0x41, 0xd05, "Arm Cortex-A55"},
    {0x41, 0xd07, "Arm Cortex-A57"},   {0x41, 0xd08, "Arm Cortex-A72"},
    {0x41, 0xd0b, "Arm Cortex-A76"},   {0x41, 0xd0c, "Arm Neoverse N1"},
    {0x41, 0xd40, "Arm Neoverse V1"},  {0x41, 0xd41, "Arm Cortex-A78"},
    {0x41, 0xd44, "Arm Cortex-X1"},    {0x41, 0xd49, "Arm Neoverse N2"},
    {0x41, 0xd4f, "Arm Neoverse V2"},  {0x41, 0xd8e, "Arm Neoverse N3"},
    {0x61, 0x022, "Apple M1"},         {0x61, 0x032, "Apple M2"},
};
#endif

/* value of the first "key : value" line of /proc/cpuinfo into buf; 0 when there is none. */
static int cpuinfo_value(const char *key, char *buf, size_t size)
{
    int fd = cn_open_regular("/proc/cpuinfo", NULL), found = 0;
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return 0;
    }
    char line[512];
    size_t n = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, key, n) != 0 || !colon || line + n + strspn(line + n, " \t") != colon)
            continue; /* another key, or one that only starts with this one */
        colon += strspn(colon + 1, " \t") + 1;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, size, "%s", colon);
        found = 1;
    }
    fclose(f);
    return found;
}

/* The CPU's name as this build's processor family describes it: x86's "model name" with its
 * family and model numbers (a virtual machine's bare "AMD EPYC" covers a Zen 4, family 25,
 * whose AVX-512 runs on 256-bit units, and a Zen 5, family 26, with twice its FMA peak); an arm64
 * core's implementer and part numbers, named where known. "unknown" when /proc/cpuinfo has none
 * of these, as under an emulator, where it describes the host. */
static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown (/proc/cpuinfo describes no " BUILD_TARGET " processor)");
#if defined(__aarch64__)
    char implementer[32], part[32];
    if (!cpuinfo_value("CPU implementer", implementer, sizeof implementer) ||
        !cpuinfo_value("CPU part", part, sizeof part))
        return;
    unsigned imp = (unsigned)strtoul(implementer, NULL, 0), pn = (unsigned)strtoul(part, NULL, 0);
    snprintf(buf, size, "arm64 implementer 0x%02x part 0x%03x", imp, pn);
    for (size_t i = 0; i < sizeof arm_cores / sizeof arm_cores[0]; i++)
        if (arm_cores[i].implementer == imp && arm_cores[i].part == pn)
            snprintf(buf, size, "%s", arm_cores[i].name);
#else
    char name[160], family[16], model[16]; /* the sum fits the caller's 256 */
    if (!cpuinfo_value("model name", name, sizeof name)) return;
    if (cpuinfo_value("cpu family", family, sizeof family) &&
        cpuinfo_value("model", model, sizeof model))
        snprintf(buf, size, "%s (family %s, model %s)", name, family, model);
    else
        snprintf(buf, size, "%s", name);
#endif
}

/* "arm64 build, running on aarch64": the build's target and the machine the kernel reports
 * (an emulator reports the machine it emulates). */
static void print_platform(void)
{
    struct utsname u;
    printf("Platform:  %s build, running on %s\n", BUILD_TARGET,
           uname(&u) == 0 ? u.machine : "an unknown machine");
}

static void print_simd(void)
{
    char supported[64] = "";
    for (int i = 0; i < CN_ISA_COUNT; i++)
        if (cn_isa_supported((cn_isa)i)) {
            strcat(supported, supported[0] ? " " : "");
            strcat(supported, cn_isa_name((cn_isa)i));
        }
    cn_error err = {{0}};
    cn_isa wanted;
    const char *env = getenv("CNNC_ISA");
    printf("SIMD:      %s (this CPU runs: %s; ", cn_isa_name(cn_isa_active()), supported);
    if (cn_isa_from_env(&wanted, &err) != 0)
        printf("%s)\n", err.msg);
    else if (env && *env)
        printf("chosen by CNNC_ISA=%s)\n", env);
    else
        printf("the best; CNNC_ISA picks another)\n");
}

/* The kernels of the bf16 products, as print_simd the instruction sets. */
static void print_bf16(void)
{
    char supported[64] = "";
    for (int i = 0; i < CN_BF16_KERNEL_COUNT; i++)
        if (cn_bf16_kernel_supported((cn_bf16_kernel)i)) {
            strcat(supported, supported[0] ? " " : "");
            strcat(supported, cn_bf16_kernel_name((cn_bf16_kernel)i));
        }
    if (!supported[0]) {
        printf("BF16:      none (this CPU lacks AVX512_BF16: --precision bf16 is refused)\n");
        return;
    }
    cn_error err = {{0}};
    cn_bf16_kernel wanted;
    const char *env = getenv("CNNC_BF16");
    printf("BF16:      %s (this CPU runs: %s; ", cn_bf16_kernel_name(cn_bf16_kernel_active()),
           supported);
    if (cn_bf16_kernel_from_env(&wanted, &err) != 0)
        printf("%s)\n", err.msg);
    else if (env && *env)
        printf("chosen by CNNC_BF16=%s)\n", env);
    else
        printf("the best; CNNC_BF16 picks another)\n");
}

static void print_peak(int threads)
{
    cn_error err = {{0}};
    double one = 0, all = 0;
    if (cn_peak_gflops(1, &one, &err) != 0 ||
        (threads > 1 && cn_peak_gflops(threads, &all, &err) != 0)) {
        printf("FMA peak:  not measured: %s\n", err.msg);
        return;
    }
    printf("FMA peak:  %.1f GFLOP/s on 1 thread", one);
    if (threads > 1) printf(", %.1f GFLOP/s on %d threads", all, threads);
    printf(" (fp32, measured now with the %s kernels)\n", cn_isa_name(cn_isa_active()));
}

static void print_dataset(const info_settings *s)
{
    cn_dataset train = {0}, test = {0};
    cn_error err = {{0}};
    const char *where = s->data_dir_given ? "--data-dir" : "default";
    cn_data_source src = {.dir = s->data_dir, .test_percent = s->test_percent,
                          .threads = s->threads};
    if (cn_dataset_read(&train, &src, "train", &err) == 0 &&
        cn_dataset_read(&test, &src, "test", &err) == 0) {
        cli_print_line("Dataset:   %s (%s): %s, %d training and %d test images of %dx%dx%d in "
                       "%d classes", s->data_dir, where, cn_data_format_name(train.format),
                       train.count, test.count, train.channels, train.height, train.width,
                       train.classes);
        cli_print_skipped("           ", &train, &test);
    } else {
        cli_print_line("Dataset:   not usable in %s (%s): %s", s->data_dir, where, err.msg);
    }
    cn_dataset_free(&train);
    cn_dataset_free(&test);
}

static void print_info(const info_settings *s)
{
    char model[256];
    cpu_model(model, sizeof model);
    long online = sysconf(_SC_NPROCESSORS_ONLN), configured = sysconf(_SC_NPROCESSORS_CONF);
    printf("cnnc %s\n", CN_VERSION);
    cli_print_line("CPU:       %s", model); /* text from a file */
    print_platform();
    printf("Cores:     %ld online (of %ld)\n", online, configured);
    print_simd();
    print_bf16();
    print_peak(s->threads);
    char mpi[160];
    printf("MPI:       %s\n", mpi_support(mpi, sizeof mpi));
#if defined(__clang__)
    printf("Compiler:  %s\n", __VERSION__);
#elif defined(__GNUC__)
    printf("Compiler:  gcc %s\n", __VERSION__);
#endif
    print_dataset(s);
}

static info_settings info_defaults(void)
{
    return (info_settings){.data_dir = CLI_DEFAULT_DATA_DIR, .threads = cli_default_threads()};
}

int cli_info_check_flags(int argc, char **argv)
{
    info_settings s = info_defaults();
    int help = 0;
    return parse_info_flags(argc, argv, &s, &help);
}

int cli_info(int argc, char **argv)
{
    info_settings s = info_defaults();
    int help = 0;
    int rc = parse_info_flags(argc, argv, &s, &help);
    if (rc != CLI_OK || help) {
        if (help) cli_info_help(stdout);
        return rc;
    }
    print_info(&s);
    return CLI_OK;
}
