// The stats table printed by vstack-stat (live and --file): one place, so the
// live view and the final dump after a job look the same.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.hpp"

namespace vstack::tools {

// "1.50 GiB", "512 B".
std::string format_bytes(double bytes);
// "1.234 s", "12.0 ms", "0 s".
std::string format_ns(double ns);

// A table from a stats dump (the object written by to_json()). Fails with a
// message naming the missing or mistyped field when the dump is not one.
Result<std::string> format_stats_table(const nlohmann::json& dump);

}  // namespace vstack::tools
