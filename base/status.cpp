#include "base/status.hpp"

namespace vstack {

const char* code_name(Code c) {
  switch (c) {
    case Code::ok: return "ok";
    case Code::out_of_memory: return "out_of_memory";
    case Code::invalid_value: return "invalid_value";
    case Code::not_found: return "not_found";
    case Code::not_supported: return "not_supported";
    case Code::driver_error: return "driver_error";
    case Code::io_error: return "io_error";
    case Code::config_error: return "config_error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  std::string s = code_name(code_);
  if (code_ == Code::driver_error) s += " (CUresult " + std::to_string(driver_) + ")";
  if (!msg_.empty()) s += ": " + msg_;
  return s;
}

}  // namespace vstack
