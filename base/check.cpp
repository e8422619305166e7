#include "base/check.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace vstack {

namespace {
void put(const char* s) noexcept {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

[[noreturn]] void check_failed(const char* expr, const char* file, int line) noexcept {
  char num[16];
  int i = sizeof(num) - 1;
  num[i] = '\0';
  unsigned v = line > 0 ? static_cast<unsigned>(line) : 0u;
  do {
    num[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  put("[vstack] check failed: ");
  put(expr);
  put(" at ");
  put(file);
  put(":");
  put(num + i);
  put("\n");
  std::abort();
}

}  // namespace vstack
