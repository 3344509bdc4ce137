/*
 * dlfcn.h (tests/examples/cuda_emu): dlopen and dlsym for cuda_backend.cu's
 * cuBLAS loader, answering with the stand-ins of cublas_v2.h.
 */
#ifndef EMU_DLFCN_H
#define EMU_DLFCN_H

#include <cstring>

#include "cublas_v2.h"

#define RTLD_NOW 2
#define RTLD_LOCAL 0

inline void *dlopen(const char *name, int flags)
{
    (void)flags;
    return strstr(name, "libcublas.so.13") ? (void *)&emu_gemms : nullptr;
}
inline const char *dlerror()
{
    return "emulated dlopen: no such library";
}
inline void *dlsym(void *lib, const char *name)
{
    (void)lib;
    static const struct {
        const char *name;
        void *fn;
    } t[] = {
        {"cublasCreate", (void *)&cublasCreate},
        {"cublasDestroy", (void *)&cublasDestroy},
        {"cublasSetStream", (void *)&cublasSetStream},
        {"cublasSetPointerMode", (void *)&cublasSetPointerMode},
        {"cublasSetMathMode", (void *)&cublasSetMathMode},
        {"cublasSetAtomicsMode", (void *)&cublasSetAtomicsMode},
        {"cublasSgemm", (void *)&cublasSgemm},
        {"cublasGetStatusString", (void *)&cublasGetStatusString},
    };
    for (auto &e : t)
        if (!strcmp(e.name, name))
            return e.fn;
    return nullptr;
}

#endif
