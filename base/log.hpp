// One logger for all of vstack: spdlog, stderr, "[vstack]" prefix. Nothing goes
// to stdout: stdout belongs to the application.
#pragma once

#include <spdlog/spdlog.h>

namespace vstack::log {

// The logger; created on first use with level from set_level() (default: warn).
spdlog::logger& get();
// Accepts spdlog level names: trace, debug, info, warn, error, critical, off.
bool set_level(const char* name);

template <class... A>
void trace(spdlog::format_string_t<A...> f, A&&... a) { get().trace(f, std::forward<A>(a)...); }
template <class... A>
void debug(spdlog::format_string_t<A...> f, A&&... a) { get().debug(f, std::forward<A>(a)...); }
template <class... A>
void info(spdlog::format_string_t<A...> f, A&&... a) { get().info(f, std::forward<A>(a)...); }
template <class... A>
void warn(spdlog::format_string_t<A...> f, A&&... a) { get().warn(f, std::forward<A>(a)...); }
template <class... A>
void error(spdlog::format_string_t<A...> f, A&&... a) { get().error(f, std::forward<A>(a)...); }

}  // namespace vstack::log
