/* vijp certify's parts (certify.c: the command, --layer, --jacobian;
 * certify_net.c: --net, every layer of a net at its own inputs). */
#ifndef VIJP_CLI_CERTIFY_H
#define VIJP_CLI_CERTIFY_H

#include "mpi/mpi.h"
#include "vijp/array_io.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include <jansson.h>
#include <math.h>

/* A number for the JSON reports: null where it is not finite. */
static inline json_t *certify_json_num(double x) { return isfinite(x) ? json_real(x) : json_null(); }
/* The generator of the points certify draws (--layer's samples, --net's
 * inputs): scale·N(0,1) entries from it, in order. */
static inline void certify_seed_points(vijp_rng *rng, uint64_t seed) { vijp_rng_seed(rng, seed ^ 0x5eed5eed5eedull); }

/* What the command line asked for. */
typedef struct {
    const char *spec, *init_name, *jacobian, *radius, *input, *params, *net, *box, *box_file;
    const char *point_opt; /* why an option about sampled points does not go with a box */
    const char *layer_opt; /* an option that only --layer takes, given */
    const char *net_opt;   /* an option that only --net takes, given */
    unsigned long long width, samples, seed, depth, layer_index;
    vijp_box_budget budget; /* --budget N (intervals) or Ts (seconds) */
    int budget_given;
    const char *box_form; /* --box-form: "affine", "interval" or NULL (affine) */
    double scale, range;
    vijp_format fmts[VIJP_ACT_FORMATS_MAX]; /* --formats; n_fmts 0: the default table */
    size_t n_fmts;
    vijp_certify_opts co;
    int json, verbose, quiet;
    vijp_init init;
} certify_args;

/* What the report says was certified, and where θ and the points came from. */
typedef struct {
    const char *label;       /* the layer: its spec, or "NET layer I: SPEC" */
    char params[4200];       /* "parameters from F", "gaussian parameters" */
    const char *params_json; /* the file, or the init's name */
    char points[4300];       /* "from X.npy", "1·N(0,1)", ... */
} certify_sources;

/* The certificates of a run's samples. */
typedef struct {
    vijp_certificate *c;
    size_t n;
} certify_results;

/* o: the keys that say what was certified; the verdicts' are added. */
void certify_add_verdicts(json_t *o, const certify_results *r, const vijp_activation_report *act);
/* A line per certificate (and its reason), then a blank line. */
void certify_print_rows(const certify_results *r);
/* Where --layer's θ and points came from, as the command line says. */
void certify_layer_sources(const certify_args *a, const vijp_net *net, certify_sources *src);
/* Whether certifying an m × n Jacobian of a layer with P parameters fits in
 * memory (says why not on stderr). */
int certify_fits(double m, double n, double P);
/* net's one layer at the samples (xin's rows, or drawn; shared out under
 * mpirun), then, on rank 0, the activation's f′ analysis and the report:
 * printed, or with --json appended to collect when it is not NULL; *verdict
 * (when not NULL) receives the samples' overall verdict.  The exit status:
 * 0 every sample certified, 1 not, 2 bad input, 3 a declaration
 * contradicted. */
int certify_samples(const mpi_world *w, const certify_args *a, const certify_sources *src, vijp_net *net,
                    const vijp_array *xin, size_t samples, json_t *collect, vijp_verdict *verdict);
/* Print o as the command's JSON and free it. */
void print_json(json_t *o);
/* --layer's net of one layer, sized, its parameters drawn or given, and
 * --input's points: -1 to go on, or the exit status with nothing held. */
int certify_setup_layer(const certify_args *a, vijp_net *net, vijp_array *xin, size_t *samples, vijp_error *err);
/* --box, --box-file: the layer over a box of inputs (certify_box.c). */
int certify_box(const certify_args *a, const vijp_net *net);
/* --net's net, built with every parameter (a JSON net's own, the others
 * from --init and --seed): 0, or the exit status having said why. */
int certify_build_net(const certify_args *a, vijp_net *net);
/* --net with --box or --box-file: each layer over an enclosure of the
 * inputs that reach it from the box (certify_box.c). */
int certify_net_box(const certify_args *a);
/* --net: every layer (or --layer-index's) at the inputs that reach it. */
int certify_net(const mpi_world *w, const certify_args *a);

#endif
