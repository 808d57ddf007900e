/* What the plugin loader tells the registry about the plugin whose
 * vijp_plugin_init is running: the plugin ABI it was built for, so that a
 * type from an older ABI is registered as a copy that shows vijp only the
 * members that ABI had (plugin.c sets it, registry.c reads it). */
#ifndef VIJP_LAYERS_LEGACY_H
#define VIJP_LAYERS_LEGACY_H

/* The ABI of the plugin being initialised; 0 outside plugin loading (the
 * current ABI: types registered by the program itself). */
extern int vijp_registering_abi;

#endif
