/* VIJP_API marks what the library exports.  libvijp is built with
 * -fvisibility=hidden, so a function is part of libvijp.so's interface only
 * when its declaration in include/vijp/ carries VIJP_API; everything else
 * stays internal to the library (make check compares nm -D with these
 * headers: scripts/check-exports.py). */
#ifndef VIJP_API_H
#define VIJP_API_H

#ifdef __cplusplus
extern "C" {
#endif

#define VIJP_API __attribute__((visibility("default")))

#ifdef __cplusplus
}
#endif

#endif
