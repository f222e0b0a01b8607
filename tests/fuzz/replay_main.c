/* replay_main: a fuzz target without libFuzzer — runs it over files and directories (the regression cases and the seeds) in the ordinary test build. */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
        FILE *fp = fopen(path, "rb");
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0, n;

        if (!fp) {
                fprintf(stderr, "replay: cannot open %s\n", path);
                return -1;
        }
        do {
                if (len == cap)
                        buf = realloc(buf, cap = cap ? cap * 2 : 4096);
                n = fread(buf + len, 1, cap - len, fp);
                len += n;
        } while (n > 0);
        fclose(fp);
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        return 0;
}

/* Returns how many inputs ran, or -1. */
static long run_path(const char *path)
{
        struct stat st;
        long cnt = 0;
        if (stat(path, &st) != 0)
                return 0; /* an empty regress/ dir is not in git */
        if (!S_ISDIR(st.st_mode))
                return run_file(path) ? -1 : 1;
        DIR *d = opendir(path);
        struct dirent *e;
        if (!d)
                return -1;
        while ((e = readdir(d))) {
                char sub[4096];
                if (e->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
                long r = run_path(sub);
                if (r < 0) {
                        closedir(d);
                        return -1;
                }
                cnt += r;
        }
        closedir(d);
        return cnt;
}

int main(int argc, char **argv)
{
        const char *defaults[] = {FUZZ_REGRESS_DIR, FUZZ_CORPUS_DIR};
        const char *const *paths = argc > 1 ? (const char *const *)argv + 1 : defaults;
        size_t cnt = argc > 1 ? (size_t)argc - 1 : 2;
        long total = 0;

        for (size_t i = 0; i < cnt; i++) {
                long r = run_path(paths[i]);
                if (r < 0)
                        return 1;
                total += r;
        }
        printf("%s: %ld inputs replayed, no crash, every property held\n", FUZZ_TARGET, total);
        return total > 0 ? 0 : 1;
}
