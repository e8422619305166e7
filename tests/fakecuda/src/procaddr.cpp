// cuGetProcAddress: base name + cudaVersion + stream flavour -> an export.
#include <cstring>

#include "export_table.hpp"
#include "internal.hpp"

namespace fakecuda {
namespace {

CUresult proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status) {
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if ((flags & ~cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ExportEntry* legacy = nullptr;
  const ExportEntry* ptds = nullptr;
  bool known = false;
  for (const ExportEntry& e : exports()) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    known = true;
    if (e.since > version) continue;
    const ExportEntry*& best = e.kind == ExportKind::kDEFAULT ? legacy : ptds;
    if (best == nullptr || e.since > best->since) best = &e;
  }
  const ExportEntry* pick = per_thread && ptds != nullptr ? ptds : legacy;
  if (pick == nullptr) {
    if (status != nullptr)
      *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = pick->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

// cuda.h maps cuGetProcAddress to _v2; the driver exports both.
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

FAKECUDA_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  return fakecuda::proc_address(symbol, pfn, version, flags, status);
}

FAKECUDA_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags) {
  return fakecuda::proc_address(symbol, pfn, version, flags, nullptr);
}
