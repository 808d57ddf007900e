#!/usr/bin/env python3
"""Calls between src/'s modules run one way.

Reads which functions each object of a build defines and which it calls
(nm), groups the objects by module (src/NAME/..., and oracles/), and checks
that the module graph has no cycle once the back edges listed in
KNOWN_BACK_EDGES are set aside, and that no files call each other in a
circle but the groups of KNOWN_FILE_CIRCLES (inside one module); a new
cycle, or a listed edge that no longer exists (so the list must shrink
with it), fails.  Also fails on any
#include "../" in src/, oracles/, tests/ and examples/ (includes name a
module from -Isrc, or oracles/ from the root).  Prints the modules in
dependency order, lowest first.

Usage: scripts/check-modules.py BUILD   (the object tree: build, build-san)
Exit status: 0 clean, 1 a cycle or a stale exception, 2 bad usage.
"""
import collections, glob, os, re, subprocess, sys

# Back edges that still close a cycle, each with what it is:
#     ('caller', 'callee'): "why the call goes up",
# None today; an entry is a debt, and one whose edge is gone fails the check.
KNOWN_BACK_EDGES = {
}

# Files that call each other inside one module, each group with why: a
# circle of files no larger than these (and no new one) is allowed.
KNOWN_FILE_CIRCLES = {
    # activation.c holds the elementwise types' shared operators, which
    # each type's file calls, and a table of the types' descriptors; gelu.c
    # and softplus.c parse their arguments into gelu_tanh's and
    # softplus_beta's descriptors.
    frozenset('src/layers/' + n for n in ('activation', 'gelu', 'gelu_tanh', 'mish', 'sigmoid', 'silu', 'softplus',
                                          'softplus_beta', 'tanh')):
        'the activation types and their shared descriptor code',
    # chain.c holds the coupling blocks' shared code, which additive.c and
    # affine.c call, and recognises their descriptors; it parses the
    # sub-layers through the registry, which lists the coupling types.  The
    # residual block (residual.c) parses its sub-layers the same way and forms
    # its Jacobian through chain.c's vijp_jacobian_by_jvp.
    frozenset('src/layers/' + n for n in ('additive', 'affine', 'chain', 'registry', 'residual')):
        'composite blocks (coupling, residual) and the registry that parses their sub-layers',
}

def strongly_connected(graph):
    """Tarjan's components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))
    for v in list(graph):
        if v not in index:
            visit(v)
    return out

def module(obj, build):
    rel = os.path.relpath(obj, build)
    parts = rel.split(os.sep)
    return parts[1] if parts[0] == 'src' else parts[0]

def symbols(objs):
    """{obj: (defined, used)}: one nm for every object (-A names each line's
    object), not a process each: a process per object cost make check ten
    seconds of a serial step."""
    out = {o: (set(), set()) for o in objs}
    run = subprocess.run(['nm', '-A'] + objs, capture_output=True, text=True, check=True)
    for line in run.stdout.splitlines():
        obj, _, rest = line.partition(':')
        f = rest.split()
        if len(f) == 3 and f[1] in 'TDBRC':
            out[obj][0].add(f[2])
        elif len(f) == 2 and f[0] == 'U':
            out[obj][1].add(f[1])
    return out

def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.split('\n\n')[2], file=sys.stderr)
        return 2
    build = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = 0
    for d in ('src', 'oracles', 'tests', 'examples'):
        for path in glob.glob(os.path.join(root, d, '**', '*.[ch]'), recursive=True) + \
                    glob.glob(os.path.join(root, d, '**', '*.cu'), recursive=True):
            for n, line in enumerate(open(path, errors='replace'), 1):
                if re.match(r'\s*#\s*include\s+"\.\./', line):
                    print('check-modules: %s:%d: #include "../": name the module from -Isrc instead'
                          % (os.path.relpath(path, root), n))
                    bad = 1
    # The objects of today's sources only (a build tree can hold stale ones).
    objs = []
    for src in glob.glob(os.path.join(root, 'src', '**', '*.c'), recursive=True) + glob.glob(os.path.join(root, 'oracles', '*.c')):
        obj = os.path.join(build, os.path.relpath(src, root)[:-2] + '.o')
        if os.path.exists(obj):
            objs.append(obj)
    if len(objs) < 50:
        print('check-modules: only %d objects under %s: build first' % (len(objs), build), file=sys.stderr)
        return 2
    owner, uses = {}, {}
    for o, (d, u) in symbols(objs).items():
        uses[o] = u
        for s in d:
            owner[s] = o
    graph = collections.defaultdict(set)
    files = collections.defaultdict(set)
    why = {}
    for o, u in uses.items():
        for s in u:
            if s in owner:
                if owner[s] != o:
                    files[os.path.relpath(o, build)[:-2]].add(os.path.relpath(owner[s], build)[:-2])
                a, b = module(o, build), module(owner[s], build)
                if a != b:
                    graph[a].add(b)
                    why.setdefault((a, b), '%s calls %s' % (os.path.relpath(o, build), s))
    mods = sorted({module(o, build) for o in objs})
    for edge in KNOWN_BACK_EDGES:
        if edge[1] not in graph[edge[0]]:
            print('check-modules: the known back edge %s -> %s is gone: remove it from KNOWN_BACK_EDGES' % edge)
            bad = 1
    dag = {m: {b for b in graph[m] if (m, b) not in KNOWN_BACK_EDGES} for m in mods}
    order, state = [], {}
    def visit(m, path):
        if state.get(m) == 2:
            return
        if state.get(m) == 1:
            cyc = path[path.index(m):] + [m]
            print('check-modules: calls run in a circle: ' + ' -> '.join(cyc))
            for a, b in zip(cyc, cyc[1:]):
                print('  %s -> %s: %s' % (a, b, why[(a, b)]))
            raise SystemExit(1)
        state[m] = 1
        for b in sorted(dag[m]):
            visit(b, path + [m])
        state[m] = 2
        order.append(m)
    for m in mods:
        visit(m, [])
    print('check-modules: %d modules, calls one way (lowest first): %s' % (len(mods), ' '.join(order)))
    sys.setrecursionlimit(10000)
    for comp in strongly_connected(files):
        if not any(comp <= known for known in KNOWN_FILE_CIRCLES):
            print('check-modules: files call each other in a circle: ' + ' '.join(sorted(comp)))
            bad = 1
    print('check-modules: %d known circles of files inside a module: %s' % (len(KNOWN_FILE_CIRCLES),
          '; '.join(KNOWN_FILE_CIRCLES.values())))
    if KNOWN_BACK_EDGES:
        print('check-modules: %d known back edges left: %s' % (len(KNOWN_BACK_EDGES),
              ', '.join('%s -> %s' % e for e in sorted(KNOWN_BACK_EDGES))))
    else:
        print('check-modules: no known back edges')
    return bad

if __name__ == '__main__':
    sys.exit(main())
