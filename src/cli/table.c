/* table.c: aligned text tables (table.h). */
#include <stdarg.h>
#include <string.h>

#include "cli/table.h"

void cli_table_init(cli_table *t, int n_cols, const char *const *headers)
{
    memset(t, 0, sizeof *t);
    t->n_cols = n_cols > CLI_TABLE_MAX_COLS ? CLI_TABLE_MAX_COLS : n_cols;
    t->overflow = n_cols > CLI_TABLE_MAX_COLS;
    for (int c = 0; c < t->n_cols; c++)
        snprintf(t->cells[0][c], CLI_TABLE_CELL, "%s", headers[c]);
    t->n_rows = 1;
}

void cli_table_cell(cli_table *t, const char *fmt, ...)
{
    if (t->col == 0) {
        if (t->n_rows == CLI_TABLE_MAX_ROWS) {
            t->overflow = true;
            return;
        }
        t->n_rows++;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cells[t->n_rows - 1][t->col], CLI_TABLE_CELL, fmt, ap);
    va_end(ap);
    t->col = (t->col + 1) % t->n_cols;
}

void cli_table_print(FILE *out, const cli_table *t, const char *indent)
{
    int width[CLI_TABLE_MAX_COLS] = {0};
    for (int r = 0; r < t->n_rows; r++)
        for (int c = 0; c < t->n_cols; c++) {
            int w = (int)strlen(t->cells[r][c]);
            width[c] = w > width[c] ? w : width[c];
        }
    for (int r = 0; r < t->n_rows; r++) {
        char line[CLI_TABLE_MAX_COLS * (CLI_TABLE_CELL + 2) + 1];
        int n = 0;
        for (int c = 0; c < t->n_cols; c++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%*s", c ? "  " : "", width[c],
                          t->cells[r][c]);
        while (n > 0 && line[n - 1] == ' ')
            line[--n] = '\0';
        fprintf(out, "%s%s\n", indent, line);
    }
}
