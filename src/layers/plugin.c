/* Loading layer plugins (see include/vijp/plugin.h). */
#include "vijp/plugin.h"
#include "legacy.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int vijp_plugin_load(const char *path, vijp_error *err)
{
    char where[4096];
    /* dlopen searches the library path for a bare name; a user who types
     * "mylayer.so" means the file here. */
    if (snprintf(where, sizeof where, "%s%s", strchr(path, '/') ? "" : "./", path) >= (int)sizeof where)
        return vijp_fail(err, VIJP_EINVAL, "plugin path too long: '%s'", path);
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    if (!h) return vijp_fail(err, VIJP_EINVAL, "cannot load plugin '%s': %s", path, dlerror());
    int (*abi)(void) = (int (*)(void))dlsym(h, "vijp_plugin_abi");
    int (*init)(vijp_error *) = (int (*)(vijp_error *))dlsym(h, "vijp_plugin_init");
    int version = abi ? abi() : 0, rc = 0;
    if (!abi || !init)
        rc = vijp_fail(err, VIJP_EINVAL, "plugin '%s' defines no %s (see vijp/plugin.h)", path,
                       !abi ? "vijp_plugin_abi" : "vijp_plugin_init");
    else if (version < VIJP_PLUGIN_ABI_OLDEST || version > VIJP_PLUGIN_ABI)
        rc = vijp_fail(err, VIJP_EINVAL, "plugin '%s' was built for plugin ABI %d; this vijp has ABI %d (and loads %d "
                       "to %d): rebuild it", path, version, VIJP_PLUGIN_ABI, VIJP_PLUGIN_ABI_OLDEST, VIJP_PLUGIN_ABI);
    if (rc) {
        dlclose(h); /* nothing of it was run or registered */
        return rc;
    }
    /* A failed init may have registered some of its types: the object then
     * stays loaded, so the registry never points into unmapped code. */
    vijp_error inner = {0};
    vijp_registering_abi = version; /* an older ABI's type is registered as a copy (registry.c) */
    rc = init(&inner);
    vijp_registering_abi = 0;
    if (rc)
        rc = vijp_fail(err, VIJP_EINVAL, "plugin '%s': %s", path,
                       inner.msg[0] ? inner.msg : "its vijp_plugin_init failed");
    return rc;
}
