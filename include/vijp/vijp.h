/* vijp: numerical risk of memory-efficient gradient methods (see docs/DESIGN.md). */
#ifndef VIJP_H
#define VIJP_H

#define VIJP_VERSION "0.1.0"

#include "vijp/error.h"
#include "vijp/format.h"
#include "vijp/rng.h"
#include "vijp/mat.h"
#include "vijp/layer.h"
#include "vijp/net.h"
#include "vijp/engine.h"
#include "vijp/metrics.h"
#include "vijp/xnum.h"
#include "vijp/arith.h"
#include "vijp/memory.h"
#include "vijp/array_io.h"
#include "vijp/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif
