/* vijp regress --junit FILE: the comparison as JUnit XML, the format CI
 * servers render as a test report (Jenkins, GitLab, GitHub actions that
 * publish test results).  One <testsuite>; one <testcase> per curve, named
 * like the text output's lines, with a <failure> when it fails, <skipped/>
 * when the two files do not both have it, and its findings as <system-out>
 * when it differs without failing.
 *
 * The file is written whole or not at all: into a temporary file beside it,
 * flushed to disk, then renamed over it, so a CI step never reads half a
 * report, and a failed write leaves what was there before. */
#include "regress.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* s as XML character data or attribute value.  XML 1.0 has no way to write
 * the other control characters, even as references: they become '?'. */
static void xml(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        case '\n': fputs("&#10;", out); break;
        case '\t': fputs("&#9;", out); break;
        default: fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, out);
        }
    }
}

static void findings_text(FILE *out, const regress_curve *c)
{
    size_t k;
    json_t *f;
    json_array_foreach(c->findings, k, f) {
        char line[512];
        regress_describe_finding(f, line, sizeof line);
        xml(out, line);
        fputs(" (", out);
        xml(out, json_string_value(json_object_get(f, "why")));
        fputs(json_is_true(json_object_get(f, "fails")) ? "; fails)\n" : ")\n", out);
    }
}

static void property(FILE *out, const char *name, const char *value)
{
    fprintf(out, "    <property name=\"%s\" value=\"", name);
    xml(out, value);
    fputs("\"/>\n", out);
}

static void report(FILE *out, const regress_result *r, const char *baseline, const char *current, const regress_opts *o)
{
    char summary[256], text[1024];
    regress_summary(r, summary, sizeof summary);
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<testsuite name=\"vijp regress\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"0\">\n"
                 "  <properties>\n",
            r->n, r->failing, r->n - r->compared);
    property(out, "baseline", baseline);
    property(out, "current", current);
    property(out, "strict", o->strict ? "true" : "false");
    property(out, "summary", summary);
    char only[1024]; /* what no testcase shows: seeds left out of curves judged over seeds */
    regress_only_text(r->only_base, only, sizeof only);
    if (*only) property(out, "only in the baseline", only);
    regress_only_text(r->only_cur, only, sizeof only);
    if (*only) property(out, "only in the current file", only);
    fputs("  </properties>\n", out);
    for (size_t i = 0; i < r->n; i++) {
        const regress_curve *c = &r->v[i];
        fputs("  <testcase classname=\"vijp regress\" name=\"", out);
        xml(out, c->name);
        fputs("\" time=\"0\"", out);
        if (c->skipped) {
            fputs(">\n    <skipped message=\"not compared: ", out);
            xml(out, c->skipped);
            fputs("\"/>\n  </testcase>\n", out);
        } else if (!json_array_size(c->findings)) {
            fputs("/>\n", out);
        } else {
            regress_describe(c, text, sizeof text);
            if (c->fails) {
                fprintf(out, ">\n    <failure type=\"%s\" message=\"%s ", c->status, c->status);
                xml(out, text);
                fputs("\">", out);
                findings_text(out, c);
                fputs("</failure>\n  </testcase>\n", out);
            } else {
                fputs(">\n    <system-out>", out);
                findings_text(out, c);
                fputs("</system-out>\n  </testcase>\n", out);
            }
        }
    }
    fputs("  <system-out>", out);
    xml(out, summary);
    fputs("</system-out>\n</testsuite>\n", out);
}

static int io_fail(vijp_error *err, const char *path, int e)
{
    return vijp_fail(err, VIJP_EIO, "cannot write the JUnit report %s: %s", path, strerror(e));
}

int regress_junit_write(const regress_result *r, const char *path, const char *baseline, const char *current,
                        const regress_opts *o, vijp_error *err)
{
    struct stat st;
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) { /* /dev/stdout, a pipe: no file to replace */
        FILE *out = fopen(path, "w");
        if (!out) return io_fail(err, path, errno);
        report(out, r, baseline, current, o);
        int bad = fflush(out) || ferror(out);
        int e = errno;
        if (fclose(out) || bad) return io_fail(err, path, bad ? e : errno);
        return 0;
    }
    /* Through a symbolic link, the file it names is replaced, not the link. */
    char target[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX + 64];
    if (!realpath(path, target)) snprintf(target, sizeof target, "%s", path);
    snprintf(dir, sizeof dir, "%s", target);
    char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    const char *folder = dirname(dir);
    snprintf(tmp, sizeof tmp, "%s/.%s.vijp-tmp-%ld", folder, base, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return io_fail(err, path, errno);
    FILE *out = fdopen(fd, "w");
    if (!out) {
        int e = errno;
        close(fd), unlink(tmp);
        return io_fail(err, path, e);
    }
    report(out, r, baseline, current, o);
    int e = 0;
    if (fflush(out) || ferror(out)) e = errno ? errno : EIO;
    else if (fsync(fd)) e = errno;
    if (fclose(out) && !e) e = errno;
    if (!e && rename(tmp, target)) e = errno;
    if (e) {
        unlink(tmp);
        return io_fail(err, path, e);
    }
    /* The rename itself to disk; a folder that some file system cannot sync
     * leaves the file written all the same. */
    int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int rc = fsync(dfd);
        (void)rc;
        close(dfd);
    }
    return 0;
}
