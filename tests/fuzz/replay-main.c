/* replay-main.c - runs a fuzz target's entry point over files without libFuzzer: every file named
 * on the command line, and every file in a folder named there (a committed seed corpus). The
 * default test suite builds each fuzz target with this driver (tests/CMakeLists.txt, replay_*),
 * so every build, and the ASan/UBSan run of the unit tests, exercises the targets on their
 * corpora; the libFuzzer builds (-DMAGPIE_FUZZ=ON, clang) explore beyond them. Exit status 0
 * when every input ran (a crash ends the process, which is the test failing). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads path whole and hands it to the target; -1 when it cannot be read. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: cannot stat\n", argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) != 0) return 2;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) return 2;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (replay_file(path) != 0) {
                fprintf(stderr, "replay: %s: cannot read\n", path);
                closedir(d);
                return 2;
            }
            runs++;
        }
        closedir(d);
    }
    printf("replay: %d inputs ran\n", runs);
    return runs > 0 ? 0 : 2;
}
