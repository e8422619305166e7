// The CUDA driver header as the shim sees it: types and prototypes, with the
// version-remapping macro for cuGetProcAddress undone so that both exported
// versions can be named.
#pragma once

#include <cuda.h>

#undef cuGetProcAddress
