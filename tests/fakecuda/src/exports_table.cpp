// Builds the export table from exports.def. This file deliberately does not
// include cuda.h: every export is declared here as `void f()` only to take its
// address (the definitions, with their real signatures, are C functions in the
// other files), so names cuda.h redirects with macros are taken literally.
#include "export_table.hpp"

extern "C" {
#define FAKECUDA_EXPORT(symbol, base, since, kind) void symbol();
#include "exports.def"
#undef FAKECUDA_EXPORT
}

namespace fakecuda {
namespace {

const ExportEntry kExports[] = {
#define FAKECUDA_EXPORT(symbol, base, since, kind) \
  {#symbol, #base, since, ExportKind::k##kind, reinterpret_cast<void*>(&symbol)},
#include "exports.def"
#undef FAKECUDA_EXPORT
};

}  // namespace

std::span<const ExportEntry> exports() { return kExports; }

}  // namespace fakecuda
