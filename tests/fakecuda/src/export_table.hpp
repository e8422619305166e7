// The export table generated from exports.def (see there).
#pragma once

#include <span>

namespace fakecuda {

enum class ExportKind { kDEFAULT, kPTDS, kPTSZ };

struct ExportEntry {
  const char* symbol;
  const char* base;
  int since;
  ExportKind kind;
  void* fn;  // the library's own definition (-Bsymbolic-functions), never an interposer's
};

std::span<const ExportEntry> exports();

}  // namespace fakecuda
