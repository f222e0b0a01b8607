/* config_doc: the configuration reference, printed from the rows themselves — the text of --help-config and the Markdown of docs/configuration.md. */
#include "base/config_impl.h"

#include <stdio.h>
#include <string.h>

static const char *const types[] = {"string", "integer", "duration", "boolean", "enum",   "section",
                                    "tree",   "map",     "list",     "map",     "section"};

/* The key a row's children are under: "topics[].", "retention_classes.NAME.", "x.". */
static void child_prefix(const struct field *f, const char *path, char *out, size_t outsz)
{
        snprintf(out, outsz, "%s%s", path, f->type == F_TOPICS ? "[]." : f->type == F_CLASSES ? ".NAME." : ".");
}

static int has_children(const struct field *f)
{
        return f->type == F_SECTION || f->type == F_TOPICS || f->type == F_CLASSES;
}

/* A broker's F_OWN row stands for its own row. */
static const struct field *own(const struct field *f) { return f->type == F_OWN ? f->sub : f; }

/* ---- --help-config ---------------------------------------------------------------- */

static void print_fields(FILE *fp, const struct field *fields, const char *prefix)
{
        for (const struct field *g = fields; g->name; g++) {
                const struct field *f = own(g);
                char path[256], list[256];
                snprintf(path, sizeof(path), "%s%s", prefix, f->name);
                fprintf(fp, "  %-48s %-8s %-13s %s%s%s%s%s\n", path, types[f->type],
                        f->required ? "required" : (f->def ? f->def : "-"), f->desc, f->names ? " (one of: " : "",
                        f->names ? config_enum_list(f->names, list, sizeof(list)) : "", f->names ? ")" : "",
                        f->reload ? " [reloads on SIGHUP]" : "");
                if (has_children(f)) {
                        char sub[256];
                        child_prefix(f, path, sub, sizeof(sub));
                        print_fields(fp, f->sub, sub);
                }
        }
}

void config_print_reference(FILE *fp)
{
        fprintf(fp, "  %-48s %-8s %-13s %s\n", "key", "type", "default", "description");
        print_fields(fp, config_rows(), "");
}

/* ---- docs/configuration.md -------------------------------------------------------- */

/* What values a row takes. */
static const char *range_of(const struct field *f, char *buf, size_t bufsz)
{
        char list[256], d[64];
        switch (f->type) {
        case F_INT: snprintf(buf, bufsz, "%ld to %ld", f->min, f->max); break;
        case F_DURATION:
                snprintf(buf, bufsz, "at least %s", f->min ? config_format_duration(f->min, d, sizeof(d)) : "0");
                if (f->step)
                        snprintf(buf + strlen(buf), bufsz - strlen(buf), ", whole %s",
                                 config_format_duration(f->step, d, sizeof(d)));
                break;
        case F_BOOL: snprintf(buf, bufsz, "true, false"); break;
        case F_ENUM: snprintf(buf, bufsz, "%s", config_enum_list(f->names, list, sizeof(list))); break;
        case F_STR: snprintf(buf, bufsz, "%s", config_field_empty_ok(f) ? "text, \"\" allowed" : "text"); break;
        case F_KV: snprintf(buf, bufsz, "name: value pairs"); break;
        case F_TREE: snprintf(buf, bufsz, "any YAML"); break;
        default: snprintf(buf, bufsz, "-"); break;
        }
        return buf;
}

/* A table cell: '|' escaped, a newline a space. */
static void cell(FILE *fp, const char *s)
{
        for (; s && *s; s++) {
                if (*s == '|')
                        fputc('\\', fp);
                fputc(*s == '\n' ? ' ' : *s, fp);
        }
}

/* The row as a line of the table, its default `code`. */
static void print_row(FILE *fp, const struct field *f, const char *path)
{
        char range[320];
        fprintf(fp, "| `%s` | %s | ", path, types[f->type]);
        cell(fp, range_of(f, range, sizeof(range)));
        fprintf(fp, " | %s%s%s | %s | ",
                f->required ? "required"
                : f->def    ? "`"
                            : "-",
                f->required ? ""
                : f->def    ? (*f->def ? f->def : "\"\"")
                            : "",
                !f->required && f->def ? "`" : "", f->reload ? "yes" : "no");
        cell(fp, f->desc);
        fprintf(fp, "%s |\n", f->secret ? " (a secret: never logged, `(set, not shown)` in `check --print`)" : "");
}

/* The row as an entry of a definition list (the man page: tables do not fit 80 columns). */
static void print_entry(FILE *fp, const struct field *f, const char *path)
{
        char range[320];
        fprintf(fp, "**%s** (%s", path, types[f->type]);
        if (f->required)
                fprintf(fp, ", required");
        else if (f->def)
                fprintf(fp, ", default %s", *f->def ? f->def : "\"\"");
        fprintf(fp, "%s)\n:   ", f->reload ? ", reloads on SIGHUP" : "");
        cell(fp, f->desc);
        fprintf(fp, ". Values: ");
        cell(fp, range_of(f, range, sizeof(range)));
        fprintf(fp, "%s.\n\n", f->secret ? "; a secret, never logged" : "");
}

/* The rows of one importance, under prefix, as lines of the table (or
 * entries); sections recurse whatever theirs. */
static void markdown_rows(FILE *fp, const struct field *fields, const char *prefix, int importance, int entries)
{
        for (const struct field *g = fields; g->name; g++) {
                const struct field *f = own(g);
                char path[256];
                snprintf(path, sizeof(path), "%s%s", prefix, f->name);
                int level = f->importance ? f->importance : 2;
                if (level == importance && !has_children(f))
                        (entries ? print_entry : print_row)(fp, f, path);
                if (has_children(f)) {
                        char sub[256];
                        child_prefix(f, path, sub, sizeof(sub));
                        markdown_rows(fp, f->sub, sub, importance, entries);
                }
        }
}

static const char *const heads[] = {
        "The settings that matter: set them, or know why not",
        "The settings with defaults most deployments keep",
        "The settings rarely touched",
};

static const char intro[] =
        "Every setting of `dedupd.yaml`: its key, type, the values it takes, its default, whether SIGHUP applies "
        "a change without a restart, and what it means. `topics[].` keys are per topic, `retention_classes.NAME.` "
        "per class; a broker's own keys (`kafka`, `nats.`, `rabbitmq.`) apply when `source` names it. Durations "
        "take `250ms`, `30s`, `5m`, `48h`, `7d` or plain milliseconds; any value may be `${ENV}`, "
        "`${ENV:-default}` or `${file:/path}`.\n";

void config_print_markdown(FILE *fp)
{
        fprintf(fp,
                "# Configuration reference\n\n"
                "<!-- Generated by `dedupctl help-config --markdown` from the configuration table "
                "(src/base/config_table.c and each broker's src/source/*/settings.c); the suite fails when this "
                "file differs from what the code prints: regenerate it, never edit it. -->\n\n%s",
                intro);
        for (int level = 1; level <= 3; level++) {
                fprintf(fp,
                        "\n## %s\n\n| key | type | values | default | SIGHUP | meaning |\n|---|---|---|---|---|---|\n",
                        heads[level - 1]);
                markdown_rows(fp, config_rows(), "", level, 0);
        }
}

void config_print_man(FILE *fp)
{
        fprintf(fp, "%s", intro);
        for (int level = 1; level <= 3; level++) {
                fprintf(fp, "\n# %s\n\n", heads[level - 1]);
                markdown_rows(fp, config_rows(), "", level, 1);
        }
}
