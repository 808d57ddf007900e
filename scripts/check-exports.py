#!/usr/bin/env python3
"""libvijp.so exports exactly the functions include/vijp/ declares.

Every symbol `nm -D --defined-only LIB` lists must be declared with VIJP_API
in a public header and carry the vijp_ or vo_ prefix, and every function a
header declares with VIJP_API must be exported (a declaration without
VIJP_API, or one the library does not define, fails too: a user would
compile against it and fail to link).  No public header but interval.h may
include <mpfi.h>.

Usage: scripts/check-exports.py LIB [INCLUDE_DIR]   (default include/vijp)
Exit status: 0 they agree, 1 they differ (each difference named), 2 bad usage.
"""
import glob, os, re, subprocess, sys

# What the toolchain defines in every shared object.
TOOLCHAIN = {'_init', '_fini', '__bss_start', '_edata', '_end'}

def declared(include_dir):
    marked, unmarked = set(), set()
    for path in sorted(glob.glob(os.path.join(include_dir, '*.h'))):
        text = open(path).read()
        text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
        # the extern "C" { ... } wrappers: C++ linkage, not statements of the API
        text = re.sub(r'^#ifdef __cplusplus\n.*?^#endif$', ' ', text, flags=re.M | re.S)
        text = re.sub(r'^\s*#.*?(?<!\\)$', ' ', text, flags=re.M | re.S)
        depth, start = 0, 0
        for i, c in enumerate(text):  # file-scope statements, split at ';' and at a closing brace
            if c == '{':
                depth += 1
            elif c == '}':
                depth -= 1
                if depth == 0:
                    start = i + 1
            elif c == ';' and depth == 0:
                stmt = ' '.join(text[start:i].split())
                start = i + 1
                # VIJP_PLUGIN_EXPORT: what a plugin defines, not the library
                if not stmt or stmt.startswith(('typedef', 'struct', 'enum', 'union', 'static', 'VIJP_PLUGIN_EXPORT')):
                    continue
                m = re.match(r'(?:VIJP_API\s+)?[^(]*?(\w+)\s*\(', stmt)
                if not m:
                    continue
                (marked if stmt.startswith('VIJP_API') else unmarked).add(m.group(1))
    return marked, unmarked

def main():
    if len(sys.argv) not in (2, 3) or not os.path.exists(sys.argv[1]):
        print('usage: check-exports.py LIB [INCLUDE_DIR]', file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inc = sys.argv[2] if len(sys.argv) == 3 else os.path.join(root, 'include', 'vijp')
    out = subprocess.run(['nm', '-D', '--defined-only', sys.argv[1]], capture_output=True, text=True, check=True).stdout
    exported = {l.split()[-1].split('@')[0] for l in out.splitlines() if l.strip()} - TOOLCHAIN
    marked, unmarked = declared(inc)
    bad = []
    bad += ['exported but declared in no public header: %s' % s for s in sorted(exported - marked)]
    bad += ['exported without the vijp_/vo_ prefix: %s' % s for s in sorted(exported) if not s.startswith(('vijp_', 'vo_'))]
    bad += ['declared with VIJP_API but not exported: %s' % s for s in sorted(marked - exported)]
    bad += ['declared without VIJP_API (so not exported): %s' % s for s in sorted(unmarked)]
    # <mpfi.h> only where it is needed: a user of the API without intervals
    # does not need MPFI's headers.
    for path in sorted(glob.glob(os.path.join(inc, '*.h'))):
        if os.path.basename(path) != 'interval.h' and re.search(r'#\s*include\s*<mpfi\.h>', open(path).read()):
            bad.append('%s includes <mpfi.h>: only vijp/interval.h may' % os.path.basename(path))
    for b in bad:
        print('check-exports: ' + b)
    if bad:
        return 1
    print('check-exports: %s exports exactly the %d functions include/vijp/ declares' % (os.path.basename(sys.argv[1]), len(exported)))
    return 0

if __name__ == '__main__':
    sys.exit(main())
