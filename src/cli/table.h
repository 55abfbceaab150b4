/* table.h: aligned text tables for the CLI's reports: columns as wide as their widest
 * cell or header, cells right-aligned, two spaces apart, no trailing spaces. */
#ifndef TESSERA_CLI_TABLE_H
#define TESSERA_CLI_TABLE_H

#include <stdbool.h>
#include <stdio.h>

enum { CLI_TABLE_MAX_COLS = 16, CLI_TABLE_MAX_ROWS = 64, CLI_TABLE_CELL = 40 };

typedef struct cli_table {
    int n_cols, n_rows;   /* rows include the header */
    int col;              /* next cell of the current row */
    bool overflow;        /* a cell, row or column past the limits was dropped */
    char cells[CLI_TABLE_MAX_ROWS][CLI_TABLE_MAX_COLS][CLI_TABLE_CELL];
} cli_table;

/* Starts t with a header row of n_cols names (borrowed, copied in). */
void cli_table_init(cli_table *t, int n_cols, const char *const *headers);

/* Appends a cell (printf format) to the current row, starting a new row after the last
 * column. A cell longer than CLI_TABLE_CELL - 1 bytes is cut. */
void cli_table_cell(cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints every row, each prefixed by indent (borrowed). */
void cli_table_print(FILE *out, const cli_table *t, const char *indent);

#endif
