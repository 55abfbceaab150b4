/* cli_version.c: `tessera version` (also `tessera --version`): the version, git commit,
 * build type and compiler, and the kernels this CPU runs, as text or one JSON object. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "common/build_info.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera version [--json]\n"
                 "  prints the version, git commit, build type, compiler, and the kernels this\n"
                 "  CPU runs: the vector set chosen, the packed quantized kernels, and every set\n"
                 "  built in that the CPU supports.\n");
}

static int print_json(const ts_build_info *b)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "version", b->version) &&
              cJSON_AddStringToObject(o, "commit", b->commit) &&
              cJSON_AddStringToObject(o, "build_type", b->build_type) &&
              cJSON_AddStringToObject(o, "compiler", b->compiler) &&
              cJSON_AddStringToObject(o, "kernels", b->vector) &&
              cJSON_AddStringToObject(o, "packed_kernels", b->packed) &&
              cJSON_AddStringToObject(o, "cpu_kernels", b->cpu);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        fprintf(stderr, "tessera: out of memory\n");
        return 1;
    }
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

int cli_version(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tessera version: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    ts_build_info b;
    ts_build_info_get(&b);
    if (json)
        return print_json(&b);
    printf("tessera %s\n"
           "commit:     %s\n"
           "build:      %s\n"
           "compiler:   %s\n"
           "kernels:    %s (vector), %s (packed quantized)\n"
           "cpu:        %s\n",
           b.version, b.commit, b.build_type, b.compiler, b.vector, b.packed, b.cpu);
    return 0;
}
