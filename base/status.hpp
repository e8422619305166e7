// Errors are values inside vstack: every fallible function returns a Status
// (or Result<T>), and the shim maps it to a CUresult at the C boundary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace vstack {

enum class Code : uint8_t {
  ok = 0,
  out_of_memory,   // a tier (or every tier) is full: CUDA_ERROR_OUT_OF_MEMORY
  invalid_value,   // bad argument from the application
  not_found,       // pointer not in the pool
  not_supported,   // e.g. IPC export of a paged allocation
  driver_error,    // the real driver failed; Status::driver holds its CUresult
  io_error,        // nvme read/write failed; nothing moved
  config_error,    // bad JSON config
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code c, std::string msg, int driver = 0) : code_(c), driver_(driver), msg_(std::move(msg)) {}
  static Status ok() { return {}; }
  static Status driver(int cu_result, std::string what) {
    return {Code::driver_error, std::move(what), cu_result};
  }

  bool is_ok() const { return code_ == Code::ok; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  int driver_code() const { return driver_; }
  const std::string& message() const { return msg_; }
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  int driver_ = 0;
  std::string msg_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status s) : v_(std::move(s)) {}
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  const Status& status() const {
    static const Status ok_status;
    return is_ok() ? ok_status : std::get<1>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace vstack

// Propagate a failed Status to the caller.
#define VSTACK_TRY(expr)                          \
  do {                                            \
    ::vstack::Status vstack_try_s_ = (expr);      \
    if (!vstack_try_s_.is_ok()) return vstack_try_s_; \
  } while (0)
